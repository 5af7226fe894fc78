// SimGrid on DLRM sharding plans (strategies/dlrm_lowering.h) against the analytical DLRM model
// (core/dlrm_model.h) on the 8-GPU MLPerf DLRM-DCNv2 scenario: every plan the planner ranks,
// uniform row-wise, and a mixed row-wise / data-parallel / table-wise plan.
//
// Tolerance 5 %: the graph runs the model's own durations; the difference is the network.
// SimGrid moves each all-to-all as n(n-1) NVLink flows sharing the GPUs' ports and each ring
// collective step by step, where the model prices an alpha-beta formula on the same links.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "sim/simgrid_backend.h"
#include "strategies/dlrm_lowering.h"
#include "strategies/dlrm_sharding.h"

namespace monarch {
namespace {

constexpr double kAgreement = 0.05;  // relative; see the header comment

TEST(SimgridDlrm, AgreesWithTheAnalyticalModelOnSeveralShardingPlans) {
  auto sc = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/dlrm-dcnv2-8-h100.json", {});
  ASSERT_TRUE(sc.ok());
  const Scenario& s = *sc;
  std::vector<DlrmShardingPlan> plans;
  for (const auto& rp : search_dlrm_sharding(s).ranked) plans.push_back(rp.sharding);
  DlrmShardingPlan rw, mixed;
  rw.name = "all-row-wise";
  mixed.name = "mixed";
  for (size_t t = 0; t < s.model.dlrm.tables.size(); ++t) {
    rw.tables.push_back({TableSharding::kRowWise, {}});
    const int64_t rows = s.model.dlrm.tables[t].rows;
    mixed.tables.push_back(rows >= 1'000'000 ? TablePlacement{TableSharding::kRowWise, {}}
                           : rows < 1000     ? TablePlacement{TableSharding::kDataParallel, {}}
                                             : TablePlacement{TableSharding::kTableWise, {static_cast<int32_t>(t % 8)}});
  }
  for (const DlrmShardingPlan& extra : {rw, mixed}) {
    bool seen = false;
    for (const auto& p : plans) seen |= describe(p) == describe(extra);
    if (!seen) plans.push_back(extra);
  }
  ASSERT_GE(plans.size(), 4u);
  SimgridOptions o;
  o.record_timeline = false;
  for (const DlrmShardingPlan& plan : plans) {
    SCOPED_TRACE(plan.name + ": " + describe(plan));
    auto g = lower_dlrm(s, plan);
    ASSERT_TRUE(g.ok());
    auto r = run_simgrid(s, *g, o);
    ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
    const BackendResult a = estimate_dlrm(s, plan);
    std::printf("%-20s analytical %.3f ms  simgrid %.3f ms  (%+.2f %%)\n", plan.name.c_str(), 1e3 * a.iteration_time_s,
                1e3 * r->iteration_time_s, 100 * (r->iteration_time_s / a.iteration_time_s - 1));
    EXPECT_EQ(r->backend, "simgrid");
    EXPECT_NEAR(r->iteration_time_s, a.iteration_time_s, kAgreement * a.iteration_time_s);
    // Memory from the graph's alloc events: the busiest GPU, as the model reports it.
    EXPECT_NEAR(r->memory.peak_gib, a.memory.peak_gib, 1e-3 * a.memory.peak_gib);
    // The embedding collectives are on the critical path: SimGrid reports them.
    bool a2a = false;
    for (const auto& c : r->communication) a2a |= c.kind == "all-to-all" || c.kind == "reduce-scatter";
    EXPECT_TRUE(a2a);
  }
}

}  // namespace
}  // namespace monarch
