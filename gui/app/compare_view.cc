#include "gui/app/compare_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <utility>
#include <QHBoxLayout>
#include <QLegend>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/models/plans_model.h"  // kSortRole

namespace monarch::gui {
namespace {
// Lines of the "what differs most" summary.
constexpr size_t kMostDifferentShown = 6;
}  // namespace

int CompareView::find_run(const QString& label) const {
  for (size_t i = 0; i < runs_.size(); ++i)
    if (runs_[i].label == label) return static_cast<int>(i);
  return -1;
}

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
  model_ = new CompareModel(this);
  auto* layout = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  a_ = new QComboBox(this);
  b_ = new QComboBox(this);
  a_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  b_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  form->addRow(QStringLiteral("Run A"), a_);
  form->addRow(QStringLiteral("Run B"), b_);
  layout->addLayout(form);
  auto* buttons = new QHBoxLayout;
  timeline_a_ = new QPushButton(QStringLiteral("Timeline of A"), this);
  timeline_b_ = new QPushButton(QStringLiteral("Timeline of B"), this);
  buttons->addWidget(timeline_a_);
  buttons->addWidget(timeline_b_);
  buttons->addStretch(1);
  layout->addLayout(buttons);
  connect(timeline_a_, &QPushButton::clicked, this, [this] { open_timeline(0); });
  connect(timeline_b_, &QPushButton::clicked, this, [this] { open_timeline(1); });
  most_ = new QLabel(this);
  most_->setWordWrap(true);
  most_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  most_->setStyleSheet(QStringLiteral("padding:4px; background:#f3f0e6;"));
  layout->addWidget(most_);
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  layout->addWidget(note_);
  auto* split = new QSplitter(Qt::Vertical, this);
  chart_view_ = new QChartView(split);
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setChart(new QChart);
  table_ = new QTableView(split);
  table_->setModel(model_);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setStretchLastSection(true);
  split->addWidget(chart_view_);
  split->addWidget(table_);
  layout->addWidget(split, 1);
  connect(a_, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
  connect(b_, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
  refresh();
}

void CompareView::set_runs(std::vector<RunChoice> runs) {
  const QString keep_a = a_->currentText();
  const QString keep_b = b_->currentText();
  runs_ = std::move(runs);
  {
    const QSignalBlocker ba(a_), bb(b_);
    a_->clear();
    b_->clear();
    for (const RunChoice& r : runs_) {
      a_->addItem(r.label);
      b_->addItem(r.label);
    }
    int ia = a_->findText(keep_a);
    int ib = b_->findText(keep_b);
    if (ia < 0) ia = runs_.empty() ? -1 : 0;
    if (ib < 0) ib = runs_.size() > 1 ? 1 : ia;
    a_->setCurrentIndex(ia);
    b_->setCurrentIndex(ib);
  }
  refresh();
}

bool CompareView::has_timeline(int which) const {
  const int i = which == 0 ? a_->currentIndex() : b_->currentIndex();
  if (i < 0 || i >= run_count()) return false;
  const RunChoice& run = runs_[static_cast<size_t>(i)];
  return run.result && !run.result->timeline.empty();
}

bool CompareView::open_timeline(int which) {
  if (!has_timeline(which)) return false;
  const RunChoice& run = runs_[static_cast<size_t>(which == 0 ? a_->currentIndex() : b_->currentIndex())];
  emit timeline_requested(*run.result, run.label);
  return true;
}

void CompareView::choose(int a, int b) {
  const QSignalBlocker ba(a_), bb(b_);
  a_->setCurrentIndex(a);
  b_->setCurrentIndex(b);
  refresh();
}

bool CompareView::ensure_loaded(int i, QString* why) {
  RunChoice& run = runs_[static_cast<size_t>(i)];
  if (run.result) return true;
  if (run.store_id < 0 || !loader_) {
    *why = QStringLiteral("%1 has no result").arg(run.label);
    return false;
  }
  Expected<BackendResult> r = loader_(run.store_id);
  if (!r.ok()) {
    *why = QString::fromStdString(r.problems().front().to_string());
    return false;
  }
  run.result = std::move(r.value());
  return true;
}

void CompareView::refresh() {
  const int ia = a_->currentIndex();
  const int ib = b_->currentIndex();
  // Whatever the branch below, the timeline buttons follow the loaded runs.
  struct UpdateButtons {
    CompareView* v;
    ~UpdateButtons() {
      for (int which = 0; which < 2; ++which) {
        QPushButton* b = which == 0 ? v->timeline_a_ : v->timeline_b_;
        const bool has = v->has_timeline(which);
        b->setEnabled(has);
        b->setToolTip(has ? QStringLiteral("Show this run's per-rank timeline in the Timeline tab")
                          : QStringLiteral("This run recorded no timeline (analytical runs have none)"));
      }
    }
  } update_buttons{this};
  auto* chart = new QChart;
  QString why;
  most_different_.clear();
  if (ia < 0 || ib < 0 || ia >= run_count() || ib >= run_count()) {
    model_->clear();
    note_->setText(QStringLiteral("Nothing to compare yet: run a search (plans of this session) or "
                                  "open a results store with recorded runs."));
    chart->setTitle(QStringLiteral("No runs"));
  } else if (!ensure_loaded(ia, &why) || !ensure_loaded(ib, &why)) {
    model_->clear();
    note_->setText(QStringLiteral("<span style='color:#b41e1e'>Cannot load the run: %1</span>").arg(why.toHtmlEscaped()));
    chart->setTitle(QStringLiteral("No runs"));
  } else {
    const RunChoice& a = runs_[static_cast<size_t>(ia)];
    const RunChoice& b = runs_[static_cast<size_t>(ib)];
    model_->set_results(*a.result, QStringLiteral("A"), *b.result, QStringLiteral("B"));
    most_different_ = differs_most(model_->rows(), kMostDifferentShown);
    QString note = ia == ib ? QStringLiteral("A and B are the same run; pick another B.")
                            : QStringLiteral("Differences are B - A; percentages are (B - A) / A.");
    for (const auto& [name, run] : {std::pair{"A", &a}, std::pair{"B", &b}})
      for (const std::string& w : run->result->warnings)
        note += QStringLiteral("<br><span style='color:#b46400'>Warning (%1): %2</span>")
                    .arg(QLatin1String(name), QString::fromStdString(w).toHtmlEscaped());
    note_->setText(note);
    const TimeBreakdown& ta = a.result->time_breakdown_s;
    const TimeBreakdown& tb = b.result->time_breakdown_s;
    const std::pair<const char*, double TimeBreakdown::*> kParts[] = {
        {"compute", &TimeBreakdown::compute}, {"tp", &TimeBreakdown::tp_comm},
        {"cp", &TimeBreakdown::cp_comm},      {"pp", &TimeBreakdown::pp_comm},
        {"dp", &TimeBreakdown::dp_comm},      {"ep", &TimeBreakdown::ep_comm},
        {"bubble", &TimeBreakdown::bubble},   {"optimizer", &TimeBreakdown::optimizer},
        {"exposed comm", &TimeBreakdown::exposed_comm}};
    auto* set_a = new QBarSet(QStringLiteral("A"));
    auto* set_b = new QBarSet(QStringLiteral("B"));
    set_a->setColor(QColor(70, 120, 200));
    set_b->setColor(QColor(240, 150, 30));
    QStringList cats{QStringLiteral("iteration")};
    *set_a << a.result->iteration_time_s;
    *set_b << b.result->iteration_time_s;
    double top = std::max(a.result->iteration_time_s, b.result->iteration_time_s);
    for (const auto& [name, m] : kParts) {
      cats << QLatin1String(name);
      *set_a << ta.*m;
      *set_b << tb.*m;
      top = std::max({top, ta.*m, tb.*m});
    }
    auto* series = new QBarSeries;
    series->append(set_a);
    series->append(set_b);
    chart->addSeries(series);
    auto* ax = new QBarCategoryAxis;
    ax->append(cats);
    auto* ay = new QValueAxis;
    ay->setTitleText(QStringLiteral("seconds per iteration"));
    ay->setRange(0, top > 0 ? top * 1.1 : 1);
    chart->addAxis(ax, Qt::AlignBottom);
    chart->addAxis(ay, Qt::AlignLeft);
    series->attachAxis(ax);
    series->attachAxis(ay);
    chart->setTitle(QStringLiteral("Time breakdown: A = %1 | B = %2").arg(a.label, b.label));
    chart->legend()->setAlignment(Qt::AlignBottom);
  }
  if (most_different_.empty()) {
    most_->setText(QStringLiteral("<b>What differs most:</b> nothing (pick two different runs)."));
  } else {
    QString html = QStringLiteral("<b>What differs most</b> (B against A, largest relative difference first):<br>");
    html += differs_most_text(most_different_).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"));
    most_->setText(html);
  }
  table_->resizeColumnsToContents();
  QChart* old = chart_view_->chart();
  chart_view_->setChart(chart);
  delete old;
}

}  // namespace monarch::gui
