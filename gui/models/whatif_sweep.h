// What-if curves: one knob of a scenario (inter-node bandwidth, GPU count, micro-batch size,
// global batch, sequence length, oversubscription, GPU kind) swept over a range of values, and
// at each value the iteration time, MFU and peak memory of the selected plan and of the best
// plan found there. Plain values: which values a sweep takes, how one value changes the
// scenario and the plan, and the axis ranges of the curves. The evaluation itself goes through
// the backends (gui/app/backends.h).
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"

namespace monarch::gui {

enum class Knob {
  kInterNodeBandwidth,  // GB/s per NIC, per direction
  kGpuCountStrong,      // GPUs, global batch fixed (strong scaling)
  kGpuCountWeak,        // GPUs, global batch grows with them (weak scaling)
  kMicroBatch,
  kGlobalBatch,
  kSeqLength,
  kOversubscription,    // fat-tree oversubscription ratio
  kGpuKind,             // the GPU presets (core/presets.h)
};
const std::vector<Knob>& knobs();
QString knob_name(Knob k);  // "inter-node bandwidth (GB/s)", ...
// True for knobs whose values grow geometrically (drawn on a log axis).
bool knob_is_geometric(Knob k);
bool knob_is_categorical(Knob k);  // GPU kind: x is the position in the value list

struct KnobValue {
  double x = 0;       // the value (GPU kind: its position)
  std::string label;  // "400 GB/s", "H100-SXM", "64 GPUs"
};

// The knob's value in `scenario` with `plan` (GPU kind: its position among the presets, -1
// when the scenario's GPU is no preset).
double knob_value(Knob k, const Scenario& scenario, const Plan& plan);

// `points` values of the knob around its value in the scenario: bandwidth and oversubscription
// from 1/8x to 8x, counts by doublings that the plan can take (GPU counts in multiples of
// tp x pp x cp, micro-batches that divide the per-replica batch), every GPU preset.
std::vector<KnobValue> sweep_values(Knob k, const Scenario& scenario, const Plan& plan, int points);

// The scenario and plan at one value: the plan's data-parallel degree follows the GPU count,
// a weak-scaling global batch follows it too; problems when the plan cannot take the value.
struct SweepInput {
  Scenario scenario;
  Plan plan;
};
Expected<SweepInput> apply_knob(Knob k, const KnobValue& v, const Scenario& scenario, const Plan& plan);

// What a backend predicted at one value.
struct CurveMetrics {
  double iteration_time_s = 0;
  double mfu = 0;
  double peak_memory_gib = 0;
  double tokens_per_s = 0;
  bool fits = true;
};

struct SweepPoint {
  KnobValue value;
  std::optional<CurveMetrics> selected;  // the selected plan (analytical)
  std::optional<CurveMetrics> best;      // the best plan a search finds at this value
  std::string best_plan;                 // describe() of it
  std::optional<CurveMetrics> simgrid;   // the selected plan simulated by SimGrid, on request
  std::string problem;                   // why the selected plan cannot take the value
};

enum class CurveMetric { kIterationTime, kMfu, kPeakMemory, kTokensPerS };
QString curve_metric_name(CurveMetric m);  // "iteration time (s)", "MFU (%)", ...
double curve_value(const CurveMetrics& c, CurveMetric m);  // MFU in percent

// Ranges of one chart: x over the sweep, y over every curve's present values (from 0).
struct CurveRanges {
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
};
CurveRanges curve_ranges(const std::vector<SweepPoint>& points, CurveMetric m);

}  // namespace monarch::gui
