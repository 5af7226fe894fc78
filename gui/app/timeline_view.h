// Gantt chart of one simulated (or measured) iteration: one row per (rank, stream), spans
// coloured by kind, the idle time of each compute stream (pipeline bubble and waits) hatched,
// zoom (Ctrl+wheel, +/-), pan (drag, Shift+wheel, arrows), fit (F), a tooltip per span.
// Paints only the rows and spans in view, so thousands of rows stay responsive.
#pragma once

#include <QAbstractScrollArea>
#include <QColor>
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
  const TimelineRows& rows() const { return rows_; }
  const TimeAxis& axis() const { return axis_; }
  const PaintStats& last_paint() const { return stats_; }
  // Text of the tooltip at a viewport point, empty when no span is there.
  QString tooltip_at(QPoint viewport_pos) const;

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
  RowWindow row_window() const;
  double plot_width() const;

  TimelineRows rows_;
  TimeAxis axis_;
  PaintStats stats_;
  bool dragging_ = false;
  QPoint drag_last_;
};

// The canvas with its toolbar (zoom buttons, legend, summary line).
class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  // Shows the result's timeline; `title` names where it comes from ("simgrid, tp=8 ...").
  void show_result(const BackendResult& result, const QString& title);
  void clear(const QString& why);
  TimelineCanvas* canvas() const { return canvas_; }

 private:
  TimelineCanvas* canvas_;
  QLabel* summary_;
};

}  // namespace monarch::gui
