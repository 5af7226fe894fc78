// SimGrid vs the analytical model on real lowered plans (strategies' lower_plan with the cost
// model's costs), in the uncontended cases of issue 5: single-node TP, DP only, PP only.
// Two references: the graph's own critical path with the cost model's durations
// (core/graph_time, the same graph SimGrid runs) and the analytical backend's closed form.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "sim/analytical_backend.h"
#include "sim/simgrid_backend.h"
#include "strategies/plan_costs.h"
#include "strategies/search.h"

namespace monarch {
namespace {

// A small Mixtral-shaped mixture of experts (8 experts, top-2, SwiGLU experts, GQA).
constexpr const char* kMoeModel = R"({ "architecture": "llama", "num_layers": 8, "hidden_size": 2048,
    "num_attention_heads": 16, "num_kv_heads": 8, "ffn_hidden_size": 5632, "vocab_size": 32000,
    "seq_length": 2048, "tie_embeddings": false, "num_experts": 8, "moe_top_k": 2,
    "moe_ffn_hidden_size": 5632 })";

Scenario scenario(const std::string& parallelism, int num_gpus, int gpus_per_node, int nics, int global_batch,
                  const std::string& preset = "gpt3-1.3b", const std::string& model = "") {
  const auto j = nlohmann::json::parse(R"({
    "name": "agreement",
    "model": )" + (model.empty() ? R"({ "preset": ")" + preset + R"(" })" : model) + R"(,
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
  CommEntry simgrid_a2a, analytical_a2a;  // the EP all-to-all entries of the two results
};

CommEntry ep_all_to_all(const BackendResult& r) {
  for (const CommEntry& c : r.communication)
    if (c.kind == "all-to-all" && c.group == "ep") return c;
  return {};
}

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
  const BackendResult analytical = run_analytical(sc, *plan);
  t.analytical_s = analytical.iteration_time_s;
  t.analytical_a2a = ep_all_to_all(analytical);
  SimgridOptions o;
  o.allow_tree = false;  // the cost model prices rings
  auto r = run_simgrid(sc, *graph, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.problems().front().to_string());
  if (r) {
    t.simgrid_s = r->iteration_time_s;
    t.simgrid_a2a = ep_all_to_all(*r);
  }
  std::printf("  %-64s simgrid %.4f s, graph %.4f s, analytical %.4f s\n", describe(*plan).c_str(), t.simgrid_s,
              t.graph_s, t.analytical_s);
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

// Mixture of experts: the EP dispatch and combine all-to-alls (and their gradients) run as
// blocking collectives between the attention and the expert GEMMs in both models.
// Measured 2026-11-29 (SimGrid / lowered graph / closed form): EP 8 0.1700 / 0.1731 /
// 0.1705 s; EP 4 x TP 2 0.0576 / 0.0580 / 0.0569 s; EP 4 x PP 2 x DP 4 0.1029 / 0.1034 /
// 0.1055 s. The EP-only case needs 8 micro-batches: with 2 the exposed tail of the
// overlapped dense DP all-reduce (last layer and embedding) is 5 % of the graph's 51 ms,
// which the closed form's overlap window hides (a graph vs closed-form gap, as for DP in
// strategies/plan_costs_test.cc, not a SimGrid one).
TEST(SimgridAgreement, ExpertParallelOnly) {
  const auto t = run_all(scenario(R"({"tp": 1, "pp": 1, "dp": 8, "ep": 8})", 8, 8, 8, 64, "", kMoeModel));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.03 * t.analytical_s);
  // Same all-to-all calls and bytes: 8 micro-batches x 8 layers x 4, each 2048 tokens x
  // top-2 x 2048 x 2 bytes, 7/8 of it leaving the rank.
  EXPECT_EQ(t.analytical_a2a.count, 8 * 8 * 4);
  EXPECT_EQ(t.simgrid_a2a.count, t.analytical_a2a.count);
  EXPECT_EQ(t.analytical_a2a.bytes, int64_t{8 * 8 * 4} * (2048 * 2 * 2048 * 2) / 8 * 7);
  EXPECT_NEAR(static_cast<double>(t.simgrid_a2a.bytes), static_cast<double>(t.analytical_a2a.bytes), 1e-9 * t.analytical_a2a.bytes);
}

TEST(SimgridAgreement, ExpertTimesTensorParallel) {
  const auto t = run_all(scenario(R"({"tp": 2, "pp": 1, "dp": 4, "ep": 4})", 8, 8, 8, 16, "", kMoeModel));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.03 * t.analytical_s);
}

TEST(SimgridAgreement, ExpertTimesPipelineTimesDataParallel) {
  // Two nodes of 4: the pipeline hop crosses nodes, the EP group (4 consecutive ranks) does
  // not, and the expert-DP group is 1 (dp 4 / ep 4) while the dense DP group is 4.
  const auto t = run_all(scenario(R"({"tp": 1, "pp": 2, "dp": 4, "ep": 4})", 8, 4, 4, 32, "", kMoeModel));
  EXPECT_NEAR(t.simgrid_s, t.graph_s, 0.03 * t.graph_s);
  // The 2.5 % gap is the closed form's pipeline bubble, as in PipelineParallelOnly.
  EXPECT_NEAR(t.simgrid_s, t.analytical_s, 0.05 * t.analytical_s);
}

}  // namespace
}  // namespace monarch
