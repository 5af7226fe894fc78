#include "gui/models/reliability_picture.h"

#include <algorithm>

namespace monarch::gui {
namespace {
constexpr double kHour_s = 3600.0;
}  // namespace

int ReliabilityPicture::component_row(const std::string& component) const {
  const auto it = std::find(components.begin(), components.end(), component);
  return it == components.end() ? -1 : static_cast<int>(it - components.begin());
}

std::optional<ReliabilityPicture> reliability_picture(const Scenario& scenario, const Plan& plan, double iteration_time_s) {
  if (!scenario.reliability) return std::nullopt;
  const ReliabilityConfig& cfg = *scenario.reliability;
  ReliabilityPicture p;
  p.inputs = goodput_inputs(scenario, plan, iteration_time_s);
  // Without a token target the run is one month of wall time, as the timeline shows.
  const double horizon_s = p.inputs.total_tokens > 0 ? 0 : kMonth_s;
  p.estimate = estimate_goodput(p.inputs, cfg, horizon_s);
  p.curve = goodput_curve(p.inputs, cfg);
  std::sort(p.curve.begin(), p.curve.end(), [](const IntervalPoint& a, const IntervalPoint& b) { return a.interval_s < b.interval_s; });
  p.curve_min_goodput = 1;
  for (const IntervalPoint& c : p.curve) p.curve_min_goodput = std::min(p.curve_min_goodput, c.goodput);
  const Badput& b = p.estimate.badput;
  const double wall = p.estimate.wall_time_s > 0 ? p.estimate.wall_time_s : 1;
  const std::pair<const char*, double> kinds[] = {{"checkpoint save", b.checkpoint_save_s},
                                                  {"checkpoint restore", b.checkpoint_restore_s},
                                                  {"wasted progress", b.wasted_progress_s},
                                                  {"infrastructure recovery", b.infrastructure_recovery_s},
                                                  {"program startup", b.startup_s}};
  for (const auto& [name, s] : kinds) p.badput.push_back({QString::fromLatin1(name), s / kHour_s, s / wall});
  p.month = month_timeline(p.inputs, cfg);
  std::sort(p.month.begin(), p.month.end(), [](const FailureEvent& x, const FailureEvent& y) { return x.time_s < y.time_s; });
  for (const FailureEvent& e : p.month)
    if (p.component_row(e.component) < 0) p.components.push_back(e.component);
  return p;
}

}  // namespace monarch::gui
