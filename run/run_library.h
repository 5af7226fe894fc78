// The run library: one scenario end to end, the same for every front end (monarch-sim, the GUI)
// and every architecture (dense, MoE, DLRM).
//
//   1. search: the plans the scenario leaves open, ranked by the analytical model
//      (strategies/search.h; recommendation models: strategies/dlrm_sharding.h), and the
//      FSDP / ZeRO-3 baseline;
//   2. SimGrid re-ranks the best kRerankTopPlans plans (when selected);
//   3. the real runtimes train the chosen plan (when selected);
//   4. the caller writes the files (write_outputs) and records the runs in the store
//      (record_runs; a failed real run: record_failed_run).
// Steps 1-3 compute in memory only, so a cancelled or failed run leaves nothing written.
//
//   RunOutcome out = run_scenario(scenario, request, events);
//   if (out.end == RunEnd::kDone) write_outputs(out.report, paths); record_runs(store, out.report, t0);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "results/store.h"
#include "run/backend.h"
#include "strategies/search.h"

namespace monarch::run {

// How many of the analytically best plans the slower backends re-rank.
inline constexpr size_t kRerankTopPlans = 3;

struct RunRequest {
  std::vector<Backend> backends;  // analytical always runs (it ranks); the others as listed
  BackendSettings settings;
  bool lower_chosen_plan = false;  // keep the chosen plan's task graph (--emit-plan)
  bool want_trace = false;         // keep a timeline of the chosen plan (--trace)
  int64_t search_jobs = 1;         // threads of the plan search (0 = every hardware thread)
};

// One (plan, backend) entry of a run.
struct RunEntry {
  int64_t rank = 0;      // the plan's position, 1 = the chosen plan
  BackendResult result;
  std::string sharding;  // recommendation models: "name: description"; else empty
};

struct RunReport {
  Scenario scenario;
  bool recommendation = false;  // a DLRM scenario: entries carry their sharding
  std::vector<RunEntry> entries;  // by rank; per plan analytical first, then the others
  std::optional<BackendResult> baseline;  // the FSDP / ZeRO-3 plan, when it can run
  SearchResult search;                    // transformer plans: counts, rejections, baseline note
  std::vector<RejectedPlan> rejected;     // the result file's "rejected" list
  std::optional<PlanGraph> chosen_graph;  // when lower_chosen_plan
  std::optional<BackendResult> traced;    // when want_trace: the run whose timeline is traced
  int64_t parameters = 0;                 // the model's parameter count
};

enum class RunEnd {
  kDone,
  kInvalid,     // the input cannot run on a backend (problems say why)
  kNoPlanFits,  // problems: one, the search's message
  kFailed,      // a lowering bug, a failed real run, a missing timeline (problems say which)
  kCancelled,
};

struct RunOutcome {
  RunEnd end = RunEnd::kDone;
  Problems problems;
  RunReport report;
  // A real run that failed: its backend and plan, to be recorded with record_failed_run.
  std::optional<BackendResult> failed_run;
};

struct RunEvents {
  RunControl control;  // cancel flag and progress
  // After the analytical ranking, before any slower backend: the report so far (entries are
  // the analytical ones, baseline and search filled in).
  std::function<void(const RunReport&)> ranked;
  // Each slower backend's entry as it arrives (rank: the plan's analytical rank).
  std::function<void(const RunEntry&)> entry;
  // Transformer plans: every plan the search's cost model estimated, fitting or not, as the
  // search goes (strategies/search.h SearchOptions::estimated).
  std::function<void(const Plan&, const PlanEstimate&)> estimated;
};

// Problems with the request before any work: backends this build lacks (named at
// `backends_where`), bad SimGrid settings.
Problems check_request(const RunRequest& request, const std::string& backends_where);

RunOutcome run_scenario(const Scenario& scenario, const RunRequest& request, const RunEvents& events);

// One candidate on one backend (the GUI's "simulate this plan").
Expected<BackendResult> run_plan(const Scenario& scenario, const Candidate& candidate, Backend backend,
                                 const BackendSettings& settings, const RunControl& control);

// Files of a finished run, each written through a temporary file renamed into place; an empty
// path is not written. Problems name the option ("--output", "--emit-plan", "--trace").
struct OutputPaths {
  std::string result_file;  // monarch-sim-result/1
  std::string plan_file;    // the chosen plan's task graph (needs lower_chosen_plan)
  std::string trace_file;   // Chrome trace of report.traced (needs want_trace)
};
Problems write_outputs(const RunReport& report, const OutputPaths& paths);

// The result file's text (monarch-sim-result/1, core/result_io.h).
std::string result_file_text(const RunReport& report);

// The store's record of every entry of the report, in order (record_runs writes them).
std::vector<RunRecord> run_records(const RunReport& report, TimePoint started_at);

// Records every entry of the report, each in its own transaction; returns their ids in order.
Expected<std::vector<int64_t>> record_runs(Store& store, const RunReport& report, TimePoint started_at);

// Records a real run that failed (status "failed", `why` as its error message).
Expected<int64_t> record_failed_run(Store& store, const Scenario& scenario, const BackendResult& failed,
                                    const std::string& why, TimePoint started_at);

}  // namespace monarch::run
