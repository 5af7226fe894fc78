// The plan space of a search as pictures: every estimated plan as a point of (peak memory per
// GPU, speed), the Pareto front of the plans that fit, colour classes by one plan dimension,
// and a grid over two dimensions holding the best iteration time of each cell. Plain values and
// functions, no widgets: the charts of gui/app/plan_space_view.h draw what these compute.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch::gui {

// One plan the search's cost model estimated.
struct PlanPoint {
  Plan plan;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double peak_memory_gib = 0;
  bool fits = false;
  std::string reason;  // why it was rejected; empty when it fits
};

// The plan dimensions a point can be coloured by and a grid can be laid over.
enum class PlanDimension { kTp, kPp, kDp, kCp, kEp, kVpp, kMicroBatch, kZero, kRecompute, kSchedule, kSequenceParallel };
const std::vector<PlanDimension>& plan_dimensions();
QString dimension_name(PlanDimension d);  // "TP", "ZeRO stage", "recompute", ...
// The dimension's value for a plan as an ordered key (degrees as they are, enums by position).
int64_t dimension_value(const Plan& plan, PlanDimension d);
// The key as the user reads it: "8", "selective", "interleaved-1f1b", "sp" / "no sp".
QString dimension_label(PlanDimension d, int64_t value);

// The vertical axis of the scatter: iteration time (lower is better) or tokens/s (higher).
enum class SpeedMetric { kIterationTime, kTokensPerS };
double speed_of(const PlanPoint& p, SpeedMetric m);
// True when speed a is better than speed b under m.
bool faster(double a, double b, SpeedMetric m);

// Indices of the fitting plans that no other fitting plan beats on both peak memory and
// speed (ties on both kept once), by peak memory ascending (speed then improves strictly).
std::vector<size_t> pareto_front(const std::vector<PlanPoint>& points, SpeedMetric m);

struct AxisRange {
  double min = 0;
  double max = 1;
  double span() const { return max - min; }
  bool contains(double v) const { return v >= min && v <= max; }
};
// [lo, hi] widened by `margin` of its span on each side (a point range of zero width gets
// +-10% of its value, or +-1 when that is zero too).
AxisRange padded_range(double lo, double hi, double margin = 0.05);

// What the scatter draws: ranges, capacity, front, the fitting plans by colour class and the
// rejected ones (faint).
struct PlanSpaceGeometry {
  // Rejected plans needing more than this many times the capacity are left off the chart (and
  // counted): a few plans needing terabytes would squeeze every plan that fits into one column.
  static constexpr double kMaxMemoryShownOverCapacity = 2.0;
  // Above this ratio of the slowest to the fastest plan, the speed axis is logarithmic.
  static constexpr double kLogSpeedRatio = 10.0;
  struct ColourClass {
    int64_t value = 0;
    QString label;
    std::vector<size_t> points;  // indices of fitting plans with this value
  };
  AxisRange memory_gib;  // x: includes the capacity line
  AxisRange speed;       // y
  double capacity_gib = 0;
  std::vector<size_t> front;
  std::vector<ColourClass> classes;  // by value ascending
  std::vector<size_t> rejected;      // estimated but not fitting, on the chart
  int64_t rejected_off_chart = 0;    // rejected beyond kMaxMemoryShownOverCapacity x capacity
  bool log_speed = false;            // the speed axis is logarithmic
};
PlanSpaceGeometry plan_space_geometry(const std::vector<PlanPoint>& points, double capacity_gib, SpeedMetric m,
                                      PlanDimension colour_by);

// The plot area in pixels, for thinning and hit-testing in screen distance.
struct PlotFrame {
  AxisRange x, y;
  double width_px = 1, height_px = 1;
  bool log_y = false;  // y drawn on a logarithmic scale (positive range)
  double px_x(double v) const { return (v - x.min) / (x.span() > 0 ? x.span() : 1) * width_px; }
  double px_y(double v) const;
};

// At most one of `indices` per cell of cell_px x cell_px pixels (the fastest of the cell):
// a cloud of 100,000 plans draws as the few thousand markers the eye can tell apart.
std::vector<size_t> thin_to_cells(const std::vector<PlanPoint>& points, const std::vector<size_t>& indices,
                                  const PlotFrame& frame, double cell_px, SpeedMetric m);

// The plan drawn nearest to (memory_gib, speed) within max_px pixels, or none.
std::optional<size_t> nearest_point(const std::vector<PlanPoint>& points, double memory_gib, double speed,
                                    const PlotFrame& frame, SpeedMetric m, double max_px);

// A grid over two dimensions: per cell the best (shortest) iteration time of its fitting plans.
struct PlanGrid {
  struct Cell {
    int x = 0, y = 0;  // positions in x_values / y_values
    int64_t plans = 0;
    int64_t fitting = 0;
    std::optional<size_t> best;  // the fastest fitting plan of the cell
    double best_time_s = 0;
  };
  PlanDimension x_dim = PlanDimension::kTp, y_dim = PlanDimension::kPp;
  std::vector<int64_t> x_values, y_values;  // ascending
  std::vector<Cell> cells;                  // only cells holding a plan, by (y, x)
  std::optional<size_t> best_cell;          // index into cells of the fastest cell
  double min_time_s = 0, max_time_s = 0;    // over the cells' best times

  const Cell* cell(int x, int y) const;
  // 0 for the fastest cell, 1 for the slowest (the colour scale); 0 when all are equal.
  double shade(const Cell& c) const;
};
PlanGrid plan_grid(const std::vector<PlanPoint>& points, PlanDimension x_dim, PlanDimension y_dim);

// The same plan up to the pipeline split (the search balances the layers of its best plans
// after estimating them, so a ranked plan may carry a split its estimated point lacks).
bool same_plan_degrees(const Plan& a, const Plan& b);

}  // namespace monarch::gui
