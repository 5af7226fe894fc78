// Time-to-pixel math of the timeline, free of any widget: which instants are visible, where
// an instant is drawn, zoom about a point, pan, and tick spacing. RowWindow does the same for
// rows so that the timeline draws only the rows in view.
#pragma once

#include <cstdint>
#include <vector>

namespace monarch::gui {

struct TimeAxis {
  // Narrowest visible span: 1 ns (finer than any modelled task).
  static constexpr double kMinSpan_s = 1e-9;

  double total_s = 1;   // data range is [0, total_s]
  double start_s = 0;   // first visible instant
  double span_s = 1;    // visible duration
  double width_px = 1;  // pixels across the visible range

  // Shows [0, total]; total <= 0 becomes 1 s so the math stays finite.
  static TimeAxis fit(double total_s, double width_px);

  double end_s() const { return start_s + span_s; }
  double px_per_s() const { return width_px / span_s; }
  double x_of(double t_s) const { return (t_s - start_s) * px_per_s(); }
  double t_of(double x_px) const { return start_s + x_px / px_per_s(); }
  bool visible(double t0_s, double t1_s) const { return t1_s >= start_s && t0_s <= end_s(); }

  // factor > 1 zooms in, < 1 out; the instant under anchor_x_px stays under it.
  void zoom(double factor, double anchor_x_px);
  // Moves the view right by dx_px pixels (content moves left).
  void pan_px(double dx_px);
  void set_width(double width_px);
  // Keeps the view inside [0, total] and the span within [kMinSpan_s, total].
  void clamp();

  // Step between ticks from the 1-2-5 series so ticks are at least min_gap_px apart.
  double tick_step_s(double min_gap_px) const;
  // Tick instants (multiples of the step) inside the visible range.
  std::vector<double> ticks(double min_gap_px) const;
};

struct RowWindow {
  int row_count = 0;
  double row_height_px = 1;
  double offset_px = 0;    // scrolled distance from the top of row 0
  double viewport_px = 0;  // visible height

  // Half-open range [first, last) of rows that intersect the viewport.
  int first_visible() const;
  int last_visible() const;
  double y_of(int row) const { return row * row_height_px - offset_px; }
  // The row under y (viewport coordinates), or -1.
  int row_at(double y_px) const;
};

}  // namespace monarch::gui
