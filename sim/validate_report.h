// A validation report kept in a file (`monarch-sim validate CASES.json --save REPORT.json`) and
// what changed against it (`--against REPORT.json`): per group the MAPE then and now, per case
// the error then and now and the term of the predicted time that moved most.
//
// REPORT.json:
//   { "format": "monarch-validation-report/1", "cases_file": "...", "backend": "analytical",
//     "cases": [ { "id", "group", "metric", "gpus", "predicted", "measured", "error_pct", "fits",
//                  "iteration_time_s",
//                  "time_s": { "compute", "exposed_comm", "bubble", "optimizer", "host" },
//                  "plan" } ],
//     "groups": [ { "group", "cases", "mape_pct", "median_error_pct", "mean_signed_error_pct",
//                   "max_abs_error_pct", "worst_case" } ],
//     "overall": { the same keys } }
// "groups" and "overall" are for people and scripts; reading a report takes its cases only.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/problem.h"
#include "sim/validate.h"

namespace monarch {

inline constexpr const char* kValidationReportFormat = "monarch-validation-report/1";

struct SavedValidation {
  std::string cases_file;  // as given to validate
  std::string backend;     // "analytical" or "simgrid"
  std::vector<ValidationRow> rows;
};

// The report as REPORT.json holds it.
std::string validation_report_json(const ValidationReport& report, const std::string& cases_file,
                                   const std::string& backend);

// Reads a report written by validation_report_json. Problems name the file and JSON path.
Expected<SavedValidation> read_validation_report(const std::string& path);

// One case predicted in both reports (matched by id).
struct CaseChange {
  std::string id;
  double error_before_pct = 0, error_now_pct = 0;
  double iteration_before_s = 0, iteration_now_s = 0;
  const char* moved_term = "-";  // the term of the predicted time whose seconds changed most
  double moved_s = 0;            // its change, now - before
  std::string plan_before, plan_now;
};

struct ReportChange {
  std::vector<ErrorStats> groups_before, groups_now;  // over the matched cases, group by group
  ErrorStats overall_before, overall_now;
  std::vector<CaseChange> cases;                     // matched cases, largest change of error first
  std::vector<std::string> added, removed;           // ids in only one of the two
};

ReportChange compare_reports(const std::vector<ValidationRow>& before, const std::vector<ValidationRow>& now);

// Prints the change: the groups' MAPE then and now, and the cases whose error moved by at least
// `min_change_pct` points or whose plan changed (at most `max_cases` of them, largest first).
void print_report_change(const ReportChange& change, const std::string& before_label, double min_change_pct,
                         size_t max_cases, std::ostream& out);

}  // namespace monarch
