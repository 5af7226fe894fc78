#include "gui/app/result_views.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QSaveFile>
#include <QToolButton>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLegend>
#include <QLineEdit>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

QTableView* make_table(QWidget* parent, QAbstractItemModel* model, bool sortable) {
  auto* t = new QTableView(parent);
  if (sortable) {
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(model);
    if (!proxy) {
      proxy = new QSortFilterProxyModel(t);
      proxy->setSortRole(kSortRole);
      proxy->setSourceModel(model);
    }
    t->setModel(proxy);
    t->setSortingEnabled(true);
  } else {
    t->setModel(model);
  }
  t->setAlternatingRowColors(true);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->verticalHeader()->setVisible(false);
  t->verticalHeader()->setDefaultSectionSize(22);
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
}

}  // namespace

// ---------------- PlansView ----------------

PlansView::PlansView(QWidget* parent) : QWidget(parent) {
  model_ = new PlansModel(this);
  proxy_ = new PlansFilterModel(this);
  proxy_->setSourceModel(model_);
  rejected_ = new RejectedModel(this);

  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  auto* filter = new QLineEdit(this);
  filter->setPlaceholderText(QStringLiteral("Filter: text in any column (e.g. interleaved, selective)"));
  filter->setClearButtonEnabled(true);
  auto* fits = new QCheckBox(QStringLiteral("Fits in memory only"), this);
  export_button_ = new QToolButton(this);
  export_button_->setText(QStringLiteral("Export as ..."));
  export_button_->setToolTip(QStringLiteral("The selected plan as a torchtitan, Megatron-LM, DeepSpeed or Megatron-Bridge config"));
  export_button_->setPopupMode(QToolButton::InstantPopup);
  auto* export_menu = new QMenu(export_button_);
  for (ConfigFormat f : {ConfigFormat::kTorchtitan, ConfigFormat::kMegatron, ConfigFormat::kDeepspeed,
                         ConfigFormat::kMegatronBridge}) {
    QAction* a = export_menu->addAction(QString::fromLatin1(to_string(f)));
    connect(a, &QAction::triggered, this, [this, f] { ask_and_export(f); });
  }
  export_button_->setMenu(export_menu);
  export_button_->setEnabled(false);
  bar->addWidget(filter, 1);
  bar->addWidget(fits);
  bar->addWidget(export_button_);
  layout->addLayout(bar);
  summary_ = new QLabel(QStringLiteral("No search yet: open a scenario and press Search."), this);
  layout->addWidget(summary_);

  tabs_ = new QTabWidget(this);
  table_ = make_table(this, proxy_, true);
  rejected_table_ = make_table(this, rejected_, true);
  rejected_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  rejected_table_->horizontalHeader()->setStretchLastSection(true);
  tabs_->addTab(table_, QStringLiteral("Ranked plans"));
  tabs_->addTab(rejected_table_, QStringLiteral("Rejected"));
  layout->addWidget(tabs_, 1);

  connect(filter, &QLineEdit::textChanged, proxy_, &PlansFilterModel::set_text);
  connect(fits, &QCheckBox::toggled, proxy_, &PlansFilterModel::set_fits_only);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            update_export_button();
            if (!current.isValid()) return;
            emit plan_selected(proxy_->mapToSource(current).row());
          });
}

void PlansView::set_scenario(std::optional<Scenario> scenario) {
  scenario_ = std::move(scenario);
  update_export_button();
}

void PlansView::update_export_button() { export_button_->setEnabled(scenario_ && selected_row() >= 0); }

Expected<ExportedConfig> PlansView::export_selected(ConfigFormat format) const {
  const int row = selected_row();
  if (!scenario_ || row < 0) return Expected<ExportedConfig>::fail("", "no plan selected");
  return export_plan(*scenario_, model_->result(row).plan, format);
}

QString PlansView::save_export(ConfigFormat format, const QString& path) const {
  auto out = export_selected(format);
  if (!out) {
    QString text;
    for (const Problem& p : out.problems()) text += QString::fromStdString(p.message) + QLatin1Char('\n');
    return QStringLiteral("The plan cannot be expressed for %1:\n%2").arg(QString::fromLatin1(to_string(format)), text.trimmed());
  }
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return QStringLiteral("%1 cannot be written: %2").arg(path, file.errorString());
  file.write(QByteArray::fromStdString(out->text));
  if (!file.commit()) return QStringLiteral("%1 cannot be written: %2").arg(path, file.errorString());
  return {};
}

void PlansView::ask_and_export(ConfigFormat format) {
  const bool toml = format == ConfigFormat::kTorchtitan;
  const QString path = QFileDialog::getSaveFileName(
      this, QStringLiteral("Export the selected plan as %1").arg(QString::fromLatin1(to_string(format))),
      QStringLiteral("plan_%1%2").arg(QString::fromLatin1(to_string(format)), toml ? QStringLiteral(".toml") : QStringLiteral(".sh")),
      toml ? QStringLiteral("TOML (*.toml)") : QStringLiteral("Scripts (*.sh);;All files (*)"));
  if (path.isEmpty()) return;
  const QString error = save_export(format, path);
  if (!error.isEmpty()) QMessageBox::warning(this, QStringLiteral("Export"), error);
}

void PlansView::set_search(std::vector<BackendResult> ranked, std::vector<RejectedPlan> rejected) {
  const size_t n = ranked.size();
  const size_t nr = rejected.size();
  model_->set_results(std::move(ranked));
  rejected_->set_rejected(std::move(rejected));
  table_->sortByColumn(PlansModel::kRank, Qt::AscendingOrder);
  table_->resizeColumnsToContents();
  tabs_->setTabText(0, QStringLiteral("Ranked plans (%1)").arg(n));
  tabs_->setTabText(1, QStringLiteral("Rejected (%1)").arg(nr));
  summary_->setText(QStringLiteral("%1 ranked plans, %2 rejected. Click a column to sort; select a "
                                   "plan to see its memory, communication and timeline.")
                        .arg(n)
                        .arg(nr));
}

int PlansView::selected_row() const {
  const QModelIndex cur = table_->selectionModel()->currentIndex();
  return cur.isValid() ? proxy_->mapToSource(cur).row() : -1;
}

void PlansView::select_row(int model_row) {
  const QModelIndex src = model_->index(model_row, 0);
  const QModelIndex idx = proxy_->mapFromSource(src);
  if (!idx.isValid()) return;
  table_->selectionModel()->setCurrentIndex(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

// ---------------- MemoryView ----------------

MemoryView::MemoryView(QWidget* parent) : QWidget(parent) {
  model_ = new MemoryModel(this);
  auto* layout = new QVBoxLayout(this);
  auto* split = new QSplitter(Qt::Vertical, this);
  chart_view_ = new QChartView(split);
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setMinimumHeight(260);
  auto* chart = new QChart;
  chart->setTitle(QStringLiteral("No result yet"));
  chart_view_->setChart(chart);
  timeline_view_ = new QChartView(split);
  timeline_view_->setRenderHint(QPainter::Antialiasing);
  timeline_view_->setMinimumHeight(280);
  timeline_view_->setChart(new QChart);
  table_ = make_table(split, model_, false);
  split->addWidget(chart_view_);
  split->addWidget(timeline_view_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 1);
  layout->addWidget(split);
  clear_memory_timeline(QStringLiteral("No memory timeline yet: simulate a plan with SimGrid."));
}

void MemoryView::clear_memory_timeline(const QString& why) {
  curves_.clear();
  auto* chart = new QChart;
  chart->setTitle(why);
  QChart* old = timeline_view_->chart();
  timeline_view_->setChart(chart);
  delete old;
}

void MemoryView::show_memory_timeline(const BackendResult& r, const QString& title) {
  curves_ = memory_curves(r.memory_timeline, r.plan);
  if (curves_.empty()) {
    clear_memory_timeline(QStringLiteral("%1: no memory timeline (the analytical model predicts the peak only; "
                                         "SimGrid records one).").arg(title));
    return;
  }
  static const QColor kStageColours[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),
                                         QColor(148, 103, 189), QColor(140, 86, 75),  QColor(227, 119, 194),
                                         QColor(127, 127, 127), QColor(23, 190, 207)};
  auto* chart = new QChart;
  auto* ax = new QValueAxis;
  ax->setTitleText(QStringLiteral("time in the iteration (ms)"));
  auto* ay = new QValueAxis;
  ay->setTitleText(QStringLiteral("allocated GiB"));
  double t_max = 0, top = r.memory.capacity_gib;
  for (const MemoryCurve& c : curves_) {
    if (!c.steps.empty()) t_max = std::max(t_max, c.steps.back().first);
    top = std::max(top, c.peak_gib);
  }
  t_max = std::max(t_max, r.iteration_time_s);
  ax->setRange(0, t_max > 0 ? t_max * 1e3 : 1);
  ay->setRange(0, top * 1.1 + 1e-9);
  chart->addAxis(ax, Qt::AlignBottom);
  chart->addAxis(ay, Qt::AlignLeft);
  auto add = [&](QXYSeries* s) {
    chart->addSeries(s);
    s->attachAxis(ax);
    s->attachAxis(ay);
  };
  auto* peaks = new QScatterSeries;
  peaks->setName(QStringLiteral("peak"));
  peaks->setMarkerSize(11);
  peaks->setColor(QColor(200, 30, 30));
  peaks->setPointLabelsVisible(true);
  peaks->setPointLabelsFormat(QStringLiteral("@yPoint GiB"));
  peaks->setPointLabelsClipping(false);
  size_t k = 0;
  for (const MemoryCurve& c : curves_) {
    auto* line = new QLineSeries;
    line->setName(QStringLiteral("stage %1 (rank %2)").arg(c.stage).arg(c.rank));
    line->setPen(QPen(kStageColours[k++ % std::size(kStageColours)], 2));
    QList<QPointF> pts;
    pts.reserve(static_cast<qsizetype>(c.steps.size()));
    for (const auto& [t, gib] : c.steps) pts.append(QPointF(t * 1e3, gib));
    line->replace(pts);
    add(line);
    peaks->append(c.peak_time_s * 1e3, std::round(c.peak_gib * 10) / 10);
  }
  add(peaks);
  if (r.memory.capacity_gib > 0) {
    auto* cap = new QLineSeries;
    cap->setName(QStringLiteral("usable %1 GiB").arg(r.memory.capacity_gib, 0, 'f', 1));
    cap->setPen(QPen(QColor(200, 30, 30), 1.5, Qt::DashLine));
    cap->append(0, r.memory.capacity_gib);
    cap->append(t_max * 1e3, r.memory.capacity_gib);
    add(cap);
  }
  const auto highest = std::max_element(curves_.begin(), curves_.end(),
                                        [](const MemoryCurve& a, const MemoryCurve& b) { return a.peak_gib < b.peak_gib; });
  chart->setTitle(QStringLiteral("%1 — memory over the iteration, busiest rank per stage; peak %2 GiB on rank %3 at %4")
                      .arg(title)
                      .arg(highest->peak_gib, 0, 'f', 1)
                      .arg(highest->rank)
                      .arg(format_seconds(highest->peak_time_s)));
  chart->legend()->setAlignment(Qt::AlignBottom);
  QChart* old = timeline_view_->chart();
  timeline_view_->setChart(chart);
  delete old;
}

void MemoryView::show_result(const BackendResult& r, const QString& title) {
  model_->set_report(r.memory);
  table_->resizeColumnsToContents();
  auto* chart = new QChart;
  auto* series = new QStackedBarSeries;
  static const char* const kNames[] = {"weights", "gradients", "optimizer", "activations", "buffers"};
  static const QColor kColors[] = {QColor(70, 120, 200), QColor(110, 170, 230), QColor(240, 160, 50),
                                   QColor(90, 180, 110), QColor(170, 140, 200)};
  QStringList categories;
  double top = r.memory.capacity_gib;
  for (int row = 0; row < model_->rowCount(); ++row) {
    // Uneven pipeline splits show in the labels: "stage 0 (15 layers)".
    const int64_t layers = model_->report().stages.at(static_cast<size_t>(row)).layers;
    categories << (layers > 0 ? QStringLiteral("stage %1 (%2 layers)").arg(model_->gib(row, MemoryModel::kStage)).arg(layers)
                              : QStringLiteral("stage %1").arg(model_->gib(row, MemoryModel::kStage)));
    top = std::max(top, model_->gib(row, MemoryModel::kTotal));
  }
  int k = 0;
  for (MemoryModel::Column c : MemoryModel::kCategories) {
    auto* set = new QBarSet(QLatin1String(kNames[k]));
    set->setColor(kColors[k]);
    for (int row = 0; row < model_->rowCount(); ++row) *set << model_->gib(row, c);
    series->append(set);
    ++k;
  }
  chart->addSeries(series);
  auto* axis_x = new QBarCategoryAxis;
  axis_x->append(categories);
  auto* axis_y = new QValueAxis;
  axis_y->setTitleText(QStringLiteral("GiB per GPU (busiest rank of the stage)"));
  axis_y->setRange(0, top * 1.1 + 1e-9);
  axis_y->applyNiceNumbers();
  chart->addAxis(axis_x, Qt::AlignBottom);
  chart->addAxis(axis_y, Qt::AlignLeft);
  series->attachAxis(axis_x);
  series->attachAxis(axis_y);
  if (r.memory.capacity_gib > 0 && !categories.isEmpty()) {
    auto* cap = new QLineSeries;
    cap->setName(QStringLiteral("GPU capacity %1 GiB").arg(r.memory.capacity_gib, 0, 'f', 1));
    cap->setPen(QPen(QColor(200, 30, 30), 2, Qt::DashLine));
    cap->append(-0.5, r.memory.capacity_gib);
    cap->append(categories.size() - 0.5, r.memory.capacity_gib);
    chart->addSeries(cap);
    cap->attachAxis(axis_x);
    cap->attachAxis(axis_y);
  }
  chart->setTitle(QStringLiteral("%1 — peak %2 GiB of %3 GiB usable: %4")
                      .arg(title)
                      .arg(r.memory.peak_gib, 0, 'f', 1)
                      .arg(r.memory.capacity_gib, 0, 'f', 1)
                      .arg(r.memory.fits ? QStringLiteral("fits") : QStringLiteral("does NOT fit")));
  chart->legend()->setAlignment(Qt::AlignBottom);
  QChart* old = chart_view_->chart();
  chart_view_->setChart(chart);
  delete old;
}

// ---------------- CommunicationView ----------------

CommunicationView::CommunicationView(QWidget* parent) : QWidget(parent) {
  model_ = new CommunicationModel(this);
  auto* layout = new QVBoxLayout(this);
  title_ = new QLabel(QStringLiteral("No result yet."), this);
  title_->setWordWrap(true);
  layout->addWidget(title_);
  auto* split = new QSplitter(Qt::Vertical, this);
  table_ = make_table(split, model_, true);
  chart_view_ = new QChartView(split);
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setChart(new QChart);
  split->addWidget(table_);
  split->addWidget(chart_view_);
  layout->addWidget(split, 1);
}

void CommunicationView::show_result(const BackendResult& r, const QString& title) {
  model_->set_result(r);
  table_->resizeColumnsToContents();
  title_->setText(QStringLiteral("%1 — per iteration and rank. algbw = bytes / time; busbw = algbw x "
                                 "2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter "
                                 "and all-to-all, 1 for send-recv (nccl-tests).")
                      .arg(title));
  auto* chart = new QChart;
  auto* series = new QHorizontalBarSeries;
  auto* set = new QBarSet(QStringLiteral("time per iteration (ms)"));
  set->setColor(QColor(240, 150, 30));
  QStringList categories;
  double top = 0;
  for (const CommRow& row : model_->rows()) {
    categories << QString::fromStdString(std::string(to_string(row.entry.kind)) + " " + group_name(row.entry));
    *set << row.entry.time_s * 1e3;
    top = std::max(top, row.entry.time_s * 1e3);
  }
  series->append(set);
  chart->addSeries(series);
  auto* axis_y = new QBarCategoryAxis;
  axis_y->append(categories);
  auto* axis_x = new QValueAxis;
  axis_x->setTitleText(QStringLiteral("ms per iteration"));
  axis_x->setRange(0, top > 0 ? top * 1.1 : 1);
  chart->addAxis(axis_y, Qt::AlignLeft);
  chart->addAxis(axis_x, Qt::AlignBottom);
  series->attachAxis(axis_y);
  series->attachAxis(axis_x);
  chart->legend()->setVisible(false);
  chart->setTitle(categories.isEmpty() ? QStringLiteral("No communication") : QStringLiteral("Communication time"));
  QChart* old = chart_view_->chart();
  chart_view_->setChart(chart);
  delete old;
}

}  // namespace monarch::gui
