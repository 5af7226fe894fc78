#include "gui/app/reliability_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

constexpr double kHour_s = 3600.0;
constexpr double kDay_s = 86400.0;

void replace_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
}

QChartView* make_view(QWidget* parent) {
  auto* v = new QChartView(parent);
  v->setRenderHint(QPainter::Antialiasing);
  v->setMinimumHeight(200);
  v->setChart(new QChart);
  return v;
}

}  // namespace

ReliabilityView::ReliabilityView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  auto* grid = new QGridLayout;
  curve_view_ = make_view(this);
  badput_view_ = make_view(this);
  month_view_ = make_view(this);
  grid->addWidget(curve_view_, 0, 0);
  grid->addWidget(badput_view_, 0, 1);
  grid->addWidget(month_view_, 1, 0, 1, 2);
  grid->setRowStretch(0, 3);
  grid->setRowStretch(1, 2);
  layout->addLayout(grid, 1);
  clear(QStringLiteral("No plan yet: run a search. Goodput needs a scenario with a reliability block."));
}

void ReliabilityView::clear(const QString& why) {
  picture_.reset();
  summary_->setText(why);
  for (QChartView* v : {curve_view_, badput_view_, month_view_}) {
    auto* c = new QChart;
    c->setTitle(why.section(QLatin1Char('.'), 0, 0));
    replace_chart(v, c);
  }
}

void ReliabilityView::show_plan(const Scenario& scenario, const Plan& plan, double iteration_time_s, const QString& title) {
  picture_ = reliability_picture(scenario, plan, iteration_time_s);
  if (!picture_) {
    clear(QStringLiteral("%1: this scenario has no reliability block (failure rates, checkpoints, recovery), "
                         "so goodput is not modelled.").arg(scenario.name.empty() ? QStringLiteral("The scenario") : QString::fromStdString(scenario.name)));
    return;
  }
  const GoodputEstimate& e = picture_->estimate;
  QString text = QStringLiteral("%1 — goodput %2% (useful time / wall time), %3 interruptions a day (job MTBF %4), "
                                "checkpoint every %5 (optimum %6, Daly %7), %8 blocking per checkpoint.")
                     .arg(title)
                     .arg(e.goodput * 100, 0, 'f', 1)
                     .arg(e.interruptions_per_day, 0, 'f', 2)
                     .arg(format_seconds(e.mtbf_s), format_seconds(e.interval_s), format_seconds(e.optimal_interval_s),
                          format_seconds(e.young_daly_interval_s), format_seconds(e.checkpoint.blocking_s));
  for (const std::string& w : e.warnings) text += QStringLiteral(" Warning: %1.").arg(QString::fromStdString(w));
  summary_->setText(text);
  draw_curve();
  draw_badput();
  draw_month();
}

void ReliabilityView::draw_curve() {
  const ReliabilityPicture& p = *picture_;
  auto* chart = new QChart;
  chart->setTitle(QStringLiteral("Goodput against the checkpoint interval"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* ax = new QLogValueAxis;
  ax->setBase(10);
  ax->setLabelFormat(QStringLiteral("%g"));
  ax->setTitleText(QStringLiteral("checkpoint interval (hours of training)"));
  auto* ay = new QValueAxis;
  ay->setTitleText(QStringLiteral("goodput (%)"));
  auto* curve = new QLineSeries;
  curve->setName(QStringLiteral("goodput"));
  curve->setPen(QPen(QColor(31, 119, 180), 2));
  double lo = 1e300, hi = 0;
  for (const IntervalPoint& c : p.curve) {
    if (c.interval_s <= 0) continue;
    curve->append(c.interval_s / kHour_s, c.goodput * 100);
    lo = std::min(lo, c.interval_s / kHour_s);
    hi = std::max(hi, c.interval_s / kHour_s);
  }
  if (hi <= lo) {
    lo = 0.01;
    hi = 100;
  }
  ax->setRange(lo, hi);
  const double y_lo = std::max(0.0, p.curve_min_goodput * 100 - 2);
  ay->setRange(y_lo, 100);
  chart->addAxis(ax, Qt::AlignBottom);
  chart->addAxis(ay, Qt::AlignLeft);
  chart->addSeries(curve);
  curve->attachAxis(ax);
  curve->attachAxis(ay);
  auto mark = [&](const QString& name, double interval_s, QColor colour, Qt::PenStyle style) {
    if (interval_s <= 0) return;
    auto* s = new QLineSeries;
    s->setName(name);
    s->setPen(QPen(colour, 1.5, style));
    s->append(interval_s / kHour_s, y_lo);
    s->append(interval_s / kHour_s, 100);
    chart->addSeries(s);
    s->attachAxis(ax);
    s->attachAxis(ay);
  };
  mark(QStringLiteral("used %1").arg(format_seconds(p.estimate.interval_s)), p.estimate.interval_s, QColor(214, 39, 40), Qt::SolidLine);
  mark(QStringLiteral("optimum %1").arg(format_seconds(p.estimate.optimal_interval_s)), p.estimate.optimal_interval_s,
       QColor(44, 160, 44), Qt::DashLine);
  mark(QStringLiteral("Daly %1").arg(format_seconds(p.estimate.young_daly_interval_s)), p.estimate.young_daly_interval_s,
       QColor(120, 120, 120), Qt::DotLine);
  replace_chart(curve_view_, chart);
}

void ReliabilityView::draw_badput() {
  const ReliabilityPicture& p = *picture_;
  auto* chart = new QChart;
  chart->setTitle(QStringLiteral("Badput: %1% of the wall time lost")
                      .arg((1 - p.estimate.goodput) * 100, 0, 'f', 1));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* series = new QHorizontalStackedBarSeries;
  static const QColor kColours[] = {QColor(31, 119, 180), QColor(23, 190, 207), QColor(214, 39, 40),
                                    QColor(255, 127, 14), QColor(148, 103, 189)};
  double total = 0;
  size_t k = 0;
  for (const BadputBar& b : p.badput) {
    auto* set = new QBarSet(QStringLiteral("%1 %2%").arg(b.name).arg(b.share_of_wall * 100, 0, 'f', 2));
    set->setColor(kColours[k++ % std::size(kColours)]);
    *set << b.share_of_wall * 100;
    series->append(set);
    total += b.share_of_wall * 100;
  }
  chart->addSeries(series);
  auto* ay = new QBarCategoryAxis;
  ay->append(QStringLiteral("badput"));
  auto* ax = new QValueAxis;
  ax->setTitleText(QStringLiteral("% of wall time"));
  ax->setRange(0, total > 0 ? total * 1.1 : 1);
  chart->addAxis(ay, Qt::AlignLeft);
  chart->addAxis(ax, Qt::AlignBottom);
  series->attachAxis(ay);
  series->attachAxis(ax);
  replace_chart(badput_view_, chart);
}

void ReliabilityView::draw_month() {
  const ReliabilityPicture& p = *picture_;
  auto* chart = new QChart;
  chart->setTitle(QStringLiteral("One simulated month: %1 failures (%2 full restarts)")
                      .arg(p.month.size())
                      .arg(std::count_if(p.month.begin(), p.month.end(), [](const FailureEvent& e) { return e.full_restart; })));
  chart->legend()->setVisible(false);
  auto* ax = new QValueAxis;
  ax->setTitleText(QStringLiteral("day"));
  ax->setRange(0, kMonth_s / kDay_s);
  auto* ay = new QCategoryAxis;
  ay->setStartValue(-0.5);
  for (size_t i = 0; i < p.components.size(); ++i) ay->append(QString::fromStdString(p.components[i]), static_cast<double>(i) + 0.5);
  ay->setRange(-0.5, std::max<double>(0.5, static_cast<double>(p.components.size()) - 0.5));
  ay->setLabelsPosition(QCategoryAxis::AxisLabelsPositionCenter);
  chart->addAxis(ax, Qt::AlignBottom);
  chart->addAxis(ay, Qt::AlignLeft);
  auto* events = new QScatterSeries;
  events->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  events->setMarkerSize(8);
  events->setColor(QColor(214, 39, 40));
  for (const FailureEvent& e : p.month) events->append(e.time_s / kDay_s, p.component_row(e.component));
  chart->addSeries(events);
  events->attachAxis(ax);
  events->attachAxis(ay);
  replace_chart(month_view_, chart);
}

}  // namespace monarch::gui
