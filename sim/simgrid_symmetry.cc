#include "sim/simgrid_symmetry.h"

#include <algorithm>

#include "core/graph_replica.h"
#include "core/placement.h"

namespace monarch::simgrid_backend {
namespace {

bool is_dp_kind(GroupKind k) { return k == GroupKind::kDp || k == GroupKind::kDpCp; }

// A collective that may have members outside the simulated replica: each such member is the
// image of a simulated one (same program, same instants), so the collective runs with every
// member's flows once its simulated members arrive. The data-parallel groups have one member
// per replica; a transformer's expert groups (expert parallel, expert data parallel, expert
// tensor parallel) span replicas when EP exceeds TP x CP, and under the even token routing the
// lowering gives every expert rank the same work. A DLRM's embedding group (its tables differ
// by rank) is not such a group.
bool may_cross_replicas(const PlanGraph& g, GroupKind k) {
  if (is_dp_kind(k)) return true;
  const bool expert = k == GroupKind::kEp || k == GroupKind::kExpertDp || k == GroupKind::kExpertTp;
  return expert && g.plan.ep > 1 && g.plan.embedding_sharding.empty();
}

size_t worst_rank(const std::vector<double>& weight) {
  size_t worst = 0;
  for (size_t r = 1; r < weight.size(); ++r)
    if (weight[r] > weight[worst]) worst = r;
  return worst;
}

// Ranks at each position of their `kind` groups; empty unless those groups partition the
// ranks with one size of at least 2.
std::vector<int64_t> group_positions(const PlanGraph& g, GroupKind kind, int64_t* size) {
  std::vector<int64_t> pos(static_cast<size_t>(g.world_size), -1);
  *size = 0;
  for (const auto& grp : g.groups) {
    if (grp.kind != kind) continue;
    if (*size == 0) *size = static_cast<int64_t>(grp.ranks.size());
    if (static_cast<int64_t>(grp.ranks.size()) != *size) return {};
    for (size_t i = 0; i < grp.ranks.size(); ++i) {
      auto& p = pos[static_cast<size_t>(grp.ranks[i])];
      if (p != -1) return {};
      p = static_cast<int64_t>(i);
    }
  }
  if (*size < 2 || std::find(pos.begin(), pos.end(), -1) != pos.end()) return {};
  return pos;
}

// Ranks at the plan's data-parallel index `dp_index`; empty when the plan does not describe
// the graph's ranks.
std::vector<char> plan_replica(const Plan& plan, int64_t world_size, int64_t dp_index) {
  if (plan.dp < 2 || plan.world_size() != world_size) return {};
  return replica_ranks(plan, dp_index);
}

}  // namespace

std::vector<double> rank_weights(const ClusterConfig& cluster, const WhatIf& whatif, int64_t world_size,
                                 const std::vector<int64_t>& gpus) {
  const auto num_gpus = static_cast<size_t>(std::max<int64_t>(cluster.num_gpus, 0));
  std::vector<double> slowdown(num_gpus, 1.0), degraded(num_gpus, 0.0);
  auto node_gpus = [&](int64_t node, auto&& f) {
    for (int64_t g = node * cluster.gpus_per_node; g < std::min((node + 1) * cluster.gpus_per_node, cluster.num_gpus); ++g)
      if (g >= 0) f(static_cast<size_t>(g));
  };
  for (const auto& s : whatif.stragglers) {
    if (s.gpu >= 0 && static_cast<size_t>(s.gpu) < num_gpus) slowdown[static_cast<size_t>(s.gpu)] *= s.slowdown;
    if (s.node >= 0) node_gpus(s.node, [&](size_t g) { slowdown[g] *= s.slowdown; });
  }
  for (const auto& d : whatif.degraded_links) node_gpus(d.node, [&](size_t g) { degraded[g] += 1.0 - d.bandwidth_factor; });
  std::vector<double> weight(static_cast<size_t>(std::max<int64_t>(world_size, 0)), 0.0);
  for (size_t r = 0; r < weight.size(); ++r) {
    const size_t gpu = gpus.empty() ? r : static_cast<size_t>(gpus[r]);
    if (gpu < num_gpus) weight[r] = (slowdown[gpu] - 1.0) * 1e3 + degraded[gpu];
  }
  return weight;
}

bool replica_is_closed(const PlanGraph& g, const std::vector<char>& simulated) {
  for (const auto& prog : g.ranks) {
    if (!simulated[static_cast<size_t>(prog.rank)]) continue;
    for (const auto& t : prog.tasks) {
      if (t.kind == TaskKind::kCollective) {
        const auto& grp = g.groups[static_cast<size_t>(t.group)];
        if (may_cross_replicas(g, grp.kind)) continue;
        for (int32_t m : grp.ranks)
          if (!simulated[static_cast<size_t>(m)]) return false;
      } else if (t.kind == TaskKind::kSend || t.kind == TaskKind::kRecv) {
        if (!simulated[static_cast<size_t>(t.peer)]) return false;
      }
    }
  }
  return true;
}

std::optional<SymmetryChoice> dp_replica(const PlanGraph& g, const std::vector<double>& rank_weight) {
  const auto world = static_cast<size_t>(g.world_size);
  if (std::vector<char> have = lowered_replica(g); !have.empty()) {  // lowered for one replica
    if (!replica_is_closed(g, have)) return std::nullopt;
    return SymmetryChoice{std::move(have), g.plan.dp};
  }
  const size_t worst = worst_rank(rank_weight);
  for (GroupKind kind : {GroupKind::kDp, GroupKind::kDpCp}) {
    int64_t size = 0;
    const std::vector<int64_t> pos = group_positions(g, kind, &size);
    if (pos.empty()) continue;
    SymmetryChoice c;
    c.replicas = size;
    c.simulated.resize(world);
    for (size_t r = 0; r < world; ++r) c.simulated[r] = pos[r] == pos[worst];
    if (replica_is_closed(g, c.simulated)) return c;
  }
  // Context parallelism: DP x CP groups cross replicas by design; the replica is one
  // data-parallel index with all its context-parallel ranks.
  std::vector<char> in = plan_replica(g.plan, g.world_size, rank_to_coords(static_cast<int64_t>(worst), g.plan).dp);
  if (in.empty() || !replica_is_closed(g, in)) return std::nullopt;
  return SymmetryChoice{std::move(in), g.plan.dp};
}

std::vector<char> replica_ranks_to_lower(const Scenario& sc, const Plan& plan, const SimgridOptions& options) {
  if (options.symmetry == SimgridSymmetry::kOff || plan.dp < 2 || plan.world_size() != sc.cluster.num_gpus) return {};
  const std::vector<double> weight = rank_weights(sc.cluster, sc.whatif, plan.world_size(), {});
  return plan_replica(plan, plan.world_size(), rank_to_coords(static_cast<int64_t>(worst_rank(weight)), plan).dp);
}

bool replica_graph_usable(const PlanGraph& g, const std::vector<char>& lowered_ranks, const SimgridOptions& options) {
  if (!replica_is_closed(g, lowered_ranks)) return false;
  if (options.symmetry != SimgridSymmetry::kAuto) return true;
  int64_t tasks = 0;
  for (const auto& prog : g.ranks) tasks += static_cast<int64_t>(prog.tasks.size());
  return tasks * g.plan.dp > options.symmetry_min_tasks;
}

}  // namespace monarch::simgrid_backend
