// Measured runs against simulations of the same plan, for `runs compare`:
//   - the figures of a measured and a predicted run side by side, largest relative difference
//     first (iteration time, compute, exposed communication, bubble, per-group communication
//     time, bytes and time per collective kind and group, peak memory);
//   - `runs compare --validate [ID...]`: every measured run (or those given) against the newest
//     predicted run of each backend on the same plan, as a validation table like
//     `monarch-sim validate` (iteration time: predicted, measured, error, MAPE).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/result.h"
#include "results/store.h"

namespace monarch {

struct DifferenceRow {
  std::string label;
  double measured = 0;
  double predicted = 0;
  double error_pct() const;  // (predicted - measured) / |measured| x 100; NaN when measured is 0
};

// Rows present in both results (a figure 0 in both is left out), largest |error| first; rows
// with a measured 0 and a predicted non-zero value come last.
std::vector<DifferenceRow> largest_differences(const BackendResult& measured, const BackendResult& predicted);

void print_largest_differences(std::ostream& out, const BackendResult& measured, const BackendResult& predicted);

// `runs compare --validate`: returns the exit status (0; 2 for unknown ids or no measured run).
int run_compare_validate(const Store& store, const std::vector<int64_t>& ids, std::ostream& out, std::ostream& err);

}  // namespace monarch
