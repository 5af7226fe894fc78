#include "gui/app/timeline_view.h"

#include <QHBoxLayout>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

constexpr int kHScrollSteps = 1000000;  // resolution of the horizontal scroll bar
constexpr double kZoomStep = 1.5;       // per click / key press / wheel notch

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

QColor span_color(const TimelineSpan& s) {
  if (s.category == "compute") {
    if (starts_with(s.name, "bwd") || contains(s.name, "backward")) return QColor(37, 99, 175);
    if (starts_with(s.name, "recompute") || contains(s.name, "recomp")) return QColor(140, 180, 230);
    return QColor(86, 150, 220);
  }
  if (s.category == "optimizer") return QColor(120, 120, 120);
  if (s.category == "p2p") return QColor(214, 60, 60);
  // An injected failure (SimGrid): the failed host's ranks, and the operations left waiting.
  if (s.category == "failure") return QColor(30, 30, 30);
  if (s.category == "stall") return QColor(250, 205, 60);
  if (s.category == "collective") {
    if (contains(s.name, "AllReduce") || contains(s.name, "all-reduce")) return QColor(240, 150, 30);
    if (contains(s.name, "AllGather") || contains(s.name, "all-gather")) return QColor(60, 170, 90);
    if (contains(s.name, "ReduceScatter") || contains(s.name, "reduce-scatter")) return QColor(150, 90, 190);
    if (contains(s.name, "AllToAll") || contains(s.name, "all-to-all")) return QColor(200, 90, 150);
    return QColor(180, 150, 40);
  }
  return QColor(160, 160, 160);
}

// ---------------- TimelineCanvas ----------------

TimelineCanvas::TimelineCanvas(QWidget* parent) : QAbstractScrollArea(parent) {
  setFocusPolicy(Qt::StrongFocus);
  viewport()->setMouseTracking(true);
  viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
  horizontalScrollBar()->setRange(0, 0);
  verticalScrollBar()->setSingleStep(kRowHeightPx);
  axis_ = TimeAxis::fit(1.0, plot_width());
}

double TimelineCanvas::plot_width() const {
  return std::max(1, viewport()->width() - kGutterPx);
}

RowWindow TimelineCanvas::row_window() const {
  RowWindow w;
  w.row_count = rows_.row_count();
  w.row_height_px = kRowHeightPx;
  w.offset_px = verticalScrollBar()->value();
  w.viewport_px = std::max(0, viewport()->height() - kRulerPx);
  return w;
}

void TimelineCanvas::set_spans(std::vector<TimelineSpan> spans) {
  rows_ = TimelineRows(std::move(spans));
  reset_view();
}

void TimelineCanvas::set_spans(std::vector<TimelineSpan> spans, const Plan& plan, std::vector<TimelineSpan> measured) {
  rows_ = TimelineRows(std::move(spans), plan);
  rows_.prepend_measured(std::move(measured));
  reset_view();
}

void TimelineCanvas::reset_view() {
  axis_ = TimeAxis::fit(rows_.end_s(), plot_width());
  verticalScrollBar()->setValue(0);
  update_scrollbars();
  viewport()->update();
  emit view_changed();
}

void TimelineCanvas::center_on(double t_s) {
  axis_.start_s = t_s - axis_.span_s / 2;
  axis_.clamp();
  update_scrollbars();
  viewport()->update();
  emit view_changed();
}

void TimelineCanvas::scroll_to_row(int row) {
  verticalScrollBar()->setValue(row * kRowHeightPx);
}

void TimelineCanvas::update_scrollbars() {
  const int content = rows_.row_count() * kRowHeightPx;
  const int page = std::max(0, viewport()->height() - kRulerPx);
  verticalScrollBar()->setPageStep(page);
  verticalScrollBar()->setRange(0, std::max(0, content - page));
  QScrollBar* h = horizontalScrollBar();
  const double slack_s = axis_.total_s - axis_.span_s;
  const QSignalBlocker block(h);
  if (slack_s <= 0) {
    h->setRange(0, 0);
  } else {
    h->setRange(0, kHScrollSteps);
    h->setPageStep(std::max(1, static_cast<int>(kHScrollSteps * axis_.span_s / axis_.total_s)));
    h->setSingleStep(std::max(1, h->pageStep() / 10));
    h->setValue(static_cast<int>(std::lround(axis_.start_s / slack_s * kHScrollSteps)));
  }
  emit view_changed();
}

void TimelineCanvas::scrollContentsBy(int, int) {
  QScrollBar* h = horizontalScrollBar();
  const double slack_s = axis_.total_s - axis_.span_s;
  if (h->maximum() > 0 && slack_s > 0) {
    axis_.start_s = slack_s * h->value() / kHScrollSteps;
    axis_.clamp();
  }
  viewport()->update();
  emit view_changed();
}

void TimelineCanvas::zoom_in() {
  axis_.zoom(kZoomStep, plot_width() / 2);
  update_scrollbars();
  viewport()->update();
}

void TimelineCanvas::zoom_out() {
  axis_.zoom(1 / kZoomStep, plot_width() / 2);
  update_scrollbars();
  viewport()->update();
}

void TimelineCanvas::fit() {
  axis_ = TimeAxis::fit(rows_.end_s(), plot_width());
  update_scrollbars();
  viewport()->update();
}

void TimelineCanvas::resizeEvent(QResizeEvent* e) {
  QAbstractScrollArea::resizeEvent(e);
  axis_.set_width(plot_width());
  update_scrollbars();
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(viewport());
  const QRect vr = viewport()->rect();
  const QPalette& pal = palette();
  p.fillRect(vr, pal.color(QPalette::Base));
  stats_ = PaintStats{};

  const RowWindow win = row_window();
  const double pw = plot_width();
  const double t0 = axis_.start_s;
  const double t1 = axis_.end_s();
  const QFontMetrics fm(font());

  // Rows: only those in view.
  p.save();
  p.setClipRect(QRect(0, kRulerPx, vr.width(), vr.height() - kRulerPx));
  const QBrush idle_brush(QColor(220, 90, 90, 160), Qt::BDiagPattern);
  for (int r = win.first_visible(); r < win.last_visible(); ++r) {
    const TimelineRows::Row& row = rows_.rows()[static_cast<size_t>(r)];
    const int y = kRulerPx + static_cast<int>(win.y_of(r));
    const QRect band(kGutterPx, y, static_cast<int>(pw), kRowHeightPx);
    if (r % 2) p.fillRect(band, pal.color(QPalette::AlternateBase));
    if (row.stream == "compute") {
      // Idle compute stream up to the end of the iteration: bubble and waits show through.
      const double x_end = std::min(axis_.x_of(rows_.end_s()), pw);
      const double x_begin = std::max(axis_.x_of(0), 0.0);
      if (x_end > x_begin)
        p.fillRect(QRectF(kGutterPx + x_begin, y + 2, x_end - x_begin, kRowHeightPx - 4), idle_brush);
    }
    const auto [first, last] = rows_.visible(r, t0, t1);
    double drawn_until_px = -1;
    for (int i = first; i < last; ++i) {
      const TimelineSpan& s = rows_.spans()[static_cast<size_t>(row.spans[static_cast<size_t>(i)])];
      double x0 = std::max(axis_.x_of(s.start_s), 0.0);
      double x1 = std::min(axis_.x_of(s.end_s), pw);
      if (x1 < x0) continue;
      if (x1 - x0 < 1) {
        // Sub-pixel span: one pixel column per run of them, not one rectangle each.
        if (std::floor(x0) <= drawn_until_px) continue;
        x0 = std::floor(x0);
        x1 = x0 + 1;
      }
      drawn_until_px = std::floor(x1 - 1e-9);
      const QRectF rect(kGutterPx + x0, y + 2, x1 - x0, kRowHeightPx - 4);
      p.fillRect(rect, span_color(s));
      ++stats_.spans_drawn;
      if (rect.width() > 40) {
        p.setPen(Qt::white);
        p.drawText(rect.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(QString::fromStdString(s.name), Qt::ElideRight, static_cast<int>(rect.width()) - 5));
      }
    }
    // Row label in the gutter.
    p.fillRect(QRect(0, y, kGutterPx, kRowHeightPx), pal.color(QPalette::Window));
    p.setPen(pal.color(QPalette::WindowText));
    QString label = row.measured ? QStringLiteral("meas r%1 %2").arg(row.rank).arg(QString::fromStdString(row.stream))
                    : row.stage >= 0 ? QStringLiteral("s%1 r%2 %3").arg(row.stage).arg(row.rank).arg(QString::fromStdString(row.stream))
                                   : QStringLiteral("rank %1 %2").arg(row.rank).arg(QString::fromStdString(row.stream));
    if (row.ranks > 1) label += QStringLiteral(" x%1").arg(row.ranks);
    p.drawText(QRect(4, y, kGutterPx - 8, kRowHeightPx), Qt::AlignVCenter | Qt::AlignLeft, label);
    // A line above the first row of each pipeline stage (and below the measured rows).
    if ((row.stage >= 0 || row.measured) && (r == 0 || rows_.rows()[static_cast<size_t>(r - 1)].stage != row.stage)) {
      p.setPen(QPen(pal.color(QPalette::WindowText), 1));
      p.drawLine(0, y, vr.width(), y);
    }
    ++stats_.rows_drawn;
  }
  p.restore();

  // Ruler.
  p.fillRect(QRect(0, 0, vr.width(), kRulerPx), pal.color(QPalette::Window));
  p.setPen(pal.color(QPalette::Mid));
  p.drawLine(0, kRulerPx - 1, vr.width(), kRulerPx - 1);
  p.drawLine(kGutterPx - 1, 0, kGutterPx - 1, vr.height());
  p.setPen(pal.color(QPalette::WindowText));
  if (rows_.row_count() > 0) {
    for (double t : axis_.ticks(90)) {
      const int x = kGutterPx + static_cast<int>(std::lround(axis_.x_of(t)));
      p.drawLine(x, kRulerPx - 6, x, kRulerPx - 1);
      p.drawText(x + 3, kRulerPx - 8, format_seconds(t));
    }
    p.drawText(QRect(4, 0, kGutterPx - 8, kRulerPx), Qt::AlignVCenter | Qt::AlignLeft,
               rows_.grouped() ? QStringLiteral("%1 rows, %2 stages").arg(rows_.row_count()).arg(rows_.stages().size())
                               : QStringLiteral("%1 rows").arg(rows_.row_count()));
  }
}

void TimelineCanvas::wheelEvent(QWheelEvent* e) {
  const double notches = e->angleDelta().y() / 120.0;
  if (e->modifiers() & Qt::ControlModifier) {
    const double x = e->position().x() - kGutterPx;
    axis_.zoom(std::pow(kZoomStep, notches), std::clamp(x, 0.0, plot_width()));
    update_scrollbars();
    viewport()->update();
    e->accept();
    return;
  }
  if (e->modifiers() & Qt::ShiftModifier) {
    axis_.pan_px(-notches * plot_width() / 10);
    update_scrollbars();
    viewport()->update();
    e->accept();
    return;
  }
  QAbstractScrollArea::wheelEvent(e);
}

void TimelineCanvas::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    dragging_ = true;
    drag_last_ = e->position().toPoint();
    viewport()->setCursor(Qt::ClosedHandCursor);
  }
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* e) {
  if (!dragging_) return;
  const QPoint pos = e->position().toPoint();
  const QPoint d = pos - drag_last_;
  drag_last_ = pos;
  axis_.pan_px(-d.x());
  verticalScrollBar()->setValue(verticalScrollBar()->value() - d.y());
  update_scrollbars();
  viewport()->update();
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent*) {
  dragging_ = false;
  viewport()->unsetCursor();
}

void TimelineCanvas::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom_in(); return;
    case Qt::Key_Minus: zoom_out(); return;
    case Qt::Key_F: fit(); return;
    case Qt::Key_Left: axis_.pan_px(-plot_width() / 10); break;
    case Qt::Key_Right: axis_.pan_px(plot_width() / 10); break;
    default: QAbstractScrollArea::keyPressEvent(e); return;
  }
  update_scrollbars();
  viewport()->update();
}

QString TimelineCanvas::tooltip_at(QPoint pos) const {
  if (pos.x() < kGutterPx || pos.y() < kRulerPx) return {};
  const int row = row_window().row_at(pos.y() - kRulerPx);
  if (row < 0) return {};
  const double x = pos.x() - kGutterPx;
  int32_t idx = rows_.span_at(row, axis_.t_of(x));
  // Narrow spans: accept a hit within 2 px.
  if (idx < 0) idx = rows_.span_at(row, axis_.t_of(x - 2));
  if (idx < 0) idx = rows_.span_at(row, axis_.t_of(x + 2));
  if (idx < 0) return {};
  const TimelineSpan& s = rows_.spans()[static_cast<size_t>(idx)];
  const TimelineRows::Row& shown = rows_.rows()[static_cast<size_t>(row)];
  const QString stage = shown.measured ? QStringLiteral("measured, ")
                        : shown.stage >= 0 ? QStringLiteral("stage %1, ").arg(shown.stage) : QString();
  const QString folded = shown.ranks > 1 ? QStringLiteral("<br>stands for %1 data-parallel replicas with the same spans").arg(shown.ranks) : QString();
  return QStringLiteral("<b>%1</b><br>%8rank %2, stream %3, %4<br>start %5, end %6<br>duration %7%9")
      .arg(QString::fromStdString(s.name).toHtmlEscaped())
      .arg(s.rank)
      .arg(QString::fromStdString(s.stream).toHtmlEscaped())
      .arg(QString::fromStdString(s.category).toHtmlEscaped())
      .arg(format_seconds(s.start_s), format_seconds(s.end_s), format_seconds(s.end_s - s.start_s))
      .arg(stage, folded);
}

bool TimelineCanvas::viewportEvent(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = tooltip_at(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      e->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, viewport());
    }
    return true;
  }
  return QAbstractScrollArea::viewportEvent(e);
}

// ---------------- TimelineMinimap ----------------

TimelineMinimap::TimelineMinimap(TimelineCanvas* canvas, QWidget* parent) : QWidget(parent), canvas_(canvas) {
  setFixedHeight(kHeightPx);
  setMouseTracking(false);
  setToolTip(QStringLiteral("The whole iteration: compute busy (blue) per row band; the box is the part in view. Click or drag to move there."));
  connect(canvas_, &TimelineCanvas::view_changed, this, qOverload<>(&QWidget::update));
}

void TimelineMinimap::rebuild() {
  const TimelineRows& rows = canvas_->rows();
  const int bands = std::min(rows.row_count(), kHeightPx);
  if (bands <= 0 || rows.end_s() <= 0) {
    overview_ = QImage();
    update();
    return;
  }
  // Busy seconds of compute spans per (band, time slice).
  std::vector<double> busy(static_cast<size_t>(bands) * kColumns, 0.0);
  std::vector<int> rows_in_band(static_cast<size_t>(bands), 0);
  const double slice_s = rows.end_s() / kColumns;
  for (int r = 0; r < rows.row_count(); ++r) {
    const TimelineRows::Row& row = rows.rows()[static_cast<size_t>(r)];
    const int band = static_cast<int>(static_cast<int64_t>(r) * bands / rows.row_count());
    if (row.stream != "compute") continue;
    ++rows_in_band[static_cast<size_t>(band)];
    for (int32_t i : row.spans) {
      const TimelineSpan& sp = rows.spans()[static_cast<size_t>(i)];
      const int c0 = std::clamp(static_cast<int>(sp.start_s / slice_s), 0, kColumns - 1);
      const int c1 = std::clamp(static_cast<int>(sp.end_s / slice_s), 0, kColumns - 1);
      for (int c = c0; c <= c1; ++c) {
        const double overlap = std::min(sp.end_s, (c + 1) * slice_s) - std::max(sp.start_s, c * slice_s);
        if (overlap > 0) busy[static_cast<size_t>(band) * kColumns + static_cast<size_t>(c)] += overlap;
      }
    }
  }
  overview_ = QImage(kColumns, bands, QImage::Format_RGB32);
  for (int b = 0; b < bands; ++b) {
    auto* line = reinterpret_cast<QRgb*>(overview_.scanLine(b));
    const int n = rows_in_band[static_cast<size_t>(b)];
    for (int c = 0; c < kColumns; ++c) {
      if (n == 0) {
        line[c] = qRgb(245, 245, 245);  // no compute stream in this band
        continue;
      }
      const double share = std::clamp(busy[static_cast<size_t>(b) * kColumns + static_cast<size_t>(c)] / (slice_s * n), 0.0, 1.0);
      // Idle (bubble) light red, busy blue.
      const auto mix = [share](int idle, int full) { return static_cast<int>(idle + (full - idle) * share); };
      line[c] = qRgb(mix(250, 37), mix(215, 99), mix(215, 175));
    }
  }
  update();
}

void TimelineMinimap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QRect area = rect().adjusted(TimelineCanvas::kGutterPx, 1, -1, -1);
  p.fillRect(rect(), palette().color(QPalette::Window));
  p.drawText(QRect(4, 0, TimelineCanvas::kGutterPx - 8, height()), Qt::AlignVCenter | Qt::AlignLeft, QStringLiteral("overview"));
  if (overview_.isNull()) return;
  p.drawImage(area, overview_);
  const TimelineRows& rows = canvas_->rows();
  const TimeAxis& axis = canvas_->axis();
  const RowWindow w = canvas_->visible_rows();
  const double total = std::max(rows.end_s(), 1e-12);
  const double x0 = area.left() + area.width() * std::clamp(axis.start_s / total, 0.0, 1.0);
  const double x1 = area.left() + area.width() * std::clamp(axis.end_s() / total, 0.0, 1.0);
  const double n = std::max(1, rows.row_count());
  const double y0 = area.top() + area.height() * std::clamp(w.first_visible() / n, 0.0, 1.0);
  const double y1 = area.top() + area.height() * std::clamp(w.last_visible() / n, 0.0, 1.0);
  p.setPen(QPen(Qt::black, 2));
  p.setBrush(Qt::NoBrush);
  p.drawRect(QRectF(x0, y0, std::max(2.0, x1 - x0), std::max(2.0, y1 - y0)));
}

void TimelineMinimap::jump_to(QPoint pos) {
  const int width = std::max(1, this->width() - TimelineCanvas::kGutterPx - 1);
  const double f = std::clamp(static_cast<double>(pos.x() - TimelineCanvas::kGutterPx) / width, 0.0, 1.0);
  canvas_->center_on(f * canvas_->rows().end_s());
  const double g = std::clamp(static_cast<double>(pos.y()) / std::max(1, height()), 0.0, 1.0);
  const RowWindow w = canvas_->visible_rows();
  const int visible = w.last_visible() - w.first_visible();
  canvas_->scroll_to_row(std::max(0, static_cast<int>(g * canvas_->rows().row_count()) - visible / 2));
}

void TimelineMinimap::mousePressEvent(QMouseEvent* e) { jump_to(e->position().toPoint()); }
void TimelineMinimap::mouseMoveEvent(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) jump_to(e->position().toPoint());
}

// ---------------- TimelineView ----------------

namespace {

QWidget* legend_item(const QColor& c, const QString& text, QWidget* parent, Qt::BrushStyle style = Qt::SolidPattern) {
  auto* w = new QLabel(parent);
  QPixmap pm(12, 12);
  pm.fill(Qt::transparent);
  QPainter p(&pm);
  p.fillRect(pm.rect(), QBrush(c, style));
  p.setPen(Qt::darkGray);
  p.drawRect(pm.rect().adjusted(0, 0, -1, -1));
  p.end();
  auto* box = new QWidget(parent);
  auto* l = new QHBoxLayout(box);
  l->setContentsMargins(0, 0, 6, 0);
  l->setSpacing(3);
  w->setPixmap(pm);
  l->addWidget(w);
  l->addWidget(new QLabel(text, box));
  return box;
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  auto* zin = new QToolButton(this);
  zin->setText(QStringLiteral("Zoom in"));
  auto* zout = new QToolButton(this);
  zout->setText(QStringLiteral("Zoom out"));
  auto* fitb = new QToolButton(this);
  fitb->setText(QStringLiteral("Fit"));
  bar->addWidget(zin);
  bar->addWidget(zout);
  bar->addWidget(fitb);
  bar->addSpacing(12);
  TimelineSpan probe;
  probe.category = "compute";
  probe.name = "fwd";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("forward"), this));
  probe.name = "bwd";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("backward"), this));
  probe.category = "collective";
  probe.name = "ncclAllReduce";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("all-reduce"), this));
  probe.name = "ncclAllGather";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("all-gather"), this));
  probe.name = "ncclReduceScatter";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("reduce-scatter"), this));
  probe.name = "ncclAllToAll";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("all-to-all"), this));
  probe.category = "p2p";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("send/recv"), this));
  probe.category = "optimizer";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("optimizer"), this));
  probe.category = "stall";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("stalled (failure)"), this));
  probe.category = "failure";
  bar->addWidget(legend_item(span_color(probe), QStringLiteral("host down"), this));
  bar->addWidget(legend_item(QColor(235, 120, 120), QStringLiteral("compute idle (bubble)"), this, Qt::BDiagPattern));
  bar->addStretch(1);
  layout->addLayout(bar);
  summary_ = new QLabel(this);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  canvas_ = new TimelineCanvas(this);
  minimap_ = new TimelineMinimap(canvas_, this);
  layout->addWidget(minimap_);
  layout->addWidget(canvas_, 1);
  connect(zin, &QToolButton::clicked, canvas_, &TimelineCanvas::zoom_in);
  connect(zout, &QToolButton::clicked, canvas_, &TimelineCanvas::zoom_out);
  connect(fitb, &QToolButton::clicked, canvas_, &TimelineCanvas::fit);
  clear(QStringLiteral("No timeline yet: run a simulation of a plan."));
}

void TimelineView::show_result(const BackendResult& r, const QString& title, const BackendResult* measured,
                               const QString& measured_title) {
  std::vector<TimelineSpan> measured_rank;
  if (measured && !measured->timeline.empty() && measured != &r) {
    int32_t first = measured->timeline.front().rank;
    for (const TimelineSpan& s : measured->timeline) first = std::min(first, s.rank);
    for (const TimelineSpan& s : measured->timeline)
      if (s.rank == first) measured_rank.push_back(s);
  }
  const bool with_measured = !measured_rank.empty();
  canvas_->set_spans(r.timeline, r.plan, std::move(measured_rank));
  minimap_->rebuild();
  if (r.timeline.empty()) {
    summary_->setText(QStringLiteral("%1: this result has no timeline (the analytical backend "
                                     "predicts totals only; run SimGrid for a timeline).")
                          .arg(title));
    return;
  }
  const TimelineRows& rows = canvas_->rows();
  const QString grouping =
      rows.grouped() ? QStringLiteral(" grouped by %1 pipeline stage(s)%2").arg(rows.stages().size())
                           .arg(rows.folded_ranks() > 0 ? QStringLiteral(", %1 rank(s) alike their stage's first DP replica folded (xN)").arg(rows.folded_ranks())
                                                        : QString())
                     : QString();
  const QString measured_note =
      with_measured ? QStringLiteral(" Top rows (meas): rank %1 of %2, measured iteration %3, on the same time axis.")
                          .arg(rows.rows().front().rank)
                          .arg(measured_title, format_seconds(measured->iteration_time_s))
                    : QString();
  QString failure_note;
  if (const auto& f = r.failure) {
    int stalled = 0, failed = 0;
    for (const RankStall& st : f->ranks) {
      stalled += st.state == "stalled" ? 1 : 0;
      failed += st.state == "failed" ? 1 : 0;
    }
    failure_note = f->affected ? QStringLiteral(" Failed iteration: %1 of node %2 down at %3, %4 rank(s) failed, %5 stalled, timeout at %6.")
                                     .arg(QString::fromStdString(f->component))
                                     .arg(f->node)
                                     .arg(format_seconds(f->at_s))
                                     .arg(failed)
                                     .arg(stalled)
                                     .arg(format_seconds(f->timeout_at_s))
                               : QStringLiteral(" The injected failure at %1 comes after the iteration: nothing changes.")
                                     .arg(format_seconds(f->at_s));
  }
  summary_->setText(QStringLiteral("%1 — iteration %2, bubble %3, %4 spans on %5 rows%6. "
                                   "Ctrl+wheel zooms, drag pans, F fits.%7")
                        .arg(title, format_seconds(r.iteration_time_s),
                             format_seconds(r.time_breakdown_s.bubble))
                        .arg(r.timeline.size())
                        .arg(rows.row_count())
                        .arg(grouping, measured_note + failure_note));
}

void TimelineView::clear(const QString& why) {
  canvas_->set_spans({});
  minimap_->rebuild();
  summary_->setText(why);
}

}  // namespace monarch::gui
