#include "gui/app/whatif_view.h"

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFutureWatcher>
#include <QGridLayout>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QSplitter>
#include <QTimer>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrentRun>
#include <QElapsedTimer>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

// The slider spans 1/16x to 16x the baseline bandwidth on a log scale, 10 steps per doubling.
constexpr int kSliderStepsPerOctave = 10;
constexpr int kSliderOctaves = 4;

}  // namespace

// A sweep on a worker thread: its control (cancel, progress) and the watcher of its result.
struct WhatIfView::SweepJob {
  std::shared_ptr<JobControl> control = std::make_shared<JobControl>();
  QFutureWatcher<std::vector<SweepPoint>> watcher;
  QTimer progress_timer;
};

WhatIfView::~WhatIfView() {
  // The worker holds copies of its inputs: cancelled, it ends on its own.
  if (sweep_job_) sweep_job_->control->cancel = true;
}

WhatIfView::WhatIfView(Estimator estimator, QWidget* parent) : QWidget(parent), estimator_(std::move(estimator)) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* split = new QSplitter(Qt::Vertical, this);
  outer->addWidget(split);
  auto* top = new QWidget(split);
  auto* layout = new QVBoxLayout(top);
  auto* intro = new QLabel(QStringLiteral("Change one knob of the selected plan; the analytical model "
                                          "re-runs at once. Baseline = the plan as searched."),
                           this);
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* form = new QFormLayout;
  bandwidth_ = new QDoubleSpinBox(this);
  bandwidth_->setRange(0.01, 1e6);
  bandwidth_->setDecimals(2);
  bandwidth_->setSuffix(QStringLiteral(" GB/s"));
  bandwidth_->setKeyboardTracking(false);
  bandwidth_slider_ = new QSlider(Qt::Horizontal, this);
  bandwidth_slider_->setRange(-kSliderOctaves * kSliderStepsPerOctave, kSliderOctaves * kSliderStepsPerOctave);
  auto* bw_row = new QHBoxLayout;
  bw_row->addWidget(bandwidth_);
  bw_row->addWidget(bandwidth_slider_, 1);
  form->addRow(QStringLiteral("Inter-node bandwidth (per NIC, per direction)"), bw_row);
  gpus_ = new QSpinBox(this);
  gpus_->setRange(1, 1 << 22);
  gpus_->setKeyboardTracking(false);
  form->addRow(QStringLiteral("GPU count (data-parallel degree follows)"), gpus_);
  mbs_ = new QSpinBox(this);
  mbs_->setRange(1, 1 << 20);
  mbs_->setKeyboardTracking(false);
  form->addRow(QStringLiteral("Micro-batch size"), mbs_);
  layout->addLayout(form);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(status_);
  model_ = new CompareModel(this);
  table_ = new QTableView(this);
  table_->setModel(model_);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_, 1);
  split->addWidget(top);
  split->addWidget(build_curves_panel());
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 3);
  setEnabled(false);
  status_->setText(QStringLiteral("Select a plan first (run a search)."));

  connect(bandwidth_, &QDoubleSpinBox::valueChanged, this, [this](double v) { set_inter_node_bandwidth_GBps(v); });
  connect(bandwidth_slider_, &QSlider::valueChanged, this, [this](int step) {
    if (!scenario_) return;
    const double base = baseline_bandwidth_GBps_;
    set_inter_node_bandwidth_GBps(base * std::pow(2.0, double(step) / kSliderStepsPerOctave));
  });
  connect(gpus_, &QSpinBox::valueChanged, this, [this](int n) { set_num_gpus(n); });
  connect(mbs_, &QSpinBox::valueChanged, this, [this](int n) { set_micro_batch_size(n); });
}

void WhatIfView::set_baseline(const Scenario& scenario, const BackendResult& baseline) {
  scenario_ = scenario;
  baseline_ = baseline;
  baseline_bandwidth_GBps_ = scenario.cluster.inter_node.bandwidth_GBps;
  whatif_scenario_ = scenario;
  whatif_plan_ = baseline.plan;
  // The plan's degrees fix how the GPU count may change: dp steps of tp x pp x cp GPUs.
  {
    const QSignalBlocker b1(bandwidth_), b2(bandwidth_slider_), b3(gpus_), b4(mbs_);
    bandwidth_->setValue(baseline_bandwidth_GBps_);
    bandwidth_slider_->setValue(0);
    const int64_t model_parallel = baseline.plan.tp * baseline.plan.pp * baseline.plan.cp;
    gpus_->setSingleStep(static_cast<int>(std::max<int64_t>(1, model_parallel)));
    gpus_->setValue(static_cast<int>(scenario.cluster.num_gpus));
    mbs_->setValue(static_cast<int>(baseline.plan.micro_batch_size));
  }
  setEnabled(true);
  recompute(/*announce=*/false);
  cancel_sweep();
  sweep_selected();
}

void WhatIfView::set_inter_node_bandwidth_GBps(double v) {
  if (!scenario_) return;
  whatif_scenario_.cluster.inter_node.bandwidth_GBps = v;
  {
    const QSignalBlocker b(bandwidth_);
    bandwidth_->setValue(v);
  }
  recompute();
}

void WhatIfView::set_num_gpus(int64_t n) {
  if (!scenario_) return;
  whatif_scenario_.cluster.num_gpus = n;
  const int64_t model_parallel = whatif_plan_.tp * whatif_plan_.pp * whatif_plan_.cp;
  whatif_plan_.dp = model_parallel > 0 ? n / model_parallel : 0;
  {
    const QSignalBlocker b(gpus_);
    gpus_->setValue(static_cast<int>(n));
  }
  if (model_parallel <= 0 || n % model_parallel != 0) {
    problems_ = {Problem{"/cluster/num_gpus",
                         QStringLiteral("%1 GPUs is not a multiple of tp x pp x cp = %2 of this plan")
                             .arg(n)
                             .arg(model_parallel)
                             .toStdString()}};
    result_.reset();
    status_->setText(QStringLiteral("<span style='color:#b41e1e'>%1</span>")
                         .arg(QString::fromStdString(problems_.front().to_string()).toHtmlEscaped()));
    return;
  }
  recompute();
}

void WhatIfView::set_micro_batch_size(int64_t n) {
  if (!scenario_) return;
  whatif_plan_.micro_batch_size = n;
  whatif_scenario_.training.micro_batch_size = n;
  {
    const QSignalBlocker b(mbs_);
    mbs_->setValue(static_cast<int>(n));
  }
  recompute();
}

void WhatIfView::recompute(bool announce) {
  if (!scenario_) return;
  QElapsedTimer timer;
  timer.start();
  Expected<BackendResult> r = estimator_(whatif_scenario_, whatif_plan_);
  last_eval_ms_ = timer.nsecsElapsed() / 1e6;
  if (!r.ok()) {
    problems_ = r.problems();
    result_.reset();
    QString text;
    for (const Problem& p : problems_) text += QString::fromStdString(p.to_string()).toHtmlEscaped() + QStringLiteral("<br>");
    status_->setText(QStringLiteral("<span style='color:#b41e1e'>%1</span>").arg(text));
    return;
  }
  problems_.clear();
  result_ = std::move(r.value());
  model_->set_results(baseline_, QStringLiteral("baseline"), *result_, QStringLiteral("what-if"));
  table_->resizeColumnsToContents();
  const double d = baseline_.iteration_time_s > 0
                       ? (result_->iteration_time_s - baseline_.iteration_time_s) / baseline_.iteration_time_s * 100
                       : 0;
  status_->setText(QStringLiteral("What-if: iteration %1 (%2 vs baseline %3), MFU %4%, peak memory %5 GiB%6. "
                                  "Analytical model answered in %7 ms.")
                       .arg(format_seconds(result_->iteration_time_s))
                       .arg(QString::asprintf("%+.1f%%", d))
                       .arg(format_seconds(baseline_.iteration_time_s))
                       .arg(result_->mfu * 100, 0, 'f', 1)
                       .arg(result_->memory.peak_gib, 0, 'f', 1)
                       .arg(result_->memory.fits ? QString() : QStringLiteral(" — does NOT fit"))
                       .arg(last_eval_ms_, 0, 'f', 2));
  if (announce) emit result_changed(*result_);
}

// ---------------- curves ----------------

QWidget* WhatIfView::build_curves_panel() {
  auto* panel = new QWidget(this);
  auto* layout = new QVBoxLayout(panel);
  auto* bar = new QHBoxLayout;
  knob_box_ = new QComboBox(panel);
  for (Knob k : knobs()) knob_box_->addItem(knob_name(k), static_cast<int>(k));
  points_box_ = new QSpinBox(panel);
  points_box_->setRange(2, 33);
  points_box_->setValue(sweep_point_count_);
  best_button_ = new QPushButton(QStringLiteral("Add best plan at each value"), panel);
  best_button_->setToolTip(QStringLiteral("Runs the plan search at every value (worker thread)"));
  simgrid_button_ = new QPushButton(QStringLiteral("Add SimGrid points"), panel);
  simgrid_button_->setToolTip(QStringLiteral("Simulates the selected plan at every value with SimGrid (worker thread)"));
  simgrid_button_->setEnabled(false);
  sweep_progress_ = new QProgressBar(panel);
  sweep_progress_->setRange(0, 1000);
  sweep_progress_->setMaximumWidth(160);
  sweep_progress_->hide();
  cancel_button_ = new QPushButton(QStringLiteral("Cancel"), panel);
  cancel_button_->hide();
  bar->addWidget(new QLabel(QStringLiteral("Sweep"), panel));
  bar->addWidget(knob_box_);
  bar->addWidget(new QLabel(QStringLiteral("values"), panel));
  bar->addWidget(points_box_);
  bar->addWidget(best_button_);
  bar->addWidget(simgrid_button_);
  bar->addWidget(sweep_progress_);
  bar->addWidget(cancel_button_);
  bar->addStretch(1);
  layout->addLayout(bar);
  curve_status_ = new QLabel(panel);
  curve_status_->setWordWrap(true);
  curve_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(curve_status_);
  auto* grid = new QGridLayout;
  const CurveMetric kCharts[] = {CurveMetric::kIterationTime, CurveMetric::kTokensPerS, CurveMetric::kMfu,
                                 CurveMetric::kPeakMemory};
  int k = 0;
  for (CurveMetric m : kCharts) {
    auto* view = new QChartView(panel);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumHeight(180);
    view->setChart(new QChart);
    grid->addWidget(view, k / 2, k % 2);
    curve_views_.emplace_back(m, view);
    ++k;
  }
  layout->addLayout(grid, 1);
  connect(knob_box_, &QComboBox::currentIndexChanged, this,
          [this] { set_knob(static_cast<Knob>(knob_box_->currentData().toInt())); });
  connect(points_box_, &QSpinBox::valueChanged, this, [this](int n) { set_sweep_points(n); });
  connect(best_button_, &QPushButton::clicked, this, [this] { start_sweep(true, false); });
  connect(simgrid_button_, &QPushButton::clicked, this, [this] { start_sweep(false, true); });
  connect(cancel_button_, &QPushButton::clicked, this, &WhatIfView::cancel_sweep);
  return panel;
}

void WhatIfView::set_sweeper(Sweeper sweeper, bool simgrid) {
  sweeper_ = std::move(sweeper);
  simgrid_available_ = simgrid;
  simgrid_button_->setEnabled(simgrid && !sweeping());
  simgrid_button_->setToolTip(simgrid ? QStringLiteral("Simulates the selected plan at every value with SimGrid (worker thread)")
                                      : QStringLiteral("This build has no SimGrid backend"));
}

void WhatIfView::set_knob(Knob k) {
  knob_ = k;
  {
    const QSignalBlocker b(knob_box_);
    knob_box_->setCurrentIndex(knob_box_->findData(static_cast<int>(k)));
  }
  cancel_sweep();
  sweep_selected();
}

void WhatIfView::set_sweep_points(int n) {
  sweep_point_count_ = n;
  {
    const QSignalBlocker b(points_box_);
    points_box_->setValue(n);
  }
  cancel_sweep();
  sweep_selected();
}

QChartView* WhatIfView::curve_view(CurveMetric m) const {
  for (const auto& [metric, view] : curve_views_)
    if (metric == m) return view;
  return nullptr;
}

bool WhatIfView::sweeping() const { return sweep_job_ != nullptr; }

void WhatIfView::sweep_selected() {
  curve_points_.clear();
  if (!scenario_) {
    draw_curves();
    return;
  }
  QElapsedTimer timer;
  timer.start();
  // The selected plan on the analytical model: fast enough to run here, at once.
  for (const KnobValue& v : sweep_values(knob_, *scenario_, baseline_.plan, sweep_point_count_)) {
    SweepPoint point;
    point.value = v;
    Expected<SweepInput> in = apply_knob(knob_, v, *scenario_, baseline_.plan);
    if (!in.ok()) {
      point.problem = in.problems().front().to_string();
    } else {
      Expected<BackendResult> r = estimator_(in->scenario, in->plan);
      if (r.ok())
        point.selected = CurveMetrics{r->iteration_time_s, r->mfu, r->memory.peak_gib, r->tokens_per_s, r->memory.fits};
      else
        point.problem = r.problems().front().to_string();
    }
    curve_points_.push_back(std::move(point));
  }
  int problems = 0;
  for (const SweepPoint& p : curve_points_) problems += p.problem.empty() ? 0 : 1;
  curve_status_->setText(QStringLiteral("%1 values of %2 for %3: analytical model in %4 ms.%5 Solid: the selected plan; "
                                        "dashed: the best plan a search finds at each value; dots: SimGrid.")
                             .arg(curve_points_.size())
                             .arg(knob_name(knob_), plan_summary(baseline_.plan))
                             .arg(timer.nsecsElapsed() / 1e6, 0, 'f', 1)
                             .arg(problems > 0 ? QStringLiteral(" %1 value(s) the plan cannot take (hover the charts' points "
                                                                "or see the table of values).").arg(problems)
                                               : QString()));
  draw_curves();
}

bool WhatIfView::start_sweep(bool best, bool simgrid) {
  if (!scenario_ || !sweeper_ || sweep_job_) return false;
  SweepRequest request;
  request.knob = knob_;
  for (const SweepPoint& p : curve_points_) request.values.push_back(p.value);
  request.selected = false;
  request.best = best;
  request.simgrid = simgrid;
  sweep_job_ = std::make_unique<SweepJob>();
  std::shared_ptr<JobControl> control = sweep_job_->control;
  connect(&sweep_job_->watcher, &QFutureWatcher<std::vector<SweepPoint>>::finished, this, [this] {
    std::unique_ptr<SweepJob> job = std::move(sweep_job_);
    sweep_progress_->hide();
    cancel_button_->hide();
    best_button_->setEnabled(true);
    simgrid_button_->setEnabled(simgrid_available_);
    knob_box_->setEnabled(true);
    points_box_->setEnabled(true);
    const std::vector<SweepPoint> done = job->watcher.result();
    for (size_t i = 0; i < done.size() && i < curve_points_.size(); ++i) {
      SweepPoint& p = curve_points_[i];
      if (done[i].value.x != p.value.x) continue;
      if (done[i].best) {
        p.best = done[i].best;
        p.best_plan = done[i].best_plan;
      }
      if (done[i].simgrid) p.simgrid = done[i].simgrid;
      if (p.problem.empty()) p.problem = done[i].problem;
    }
    curve_status_->setText(curve_status_->text().section(QStringLiteral(" Added:"), 0, 0) +
                           QStringLiteral(" Added: %1 of %2 values.").arg(done.size()).arg(curve_points_.size()));
    draw_curves();
  });
  sweep_job_->progress_timer.setInterval(100);
  connect(&sweep_job_->progress_timer, &QTimer::timeout, this,
          [this] { if (sweep_job_) sweep_progress_->setValue(static_cast<int>(sweep_job_->control->fraction.load() * 1000)); });
  sweep_job_->progress_timer.start();
  sweep_job_->watcher.setFuture(QtConcurrent::run(
      [control, sweeper = sweeper_, scenario = *scenario_, plan = baseline_.plan, request] {
        return sweeper(scenario, plan, request, *control);
      }));
  sweep_progress_->setValue(0);
  sweep_progress_->show();
  cancel_button_->show();
  best_button_->setEnabled(false);
  simgrid_button_->setEnabled(false);
  knob_box_->setEnabled(false);
  points_box_->setEnabled(false);
  return true;
}

void WhatIfView::cancel_sweep() {
  if (!sweep_job_) return;
  // The worker stops at its next check; its result is dropped, the view is free at once.
  sweep_job_->control->cancel = true;
  SweepJob* detached = sweep_job_.release();
  disconnect(&detached->watcher, nullptr, this, nullptr);
  detached->progress_timer.stop();
  if (detached->watcher.isFinished()) {
    QTimer::singleShot(0, this, [detached] { delete detached; });
  } else {
    connect(&detached->watcher, &QFutureWatcher<std::vector<SweepPoint>>::finished, this,
            [this, detached] { QTimer::singleShot(0, this, [detached] { delete detached; }); },
            Qt::SingleShotConnection);
  }
  sweep_progress_->hide();
  cancel_button_->hide();
  best_button_->setEnabled(true);
  simgrid_button_->setEnabled(simgrid_available_);
  knob_box_->setEnabled(true);
  points_box_->setEnabled(true);
}

void WhatIfView::wait_for_sweep() {
  while (sweep_job_) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
  QCoreApplication::processEvents();
}

void WhatIfView::draw_curves() {
  const bool categorical = knob_is_categorical(knob_);
  const bool geometric = knob_is_geometric(knob_);
  for (const auto& [metric, view] : curve_views_) {
    auto* chart = new QChart;
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setTitle(curve_metric_name(metric));
    const CurveRanges range = curve_ranges(curve_points_, metric);
    QAbstractAxis* ax = nullptr;
    if (categorical) {
      auto* cat = new QCategoryAxis;
      cat->setStartValue(range.x_min - 0.5);
      for (const SweepPoint& p : curve_points_) cat->append(QString::fromStdString(p.value.label), p.value.x + 0.5);
      cat->setRange(range.x_min - 0.5, range.x_max + 0.5);
      cat->setLabelsPosition(QCategoryAxis::AxisLabelsPositionCenter);
      ax = cat;
    } else if (geometric && range.x_min > 0) {
      auto* log = new QLogValueAxis;
      log->setBase(2);
      log->setLabelFormat(QStringLiteral("%g"));
      log->setRange(range.x_min / 1.2, range.x_max * 1.2);
      ax = log;
    } else {
      auto* lin = new QValueAxis;
      lin->setRange(range.x_min - 0.05 * (range.x_max - range.x_min), range.x_max + 0.05 * (range.x_max - range.x_min));
      ax = lin;
    }
    ax->setTitleText(knob_name(knob_));
    auto* ay = new QValueAxis;
    ay->setRange(range.y_min, range.y_max);
    ay->applyNiceNumbers();
    ay->setLabelFormat(ay->max() >= 1e4 ? QStringLiteral("%.0f") : QStringLiteral("%.4g"));
    chart->addAxis(ax, Qt::AlignBottom);
    chart->addAxis(ay, Qt::AlignLeft);
    auto add = [&](QXYSeries* s) {
      chart->addSeries(s);
      s->attachAxis(ax);
      s->attachAxis(ay);
    };
    auto* selected = new QLineSeries;
    selected->setName(QStringLiteral("selected plan"));
    selected->setPointsVisible(true);
    selected->setPen(QPen(QColor(31, 119, 180), 2));
    auto* best = new QLineSeries;
    best->setName(QStringLiteral("best plan at each value"));
    best->setPointsVisible(true);
    best->setPen(QPen(QColor(44, 160, 44), 2, Qt::DashLine));
    auto* simgrid = new QScatterSeries;
    simgrid->setName(QStringLiteral("SimGrid, selected plan"));
    simgrid->setMarkerSize(9);
    simgrid->setColor(QColor(214, 39, 40));
    for (const SweepPoint& p : curve_points_) {
      if (p.selected) selected->append(p.value.x, curve_value(*p.selected, metric));
      if (p.best) best->append(p.value.x, curve_value(*p.best, metric));
      if (p.simgrid) simgrid->append(p.value.x, curve_value(*p.simgrid, metric));
    }
    add(selected);
    if (best->count() > 0) add(best);
    else delete best;
    if (simgrid->count() > 0) add(simgrid);
    else delete simgrid;
    if (scenario_) {
      // Where the scenario stands now.
      const double now = knob_value(knob_, *scenario_, baseline_.plan);
      if (now >= 0 && (!geometric || now > 0)) {
        auto* mark = new QLineSeries;
        mark->setName(QStringLiteral("scenario"));
        mark->setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
        mark->append(now, ay->min());
        mark->append(now, ay->max());
        add(mark);
      }
    }
    QChart* old = view->chart();
    view->setChart(chart);
    delete old;
  }
}

}  // namespace monarch::gui
