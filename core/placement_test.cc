#include "core/placement.h"
#include "core/recent_entries.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace monarch {
namespace {

Plan make_plan(int64_t tp, int64_t cp, int64_t dp, int64_t pp, int64_t ep = 1, int64_t etp = 0) {
  Plan p;
  p.tp = tp;
  p.cp = cp;
  p.dp = dp;
  p.pp = pp;
  p.ep = ep;
  p.etp = etp;
  return p;
}

TEST(Placement, TpIsInnermostAndPpOutermost) {
  const Plan p = make_plan(2, 2, 2, 2);
  EXPECT_EQ(rank_to_coords(1, p), (RankCoords{1, 0, 0, 0, 0, 0, 1}));  // etp index = tp index (etp == tp)
  // rank 2 = cp 1, rank 4 = dp 1, rank 8 = pp 1.
  EXPECT_EQ(rank_to_coords(2, p).cp, 1);
  EXPECT_EQ(rank_to_coords(4, p).dp, 1);
  EXPECT_EQ(rank_to_coords(8, p).pp, 1);
  for (int64_t r = 0; r < p.world_size(); ++r) EXPECT_EQ(coords_to_rank(rank_to_coords(r, p), p), r);
}

TEST(Placement, GroupsOfEachKindPartitionTheWorld) {
  for (const Plan& p : {make_plan(2, 2, 4, 2, 4), make_plan(2, 2, 4, 2, 4, 1), make_plan(2, 2, 4, 2, 2, 4),
                        make_plan(1, 2, 4, 2, 2, 2), make_plan(4, 1, 4, 1, 8, 2)})
  for (GroupKind k : {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp, GroupKind::kDp, GroupKind::kPp,
                      GroupKind::kExpertDp, GroupKind::kDpCp, GroupKind::kExpertTp}) {
    std::set<int32_t> seen;
    int groups = 0;
    for (int32_t r = 0; r < p.world_size(); ++r) {
      const auto g = group_ranks(k, r, p);
      ASSERT_EQ(static_cast<int64_t>(g.size()), group_size(k, p)) << to_string(k);
      EXPECT_NE(std::find(g.begin(), g.end(), r), g.end()) << to_string(k) << " rank " << r;
      // Every member computes the same group.
      for (int32_t m : g) EXPECT_EQ(group_ranks(k, m, p), g) << to_string(k);
      if (g.front() == r) {
        ++groups;
        for (int32_t m : g) EXPECT_TRUE(seen.insert(m).second) << to_string(k);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), p.world_size()) << to_string(k);
    EXPECT_EQ(groups * group_size(k, p), p.world_size()) << to_string(k);
  }
}

TEST(Placement, MegatronExampleGroups) {
  // Megatron's parallel_state docstring example: 16 GPUs, tp 2, pp 4, dp 2.
  const Plan p = make_plan(2, 1, 2, 4);
  EXPECT_EQ(group_ranks(GroupKind::kTp, 5, p), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 5, p), (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 5, p), (std::vector<int32_t>{1, 5, 9, 13}));
}

TEST(Placement, ExpertParallelIsCarvedOutOfDataAndContextRanks) {
  // tp 2, cp 2, dp 4, ep 4: the dp x cp slice of (tp 0, pp 0) is ranks 0,2,4,...,14.
  const Plan p = make_plan(2, 2, 4, 1, 4);
  EXPECT_EQ(group_ranks(GroupKind::kEp, 0, p), (std::vector<int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(group_ranks(GroupKind::kEp, 9, p), (std::vector<int32_t>{9, 11, 13, 15}));
  EXPECT_EQ(group_ranks(GroupKind::kExpertDp, 2, p), (std::vector<int32_t>{2, 10}));
  EXPECT_EQ(group_ranks(GroupKind::kDpCp, 3, p), (std::vector<int32_t>{1, 3, 5, 7, 9, 11, 13, 15}));
  const RankCoords c = rank_to_coords(10, p);
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.edp, 1);
}

// The layout before expert tensor parallelism existed (expert TP tied to TP): EP group = `ep`
// consecutive members of the dp x cp slice of one (tp_i, pp_i), stride tp; expert DP stride tp*ep.
std::vector<int32_t> tied_layout_group(GroupKind k, int32_t rank, const Plan& p) {
  const int64_t tp_i = rank % p.tp, j = (rank / p.tp) % (p.cp * p.dp), pp_i = rank / (p.tp * p.cp * p.dp);
  const int64_t slice_base = tp_i + p.tp * p.cp * p.dp * pp_i;
  std::vector<int32_t> out;
  if (k == GroupKind::kEp)
    for (int64_t i = 0; i < p.ep; ++i) out.push_back(static_cast<int32_t>(slice_base + p.tp * (j - j % p.ep + i)));
  else if (k == GroupKind::kExpertDp)
    for (int64_t i = 0; i < p.cp * p.dp / p.ep; ++i) out.push_back(static_cast<int32_t>(slice_base + p.tp * (j % p.ep + i * p.ep)));
  else
    out = group_ranks(GroupKind::kTp, rank, p);
  return out;
}

TEST(Placement, ExpertTpEqualToTpKeepsTheTiedLayout) {
  for (Plan p : {make_plan(2, 2, 4, 2, 4), make_plan(4, 1, 8, 1, 2), make_plan(1, 2, 2, 2, 4), make_plan(8, 2, 2, 2, 2)}) {
    for (int64_t etp : {int64_t{0}, p.tp}) {  // unset and explicitly equal
      p.etp = etp;
      for (int32_t r = 0; r < p.world_size(); ++r) {
        for (GroupKind k : {GroupKind::kEp, GroupKind::kExpertDp, GroupKind::kExpertTp})
          EXPECT_EQ(group_ranks(k, r, p), tied_layout_group(k, r, p)) << to_string(k) << " rank " << r;
        const RankCoords c = rank_to_coords(r, p);
        EXPECT_EQ(c.etp, c.tp);
        EXPECT_EQ(c.ep, (c.cp + p.cp * c.dp) % p.ep);
        EXPECT_EQ(c.edp, (c.cp + p.cp * c.dp) / p.ep);
      }
    }
  }
}

TEST(Placement, ExpertTpOneUnderTpTwo) {
  // tp 2, dp 4, ep 4, etp 1 (stage of 8 ranks): EP groups are consecutive ranks, expert DP pairs
  // them 4 apart, and every rank is its own expert-TP group.
  const Plan p = make_plan(2, 1, 4, 2, 4, 1);
  EXPECT_EQ(group_size(GroupKind::kExpertDp, p), 2);
  EXPECT_EQ(group_ranks(GroupKind::kEp, 1, p), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(group_ranks(GroupKind::kEp, 13, p), (std::vector<int32_t>{12, 13, 14, 15}));
  EXPECT_EQ(group_ranks(GroupKind::kExpertDp, 1, p), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(group_ranks(GroupKind::kExpertDp, 14, p), (std::vector<int32_t>{10, 14}));
  EXPECT_EQ(group_ranks(GroupKind::kExpertTp, 6, p), (std::vector<int32_t>{6}));
  const RankCoords c = rank_to_coords(14, p);  // stage 1, local 6
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.etp, 0);
  EXPECT_EQ(c.ep, 2);
  EXPECT_EQ(c.edp, 1);
}

TEST(Placement, ExpertTpTwoUnderTpOne) {
  // tp 1, dp 8, ep 2, etp 2: expert-TP pairs of consecutive ranks, EP stride 2, expert DP stride 4.
  const Plan p = make_plan(1, 1, 8, 1, 2, 2);
  EXPECT_EQ(group_ranks(GroupKind::kExpertTp, 5, p), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(group_ranks(GroupKind::kEp, 5, p), (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(group_ranks(GroupKind::kExpertDp, 5, p), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(group_stride(GroupKind::kEp, p), 2);
  EXPECT_EQ(group_stride(GroupKind::kExpertDp, p), 4);
  const RankCoords c = rank_to_coords(7, p);
  EXPECT_EQ(c.etp, 1);
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.edp, 1);
  // On 4-GPU nodes the expert-TP pair stays in a node, the EP pair too, expert DP crosses.
  EXPECT_FALSE(group_span(GroupKind::kExpertTp, p, 4).crosses_nodes());
  EXPECT_FALSE(group_span(GroupKind::kEp, p, 4).crosses_nodes());
  EXPECT_TRUE(group_span(GroupKind::kExpertDp, p, 4).crosses_nodes());
}

TEST(Placement, SpanOfTpInsideANodeAndDpAcrossNodes) {
  const Plan p = make_plan(8, 1, 4, 2);  // 64 GPUs on 8-GPU nodes
  const GroupSpan tp = group_span(GroupKind::kTp, p, 8);
  EXPECT_EQ(tp.size, 8);
  EXPECT_EQ(tp.nodes, 1);
  EXPECT_FALSE(tp.crosses_nodes());
  const GroupSpan dp = group_span(GroupKind::kDp, p, 8);
  EXPECT_EQ(dp.nodes, 4);
  EXPECT_EQ(dp.ranks_per_node, 1);
  EXPECT_TRUE(pp_hop_crosses_nodes(p, 8, 0, 1));
}

TEST(Placement, SpanOfAGroupPartlyInsideANode) {
  const Plan p = make_plan(2, 1, 8, 1);  // dp group stride 2: 4 members per 8-GPU node
  const GroupSpan dp = group_span(GroupKind::kDp, p, 8);
  EXPECT_EQ(dp.size, 8);
  EXPECT_EQ(dp.nodes, 2);
  EXPECT_EQ(dp.ranks_per_node, 4);
  EXPECT_FALSE(pp_hop_crosses_nodes(make_plan(2, 1, 1, 4), 8, 0, 1));
}

TEST(Placement, PipelineHopsLeaveTheNodeOnlyBetweenNodes) {
  // Stages of 4 ranks (dp 4) on 8-GPU nodes: stages 0 and 1 on node 0, 2 and 3 on node 1.
  const Plan small = make_plan(1, 1, 4, 4);
  EXPECT_FALSE(pp_hop_crosses_nodes(small, 8, 0, 1));
  EXPECT_TRUE(pp_hop_crosses_nodes(small, 8, 1, 2));
  EXPECT_FALSE(pp_hop_crosses_nodes(small, 8, 2, 3));
  EXPECT_TRUE(pp_hop_crosses_nodes(small, 8, 3, 0));  // the interleaved wrap-around
  EXPECT_FALSE(pp_hop_crosses_nodes(small, 8, 1, 0));
  // A stage of a whole node: every hop leaves it.
  EXPECT_TRUE(pp_hop_crosses_nodes(make_plan(8, 1, 1, 2), 8, 0, 1));
  // Stages of 3 ranks: stage 2 (ranks 6-8) straddles nodes 0 and 1, so only the pipeline whose
  // stage 2 rank is 8 crosses on 1 -> 2; no pipeline crosses on 0 -> 1.
  const Plan odd = make_plan(3, 1, 1, 4);
  EXPECT_FALSE(pp_hop_crosses_nodes(odd, 8, 0, 1));
  EXPECT_TRUE(pp_hop_crosses_nodes(odd, 8, 1, 2));
  EXPECT_TRUE(pp_hop_crosses_nodes(odd, 8, 2, 3));
}

TEST(Placement, IrregularNodeSizeIsCounted) {
  // 6-GPU nodes, stride 4: ranks 0,4,8,12 sit on nodes 0,0,1,2.
  const GroupSpan s = strided_span(0, 4, 4, 6);
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.ranks_per_node, 2);
  EXPECT_EQ(s.fewest_ranks_per_node, 1);
}

TEST(Placement, APartlyUsedLastNodeHoldsTheFewestMembers) {
  // 128 GPUs on GB200 NVL72: 72 + 56.
  const GroupSpan nvl = strided_span(0, 128, 1, 72);
  EXPECT_EQ(nvl.nodes, 2);
  EXPECT_EQ(nvl.ranks_per_node, 72);
  EXPECT_EQ(nvl.fewest_ranks_per_node, 56);
  // DP 12 on 8-GPU nodes: 8 + 4; whole nodes and one node are even.
  EXPECT_EQ(strided_span(0, 12, 1, 8).fewest_ranks_per_node, 4);
  EXPECT_EQ(strided_span(0, 16, 1, 8).fewest_ranks_per_node, 8);
  EXPECT_EQ(strided_span(0, 6, 1, 8).fewest_ranks_per_node, 6);
  // The data-parallel group of a plan on 256 GPUs of 72-GPU domains (72 x 3 + 40).
  Plan p;
  p.dp = 256;
  EXPECT_EQ(group_span(GroupKind::kDp, p, 72).fewest_ranks_per_node, 40);
}

}  // namespace
}  // namespace monarch

namespace monarch {
namespace {

TEST(Placement, A128GpuJobOnGb200Nvl72Takes72And56Gpus) {
  ClusterConfig c;
  c.num_gpus = 128;
  c.gpus_per_node = 72;
  EXPECT_EQ(gpus_on_each_node(c), (std::vector<int64_t>{72, 56}));
  EXPECT_EQ(c.num_nodes(), 2);
  c.num_gpus = 64;
  EXPECT_EQ(gpus_on_each_node(c), (std::vector<int64_t>{64}));
  c.num_gpus = 16;
  c.gpus_per_node = 8;
  EXPECT_EQ(gpus_on_each_node(c), (std::vector<int64_t>{8, 8}));
}

TEST(Placement, GroupsStraddlingAnNvlinkDomainAreSeen) {
  // TP 8 tiles 72-GPU domains: no TP group leaves its domain.
  Plan tp8 = make_plan(8, 1, 16, 1);
  EXPECT_FALSE(group_span(GroupKind::kTp, tp8, 72).crosses_nodes());
  // DP over 16 of stride 8: ranks 0..120 lie 9 on the first domain and 7 on the second.
  const GroupSpan dp = group_span(GroupKind::kDpCp, tp8, 72);
  EXPECT_EQ(dp.nodes, 2);
  EXPECT_EQ(dp.ranks_per_node, 9);
  // TP 16 on 72-GPU domains: rank 0's group (0..15) stays inside, the group 64..79 does not.
  Plan tp16 = make_plan(16, 1, 8, 1);
  const GroupSpan t = group_span(GroupKind::kTp, tp16, 72);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.ranks_per_node, 8);
  // The embedding group (first and last stage) of pp 4 on one 4-GPU node stays on it.
  EXPECT_EQ(group_span(GroupKind::kEmbedding, make_plan(1, 1, 1, 4), 4).nodes, 1);
  EXPECT_EQ(group_span(GroupKind::kEmbedding, make_plan(1, 1, 2, 4), 4).nodes, 2);
  // Power-of-two layouts on 8-GPU nodes keep rank 0's shape.
  EXPECT_EQ(group_span(GroupKind::kTp, tp16, 8).nodes, 2);
  EXPECT_EQ(group_span(GroupKind::kTp, tp8, 8).nodes, 1);
}

// group_span keeps its last answers per layout: asked in turns about several layouts, kinds and
// node sizes, it gives the slowest group that a pass over every rank's group finds (the most
// nodes, then the fewest members on its sparsest node).
TEST(Placement, AStraddlingGroupsSpanIsTheSlowestGroupsAskedInAnyOrder) {
  const std::vector<Plan> plans = {make_plan(16, 1, 8, 1), make_plan(12, 1, 6, 2), make_plan(16, 1, 8, 1, 4, 1),
                                   make_plan(8, 2, 9, 1)};
  const std::vector<GroupKind> kinds = {GroupKind::kTp, GroupKind::kDpCp, GroupKind::kEp, GroupKind::kExpertDp};
  auto slowest = [](GroupKind kind, const Plan& p, int64_t gpus_per_node) {
    std::pair<int64_t, int64_t> worst{0, 0};  // nodes, minus the fewest members on one node
    for (int64_t r = 0; r < p.world_size(); ++r) {
      std::map<int64_t, int64_t> per_node;
      for (int32_t member : group_ranks(kind, static_cast<int32_t>(r), p)) ++per_node[member / gpus_per_node];
      int64_t fewest = p.world_size();
      for (const auto& [node, count] : per_node) fewest = std::min(fewest, count);
      worst = std::max(worst, std::pair<int64_t, int64_t>{static_cast<int64_t>(per_node.size()), -fewest});
    }
    return worst;
  };
  for (int round = 0; round < 2; ++round)
    for (const Plan& p : plans)
      for (const GroupKind kind : kinds)
        for (const int64_t gpus_per_node : {72, 36}) {
          const GroupSpan span = group_span(kind, p, gpus_per_node);
          const auto [nodes, minus_fewest] = slowest(kind, p, gpus_per_node);
          EXPECT_EQ(span.nodes, nodes) << to_string(kind) << " tp " << p.tp << " on " << gpus_per_node;
          EXPECT_EQ(span.fewest_ranks_per_node, -minus_fewest) << to_string(kind) << " tp " << p.tp << " on " << gpus_per_node;
        }
}

TEST(Placement, APlanPlacesOneRankOnEachGpuOrSaysWhyNot) {
  EXPECT_EQ(world_size_problem(make_plan(2, 1, 4, 2), 16), "");
  EXPECT_EQ(world_size_problem(make_plan(2, 1, 2, 2), 16), "tp x pp x dp x cp = 8 but the cluster has 16 GPUs");
  EXPECT_EQ(world_size_problem(make_plan(2, 2, 2, 2), 8), "tp x pp x dp x cp = 16 but the cluster has 8 GPUs");
}

// The per-thread memo that group_span and the pipeline makespan keep: the last kSize entries,
// the oldest replaced first.
TEST(RecentEntries, KeepsTheLastFewReplacingTheOldestFirst) {
  RecentEntries<int, 3> kept;
  auto has = [&](int v) { return kept.find([v](int e) { return e == v; }) != nullptr; };
  EXPECT_FALSE(has(1));
  for (int v : {1, 2, 3}) kept.add(v);
  EXPECT_TRUE(has(1) && has(2) && has(3));
  kept.add(4);  // replaces 1
  EXPECT_FALSE(has(1));
  EXPECT_TRUE(has(2) && has(3) && has(4));
  kept.add(5);  // replaces 2
  EXPECT_FALSE(has(2));
  EXPECT_TRUE(has(3) && has(4) && has(5));
}

}  // namespace
}  // namespace monarch
