// `monarch-sim validate CASES.json [--max-mape PCT]`: predict published runs with the
// analytical backend and compare.
//
// CASES.json is a JSON array (as tests/data/validation/calibration.json) of
//   { "id": "...", "scenario": { a scenario, spec/scenario.md },
//     "target": { "metric": "iteration_time_s" | "tokens_per_s" | "samples_per_s" | "mfu" |
//                           "model_tflops_per_gpu", "value": <measured> }, ... }
// Other keys (source, group, verification) are carried for people and ignored here. The plan
// of each case is resolve_plan(scenario) (sim/analytical_backend.h); a recommendation model
// (architecture dlrm) takes the fastest embedding sharding of search_dlrm_sharding, and its
// samples per second are "samples_per_s" (or "tokens_per_s").
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/problem.h"

namespace monarch {

struct ValidationRow {
  std::string id;
  std::string metric;
  double predicted = 0;
  double measured = 0;
  double error_pct = 0;  // (predicted - measured) / measured x 100
  bool fits = true;      // the plan fits in memory by the model
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  double mape_pct = 0;           // mean of |error_pct|
  double max_abs_error_pct = 0;
  std::string worst_id;
};

// Read and predict every case. Problems name the file and JSON path ("cases.json: /3/target/value").
Expected<ValidationReport> validate_cases(const std::string& cases_path);

// Print one row per case and the MAPE to `out`; problems to `err`. Returns 0, 1 when
// `max_mape_pct` is given and the MAPE exceeds it, 2 when the file or a case is invalid.
int run_validate(const std::string& cases_path, std::optional<double> max_mape_pct, std::ostream& out,
                 std::ostream& err);

}  // namespace monarch
