// Hand-made plan graphs and clusters for the SimGrid backend tests (independent of the
// strategy engine's lowering).
#pragma once

#include <cstdint>

#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch::testing {

ClusterConfig make_cluster(int64_t num_gpus, int64_t gpus_per_node, int64_t nics_per_node,
                           double intra_GBps = 300, double intra_latency_us = 2, double inter_GBps = 25,
                           double inter_latency_us = 5, Topology topology = Topology::kFatTree,
                           double oversubscription = 1.0);

Scenario make_scenario(const ClusterConfig& cluster);

// Every rank of `group_ranks` calls `repeats` collectives of `kind` on `bytes` (one group).
PlanGraph collective_graph(int32_t world_size, const std::vector<int32_t>& group_ranks, CollectiveKind kind,
                           int64_t bytes, int repeats = 1, GroupKind group_kind = GroupKind::kDp);

// A small training step on tp x pp x dp ranks (rank = tp_i + tp * (dp_i + dp * pp_i)), GPipe:
// per micro-batch a forward compute, a TP all-reduce of `tp_bytes`, an activation send to the
// next stage; then the backward in reverse; then a DP all-reduce of `dp_bytes` on the dp stream
// after the last backward and an optimizer step. Activations are allocated in the forward and
// freed in the backward; weights are allocated first.
struct StepShape {
  int32_t tp = 1, pp = 1, dp = 1;
  int32_t micro_batches = 4;
  double fwd_s = 1e-3, bwd_s = 2e-3, optimizer_s = 1e-4;
  int64_t tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;
  int64_t weight_bytes = 1 << 30, activation_bytes = 1 << 28;
};
PlanGraph training_graph(const StepShape& shape);

}  // namespace monarch::testing
