#include "gui/models/time_axis.h"

#include <algorithm>
#include <cmath>

namespace monarch::gui {

TimeAxis TimeAxis::fit(double total_s, double width_px) {
  TimeAxis a;
  a.total_s = total_s > 0 && std::isfinite(total_s) ? total_s : 1.0;
  a.start_s = 0;
  a.span_s = a.total_s;
  a.width_px = width_px > 1 ? width_px : 1;
  return a;
}

void TimeAxis::zoom(double factor, double anchor_x_px) {
  if (!(factor > 0) || !std::isfinite(factor)) return;
  const double anchor_t = t_of(anchor_x_px);
  span_s /= factor;
  span_s = std::clamp(span_s, std::min(kMinSpan_s, total_s), total_s);
  start_s = anchor_t - anchor_x_px / px_per_s();
  clamp();
}

void TimeAxis::pan_px(double dx_px) {
  start_s += dx_px / px_per_s();
  clamp();
}

void TimeAxis::set_width(double w) {
  width_px = w > 1 ? w : 1;
}

void TimeAxis::clamp() {
  if (!(total_s > 0) || !std::isfinite(total_s)) total_s = 1;
  if (!(span_s > 0) || !std::isfinite(span_s)) span_s = total_s;
  span_s = std::clamp(span_s, std::min(kMinSpan_s, total_s), total_s);
  if (!std::isfinite(start_s)) start_s = 0;
  start_s = std::clamp(start_s, 0.0, total_s - span_s);
}

double TimeAxis::tick_step_s(double min_gap_px) const {
  const double min_step_s = std::max(min_gap_px, 1.0) / px_per_s();
  const double decade = std::pow(10.0, std::floor(std::log10(min_step_s)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * decade >= min_step_s * (1 - 1e-12)) return m * decade;
  }
  return 10 * decade;
}

std::vector<double> TimeAxis::ticks(double min_gap_px) const {
  const double step = tick_step_s(min_gap_px);
  std::vector<double> out;
  const double first = std::ceil(start_s / step - 1e-9);
  for (double k = first;; k += 1) {
    const double t = k * step;
    if (t > end_s() + step * 1e-9) break;
    out.push_back(t);
    if (out.size() > 10000) break;  // cannot happen with min_gap_px >= 1; guards the loop
  }
  return out;
}

int RowWindow::first_visible() const {
  if (row_count <= 0 || row_height_px <= 0) return 0;
  const int r = static_cast<int>(std::floor(std::max(offset_px, 0.0) / row_height_px));
  return std::clamp(r, 0, row_count);
}

int RowWindow::last_visible() const {
  if (row_count <= 0 || row_height_px <= 0) return 0;
  const int r = static_cast<int>(std::ceil((std::max(offset_px, 0.0) + viewport_px) / row_height_px));
  return std::clamp(r, first_visible(), row_count);
}

int RowWindow::row_at(double y_px) const {
  if (row_height_px <= 0) return -1;
  const double y = y_px + offset_px;
  if (y < 0) return -1;
  const int r = static_cast<int>(std::floor(y / row_height_px));
  return r < row_count ? r : -1;
}

}  // namespace monarch::gui
