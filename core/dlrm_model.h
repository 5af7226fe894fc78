// Recommendation model (DLRM / DLRM-DCNv2) cost and memory model for an embedding sharding
// plan. The dense part (bottom MLP, interaction, top MLP) is data-parallel over all GPUs; each
// embedding table is placed as TorchRec does:
//
//   data-parallel  every GPU holds the whole table; lookups stay local; the dense table
//                  gradient is all-reduced with the MLP gradients.
//   table-wise     one GPU holds the whole table and looks it up for the global batch.
//   column-wise    the dim columns are split into `ranks.size()` equal shards, each placed
//                  table-wise on its own GPU.
//   row-wise       the rows are split over all GPUs, ceil(rows / GPUs) each (the last shards may
//                  be short or empty); each GPU looks up the ids that fall in its rows for the
//                  global batch.
//
// Per iteration (B = global batch, b = B / N per GPU, N = GPUs):
//   input dist     all-to-all of the sparse ids (int64) to the GPUs that own the rows
//   forward        table-wise/column-wise: all-to-all of pooled embeddings, the owner sends
//                  B x dim_shard values (NCCL all-to-all "size" = the send buffer);
//                  row-wise: reduce-scatter of B x dim partial sums.
//   backward       all-to-all of the gradients: every GPU sends its b samples' gradients of every
//                  table-wise/column-wise shard (b x sum of their dims; equal to the forward
//                  buffer only when the shards are spread evenly); row-wise: all-gather.
//   MLPs           roofline GEMMs (core/cost_model compute_time_s) forward + 2x backward;
//                  the dot interaction is one batched GEMM of b small products.
//   lookups        HBM-bandwidth bound TBE kernels: forward reads each id and row and writes
//                  the pooled output; backward reads each id and pooled gradient and updates
//                  every distinct row once with the fused optimizer (SGD, Adagrad, row-wise
//                  Adagrad, Adam: FBGEMM's state sizes).
//   dp all-reduce  MLP gradients + data-parallel tables' gradients, DDP buckets beside the
//                  backward; only what exceeds the backward is exposed.
//
// Standard library only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

enum class TableSharding { kDataParallel, kTableWise, kColumnWise, kRowWise };
const char* to_string(TableSharding);

struct TablePlacement {
  TableSharding kind = TableSharding::kDataParallel;
  // table-wise: one GPU; column-wise: one GPU per column shard; data-parallel and row-wise:
  // empty (all GPUs).
  std::vector<int32_t> ranks;
  // Table-wise, column-wise and row-wise shards may live in host memory with an HBM cache of
  // kUvmCacheLoadFactor of their rows (FBGEMM EmbeddingLocation::MANAGED_CACHING, TorchRec's
  // FUSED_UVM_CACHING kernel); describe() marks them "+uvm".
  bool uvm_caching = false;
};

struct DlrmShardingPlan {
  std::vector<TablePlacement> tables;  // one per scenario.model.dlrm.tables entry
  std::string name;                    // how it was formed, e.g. "greedy", "all-table-wise"
};

// Short description: "t0:tw@3 t1:rw t2:cw2@0,1 t3:dp".
std::string describe(const DlrmShardingPlan& plan);

// Reads describe()'s form back: one "tI:KIND" word per table, in table order, KIND one of dp,
// rw, tw@RANK, cwK@R1,R2,..., the last three optionally followed by "+uvm" (host memory with an
// HBM cache); returns the plan (name "given") or the problem (where empty, the
// message naming the word at fault). check_dlrm_plan still applies.
Expected<DlrmShardingPlan> parse_dlrm_plan(const std::string& text);

// The plan of a recommendation model with this sharding, as every backend reports it: data
// parallel over the scenario's GPUs, the per-GPU batch as micro-batch, and the sharding.
Plan dlrm_plan(const Scenario& scenario, const DlrmShardingPlan& sharding);

// Constants (units in names; sources in dlrm_model.cc).
extern const double kEmbeddingGatherEfficiency;  // achieved / peak HBM bandwidth of TBE gathers
extern const int64_t kSparseIdBytes;              // bytes of one sparse feature id (int64)
extern const double kUvmCacheLoadFactor;          // HBM cache rows / rows of a UVM-cached shard

// Dense parameter counts.
struct DlrmDenseShape {
  int64_t interaction_out = 0;  // width entering the top MLP
  int64_t bottom_params = 0, interaction_params = 0, top_params = 0;
  int64_t dense_params() const { return bottom_params + interaction_params + top_params; }
};
DlrmDenseShape dlrm_dense_shape(const DlrmConfig& d);

// Per-GPU figures of one plan (before turning into a BackendResult).
struct DlrmRankLoad {
  double table_weight_bytes = 0;     // embedding shards held
  double table_optimizer_bytes = 0;  // their optimizer state
  double table_grad_bytes = 0;       // dense gradients of data-parallel tables
  double lookup_forward_bytes = 0;   // HBM traffic of forward gathers
  double lookup_backward_bytes = 0;  // HBM traffic of backward + fused optimizer update
  int64_t a2a_send_bytes = 0;        // forward pooled-embedding all-to-all send buffer
  int64_t a2a_backward_send_bytes = 0;  // backward all-to-all send buffer: this GPU's b samples'
                                        // gradients of every table-wise/column-wise shard
  int64_t rw_reduce_scatter_bytes = 0;  // row-wise tables: reduce-scatter input (B x dim)
  int64_t id_send_bytes = 0;         // input-dist all-to-all send buffer (ids)
  int64_t id_receive_bytes = 0;      // ids this GPU receives (every GPU's lookups of its shards)
  // UVM-cached shards: rows and optimizer state held in host memory, and the host-link
  // traffic of one iteration (forward: missed rows fetched into the cache and as many evicted
  // rows written back; backward: the optimizer state of every updated row read and written).
  double host_memory_bytes = 0;
  double host_forward_bytes = 0;
  double host_backward_bytes = 0;
};
std::vector<DlrmRankLoad> dlrm_rank_loads(const Scenario& scenario, const DlrmShardingPlan& plan);

// Seconds of one GPU's TBE kernels: HBM traffic at kEmbeddingGatherEfficiency of the peak
// bandwidth plus, for UVM-cached shards, the host-link traffic (host_link_bytes_per_s, core/model_math.h).
double dlrm_lookup_forward_s(const Scenario& scenario, const DlrmRankLoad& load);
double dlrm_lookup_backward_s(const Scenario& scenario, const DlrmRankLoad& load);

// Bytes of one element of a pooled embedding (and of its gradient): the training precision.
double dlrm_embedding_bytes_per_element(const Scenario& scenario);
// Bytes of one element of a table row as stored: model.dlrm.embedding_dtype, or the training
// precision when the scenario does not say.
double dlrm_table_bytes_per_element(const Scenario& scenario);
// Bytes of the optimizer state per row.
double dlrm_optimizer_bytes_per_row(const Scenario& scenario, int64_t dim);

// Checks that a plan is well formed for the scenario (a bug when not: the planner builds them).
// Returns an empty string when fine, else what is wrong.
std::string check_dlrm_plan(const Scenario& scenario, const DlrmShardingPlan& plan);

// Dense compute of one GPU (b = global batch / GPUs samples) per part, as estimate_dlrm counts
// it: index 0 bottom MLP, 1 interaction (dot or DCN v2), 2 top MLP. Backward = both GEMMs of
// each forward GEMM. activation_bytes: what the forward saves for backward.
struct DlrmDenseCosts {
  double fwd_s[3] = {0, 0, 0};
  double bwd_s[3] = {0, 0, 0};
  double fwd_flops[3] = {0, 0, 0};
  double activation_bytes = 0;
  double forward_s() const { return fwd_s[0] + fwd_s[1] + fwd_s[2]; }
  double backward_s() const { return bwd_s[0] + bwd_s[1] + bwd_s[2]; }
  double forward_flops() const { return fwd_flops[0] + fwd_flops[1] + fwd_flops[2]; }
};
DlrmDenseCosts dlrm_dense_costs(const Scenario& scenario);

// NCCL sizes (buffer per rank) of one iteration's collectives over all GPUs. All-to-alls are
// synchronous, so the busiest port sets the size: the largest send buffer or the most bytes
// one GPU receives, whichever is larger (the backward pooled exchange is the forward's
// transpose: the owner of the most shards receives what it sent forward). Pooled embeddings
// (forward, and their gradients backward), ids (input dist); rw_bytes: row-wise
// reduce-scatter input and all-gather output; dp_grad_bytes: the data-parallel all-reduce.
struct DlrmCommSizes {
  int64_t pooled_a2a_bytes = 0, id_a2a_bytes = 0, rw_bytes = 0, dp_grad_bytes = 0;
  int64_t pooled_a2a_backward_bytes = 0;
};
DlrmCommSizes dlrm_comm_sizes(const Scenario& scenario, const std::vector<DlrmRankLoad>& loads);

// Who sends what to whom in the embedding all-to-alls: [src][dst] bytes over all GPUs (the
// diagonal is what a GPU keeps). Pooled forward: a shard's owner sends each GPU the pooled
// rows of that GPU's b samples (b x shard dim); backward: the transpose (their gradients);
// ids: every GPU sends each shard's owner its b samples' ids of that table, and row-wise
// tables' ids spread evenly over all GPUs. Row sums are DlrmRankLoad's send buffers.
struct DlrmAllToAllMatrices {
  std::vector<std::vector<int64_t>> pooled_forward, pooled_backward, ids;
};
DlrmAllToAllMatrices dlrm_all_to_all_matrices(const Scenario& scenario, const DlrmShardingPlan& plan);

// Memory of one GPU with these loads (weights, gradients, optimizer, activations, buffers).
StageMemory dlrm_rank_memory(const Scenario& scenario, const DlrmRankLoad& load);

// The analytical result of one plan: memory.stages[0] is the busiest GPU; communication has
// the input-dist and pooled all-to-alls (group "world"), row-wise reduce-scatter/all-gather and
// the data-parallel all-reduce (group "dp"). plan.dp = num_gpus (the dense part is DP).
BackendResult estimate_dlrm(const Scenario& scenario, const DlrmShardingPlan& plan);

}  // namespace monarch
