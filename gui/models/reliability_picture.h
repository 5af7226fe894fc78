// What the Reliability view draws for one plan of a scenario with a reliability block: goodput
// against the checkpoint interval (core/reliability.h goodput_curve) with the interval used, the
// optimum and Daly's estimate marked, the badput breakdown of the run, and one simulated month
// of failures by component. Plain values; the reliability model computes every number.
#pragma once

#include <QString>
#include <optional>
#include <string>
#include <vector>

#include "core/reliability.h"
#include "core/scenario.h"

namespace monarch::gui {

struct BadputBar {
  QString name;  // "checkpoint save", ... (ml-goodput-measurement's kinds)
  double hours = 0;
  double share_of_wall = 0;  // of the run's expected wall time
};

struct ReliabilityPicture {
  GoodputInputs inputs;
  GoodputEstimate estimate;
  std::vector<IntervalPoint> curve;      // by interval ascending
  double curve_min_goodput = 0;          // for the chart's y range
  std::vector<BadputBar> badput;         // in the taxonomy's order
  std::vector<FailureEvent> month;       // one simulated month, by time
  std::vector<std::string> components;   // rows of the month timeline, in order of first use
  int component_row(const std::string& component) const;  // -1 when absent
};

// Everything for `plan` with its predicted iteration time; nullopt when the scenario has no
// reliability block.
std::optional<ReliabilityPicture> reliability_picture(const Scenario& scenario, const Plan& plan, double iteration_time_s);

}  // namespace monarch::gui
