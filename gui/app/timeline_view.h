// Gantt chart of one simulated (or measured) iteration: one row per (rank, stream), spans
// coloured by kind, the idle time of each compute stream (pipeline bubble and waits) hatched,
// zoom (Ctrl+wheel, +/-), pan (drag, Shift+wheel, arrows), fit (F), a tooltip per span.
// Paints only the rows and spans in view, so thousands of rows stay responsive. Given the plan,
// rows are grouped by pipeline stage and alike DP replicas folded into one row
// (gui/models/timeline_rows.h); a minimap above shows the whole iteration and the part in view.
#pragma once

#include <QAbstractScrollArea>
#include <QColor>
#include <QImage>
#include <QWidget>

#include "core/result.h"
#include "gui/models/time_axis.h"
#include "gui/models/timeline_rows.h"

class QLabel;

namespace monarch::gui {

// Colour of a span: compute by phase (forward, backward, recompute), optimizer, point-to-point,
// and each collective kind (all-reduce, all-gather, reduce-scatter, all-to-all) its own hue.
QColor span_color(const TimelineSpan& span);

class TimelineCanvas : public QAbstractScrollArea {
  Q_OBJECT
 public:
  static constexpr int kRowHeightPx = 18;
  static constexpr int kGutterPx = 130;  // row labels
  static constexpr int kRulerPx = 24;    // time ticks

  struct PaintStats {
    int rows_drawn = 0;
    int64_t spans_drawn = 0;
  };

  explicit TimelineCanvas(QWidget* parent = nullptr);
  void set_spans(std::vector<TimelineSpan> spans);
  // Grouped by the plan's pipeline stages (alike DP replicas folded), with the rows of a
  // measured rank on top when `measured` has spans.
  void set_spans(std::vector<TimelineSpan> spans, const Plan& plan, std::vector<TimelineSpan> measured = {});
  // Shows the visible span centred on t (zoom unchanged).
  void center_on(double t_s);
  // First visible row and how many fit (the minimap's window).
  RowWindow visible_rows() const { return row_window(); }
  void scroll_to_row(int row);
  const TimelineRows& rows() const { return rows_; }
  const TimeAxis& axis() const { return axis_; }
  const PaintStats& last_paint() const { return stats_; }
  // Text of the tooltip at a viewport point, empty when no span is there.
  QString tooltip_at(QPoint viewport_pos) const;

 signals:
  // The visible time range or rows changed (zoom, pan, scroll, new spans).
  void view_changed();

 public slots:
  void zoom_in();
  void zoom_out();
  void fit();

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  bool viewportEvent(QEvent*) override;
  void scrollContentsBy(int dx, int dy) override;

 private:
  void update_scrollbars();
  void reset_view();
  RowWindow row_window() const;
  double plot_width() const;

  TimelineRows rows_;
  TimeAxis axis_;
  PaintStats stats_;
  bool dragging_ = false;
  QPoint drag_last_;
};

// The whole iteration in a strip: per row band the busy time of its compute spans (one pixel
// column per time slice, computed once per timeline), with the canvas's visible window drawn
// over it; a click or drag moves the canvas there.
class TimelineMinimap : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kHeightPx = 48;
  static constexpr int kColumns = 1024;  // time slices of the overview image
  explicit TimelineMinimap(TimelineCanvas* canvas, QWidget* parent = nullptr);
  // Recomputes the overview from the canvas's rows.
  void rebuild();
  const QImage& overview() const { return overview_; }
  QSize sizeHint() const override { return {600, kHeightPx}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;

 private:
  void jump_to(QPoint pos);
  TimelineCanvas* canvas_;
  QImage overview_;
};

// The canvas with its toolbar (zoom buttons, legend, summary line).
class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  // Shows the result's timeline; `title` names where it comes from ("simgrid, tp=8 ...").
  // With `measured` (a measured run of the same plan), its first rank is drawn on top, on the
  // same time axis (both from their iteration's start).
  void show_result(const BackendResult& result, const QString& title, const BackendResult* measured = nullptr,
                   const QString& measured_title = {});
  void clear(const QString& why);
  TimelineCanvas* canvas() const { return canvas_; }
  TimelineMinimap* minimap() const { return minimap_; }

 private:
  TimelineCanvas* canvas_;
  TimelineMinimap* minimap_;
  QLabel* summary_;
};

}  // namespace monarch::gui
