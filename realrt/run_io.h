// Input of monarch-run: what to train and how, read from a file, and the JSON of its output.
//
// Input, either
//  - a plan file (docs/plan_format.md; `monarch-sim --emit-plan`): "monarch-plan/2" carries the
//    scenario it was planned for (--scenario optional: when given it must agree on the model and
//    training settings, steps aside); "monarch-plan/1" does not (--scenario required). The
//    runtime follows the file's task graph, which must place ranks as the plan does and pass
//    core/graph_check; or
//  - a scenario file (docs/spec/scenario.md) whose parallel plan is fully fixed —
// parallelism degrees (absent ones default: tp, pp, cp, ep, vpp 1; dp = num_gpus / (tp pp cp)),
// schedule (1f1b; interleaved-1f1b when vpp > 1), sequence_parallel (false),
// activation_recompute (none), zero_stage (0), and training.micro_batch_size. The plan is
// lowered with the strategy engine into the per-rank task graph the runtime follows.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "realrt/gpt.h"
#include "realrt/reference.h"

namespace monarch::realrt {

struct RunInput {
  Scenario scenario;
  PlanGraph graph;  // graph.plan is the plan
  GptConfig model;
  TrainSettings train;
};

// The plan a scenario fixes, or problems naming the keys that leave it open.
Expected<Plan> fixed_plan(const Scenario& scenario);

// Model and training settings of the runtime for a scenario (gpt only), or problems.
Expected<RunInput> run_input_from(const Scenario& scenario, const Plan& plan);

// Where a --scenario disagrees with the scenario a plan file carries (model and training keys,
// "preset" and "steps" aside), the first few keys joined by "; ":
// "/model/hidden_size: the plan file has 128, --scenario has 256"; nullopt when they agree.
std::optional<std::string> scenario_difference(const Scenario& planned, const Scenario& given);

// Reads and checks an input file (see above). steps > 0 overrides training.steps.
// scenario_path: required when `path` is a plan file, refused otherwise.
Expected<RunInput> read_run_input(const std::string& path, int64_t steps, const std::string& scenario_path = "");

// One rank's measurements, per step (averaged over the measured steps).
struct RankSummary {
  int64_t rank = 0;
  int64_t stage = 0;
  double step_time_s = 0;
  double compute_time_s = 0;
  std::vector<CommEntry> communication;  // wire bytes / count / time per step
  std::vector<int64_t> size_bytes;       // per entry of communication: NCCL size bytes per step
  std::vector<double> peak_bytes;        // per MemCategory (weights .. buffers)
  double peak_total_bytes = 0;           // all of them and the compute workspace
  double peak_workspace_bytes = 0;       // compute workspace (realrt/memory.h), no model category
};

// {"format": "monarch-run-result/1", "first_step", "result": <result_to_json>, "ranks": [...]}
// Writes `j` to the --output path through `path`.tmp and a rename, so a reader never sees half a
// file; false, after saying why on stderr, when it cannot.
bool write_output_file(const std::string& path, const nlohmann::json& j);

nlohmann::json run_output_json(const BackendResult& result, int64_t first_step, const std::vector<RankSummary>& ranks);
inline constexpr const char* kRunOutputFormat = "monarch-run-result/1";

}  // namespace monarch::realrt
