// The reliability model (core/reliability.h) applied to one plan of a scenario: the plan's
// checkpoint state from the memory model, the scenario's reliability block, the iteration time
// of a backend.
#pragma once

#include <optional>

#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// Without training.total_tokens the figures are for this much wall time.
inline constexpr double kReliabilityHorizon_s = kMonth_s;

// Closed form, and the Monte Carlo when `monte_carlo`; nullopt without a reliability block or
// for a recommendation model (not modelled).
std::optional<ReliabilityReport> predict_reliability(const Scenario& scenario, const Plan& plan, double iteration_time_s,
                                                     bool monte_carlo);

// Expected wall time to train training.total_tokens (the time_to_train objective); +inf when
// the run cannot finish, 0 without a reliability block or a target.
double expected_time_to_train_s(const Scenario& scenario, const Plan& plan, double iteration_time_s);

}  // namespace monarch
