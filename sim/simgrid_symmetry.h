// Data-parallel replica symmetry of the SimGrid backend (docs/simgrid_backend.md): which ranks
// are simulated when one data-parallel replica stands for all. Pure C++ (no SimGrid), so that
// the caller can lower only those ranks (strategies/lowering.h `only`) before simulating.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/plan_ir.h"
#include "core/scenario.h"
#include "sim/simgrid_backend.h"

namespace monarch::simgrid_backend {

struct SymmetryChoice {
  std::vector<char> simulated;  // by rank
  int64_t replicas = 1;         // ranks each simulated rank stands for
};

// How much a rank's GPU is affected by the what-ifs (straggler slowdown first, then NIC
// degradation): the simulated replica is the one holding the most affected GPU. `gpus`: rank ->
// cluster GPU (empty: rank i on GPU i).
std::vector<double> rank_weights(const ClusterConfig& cluster, const WhatIf& whatif, int64_t world_size,
                                 const std::vector<int64_t>& gpus);

// True when every collective of the `simulated` ranks has only simulated members, except the
// groups that run alike in every replica (data-parallel ones, kDp and kDpCp, and a transformer's
// expert groups, kEp, kExpertDp and kExpertTp, under expert parallelism), and every message of
// theirs has a simulated peer: the replica can run without the others. Ranks whose program is
// empty are not looked at.
bool replica_is_closed(const PlanGraph& graph, const std::vector<char>& simulated);

// The replica to simulate in `graph`: by data-parallel group position (each DP or DP x CP
// group has one member in it), else by the plan's data-parallel index (the replica then holds
// its context-parallel ranks, whose gradients reduce over DP x CP). A graph lowered for one
// replica only (the other ranks' programs empty) is that replica. nullopt when no replica is
// closed (replica_is_closed), e.g. a DLRM's embedding group.
std::optional<SymmetryChoice> dp_replica(const PlanGraph& graph, const std::vector<double>& rank_weight);

// The ranks to lower for a SimGrid run of `plan` under `options`: one data-parallel replica
// (by the plan's data-parallel index, the one holding the most affected GPU) when symmetry may
// apply (not off, dp > 1); empty when every rank is needed. The caller lowers those ranks,
// then keeps the replica graph only if it is closed and, under auto symmetry, large enough
// (replica_graph_usable).
std::vector<char> replica_ranks_to_lower(const Scenario& scenario, const Plan& plan, const SimgridOptions& options);

// Whether a graph lowered for replica_ranks_to_lower can be simulated as it is: the replica is
// closed, and under auto symmetry the whole graph (replica tasks x dp) would be over
// options.symmetry_min_tasks, the size from which the backend simulates one replica.
bool replica_graph_usable(const PlanGraph& replica_graph, const std::vector<char>& lowered, const SimgridOptions& options);

}  // namespace monarch::simgrid_backend
