// `monarch-sim validate CASES.json [--max-mape PCT] [--backend analytical|simgrid] [--max-gpus N]`:
// predict published runs and compare.
//
// CASES.json is a JSON array (as tests/data/validation/calibration.json) of
//   { "id": "...", "group": "...", "scenario": { a scenario, spec/scenario.md },
//     "target": { "metric": "iteration_time_s" | "tokens_per_s" | "samples_per_s" | "mfu" |
//                           "model_tflops_per_gpu", "value": <measured> }, ... }
// `group` (optional) gathers cases of one family for the per-group figures. Other keys
// (source, verification, notes) are carried for people and ignored here. The plan of each case
// is the best of the plan search over what its scenario leaves open (what the published run
// fixed is pinned), with the layers split as the framework splits them by default; without a
// fitting plan, resolve_plan(scenario) (sim/analytical_backend.h). A recommendation model
// (architecture dlrm) takes the fastest embedding sharding of search_dlrm_sharding (the one
// its parallelism.embedding_sharding gives, when the case pins it), and its
// samples per second are "samples_per_s" (or "tokens_per_s").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// Shares of the predicted iteration time, each in [0, 1]; they sum to 1 for the analytical
// backend (iteration = compute + exposed communication + bubble + optimizer + host floor).
struct TimeShares {
  double compute = 0;
  double exposed_comm = 0;
  double bubble = 0;
  double optimizer = 0;
  double host = 0;
};

struct ValidationRow {
  std::string id;
  std::string group;     // the case's "group", or "" when it has none
  std::string metric;
  int64_t gpus = 0;      // world size of the resolved plan
  double predicted = 0;
  double measured = 0;
  double error_pct = 0;  // (predicted - measured) / measured x 100
  bool fits = true;      // the plan fits in memory by the model
  double iteration_time_s = 0;  // predicted
  TimeShares shares;            // of iteration_time_s
  std::string plan;             // the plan predicted, as describe(plan) gives it (its layer split included)
};

// Error figures over a set of rows.
struct ErrorStats {
  std::string group;
  size_t cases = 0;
  double mape_pct = 0;              // mean of |error|
  double median_error_pct = 0;      // median of the signed errors
  double mean_signed_error_pct = 0; // mean of the signed errors (< 0: predicted too fast for times)
  double max_abs_error_pct = 0;
  std::string worst_id;
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<ErrorStats> groups;     // one per group, in order of first appearance
  ErrorStats overall;
  std::vector<std::string> skipped;   // ids of cases above the size limit
  double mape_pct = 0;                // = overall.mape_pct
  double max_abs_error_pct = 0;       // = overall.max_abs_error_pct
  std::string worst_id;               // = overall.worst_id
};

// Predicts one case: the result of a backend for the scenario and its resolved plan, or the
// problems that kept it from running.
using CasePredictor = std::function<Expected<BackendResult>(const Scenario&, const Plan&)>;

struct ValidationSettings {
  CasePredictor predictor;            // empty: the analytical backend
  std::optional<int64_t> max_gpus;    // cases whose plan uses more GPUs are skipped
  std::optional<double> max_mape_pct; // run_validate returns 1 above it
  size_t worst_cases = 5;             // how many worst cases run_validate lists
  bool show_plans = false;            // run_validate lists the plan each case was predicted with
  std::string save_path;              // run_validate writes the report there (sim/validate_report.h)
  std::string against_path;           // run_validate prints the change against this saved report
  std::string backend_name = "analytical";  // the backend a saved report names
  double min_change_pct = 0.05;       // with against_path: cases whose error moved this many points are listed
  size_t changed_cases = 25;          // with against_path: at most this many of them
  // Called after each case is predicted (cases done, cases in the file); empty: no progress.
  std::function<void(size_t, size_t)> progress;
  // Polled between cases: true stops the run (run_validate returns kValidateInterrupted and
  // writes nothing).
  std::function<bool()> cancelled;
};

// run_validate's status when `cancelled` stopped it (the command line's 130, Ctrl-C).
inline constexpr int kValidateInterrupted = 130;

// Figures over the rows of `group` (every row when nullopt; "" = the rows without a group).
ErrorStats error_stats(const std::vector<ValidationRow>& rows, const std::optional<std::string>& group);
// Figures per group, one entry per group in order of first appearance (rows without a group
// form one, "(no group)").
std::vector<ErrorStats> group_stats(const std::vector<ValidationRow>& rows);

// Read and predict every case. Problems name the file and JSON path ("cases.json: /3/target/value").
Expected<ValidationReport> validate_cases(const std::string& cases_path, const ValidationSettings& settings = {});

// Print one row per case (with the shares of the predicted time), the figures per group and
// overall, the worst cases and the MAPE to `out`; problems to `err`. With `save_path` the report
// is written there too; with `against_path` the change against that saved report is printed (the
// saved report is read first, so a bad one costs no predictions). Returns 0, 1 when
// `max_mape_pct` is given and the MAPE exceeds it, 2 when the file, a case, the saved report or
// the file to save is bad, kValidateInterrupted when `cancelled` stopped it.
int run_validate(const std::string& cases_path, const ValidationSettings& settings, std::ostream& out, std::ostream& err);
int run_validate(const std::string& cases_path, std::optional<double> max_mape_pct, std::ostream& out,
                 std::ostream& err);

}  // namespace monarch
