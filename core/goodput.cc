#include "core/goodput.h"

#include <cmath>
#include <limits>

namespace monarch {

std::optional<ReliabilityReport> predict_reliability(const Scenario& sc, const Plan& plan, double iteration_time_s,
                                                     bool monte_carlo) {
  if (!sc.reliability || sc.model.architecture == Architecture::kDlrm || iteration_time_s <= 0) return std::nullopt;
  const ReliabilityConfig& cfg = *sc.reliability;
  const GoodputInputs in = goodput_inputs(sc, plan, iteration_time_s);
  const double horizon = in.total_tokens > 0 ? 0 : kReliabilityHorizon_s;
  const GoodputEstimate e = estimate_goodput(in, cfg, horizon);
  ReliabilityReport r;
  r.goodput = e.goodput;
  r.time_to_train_s = horizon > 0 ? 0 : e.wall_time_s;
  r.horizon_s = horizon;
  r.useful_s = e.useful_s;
  r.expected_interruptions = e.expected_interruptions;
  r.interruptions_per_day = e.interruptions_per_day;
  r.mtbf_s = e.mtbf_s;
  r.spare_wait_s = e.spare_wait_s;
  r.interval_s = e.interval_s;
  r.optimal_interval_s = e.optimal_interval_s;
  r.young_daly_interval_s = e.young_daly_interval_s;
  r.checkpoint_bytes_per_rank = in.checkpoint_bytes_per_rank;
  r.checkpoint_bytes_total = in.checkpoint_bytes_total;
  r.checkpoint = e.checkpoint;
  r.badput = e.badput;
  r.warnings = e.warnings;
  if (monte_carlo && std::isfinite(e.wall_time_s)) {
    const MonteCarloResult mc = simulate_goodput(in, cfg, horizon);
    r.trials = mc.trials;
    r.mc_goodput = mc.goodput;
    r.mc_wall_time_s = mc.wall_time_s;
    r.mc_interruptions = mc.interruptions;
  }
  return r;
}

double expected_time_to_train_s(const Scenario& sc, const Plan& plan, double iteration_time_s) {
  if (!sc.reliability || sc.training.total_tokens <= 0 || iteration_time_s <= 0) return 0;
  const GoodputEstimate e = estimate_goodput(goodput_inputs(sc, plan, iteration_time_s), *sc.reliability);
  return std::isfinite(e.wall_time_s) ? e.wall_time_s : std::numeric_limits<double>::infinity();
}

}  // namespace monarch
