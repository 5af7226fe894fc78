#include "gui/app/result_views.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLegend>
#include <QLineEdit>
#include <QLineSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

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
  bar->addWidget(filter, 1);
  bar->addWidget(fits);
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
            if (!current.isValid()) return;
            emit plan_selected(proxy_->mapToSource(current).row());
          });
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
  table_ = make_table(split, model_, false);
  split->addWidget(chart_view_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  layout->addWidget(split);
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
    categories << QString::fromStdString(row.entry.kind + " " + row.entry.group);
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
