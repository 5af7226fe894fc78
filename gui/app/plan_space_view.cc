#include "gui/app/plan_space_view.h"

#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QCursor>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

// Distinct hues for the colour classes (Tableau 10), cycled past ten classes.
const QColor kClassColours[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),  QColor(214, 39, 40),
                                QColor(148, 103, 189), QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127),
                                QColor(188, 189, 34),  QColor(23, 190, 207)};
constexpr double kHitRadiusPx = 8;
constexpr double kCellHalfWidth = 0.46;  // grid cells, in category units

QString metric_title(SpeedMetric m) {
  return m == SpeedMetric::kIterationTime ? QStringLiteral("iteration time (s)") : QStringLiteral("tokens/s");
}

void fill_dimensions(QComboBox* box, PlanDimension current) {
  for (PlanDimension d : plan_dimensions()) box->addItem(dimension_name(d), static_cast<int>(d));
  box->setCurrentIndex(box->findData(static_cast<int>(current)));
}

void replace_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
}

// Green for the fastest cell through yellow to red for the slowest.
QColor shade_colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  return QColor::fromHsvF((1.0 - t) * 0.33, 0.65, 0.9);
}

}  // namespace

PlanSpaceView::PlanSpaceView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  colour_box_ = new QComboBox(this);
  fill_dimensions(colour_box_, colour_by_);
  metric_box_ = new QComboBox(this);
  metric_box_->addItem(QStringLiteral("iteration time"), static_cast<int>(SpeedMetric::kIterationTime));
  metric_box_->addItem(QStringLiteral("tokens/s"), static_cast<int>(SpeedMetric::kTokensPerS));
  grid_x_box_ = new QComboBox(this);
  fill_dimensions(grid_x_box_, grid_x_);
  grid_y_box_ = new QComboBox(this);
  fill_dimensions(grid_y_box_, grid_y_);
  bar->addWidget(new QLabel(QStringLiteral("Colour by"), this));
  bar->addWidget(colour_box_);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(QStringLiteral("Speed axis"), this));
  bar->addWidget(metric_box_);
  bar->addSpacing(24);
  bar->addWidget(new QLabel(QStringLiteral("Grid"), this));
  bar->addWidget(grid_x_box_);
  bar->addWidget(new QLabel(QStringLiteral("x"), this));
  bar->addWidget(grid_y_box_);
  bar->addStretch(1);
  layout->addLayout(bar);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);

  auto* split = new QSplitter(Qt::Horizontal, this);
  scatter_view_ = new QChartView(split);
  scatter_view_->setRenderHint(QPainter::Antialiasing);
  scatter_view_->setChart(new QChart);
  auto* grid_box = new QWidget(split);
  auto* grid_layout = new QVBoxLayout(grid_box);
  grid_layout->setContentsMargins(0, 0, 0, 0);
  grid_view_ = new QChartView(grid_box);
  grid_view_->setRenderHint(QPainter::Antialiasing);
  grid_view_->setChart(new QChart);
  grid_summary_ = new QLabel(grid_box);
  grid_summary_->setWordWrap(true);
  grid_layout->addWidget(grid_view_, 1);
  grid_layout->addWidget(grid_summary_);
  scatter_view_->viewport()->installEventFilter(this);
  split->addWidget(scatter_view_);
  split->addWidget(grid_box);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  connect(colour_box_, &QComboBox::currentIndexChanged, this,
          [this] { set_colour_by(static_cast<PlanDimension>(colour_box_->currentData().toInt())); });
  connect(metric_box_, &QComboBox::currentIndexChanged, this,
          [this] { set_metric(static_cast<SpeedMetric>(metric_box_->currentData().toInt())); });
  auto grid_changed = [this] {
    set_grid_dimensions(static_cast<PlanDimension>(grid_x_box_->currentData().toInt()),
                        static_cast<PlanDimension>(grid_y_box_->currentData().toInt()));
  };
  connect(grid_x_box_, &QComboBox::currentIndexChanged, this, grid_changed);
  connect(grid_y_box_, &QComboBox::currentIndexChanged, this, grid_changed);
  clear(QStringLiteral("No search yet: open a scenario and press Search."));
}

void PlanSpaceView::set_points(std::vector<PlanPoint> points, double capacity_gib, const QString& note) {
  points_ = std::move(points);
  capacity_gib_ = capacity_gib;
  selected_.reset();
  int64_t fitting = 0;
  for (const PlanPoint& p : points_) fitting += p.fits ? 1 : 0;
  rebuild_scatter();
  rebuild_grid();
  summary_->setText(QStringLiteral("%1 plans estimated, %2 fit in %3 GiB per GPU, %4 on the Pareto front "
                                   "(no other plan is both faster and smaller). %5 Click a point or a cell "
                                   "to select its plan; hover for its degrees and, when rejected, why.")
                        .arg(points_.size())
                        .arg(fitting)
                        .arg(capacity_gib_, 0, 'f', 1)
                        .arg(geometry_.front.size())
                        .arg(note));
}

void PlanSpaceView::clear(const QString& why) {
  points_.clear();
  selected_.reset();
  rebuild_scatter();
  rebuild_grid();
  summary_->setText(why);
}

void PlanSpaceView::set_colour_by(PlanDimension d) {
  colour_by_ = d;
  {
    const QSignalBlocker b(colour_box_);
    colour_box_->setCurrentIndex(colour_box_->findData(static_cast<int>(d)));
  }
  rebuild_scatter();
}

void PlanSpaceView::set_metric(SpeedMetric m) {
  metric_ = m;
  {
    const QSignalBlocker b(metric_box_);
    metric_box_->setCurrentIndex(metric_box_->findData(static_cast<int>(m)));
  }
  rebuild_scatter();
}

void PlanSpaceView::set_grid_dimensions(PlanDimension x, PlanDimension y) {
  grid_x_ = x;
  grid_y_ = y;
  {
    const QSignalBlocker bx(grid_x_box_), by(grid_y_box_);
    grid_x_box_->setCurrentIndex(grid_x_box_->findData(static_cast<int>(x)));
    grid_y_box_->setCurrentIndex(grid_y_box_->findData(static_cast<int>(y)));
  }
  rebuild_grid();
}

PlotFrame PlanSpaceView::frame() const {
  PlotFrame f;
  f.x = geometry_.memory_gib;
  f.y = geometry_.speed;
  // The plot area once the chart is laid out; before that, the view's size less the margins.
  const QRectF area = scatter_view_->chart() ? scatter_view_->chart()->plotArea() : QRectF();
  f.width_px = area.width() > 50 ? area.width() : std::max(400, scatter_view_->width() - 120);
  f.height_px = area.height() > 50 ? area.height() : std::max(300, scatter_view_->height() - 120);
  f.log_y = geometry_.log_speed;
  return f;
}

QString PlanSpaceView::tooltip_of(size_t i) const {
  const PlanPoint& p = points_.at(i);
  QString text = QStringLiteral("<b>%1</b><br>iteration %2, %3 tokens/s<br>peak %4 GiB per GPU")
                     .arg(plan_summary(p.plan).toHtmlEscaped(), format_seconds(p.iteration_time_s))
                     .arg(p.tokens_per_s, 0, 'f', 0)
                     .arg(p.peak_memory_gib, 0, 'f', 1);
  if (!p.fits) text += QStringLiteral("<br><span style='color:#b41e1e'>rejected: %1</span>").arg(QString::fromStdString(p.reason).toHtmlEscaped());
  return text;
}

void PlanSpaceView::rebuild_scatter() {
  selected_series_ = nullptr;
  geometry_ = plan_space_geometry(points_, capacity_gib_, metric_, colour_by_);
  auto* chart = new QChart;
  chart->legend()->setAlignment(Qt::AlignRight);
  auto* ax = new QValueAxis;
  ax->setTitleText(QStringLiteral("peak memory per GPU (GiB)"));
  ax->setRange(geometry_.memory_gib.min, geometry_.memory_gib.max);
  ax->applyNiceNumbers();
  QAbstractAxis* ay = nullptr;
  if (geometry_.log_speed) {
    auto* log = new QLogValueAxis;
    log->setBase(10);
    log->setMinorTickCount(8);
    log->setLabelFormat(QStringLiteral("%g"));
    log->setRange(geometry_.speed.min, geometry_.speed.max);
    log->setTitleText(metric_title(metric_) + QStringLiteral(", log scale"));
    ay = log;
  } else {
    auto* lin = new QValueAxis;
    lin->setTitleText(metric_title(metric_));
    lin->setRange(geometry_.speed.min, geometry_.speed.max);
    lin->applyNiceNumbers();
    lin->setLabelFormat(lin->max() >= 1e4 ? QStringLiteral("%.0f") : QStringLiteral("%.4g"));
    geometry_.speed = {lin->min(), lin->max()};
    ay = lin;
  }
  // Thinning and hit-testing use the ranges as drawn.
  geometry_.memory_gib = {ax->min(), ax->max()};
  chart->addAxis(ax, Qt::AlignBottom);
  chart->addAxis(ay, Qt::AlignLeft);
  markers_drawn_ = 0;
  const PlotFrame f = frame();
  auto add = [&](QXYSeries* s) {
    chart->addSeries(s);
    s->attachAxis(ax);
    s->attachAxis(ay);
  };
  auto points_of = [&](const std::vector<size_t>& indices) {
    QList<QPointF> list;
    const std::vector<size_t> kept = thin_to_cells(points_, indices, f, kMarkerCellPx, metric_);
    list.reserve(static_cast<qsizetype>(kept.size()));
    for (size_t i : kept) list.append(QPointF(points_[i].peak_memory_gib, speed_of(points_[i], metric_)));
    markers_drawn_ += static_cast<int64_t>(kept.size());
    return list;
  };
  auto hover = [this](const QPointF& at, bool state) {
    if (!state) return;
    if (auto i = nearest_point(points_, at.x(), at.y(), frame(), metric_, kHitRadiusPx))
      QToolTip::showText(QCursor::pos(), tooltip_of(*i), scatter_view_);
  };
  if (!geometry_.rejected.empty()) {
    auto* s = new QScatterSeries;
    s->setName(geometry_.rejected_off_chart > 0
                   ? QStringLiteral("rejected %1 (+%2 > %3 GiB)")
                         .arg(geometry_.rejected.size())
                         .arg(geometry_.rejected_off_chart)
                         .arg(capacity_gib_ * PlanSpaceGeometry::kMaxMemoryShownOverCapacity, 0, 'f', 0)
                   : QStringLiteral("rejected (%1)").arg(geometry_.rejected.size()));
    s->setMarkerSize(5);
    s->setColor(QColor(150, 150, 150, 60));
    s->setBorderColor(Qt::transparent);
    s->replace(points_of(geometry_.rejected));
    add(s);
    connect(s, &QScatterSeries::hovered, this, hover);
  }
  int k = 0;
  for (const PlanSpaceGeometry::ColourClass& c : geometry_.classes) {
    auto* s = new QScatterSeries;
    s->setName(QStringLiteral("%1 %2 (%3)").arg(dimension_name(colour_by_), c.label).arg(c.points.size()));
    s->setMarkerSize(7);
    s->setColor(kClassColours[k++ % std::size(kClassColours)]);
    s->setBorderColor(Qt::transparent);
    s->replace(points_of(c.points));
    add(s);
    connect(s, &QScatterSeries::hovered, this, hover);
  }
  if (!geometry_.front.empty()) {
    auto* front = new QLineSeries;
    front->setName(QStringLiteral("Pareto front (%1)").arg(geometry_.front.size()));
    front->setPen(QPen(QColor(20, 20, 20), 2));
    for (size_t i : geometry_.front) front->append(points_[i].peak_memory_gib, speed_of(points_[i], metric_));
    add(front);
  }
  if (capacity_gib_ > 0) {
    auto* cap = new QLineSeries;
    cap->setName(QStringLiteral("capacity %1 GiB").arg(capacity_gib_, 0, 'f', 1));
    cap->setPen(QPen(QColor(200, 30, 30), 2, Qt::DashLine));
    cap->append(capacity_gib_, geometry_.speed.min);
    cap->append(capacity_gib_, geometry_.speed.max);
    add(cap);
  }
  selected_series_ = new QScatterSeries;
  selected_series_->setName(QStringLiteral("selected"));
  selected_series_->setMarkerSize(16);
  selected_series_->setColor(Qt::transparent);
  selected_series_->setBorderColor(Qt::black);
  selected_series_->setPen(QPen(Qt::black, 2.5));
  add(selected_series_);
  chart->setTitle(points_.empty() ? QStringLiteral("Plan space: no plans yet")
                                  : QStringLiteral("Plan space: %1 against peak memory").arg(metric_title(metric_)));
  replace_chart(scatter_view_, chart);
  mark_selected();
}

void PlanSpaceView::rebuild_grid() {
  grid_ = plan_grid(points_, grid_x_, grid_y_);
  auto* chart = new QChart;
  chart->legend()->setVisible(false);
  auto* ax = new QCategoryAxis;
  auto* ay = new QCategoryAxis;
  ax->setTitleText(dimension_name(grid_x_));
  ay->setTitleText(dimension_name(grid_y_));
  ax->setStartValue(-0.5);
  ay->setStartValue(-0.5);
  for (size_t i = 0; i < grid_.x_values.size(); ++i)
    ax->append(dimension_label(grid_x_, grid_.x_values[i]), static_cast<double>(i) + 0.5);
  for (size_t i = 0; i < grid_.y_values.size(); ++i)
    ay->append(dimension_label(grid_y_, grid_.y_values[i]), static_cast<double>(i) + 0.5);
  ax->setRange(-0.5, std::max<double>(0.5, static_cast<double>(grid_.x_values.size()) - 0.5));
  ay->setRange(-0.5, std::max<double>(0.5, static_cast<double>(grid_.y_values.size()) - 0.5));
  ax->setLabelsPosition(QCategoryAxis::AxisLabelsPositionCenter);
  ay->setLabelsPosition(QCategoryAxis::AxisLabelsPositionCenter);
  chart->addAxis(ax, Qt::AlignBottom);
  chart->addAxis(ay, Qt::AlignLeft);
  for (size_t ci = 0; ci < grid_.cells.size(); ++ci) {
    const PlanGrid::Cell& c = grid_.cells[ci];
    auto* upper = new QLineSeries;
    auto* lower = new QLineSeries;
    upper->append(c.x - kCellHalfWidth, c.y + kCellHalfWidth);
    upper->append(c.x + kCellHalfWidth, c.y + kCellHalfWidth);
    lower->append(c.x - kCellHalfWidth, c.y - kCellHalfWidth);
    lower->append(c.x + kCellHalfWidth, c.y - kCellHalfWidth);
    auto* area = new QAreaSeries(upper, lower);
    area->setBrush(c.best ? shade_colour(grid_.shade(c)) : QColor(225, 225, 225));
    const bool best = grid_.best_cell && *grid_.best_cell == ci;
    area->setPen(best ? QPen(Qt::black, 3) : QPen(QColor(255, 255, 255), 1));
    chart->addSeries(area);
    area->attachAxis(ax);
    area->attachAxis(ay);
    const int x = c.x, y = c.y;
    connect(area, &QAreaSeries::clicked, this, [this, x, y] { choose_cell(x, y); });
    connect(area, &QAreaSeries::hovered, this, [this, x, y](const QPointF&, bool state) {
      if (!state) return;
      const PlanGrid::Cell* cell = grid_.cell(x, y);
      if (!cell) return;
      QString text = QStringLiteral("%1 %2, %3 %4: %5 plans, %6 fit")
                         .arg(dimension_name(grid_x_), dimension_label(grid_x_, grid_.x_values[static_cast<size_t>(x)]),
                              dimension_name(grid_y_), dimension_label(grid_y_, grid_.y_values[static_cast<size_t>(y)]))
                         .arg(cell->plans)
                         .arg(cell->fitting);
      if (cell->best) text += QStringLiteral("<br>best %1<br>%2").arg(format_seconds(cell->best_time_s), plan_summary(points_[*cell->best].plan));
      QToolTip::showText(QCursor::pos(), text, grid_view_);
    });
  }
  chart->setTitle(QStringLiteral("Best iteration time per %1 x %2 (green fastest, grey: none fits)")
                      .arg(dimension_name(grid_x_), dimension_name(grid_y_)));
  replace_chart(grid_view_, chart);
  if (grid_.best_cell) {
    const PlanGrid::Cell& b = grid_.cells[*grid_.best_cell];
    grid_summary_->setText(QStringLiteral("Best cell: %1 %2, %3 %4 at %5 (%6). Slowest cell with a fitting plan: %7.")
                               .arg(dimension_name(grid_x_), dimension_label(grid_x_, grid_.x_values[static_cast<size_t>(b.x)]),
                                    dimension_name(grid_y_), dimension_label(grid_y_, grid_.y_values[static_cast<size_t>(b.y)]),
                                    format_seconds(b.best_time_s), plan_summary(points_[*b.best].plan),
                                    format_seconds(grid_.max_time_s)));
  } else {
    grid_summary_->setText(points_.empty() ? QString() : QStringLiteral("No cell holds a plan that fits."));
  }
}

void PlanSpaceView::mark_selected() {
  if (!selected_series_) return;
  QList<QPointF> list;
  if (selected_) list.append(QPointF(points_[*selected_].peak_memory_gib, speed_of(points_[*selected_], metric_)));
  selected_series_->replace(list);
}

void PlanSpaceView::set_selected(const Plan& plan) {
  selected_.reset();
  for (size_t i = 0; i < points_.size(); ++i)
    if (same_plan_degrees(points_[i].plan, plan)) {
      selected_ = i;
      break;
    }
  mark_selected();
}

void PlanSpaceView::choose(size_t i) {
  selected_ = i;
  mark_selected();
  emit plan_chosen(points_[i].plan);
}

bool PlanSpaceView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == scatter_view_->viewport() && event->type() == QEvent::MouseButtonRelease && selected_series_) {
    auto* e = static_cast<QMouseEvent*>(event);
    if (e->button() == Qt::LeftButton) {
      QChart* chart = scatter_view_->chart();
      const QPointF in_chart = chart->mapFromScene(scatter_view_->mapToScene(e->position().toPoint()));
      if (chart->plotArea().contains(in_chart)) {
        const QPointF value = chart->mapToValue(in_chart, selected_series_);
        choose_at(value.x(), value.y());
      }
    }
  }
  return QWidget::eventFilter(watched, event);
}

bool PlanSpaceView::choose_at(double memory_gib, double speed) {
  const std::optional<size_t> i = nearest_point(points_, memory_gib, speed, frame(), metric_, kHitRadiusPx);
  if (!i) return false;
  choose(*i);
  return true;
}

bool PlanSpaceView::choose_cell(int x, int y) {
  const PlanGrid::Cell* c = grid_.cell(x, y);
  if (!c || !c->best) return false;
  choose(*c->best);
  return true;
}

}  // namespace monarch::gui
