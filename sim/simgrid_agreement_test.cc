// SimGrid vs the analytical model on real lowered plans (strategies' lower_plan with the cost
// model's costs), in the uncontended cases of issue 5: single-node TP, DP only, PP only.
// Two references: the graph's own critical path with the cost model's durations
// (core/graph_time, the same graph SimGrid runs) and the analytical backend's closed form.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "sim/analytical_backend.h"
#include "sim/simgrid_backend.h"
#include "strategies/plan_costs.h"

namespace monarch {
namespace {

Scenario scenario(const std::string& parallelism, int num_gpus, int gpus_per_node, int nics, int global_batch,
                  const std::string& preset = "gpt3-1.3b") {
  const auto j = nlohmann::json::parse(R"({
    "name": "agreement",
    "model": { "preset": ")" + preset + R"(" },
    "cluster": { "gpu": "H100-SXM", "num_gpus": )" + std::to_string(num_gpus) +
                                       R"(, "gpus_per_node": )" + std::to_string(gpus_per_node) + R"(,
                 "intra_node": { "bandwidth_GBps": 450, "latency_us": 2 },
                 "inter_node": { "bandwidth_GBps": 50, "nics_per_node": )" + std::to_string(nics) +
                                       R"(, "latency_us": 5, "topology": "fat-tree", "oversubscription": 1 } },
    "training": { "global_batch_size": )" + std::to_string(global_batch) +
                                       R"(, "micro_batch_size": 1, "precision": "bf16" },
    "parallelism": )" + parallelism + "}");
  auto s = scenario_from_json(j);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.problems().front().to_string());
  return s.ok() ? *s : Scenario{};
}

struct Times {
  double simgrid_s = 0, graph_s = 0, analytical_s = 0;
};

Times run_all(const Scenario& sc) {
  Times t;
  auto plan = resolve_plan(sc);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.problems().front().to_string());
  if (!plan) return t;
  auto graph = lower_plan(sc, *plan);
  EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.problems().front().to_string());
  if (!graph) return t;
  auto timing = evaluate_graph_time(*graph);
  EXPECT_TRUE(timing.ok());
  if (timing) t.graph_s = timing->makespan_s;
  t.analytical_s = run_analytical(sc, *plan).iteration_time_s;
  SimgridOptions o;
  o.allow_tree = false;  // the cost model prices rings
  auto r = run_simgrid(sc, *graph, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.problems().front().to_string());
  if (r) t.simgrid_s = r->iteration_time_s;
  return t;
}

TEST(SimgridAgreement, SingleNodeTensorParallel) {
  const auto t = run_all(scenario(R"({"tp": 8, "pp": 1, "dp": 1})", 8, 8, 8, 8));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.03 * t.analytical_s);
}

TEST(SimgridAgreement, DataParallelOnly) {
  const auto t = run_all(scenario(R"({"tp": 1, "pp": 1, "dp": 4})", 4, 1, 1, 16));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.03 * t.analytical_s);
}

TEST(SimgridAgreement, PipelineParallelOnly) {
  const auto t = run_all(scenario(R"({"tp": 1, "pp": 4, "dp": 1})", 4, 1, 1, 16));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  // Measured 2026-11-29: SimGrid 0.2795 s, graph 0.2795 s, analytical closed form 0.2997 s.
  // The 7 % gap is between the closed form's bubble and the lowered 1F1B graph, not SimGrid.
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.10 * t.analytical_s);
}

}  // namespace
}  // namespace monarch
