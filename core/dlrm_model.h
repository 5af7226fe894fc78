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
//   backward       the same volumes in reverse (all-to-all of gradients; row-wise all-gather).
//   MLPs           roofline GEMMs (core/cost_model compute_time_s) forward + 2x backward.
//   lookups        HBM-bandwidth bound gathers (forward) and gather + scatter-update with the
//                  fused optimizer (backward, FBGEMM TBE style).
//   dp all-reduce  MLP gradients + data-parallel tables' gradients (not overlapped: the
//                  model's critical path is short, so it is reported exposed).
//
// Standard library only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

struct DlrmShardingPlan {
  std::vector<TablePlacement> tables;  // one per scenario.model.dlrm.tables entry
  std::string name;                    // how it was formed, e.g. "greedy", "all-table-wise"
};

// Short description: "t0:tw@3 t1:rw t2:cw2@0,1 t3:dp".
std::string describe(const DlrmShardingPlan& plan);

// Constants (units in names; sources in dlrm_model.cc).
extern const double kEmbeddingGatherEfficiency;  // achieved / peak HBM bandwidth of TBE gathers
extern const int64_t kSparseIdBytes;              // bytes of one sparse feature id (int64)

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
  int64_t rw_reduce_scatter_bytes = 0;  // row-wise tables: reduce-scatter input (B x dim)
  int64_t id_send_bytes = 0;         // input-dist all-to-all send buffer (ids)
};
std::vector<DlrmRankLoad> dlrm_rank_loads(const Scenario& scenario, const DlrmShardingPlan& plan);

// Bytes of one embedding element and of the optimizer state per row.
double dlrm_embedding_bytes_per_element(const Scenario& scenario);
double dlrm_optimizer_bytes_per_row(const Scenario& scenario, int64_t dim);

// Checks that a plan is well formed for the scenario (a bug when not: the planner builds them).
// Returns an empty string when fine, else what is wrong.
std::string check_dlrm_plan(const Scenario& scenario, const DlrmShardingPlan& plan);

// The analytical result of one plan: memory.stages[0] is the busiest GPU; communication has
// the input-dist and pooled all-to-alls (group "world"), row-wise reduce-scatter/all-gather and
// the data-parallel all-reduce (group "dp"). plan.dp = num_gpus (the dense part is DP).
BackendResult estimate_dlrm(const Scenario& scenario, const DlrmShardingPlan& plan);

}  // namespace monarch
