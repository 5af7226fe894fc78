#include "core/graph_replica.h"

#include "core/placement.h"

namespace monarch {

std::vector<char> replica_ranks(const Plan& plan, int64_t dp_index) {
  if (dp_index < 0 || dp_index >= plan.dp) return {};
  const int64_t world = plan.world_size();
  std::vector<char> in(static_cast<size_t>(world), 0);
  for (int64_t r = 0; r < world; ++r) in[static_cast<size_t>(r)] = rank_to_coords(r, plan).dp == dp_index;
  return in;
}

std::vector<char> lowered_replica(const PlanGraph& g) {
  if (g.plan.dp < 2 || g.plan.world_size() != g.world_size || static_cast<int64_t>(g.ranks.size()) != g.world_size) return {};
  int64_t first = -1;
  for (int64_t r = 0; r < g.world_size && first < 0; ++r)
    if (!g.ranks[static_cast<size_t>(r)].tasks.empty()) first = r;
  if (first < 0) return {};
  std::vector<char> in = replica_ranks(g.plan, rank_to_coords(first, g.plan).dp);
  for (int64_t r = 0; r < g.world_size; ++r)
    if ((in[static_cast<size_t>(r)] != 0) == g.ranks[static_cast<size_t>(r)].tasks.empty()) return {};
  return in;
}

}  // namespace monarch
