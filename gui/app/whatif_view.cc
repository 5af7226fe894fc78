#include "gui/app/whatif_view.h"

#include <QDoubleSpinBox>
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

WhatIfView::WhatIfView(Estimator estimator, QWidget* parent) : QWidget(parent), estimator_(std::move(estimator)) {
  auto* layout = new QVBoxLayout(this);
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

}  // namespace monarch::gui
