#include "gui/models/plan_space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

namespace monarch::gui {

const std::vector<PlanDimension>& plan_dimensions() {
  static const std::vector<PlanDimension> kAll{
      PlanDimension::kTp,   PlanDimension::kPp,        PlanDimension::kDp,       PlanDimension::kCp,
      PlanDimension::kEp,   PlanDimension::kVpp,       PlanDimension::kMicroBatch, PlanDimension::kZero,
      PlanDimension::kRecompute, PlanDimension::kSchedule, PlanDimension::kSequenceParallel};
  return kAll;
}

QString dimension_name(PlanDimension d) {
  switch (d) {
    case PlanDimension::kTp: return QStringLiteral("TP");
    case PlanDimension::kPp: return QStringLiteral("PP");
    case PlanDimension::kDp: return QStringLiteral("DP");
    case PlanDimension::kCp: return QStringLiteral("CP");
    case PlanDimension::kEp: return QStringLiteral("EP");
    case PlanDimension::kVpp: return QStringLiteral("VPP");
    case PlanDimension::kMicroBatch: return QStringLiteral("micro-batch");
    case PlanDimension::kZero: return QStringLiteral("ZeRO stage");
    case PlanDimension::kRecompute: return QStringLiteral("recompute");
    case PlanDimension::kSchedule: return QStringLiteral("schedule");
    case PlanDimension::kSequenceParallel: return QStringLiteral("sequence parallel");
  }
  return {};
}

int64_t dimension_value(const Plan& p, PlanDimension d) {
  switch (d) {
    case PlanDimension::kTp: return p.tp;
    case PlanDimension::kPp: return p.pp;
    case PlanDimension::kDp: return p.dp;
    case PlanDimension::kCp: return p.cp;
    case PlanDimension::kEp: return p.ep;
    case PlanDimension::kVpp: return p.vpp;
    case PlanDimension::kMicroBatch: return p.micro_batch_size;
    case PlanDimension::kZero: return p.zero_stage;
    case PlanDimension::kRecompute: return static_cast<int64_t>(p.recompute);
    case PlanDimension::kSchedule: return static_cast<int64_t>(p.schedule);
    case PlanDimension::kSequenceParallel: return p.sequence_parallel ? 1 : 0;
  }
  return 0;
}

QString dimension_label(PlanDimension d, int64_t v) {
  switch (d) {
    case PlanDimension::kRecompute: return QString::fromLatin1(to_string(static_cast<Recompute>(v)));
    case PlanDimension::kSchedule: return QString::fromLatin1(to_string(static_cast<Schedule>(v)));
    case PlanDimension::kSequenceParallel: return v ? QStringLiteral("sp") : QStringLiteral("no sp");
    case PlanDimension::kZero: return QStringLiteral("zero%1").arg(v);
    default: return QString::number(v);
  }
}

double speed_of(const PlanPoint& p, SpeedMetric m) {
  return m == SpeedMetric::kIterationTime ? p.iteration_time_s : p.tokens_per_s;
}

bool faster(double a, double b, SpeedMetric m) { return m == SpeedMetric::kIterationTime ? a < b : a > b; }

std::vector<size_t> pareto_front(const std::vector<PlanPoint>& points, SpeedMetric m) {
  std::vector<size_t> order;
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].fits) order.push_back(i);
  // By memory ascending, the faster first among equal memory: a plan is on the front when it
  // is faster than every plan using no more memory.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (points[a].peak_memory_gib != points[b].peak_memory_gib) return points[a].peak_memory_gib < points[b].peak_memory_gib;
    return faster(speed_of(points[a], m), speed_of(points[b], m), m);
  });
  std::vector<size_t> front;
  for (size_t i : order)
    if (front.empty() || faster(speed_of(points[i], m), speed_of(points[front.back()], m), m)) front.push_back(i);
  return front;
}

AxisRange padded_range(double lo, double hi, double margin) {
  if (!(hi > lo)) {
    const double pad = lo != 0 ? std::abs(lo) * 0.1 : 1.0;
    return {lo - pad, lo + pad};
  }
  const double pad = (hi - lo) * margin;
  return {lo - pad, hi + pad};
}

double PlotFrame::px_y(double v) const {
  if (log_y && y.min > 0 && y.max > y.min && v > 0)
    return (std::log(y.max) - std::log(v)) / (std::log(y.max) - std::log(y.min)) * height_px;
  return (y.max - v) / (y.span() > 0 ? y.span() : 1) * height_px;
}

PlanSpaceGeometry plan_space_geometry(const std::vector<PlanPoint>& points, double capacity_gib, SpeedMetric m,
                                      PlanDimension colour_by) {
  PlanSpaceGeometry g;
  g.capacity_gib = capacity_gib;
  double mem_lo = capacity_gib > 0 ? capacity_gib : std::numeric_limits<double>::infinity();
  double mem_hi = capacity_gib > 0 ? capacity_gib : -std::numeric_limits<double>::infinity();
  double sp_lo = std::numeric_limits<double>::infinity(), sp_hi = -sp_lo;
  std::map<int64_t, size_t> class_of;  // value -> position in classes
  const double memory_cap_gib = capacity_gib > 0 ? capacity_gib * PlanSpaceGeometry::kMaxMemoryShownOverCapacity
                                                 : std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < points.size(); ++i) {
    const PlanPoint& p = points[i];
    const double s = speed_of(p, m);
    if (!std::isfinite(s) || !std::isfinite(p.peak_memory_gib) || s <= 0) continue;
    if (!p.fits && p.peak_memory_gib > memory_cap_gib) {
      ++g.rejected_off_chart;
      continue;
    }
    mem_lo = std::min(mem_lo, p.peak_memory_gib);
    mem_hi = std::max(mem_hi, p.peak_memory_gib);
    sp_lo = std::min(sp_lo, s);
    sp_hi = std::max(sp_hi, s);
    if (!p.fits) {
      g.rejected.push_back(i);
      continue;
    }
    const int64_t v = dimension_value(p.plan, colour_by);
    class_of.emplace(v, 0);
  }
  size_t k = 0;
  for (auto& [v, pos] : class_of) {
    pos = k++;
    g.classes.push_back({v, dimension_label(colour_by, v), {}});
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const PlanPoint& p = points[i];
    const double s = speed_of(p, m);
    if (!p.fits || !std::isfinite(s) || s <= 0 || !std::isfinite(p.peak_memory_gib)) continue;
    g.classes[class_of.at(dimension_value(p.plan, colour_by))].points.push_back(i);
  }
  if (!std::isfinite(mem_lo)) mem_lo = mem_hi = 0;
  if (!std::isfinite(sp_lo)) sp_lo = sp_hi = 0;
  g.memory_gib = padded_range(std::max(0.0, mem_lo), mem_hi);
  g.memory_gib.min = std::max(0.0, g.memory_gib.min);
  g.log_speed = sp_lo > 0 && sp_hi / sp_lo > PlanSpaceGeometry::kLogSpeedRatio;
  if (g.log_speed) {
    // Padded by the same share in log space.
    const AxisRange lg = padded_range(std::log(sp_lo), std::log(sp_hi));
    g.speed = {std::exp(lg.min), std::exp(lg.max)};
  } else {
    g.speed = padded_range(sp_lo, sp_hi);
    g.speed.min = std::max(0.0, g.speed.min);
  }
  g.front = pareto_front(points, m);
  return g;
}

std::vector<size_t> thin_to_cells(const std::vector<PlanPoint>& points, const std::vector<size_t>& indices,
                                  const PlotFrame& frame, double cell_px, SpeedMetric m) {
  const double cell = std::max(cell_px, 1.0);
  std::unordered_map<int64_t, size_t> kept;  // cell key -> position in out
  std::vector<size_t> out;
  kept.reserve(indices.size());
  const int64_t columns = static_cast<int64_t>(frame.width_px / cell) + 2;
  for (size_t i : indices) {
    const PlanPoint& p = points[i];
    const auto cx = static_cast<int64_t>(std::floor(frame.px_x(p.peak_memory_gib) / cell));
    const auto cy = static_cast<int64_t>(std::floor(frame.px_y(speed_of(p, m)) / cell));
    const int64_t key = cy * columns + cx;
    auto [it, inserted] = kept.emplace(key, out.size());
    if (inserted) {
      out.push_back(i);
    } else if (faster(speed_of(p, m), speed_of(points[out[it->second]], m), m)) {
      out[it->second] = i;
    }
  }
  return out;
}

std::optional<size_t> nearest_point(const std::vector<PlanPoint>& points, double memory_gib, double speed,
                                    const PlotFrame& frame, SpeedMetric m, double max_px) {
  const double x0 = frame.px_x(memory_gib), y0 = frame.px_y(speed);
  std::optional<size_t> best;
  double best_d2 = max_px * max_px;
  for (size_t i = 0; i < points.size(); ++i) {
    const double dx = frame.px_x(points[i].peak_memory_gib) - x0;
    const double dy = frame.px_y(speed_of(points[i], m)) - y0;
    const double d2 = dx * dx + dy * dy;
    // Among points drawn at the same place, a fitting plan wins over a rejected one.
    if (d2 < best_d2 || (best && d2 == best_d2 && points[i].fits && !points[*best].fits)) {
      best_d2 = d2;
      best = i;
    }
  }
  return best;
}

const PlanGrid::Cell* PlanGrid::cell(int x, int y) const {
  for (const Cell& c : cells)
    if (c.x == x && c.y == y) return &c;
  return nullptr;
}

double PlanGrid::shade(const Cell& c) const {
  if (!c.best || max_time_s <= min_time_s) return 0;
  return (c.best_time_s - min_time_s) / (max_time_s - min_time_s);
}

PlanGrid plan_grid(const std::vector<PlanPoint>& points, PlanDimension x_dim, PlanDimension y_dim) {
  PlanGrid g;
  g.x_dim = x_dim;
  g.y_dim = y_dim;
  std::map<int64_t, int> xs, ys;
  for (const PlanPoint& p : points) {
    xs.emplace(dimension_value(p.plan, x_dim), 0);
    ys.emplace(dimension_value(p.plan, y_dim), 0);
  }
  for (auto& [v, pos] : xs) {
    pos = static_cast<int>(g.x_values.size());
    g.x_values.push_back(v);
  }
  for (auto& [v, pos] : ys) {
    pos = static_cast<int>(g.y_values.size());
    g.y_values.push_back(v);
  }
  std::map<std::pair<int, int>, PlanGrid::Cell> cells;  // (y, x)
  for (size_t i = 0; i < points.size(); ++i) {
    const PlanPoint& p = points[i];
    const int x = xs.at(dimension_value(p.plan, x_dim)), y = ys.at(dimension_value(p.plan, y_dim));
    PlanGrid::Cell& c = cells[{y, x}];
    c.x = x;
    c.y = y;
    ++c.plans;
    if (!p.fits) continue;
    ++c.fitting;
    if (!c.best || p.iteration_time_s < c.best_time_s) {
      c.best = i;
      c.best_time_s = p.iteration_time_s;
    }
  }
  bool any = false;
  for (auto& [key, c] : cells) {
    if (c.best) {
      const size_t pos = g.cells.size();
      if (!any || c.best_time_s < g.min_time_s) {
        g.min_time_s = c.best_time_s;
        g.best_cell = pos;
      }
      if (!any || c.best_time_s > g.max_time_s) g.max_time_s = c.best_time_s;
      any = true;
    }
    g.cells.push_back(c);
  }
  return g;
}

bool same_plan_degrees(const Plan& a, const Plan& b) {
  Plan x = a, y = b;
  x.layers_per_stage.clear();
  y.layers_per_stage.clear();
  return x == y;
}

}  // namespace monarch::gui
