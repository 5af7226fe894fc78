// SimGrid on DLRM sharding plans (strategies/dlrm_lowering.h) against the analytical DLRM model
// (core/dlrm_model.h) on the 8- and 64-GPU MLPerf DLRM-DCNv2 scenarios: every plan the planner
// ranks (8 GPUs), uniform row-wise, column-wise and table-wise, and a mixed row-wise /
// data-parallel / table-wise plan.
//
// Tolerance 8 %: the graph runs the model's own durations; the difference is the network.
// SimGrid moves each all-to-all as concurrent flows sharing the GPUs' NVLink and NIC ports (each
// member's real row when the plan's senders are uneven) and each ring collective step by step,
// where the model prices the busiest port with an alpha-beta formula on the same links. The
// model's reduce-scatter and all-gather across nodes also pay NCCL's flat-ring latency (n - 1
// steps over all ranks, n - N of them on NVLink), which the lowered DLRM ring collectives do
// not: on 64 H100 the greedy plan's row-wise partial sums differ by that latency alone (~7 %).
#include <gtest/gtest.h>

#include <cstdio>

#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "sim/simgrid_backend.h"
#include "strategies/dlrm_lowering.h"
#include "strategies/dlrm_sharding.h"

namespace monarch {
namespace {

constexpr double kAgreement = 0.08;  // relative; see the header comment

Scenario scenario_file(const std::string& name) {
  auto sc = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + name, {});
  EXPECT_TRUE(sc.ok());
  return sc.ok() ? *sc : Scenario{};
}

// The planner's ranked plans plus all row-wise, all column-wise (every table over every GPU),
// all table-wise (table t on GPU t mod n: uneven senders) and a mixed plan.
std::vector<DlrmShardingPlan> plans_for(const Scenario& s) {
  std::vector<DlrmShardingPlan> plans;
  for (const auto& rp : search_dlrm_sharding(s).ranked) plans.push_back(rp.sharding);
  const int32_t n = static_cast<int32_t>(s.cluster.num_gpus);
  DlrmShardingPlan rw, cw, tw, mixed;
  rw.name = "all-row-wise";
  cw.name = "cw-over-all-gpus";
  tw.name = "tw-round-robin";
  mixed.name = "mixed";
  std::vector<int32_t> all;
  for (int32_t r = 0; r < n; ++r) all.push_back(r);
  for (size_t t = 0; t < s.model.dlrm.tables.size(); ++t) {
    rw.tables.push_back({TableSharding::kRowWise, {}});
    cw.tables.push_back({TableSharding::kColumnWise, all});
    tw.tables.push_back({TableSharding::kTableWise, {static_cast<int32_t>(t % n)}});
    const int64_t rows = s.model.dlrm.tables[t].rows;
    mixed.tables.push_back(rows >= 1'000'000 ? TablePlacement{TableSharding::kRowWise, {}}
                           : rows < 1000     ? TablePlacement{TableSharding::kDataParallel, {}}
                                             : TablePlacement{TableSharding::kTableWise, {static_cast<int32_t>(t % n)}});
  }
  for (const DlrmShardingPlan& extra : {rw, cw, tw, mixed}) {
    if (!check_dlrm_plan(s, extra).empty()) continue;  // e.g. dim not divisible by the GPUs
    bool seen = false;
    for (const auto& p : plans) seen |= describe(p) == describe(extra);
    if (!seen) plans.push_back(extra);
  }
  return plans;
}

void expect_agreement(const Scenario& s, const std::vector<DlrmShardingPlan>& plans) {
  SimgridOptions o;
  o.record_timeline = false;
  for (const DlrmShardingPlan& plan : plans) {
    SCOPED_TRACE(plan.name + ": " + describe(plan));
    auto g = lower_dlrm(s, plan);
    ASSERT_TRUE(g.ok());
    auto r = run_simgrid(s, *g, o);
    ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
    const BackendResult a = estimate_dlrm(s, plan);
    std::printf("%-20s %-20s analytical %.3f ms  simgrid %.3f ms  (%+.2f %%)\n", s.name.c_str(), plan.name.c_str(),
                1e3 * a.iteration_time_s, 1e3 * r->iteration_time_s, 100 * (r->iteration_time_s / a.iteration_time_s - 1));
    EXPECT_EQ(r->backend, "simgrid");
    EXPECT_NEAR(r->iteration_time_s, a.iteration_time_s, kAgreement * a.iteration_time_s);
    // Memory from the graph's alloc events: the busiest GPU, as the model reports it.
    EXPECT_NEAR(r->memory.peak_gib, a.memory.peak_gib, 1e-3 * a.memory.peak_gib);
    // The embedding collectives are on the critical path: SimGrid reports them.
    bool a2a = false;
    for (const auto& c : r->communication) a2a |= c.kind == CollectiveKind::kAllToAll || c.kind == CollectiveKind::kReduceScatter;
    EXPECT_TRUE(a2a);
  }
}

TEST(SimgridDlrm, AgreesWithTheAnalyticalModelOnSeveralShardingPlans) {
  const Scenario s = scenario_file("dlrm-dcnv2-8-h100.json");
  const auto plans = plans_for(s);
  ASSERT_GE(plans.size(), 5u);
  expect_agreement(s, plans);
}

// 8 nodes: the all-to-alls cross the NICs (max of the NIC and NVLink shares, one latency), and
// table-wise plans send uneven rows (per-peer sizes in the graph).
TEST(SimgridDlrm, AgreesAcrossNodesOnSeveralShardingPlans) {
  const Scenario s = scenario_file("dlrm-dcnv2-64-h100.json");
  const auto plans = plans_for(s);
  ASSERT_GE(plans.size(), 5u);
  expect_agreement(s, plans);
}

}  // namespace
}  // namespace monarch
