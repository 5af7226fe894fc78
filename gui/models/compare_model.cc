#include "gui/models/compare_model.h"

#include <QBrush>
#include <QColor>
#include <QStringList>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "gui/models/plans_model.h"  // kSortRole

namespace monarch::gui {

std::optional<double> CompareRow::percent() const {
  if (!a || !b) return std::nullopt;
  if (*a == 0) {
    if (*b == 0) return 0.0;
    return std::nullopt;
  }
  return (*b - *a) / (*a < 0 ? -*a : *a) * 100.0;
}

std::vector<CompareRow> compare_rows(const BackendResult& a, const BackendResult& b) {
  std::vector<CompareRow> rows;
  auto add = [&rows](const char* section, QString metric, std::optional<double> va, std::optional<double> vb) {
    rows.push_back(CompareRow{QString::fromLatin1(section), std::move(metric), va, vb});
  };
  const char* kThroughput = "Throughput";
  add(kThroughput, QStringLiteral("iteration time (s)"), a.iteration_time_s, b.iteration_time_s);
  add(kThroughput, QStringLiteral("tokens/s"), a.tokens_per_s, b.tokens_per_s);
  add(kThroughput, QStringLiteral("MFU (%)"), a.mfu * 100, b.mfu * 100);
  add(kThroughput, QStringLiteral("HFU (%)"), a.hfu * 100, b.hfu * 100);
  add(kThroughput, QStringLiteral("model TFLOP/s per GPU"), a.model_tflops_per_gpu, b.model_tflops_per_gpu);

  const char* kTime = "Time breakdown";
  const TimeBreakdown& ta = a.time_breakdown_s;
  const TimeBreakdown& tb = b.time_breakdown_s;
  const std::pair<const char*, double TimeBreakdown::*> kParts[] = {
      {"compute", &TimeBreakdown::compute},         {"tp comm", &TimeBreakdown::tp_comm},
      {"cp comm", &TimeBreakdown::cp_comm},         {"pp comm", &TimeBreakdown::pp_comm},
      {"dp comm", &TimeBreakdown::dp_comm},         {"ep comm", &TimeBreakdown::ep_comm},
      {"pipeline bubble", &TimeBreakdown::bubble},  {"optimizer", &TimeBreakdown::optimizer},
      {"exposed comm", &TimeBreakdown::exposed_comm}, {"host floor", &TimeBreakdown::host}};
  for (const auto& [name, member] : kParts)
    add(kTime, QStringLiteral("%1 (s)").arg(QLatin1String(name)), ta.*member, tb.*member);

  const char* kMemory = "Memory";
  add(kMemory, QStringLiteral("peak (GiB)"), a.memory.peak_gib, b.memory.peak_gib);
  std::map<int64_t, std::pair<std::optional<double>, std::optional<double>>> stages;
  for (const StageMemory& s : a.memory.stages) stages[s.stage].first = s.total_gib;
  for (const StageMemory& s : b.memory.stages) stages[s.stage].second = s.total_gib;
  for (const auto& [stage, v] : stages)
    add(kMemory, QStringLiteral("stage %1 total (GiB)").arg(stage), v.first, v.second);

  const char* kComm = "Communication";
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::pair<std::optional<double>, std::optional<double>>> times, bytes;
  auto key = [](const CommEntry& e) { return Key{to_string(e.kind), group_name(e)}; };
  for (const CommEntry& e : a.communication) {
    times[key(e)].first = e.time_s;
    bytes[key(e)].first = static_cast<double>(e.bytes);
  }
  for (const CommEntry& e : b.communication) {
    times[key(e)].second = e.time_s;
    bytes[key(e)].second = static_cast<double>(e.bytes);
  }
  for (const auto& [key, v] : times) {
    const QString name = QString::fromStdString(key.first + " " + key.second);
    add(kComm, name + QStringLiteral(" time (s)"), v.first, v.second);
    const auto& bv = bytes[key];
    add(kComm, name + QStringLiteral(" bytes"), bv.first, bv.second);
  }
  return rows;
}

std::vector<CompareRow> differs_most(const std::vector<CompareRow>& rows, size_t count) {
  std::vector<std::pair<double, const CompareRow*>> scored;
  for (const CompareRow& r : rows) {
    if (!r.a || !r.b || *r.a == *r.b) continue;
    const std::optional<double> pct = r.percent();
    scored.emplace_back(pct ? std::abs(*pct) : std::numeric_limits<double>::infinity(), &r);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<CompareRow> out;
  for (size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(*scored[i].second);
  return out;
}

namespace {
QString number(double v);
}  // namespace

QString differs_most_text(const std::vector<CompareRow>& rows) {
  QStringList lines;
  for (const CompareRow& r : rows) {
    const std::optional<double> pct = r.percent();
    lines << QStringLiteral("%1: %2 -> %3 (%4)")
                 .arg(r.metric, number(*r.a), number(*r.b),
                      pct ? QString::asprintf("%+.1f%%", *pct) : QStringLiteral("was 0"));
  }
  return lines.join(QLatin1Char('\n'));
}

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::set_results(const BackendResult& a, QString label_a, const BackendResult& b, QString label_b) {
  beginResetModel();
  rows_ = compare_rows(a, b);
  label_a_ = std::move(label_a);
  label_b_ = std::move(label_b);
  endResetModel();
  emit headerDataChanged(Qt::Horizontal, kA, kB);
}

void CompareModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

namespace {
QString number(double v) {
  const double a = v < 0 ? -v : v;
  if (a != 0 && (a < 1e-3 || a >= 1e7)) return QString::number(v, 'g', 4);
  return QString::number(v, 'f', a >= 100 ? 1 : 4);
}
}  // namespace

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const CompareRow& r = rows_[static_cast<size_t>(index.row())];
  const int col = index.column();
  std::optional<double> diff;
  if (r.a && r.b) diff = *r.b - *r.a;
  const std::optional<double> pct = r.percent();
  if (role == kSortRole) {
    switch (col) {
      case kSection: return r.section;
      case kMetric: return r.metric;
      case kA: return r.a ? QVariant(*r.a) : QVariant();
      case kB: return r.b ? QVariant(*r.b) : QVariant();
      case kDifference: return diff ? QVariant(*diff) : QVariant();
      case kPercent: return pct ? QVariant(*pct) : QVariant();
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (col) {
      case kSection: return r.section;
      case kMetric: return r.metric;
      case kA: return r.a ? number(*r.a) : QStringLiteral("—");
      case kB: return r.b ? number(*r.b) : QStringLiteral("—");
      case kDifference: return diff ? number(*diff) : QStringLiteral("—");
      case kPercent:
        return pct ? QString::asprintf("%+.1f%%", *pct) : QStringLiteral("—");
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    if (col == kSection || col == kMetric) return int(Qt::AlignLeft | Qt::AlignVCenter);
    return int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ForegroundRole && col == kPercent && pct && (*pct > 5 || *pct < -5))
    return QBrush(QColor(20, 90, 200));
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case kSection: return QStringLiteral("Section");
    case kMetric: return QStringLiteral("Metric");
    case kA: return label_a_;
    case kB: return label_b_;
    case kDifference: return QStringLiteral("B - A");
    case kPercent: return QStringLiteral("(B - A) / A");
  }
  return {};
}

}  // namespace monarch::gui
