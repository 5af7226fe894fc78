#include "core/placement.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

#include "core/recent_entries.h"

namespace monarch {

std::string world_size_problem(const Plan& plan, int64_t num_gpus) {
  if (plan.world_size() == num_gpus) return "";
  return "tp x pp x dp x cp = " + std::to_string(plan.world_size()) + " but the cluster has " + std::to_string(num_gpus) + " GPUs";
}

RankCoords rank_to_coords(int64_t rank, const Plan& p) {
  assert(rank >= 0 && rank < p.world_size());
  RankCoords c;
  c.tp = rank % p.tp;
  int64_t r = rank / p.tp;
  c.cp = r % p.cp;
  r /= p.cp;
  c.dp = r % p.dp;
  c.pp = r / p.dp;
  // Expert layout (placement.h): stage-local index L, etp innermost, then ep, then expert dp.
  const int64_t ep = std::max<int64_t>(p.ep, 1);
  const int64_t etp = p.expert_tp();
  const int64_t local = rank - c.pp * p.tp * p.cp * p.dp;
  c.etp = local % etp;
  c.ep = (local / etp) % ep;
  c.edp = local / (etp * ep);
  return c;
}

int64_t coords_to_rank(const RankCoords& c, const Plan& p) {
  return c.tp + p.tp * (c.cp + p.cp * (c.dp + p.dp * c.pp));
}

int64_t group_size(GroupKind kind, const Plan& p) {
  switch (kind) {
    case GroupKind::kTp: return p.tp;
    case GroupKind::kCp: return p.cp;
    case GroupKind::kEp: return std::max<int64_t>(p.ep, 1);
    case GroupKind::kDp: return p.dp;
    case GroupKind::kPp: return p.pp;
    case GroupKind::kExpertDp: return p.tp * p.dp * p.cp / (p.expert_tp() * std::max<int64_t>(p.ep, 1));
    case GroupKind::kWorld: return p.world_size();
    case GroupKind::kDpCp: return p.dp * p.cp;
    case GroupKind::kEmbedding: return p.pp > 1 ? 2 : 1;
    case GroupKind::kExpertTp: return p.expert_tp();
  }
  return 1;
}

GroupKind dense_gradient_group(const Plan& plan) { return plan.cp > 1 ? GroupKind::kDpCp : GroupKind::kDp; }

int64_t group_stride(GroupKind kind, const Plan& p) {
  switch (kind) {
    case GroupKind::kTp: return 1;
    case GroupKind::kCp: return p.tp;
    case GroupKind::kEp: return p.expert_tp();
    case GroupKind::kDp: return p.tp * p.cp;
    case GroupKind::kPp: return p.tp * p.cp * p.dp;
    case GroupKind::kExpertDp: return p.expert_tp() * std::max<int64_t>(p.ep, 1);
    case GroupKind::kWorld: return 1;
    case GroupKind::kDpCp: return p.tp;
    case GroupKind::kEmbedding: return p.tp * p.cp * p.dp * std::max<int64_t>(p.pp - 1, 1);
    case GroupKind::kExpertTp: return 1;
  }
  return 1;
}

// First member of the group of `kind` containing `rank`.
static int64_t group_base(GroupKind kind, int64_t rank, const Plan& p) {
  const int64_t stride = group_stride(kind, p);
  const int64_t size = group_size(kind, p);
  switch (kind) {
    case GroupKind::kWorld: return 0;
    case GroupKind::kDpCp: {
      // Work inside the dp x cp slice of this (tp_i, pp_i).
      const RankCoords c = rank_to_coords(rank, p);
      return c.tp + p.tp * p.cp * p.dp * c.pp;
    }
    case GroupKind::kEp:
    case GroupKind::kExpertDp:
    case GroupKind::kExpertTp: {
      // Expert layout inside the pipeline stage: zero this kind's expert coordinate.
      const RankCoords c = rank_to_coords(rank, p);
      const int64_t etp = p.expert_tp();
      const int64_t ep = std::max<int64_t>(p.ep, 1);
      const int64_t stage_base = c.pp * p.tp * p.cp * p.dp;
      if (kind == GroupKind::kExpertTp) return stage_base + etp * (c.ep + ep * c.edp);
      if (kind == GroupKind::kEp) return stage_base + c.etp + etp * ep * c.edp;
      return stage_base + c.etp + etp * c.ep;
    }
    default: {
      // Dense kinds: zero this kind's coordinate.
      const int64_t block = stride * size;
      return rank - (rank % block) + (rank % stride);
    }
  }
}

std::vector<int32_t> group_ranks(GroupKind kind, int32_t rank, const Plan& p) {
  const int64_t stride = group_stride(kind, p);
  const int64_t size = group_size(kind, p);
  const int64_t base = group_base(kind, rank, p);
  std::vector<int32_t> out(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) out[static_cast<size_t>(i)] = static_cast<int32_t>(base + i * stride);
  return out;
}

GroupSpan strided_span(int64_t base, int64_t size, int64_t stride, int64_t gpus_per_node) {
  GroupSpan s;
  s.size = size;
  if (gpus_per_node <= 0 || size <= 1) {
    s.ranks_per_node = s.fewest_ranks_per_node = size;
    return s;
  }
  if (stride >= gpus_per_node && stride % gpus_per_node == 0) {
    s.nodes = size;
    s.ranks_per_node = 1;
    s.rail_aligned = true;
    return s;
  }
  if (gpus_per_node % stride == 0 && base % gpus_per_node + (size - 1) * stride < gpus_per_node) {
    s.nodes = 1;
    s.ranks_per_node = s.fewest_ranks_per_node = size;
    return s;
  }
  if (gpus_per_node % stride == 0 && base % gpus_per_node < stride) {
    // Aligned: every node holds gpus_per_node / stride members.
    const int64_t per_node = gpus_per_node / stride;
    s.ranks_per_node = std::min(size, per_node);
    s.nodes = (size + per_node - 1) / per_node;
    s.fewest_ranks_per_node = size - (s.nodes - 1) * per_node;  // the last node holds the rest
    return s;
  }
  // Irregular layout: count.
  int64_t nodes = 0, best = 0, cur = 0, last_node = -1;
  int64_t fewest = size;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t node = (base + i * stride) / gpus_per_node;
    if (node != last_node) {
      if (nodes > 0) fewest = std::min(fewest, cur);
      ++nodes;
      cur = 0;
      last_node = node;
    }
    best = std::max(best, ++cur);
  }
  s.nodes = nodes;
  s.ranks_per_node = best;
  s.fewest_ranks_per_node = std::min(fewest, cur);
  return s;
}

// The slowest of the groups of `kind` (the most nodes, then the sparsest node), from rank 0's
// `first` on.
static GroupSpan slowest_group_span(GroupKind kind, const Plan& p, int64_t g, const GroupSpan& first) {
  const int64_t size = group_size(kind, p), stride = group_stride(kind, p);
  GroupSpan worst = first;
  const int64_t world = p.world_size();
  auto slower = [](const GroupSpan& a, const GroupSpan& b) {
    if (a.nodes != b.nodes) return a.nodes > b.nodes;
    if (a.fewest_ranks_per_node != b.fewest_ranks_per_node) return a.fewest_ranks_per_node < b.fewest_ranks_per_node;
    return a.ranks_per_node < b.ranks_per_node;
  };
  for (int64_t r = 0; r < world; ++r) {
    if (group_base(kind, r, p) != r || r + (size - 1) * stride >= world) continue;  // not a group of the plan
    const GroupSpan s = strided_span(r, size, stride, g);
    if (slower(s, worst)) worst = s;
    worst.rail_aligned = worst.rail_aligned && s.rail_aligned;
  }
  return worst;
}

GroupSpan group_span(GroupKind kind, const Plan& p, int64_t gpus_per_node) {
  const int64_t size = group_size(kind, p), stride = group_stride(kind, p);
  const GroupSpan first = strided_span(group_base(kind, 0, p), size, stride, gpus_per_node);
  const int64_t g = gpus_per_node;
  // Every group has rank 0's shape when its blocks tile the nodes (the stride divides a node
  // and a group's block fits in one or covers whole nodes) or the stride is whole nodes.
  const bool regular = g <= 0 || size <= 1 || stride % g == 0 ||
                       (g % stride == 0 && (g % (stride * size) == 0 || (stride * size) % g == 0));
  if (regular) return first;
  // Otherwise (a group block that straddles nodes, e.g. TP 16 on 72-GPU NVLink domains):
  // the group spanning the most nodes paces the collective, then the one whose sparsest node
  // holds the fewest members (the fewest NICs its ring can cross on). That takes a pass over
  // the ranks, and a search asks it of every plan of one layout (tp, cp, dp, pp, ep, etp), so
  // the last few layouts' answers are kept per thread.
  struct Kept {
    GroupKind kind;
    int64_t tp, cp, dp, pp, ep, etp, gpus_per_node;
    GroupSpan span;
  };
  thread_local RecentEntries<Kept, 16> kept;
  const int64_t ep = std::max<int64_t>(p.ep, 1), etp = p.expert_tp();
  if (const Kept* k = kept.find([&](const Kept& e) {
        return e.kind == kind && e.tp == p.tp && e.cp == p.cp && e.dp == p.dp && e.pp == p.pp && e.ep == ep &&
               e.etp == etp && e.gpus_per_node == g;
      }))
    return k->span;
  const GroupSpan worst = slowest_group_span(kind, p, g, first);
  kept.add(Kept{kind, p.tp, p.cp, p.dp, p.pp, ep, etp, g, worst});
  return worst;
}

bool tp_group_in_nvlink_domain(const Plan& plan, int64_t gpus_per_node) {
  return plan.tp <= 1 || !group_span(GroupKind::kTp, plan, gpus_per_node).crosses_nodes();
}

std::vector<int64_t> gpus_on_each_node(const ClusterConfig& c) {
  std::vector<int64_t> out;
  if (c.gpus_per_node <= 0) return out;
  for (int64_t left = c.num_gpus; left > 0; left -= c.gpus_per_node) out.push_back(std::min(left, c.gpus_per_node));
  return out;
}

bool pp_hop_crosses_nodes(const Plan& p, int64_t gpus_per_node, int64_t from, int64_t to) {
  const int64_t g = gpus_per_node;
  if (g <= 0 || from == to) return false;
  const int64_t S = p.world_size() / std::max<int64_t>(p.pp, 1);
  const int64_t lo = std::min(from, to) * S, d = std::abs(to - from) * S;
  if (d >= g) return true;
  // The pairs (r, r + d), r in [lo, lo + S): some pair straddles a node boundary when a
  // multiple of g lies in (lo, lo + S - 1 + d].
  const int64_t next_boundary = (lo / g + 1) * g;
  return next_boundary <= lo + S - 1 + d;
}

}  // namespace monarch
