// DLRM lowering: the graph passes the checks every backend relies on, carries the sharding
// plan's collective sizes and each GPU's own lookup load, and, uncontended, takes the time the
// analytical DLRM model predicts.
#include "strategies/dlrm_lowering.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/cost_model.h"
#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "strategies/dlrm_sharding.h"
#include "core/graph_check.h"

namespace monarch {
namespace {

Scenario scenario_file(const std::string& name) {
  auto s = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + name, {});
  EXPECT_TRUE(s.ok());
  return *s;
}

DlrmShardingPlan uniform(const Scenario& s, TableSharding kind) {
  DlrmShardingPlan p;
  p.name = to_string(kind);
  for (size_t t = 0; t < s.model.dlrm.tables.size(); ++t) {
    TablePlacement tp{kind, {}};
    if (kind == TableSharding::kTableWise) tp.ranks = {static_cast<int32_t>(t % s.cluster.num_gpus)};
    p.tables.push_back(tp);
  }
  return p;
}

// Every plan the planner ranks, plus uniform row-wise and a mixed plan.
std::vector<DlrmShardingPlan> plans_of(const Scenario& s) {
  std::vector<DlrmShardingPlan> out;
  for (const auto& rp : search_dlrm_sharding(s).ranked) out.push_back(rp.sharding);
  out.push_back(uniform(s, TableSharding::kRowWise));
  DlrmShardingPlan mixed = uniform(s, TableSharding::kTableWise);
  mixed.name = "mixed";
  mixed.tables[0] = {TableSharding::kRowWise, {}};
  mixed.tables[1] = {TableSharding::kDataParallel, {}};
  out.push_back(mixed);
  return out;
}

// The lowered graph's uncontended time against the analytical model's, which adds the SMs a
// collective in flight takes from the dense compute beside it: at most nccl_overlap_sm_share of
// the step more.
void expect_graph_time_within_sm_share(double graph_s, double analytical_s, const Scenario& s) {
  EXPECT_GE(analytical_s, graph_s * (1.0 - 1e-9));
  EXPECT_LE(analytical_s, graph_s * (1.0 + nccl_overlap_sm_share(s.cluster.gpu)));
}

TEST(DlrmLowering, GraphTimeMatchesAnalyticalOnEveryPlan) {
  for (const char* file : {"dlrm-dcnv2-8-h100.json", "dlrm-dcnv2-64-h100.json"}) {
    const Scenario s = scenario_file(file);
    for (const DlrmShardingPlan& plan : plans_of(s)) {
      SCOPED_TRACE(std::string(file) + " " + plan.name + ": " + describe(plan));
      auto g = lower_dlrm(s, plan);
      ASSERT_TRUE(g.ok()) << g.problems().front().to_string();
      const Problems pr = check_graph(*g);
      ASSERT_TRUE(pr.empty()) << pr.front().to_string();
      ASSERT_EQ(g->world_size, s.cluster.num_gpus);
      auto t = evaluate_graph_time(*g);
      ASSERT_TRUE(t.ok());
      const BackendResult a = estimate_dlrm(s, plan);
      // The same durations on the same critical path; the analytical model adds the SMs NCCL
      // holds beside the dense compute (at most that share of the step), which the graph's
      // uncontended time leaves to SimGrid (sim/simgrid_dlrm_test.cc checks the two agree).
      expect_graph_time_within_sm_share(t->makespan_s, a.iteration_time_s, s);
    }
  }
}

// A local batch that leaves a GPU's ids or pooled rows indivisible by the GPU count (819
// samples on 64 GPUs, as TorchRec's full-size Criteo run on 80 GPUs) gives uneven exchanges:
// each carries its per-peer sizes, and every plan still lowers and passes the checks.
TEST(DlrmLowering, UnevenExchangesCarryTheirPerPeerSizes) {
  Scenario s = scenario_file("dlrm-dcnv2-64-h100.json");
  s.training.global_batch_size = 819 * s.cluster.num_gpus;
  for (const DlrmShardingPlan& plan : plans_of(s)) {
    SCOPED_TRACE(plan.name + ": " + describe(plan));
    auto g = lower_dlrm(s, plan);
    ASSERT_TRUE(g.ok()) << g.problems().front().to_string();
    const Problems pr = check_graph(*g);
    EXPECT_TRUE(pr.empty()) << pr.front().to_string();
    for (const Task& t : g->ranks[0].tasks)
      if (t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kAllToAll &&
          t.bytes % s.cluster.num_gpus != 0)
        EXPECT_EQ(t.send_bytes.size(), static_cast<size_t>(s.cluster.num_gpus));
    auto time = evaluate_graph_time(*g);
    ASSERT_TRUE(time.ok());
    expect_graph_time_within_sm_share(time->makespan_s, estimate_dlrm(s, plan).iteration_time_s, s);
  }
}

int64_t l_send(const std::vector<DlrmRankLoad>& loads, int32_t rank) { return loads[static_cast<size_t>(rank)].a2a_send_bytes; }

TEST(DlrmLowering, CollectivesCarryThePlansSizesAndRanksTheirOwnLoads) {
  const Scenario s = scenario_file("dlrm-dcnv2-8-h100.json");
  const DlrmShardingPlan plan = uniform(s, TableSharding::kTableWise);  // 26 tables on 8 GPUs: uneven
  const auto loads = dlrm_rank_loads(s, plan);
  const DlrmCommSizes sizes = dlrm_comm_sizes(s, loads);
  // 26 tables on 8 GPUs: the busiest owner sends B x 4 tables x dim forward; backward every
  // GPU sends its b samples' gradients of all 26 tables (B/8 x 26 x dim), and that owner
  // receives what it sent forward, the busiest port.
  EXPECT_EQ(sizes.pooled_a2a_bytes, s.training.global_batch_size * 4 * 128 * 2);
  EXPECT_EQ(sizes.pooled_a2a_backward_bytes, s.training.global_batch_size * 4 * 128 * 2);
  auto g = lower_dlrm(s, plan);
  ASSERT_TRUE(g.ok());
  for (const RankProgram& p : g->ranks) {
    int a2a = 0, ar = 0, rs = 0;
    double lookup_bytes = 0;
    for (const Task& t : p.tasks) {
      if (t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kAllToAll &&
          (t.phase == Phase::kForward ? t.bytes == sizes.pooled_a2a_bytes : t.bytes == sizes.pooled_a2a_backward_bytes))
        ++a2a;
      if (t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kAllReduce) {
        ++ar;
        EXPECT_EQ(t.bytes, sizes.dp_grad_bytes);
        EXPECT_EQ(g->groups[static_cast<size_t>(t.group)].kind, GroupKind::kDp);
      }
      if (t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kReduceScatter) ++rs;
      if (t.kind == TaskKind::kCompute && t.op == OpKind::kEmbedding) lookup_bytes += t.mem_bytes;
    }
    EXPECT_EQ(a2a, 2) << "rank " << p.rank;  // forward embeddings, backward gradients
    // Uneven exchange: each all-to-all carries this rank's real sends per peer. Forward: an
    // owner of k tables sends b x k x dim to every GPU; backward: b x dim per table to its
    // owner; ids: its b samples' ids of each table to the table's owner.
    const int64_t b = s.training.global_batch_size / 8;
    int64_t owned = 0;
    for (size_t t = 0; t < plan.tables.size(); ++t) owned += plan.tables[t].ranks[0] == p.rank ? 1 : 0;
    for (const Task& t : p.tasks) {
      if (t.kind != TaskKind::kCollective || t.collective != CollectiveKind::kAllToAll) continue;
      ASSERT_EQ(t.send_bytes.size(), 8u) << to_string(t.phase);
      int64_t sum = 0;
      for (int64_t v : t.send_bytes) sum += v;
      if (t.phase == Phase::kForward) {
        for (int64_t v : t.send_bytes) EXPECT_EQ(v, b * owned * 128 * 2);
        EXPECT_EQ(sum, l_send(loads, p.rank));
      } else if (t.phase == Phase::kBackward) {
        for (int32_t o = 0; o < 8; ++o) {
          int64_t tables_of_o = 0;
          for (const auto& tp : plan.tables) tables_of_o += tp.ranks[0] == o ? 1 : 0;
          EXPECT_EQ(t.send_bytes[static_cast<size_t>(o)], b * tables_of_o * 128 * 2);
        }
      } else {
        EXPECT_EQ(sum, loads[static_cast<size_t>(p.rank)].id_send_bytes);  // ids
      }
    }
    EXPECT_EQ(ar, 1);
    EXPECT_EQ(rs, 0);  // no row-wise table
    const DlrmRankLoad& l = loads[static_cast<size_t>(p.rank)];
    EXPECT_DOUBLE_EQ(lookup_bytes, l.lookup_forward_bytes + l.lookup_backward_bytes);
  }
  // Row-wise: a reduce-scatter forward and an all-gather backward of B x dim per table.
  auto rw = lower_dlrm(s, uniform(s, TableSharding::kRowWise));
  ASSERT_TRUE(rw.ok());
  int rs = 0, ag = 0;
  for (const Task& t : rw->ranks[3].tasks) {
    if (t.kind != TaskKind::kCollective) continue;
    if (t.collective == CollectiveKind::kReduceScatter) ++rs;
    if (t.collective == CollectiveKind::kAllGather) ++ag;
    if (t.collective == CollectiveKind::kReduceScatter || t.collective == CollectiveKind::kAllGather)
      EXPECT_EQ(t.bytes, s.training.global_batch_size * 128 * 26 * 2);  // B x dim x tables x bf16
  }
  EXPECT_EQ(rs, 1);
  EXPECT_EQ(ag, 1);
  // Column-wise over every GPU is an even exchange: no per-peer sizes (NCCL's plain all-to-all).
  DlrmShardingPlan cw;
  for (size_t t = 0; t < s.model.dlrm.tables.size(); ++t) cw.tables.push_back({TableSharding::kColumnWise, {0, 1, 2, 3, 4, 5, 6, 7}});
  auto even = lower_dlrm(s, cw);
  ASSERT_TRUE(even.ok());
  for (const Task& t : even->ranks[5].tasks) EXPECT_TRUE(t.send_bytes.empty());
  // A row that does not name every member is a malformed graph, reported where it is.
  PlanGraph bad = *g;
  for (Task& t : bad.ranks[2].tasks)
    if (!t.send_bytes.empty()) {
      t.send_bytes.pop_back();
      break;
    }
  const Problems pr = check_graph(bad);
  ASSERT_FALSE(pr.empty());
  EXPECT_NE(pr.front().where.find("/send_bytes"), std::string::npos) << pr.front().to_string();
}

TEST(DlrmLowering, BadPlanIsAProblemNotACrash) {
  const Scenario s = scenario_file("dlrm-dcnv2-8-h100.json");
  DlrmShardingPlan p = uniform(s, TableSharding::kTableWise);
  p.tables[2].ranks = {99};
  auto g = lower_dlrm(s, p);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.problems().front().message.find("rank 99"), std::string::npos);
}

}  // namespace
}  // namespace monarch
