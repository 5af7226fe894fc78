// A small DLRM trained on CPUs (fp32, OpenBLAS), single-process or with its embedding tables
// sharded table-wise or row-wise over the ranks of a communicator (MPI in dlrm_cpu_mpi.cc).
//
//   dense x [B, F] -> bottom MLP (ReLU) -> z0 [B, D]
//   sparse ids [B, T, P] -> embedding bag sum -> e_t [B, D]          (T tables, P ids each)
//   dot interaction: [z0, e_1..e_T] pairwise dots i<j -> [B, D + (T+1)T/2]
//   -> top MLP (ReLU, last layer linear) -> logit [B] -> BCE with logits, mean over B
//
// Dense part data-parallel (local batch b = B / N, gradients all-reduced), SGD.
// Embeddings: row-wise Adagrad on the rows the global batch touched (FBGEMM semantics).
// Every rank generates the whole global batch deterministically from (seed, step), so no
// sparse-id exchange happens here (TorchRec's input dist is not exercised).
//
// Each table is placed on its own (train_dlrm_cpu with placements; TorchRec's sharding types):
//   data-parallel  every rank holds the whole table and pools its own samples; the dense
//               table gradient joins the MLP gradients' all-reduce.
//   table-wise  the owner holds the table; forward: it sends each rank that rank's b samples'
//               pooled rows (send buffer B x D per owned table) in one all-to-all with the
//               other table-wise tables; backward: the reverse.
//   row-wise    rank r owns rows [r * ceil(R/N), ...); forward: each rank sends every rank the
//               partial sums of its samples (send buffer B x T_rw x D), summed on arrival (a
//               reduce-scatter); backward: each rank sends its b x T_rw x D gradients to every
//               rank (an all-gather, send buffer B x T_rw x D).
// The old single-kind entry (EmbeddingSharding) places every table the same way, table-wise on
// rank t % N.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace monarch::realrt {

struct DlrmCpuConfig {
  std::vector<int64_t> table_rows;  // one per table
  int64_t dim = 16;                 // every table and the bottom MLP output
  int64_t pooling = 2;              // ids per sample per table
  std::vector<int64_t> table_pooling;  // per table, overrides `pooling` when not empty
  int64_t dense_features = 8;
  std::vector<int64_t> bottom_mlp = {32, 16};  // last = dim
  std::vector<int64_t> top_mlp = {32, 1};      // last = 1
  int64_t global_batch = 64;
  int64_t steps = 10;
  float dense_lr = 0.5f;
  float embedding_lr = 0.1f;
  uint64_t seed = 1;
};

enum class EmbeddingSharding { kLocal, kTableWise, kRowWise };

enum class CpuTableSharding { kDataParallel, kTableWise, kRowWise };
struct CpuTablePlacement {
  CpuTableSharding kind = CpuTableSharding::kDataParallel;
  int owner = 0;  // table-wise only
};

// What the embedding exchange needs from a communicator (float payloads; counts in floats).
class DlrmComm {
 public:
  virtual ~DlrmComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void alltoallv(const std::vector<float>& send, const std::vector<int>& send_counts, std::vector<float>& recv,
                         const std::vector<int>& recv_counts) = 0;
  virtual void allreduce_sum(std::vector<float>& data) = 0;
};

// One process, no communication (rank 0 of 1).
class LocalComm : public DlrmComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void alltoallv(const std::vector<float>& send, const std::vector<int>&, std::vector<float>& recv,
                 const std::vector<int>&) override {
    recv = send;
  }
  void allreduce_sum(std::vector<float>&) override {}
};

struct DlrmCpuRun {
  std::vector<double> losses;  // global-batch mean loss of each step (before its update)
  // Send-buffer bytes of this rank's embedding all-to-alls in the first step, forward and
  // backward (single-kind entry: of the one kind used).
  int64_t forward_a2a_send_bytes = 0;
  int64_t backward_a2a_send_bytes = 0;
  int64_t a2a_calls_per_step = 0;
  // Per kind, this rank, first step: send buffers (bytes) and the bytes to other ranks.
  int64_t pooled_forward_send_bytes = 0, pooled_backward_send_bytes = 0;  // table-wise all-to-all
  int64_t rw_forward_send_bytes = 0, rw_backward_send_bytes = 0;          // row-wise exchange
  int64_t pooled_forward_wire_bytes = 0, pooled_backward_wire_bytes = 0;
  int64_t rw_forward_wire_bytes = 0, rw_backward_wire_bytes = 0;
  int64_t dp_allreduce_bytes = 0;  // buffer of the data-parallel all-reduce (MLPs + dp tables)
  std::vector<double> step_time_s;  // wall-clock seconds of each step on this rank
};

// Problems with the config (sizes, widths), empty when fine.
std::string check_dlrm_cpu_config(const DlrmCpuConfig& c, int world_size);
// The same and the placements (one per table, owners in range, row-wise tables with at least
// as many rows as ranks).
std::string check_dlrm_cpu_placements(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& placements,
                                      int world_size);

DlrmCpuRun train_dlrm_cpu(const DlrmCpuConfig& c, EmbeddingSharding sharding, DlrmComm& comm);
DlrmCpuRun train_dlrm_cpu(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& placements, DlrmComm& comm);

}  // namespace monarch::realrt
