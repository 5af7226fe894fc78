#include "gui/models/memory_model.h"

#include <QBrush>
#include <QColor>

#include <algorithm>
#include <map>

#include "core/placement.h"
#include "gui/models/plans_model.h"  // kSortRole

namespace monarch::gui {

namespace {
constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
}  // namespace

std::vector<MemoryCurve> memory_curves(const std::vector<MemorySample>& samples, const Plan& plan) {
  const int64_t world = plan.world_size();
  std::map<int32_t, std::vector<const MemorySample*>> by_rank;
  for (const MemorySample& m : samples)
    if (m.rank >= 0 && m.rank < world) by_rank[m.rank].push_back(&m);
  std::map<int64_t, MemoryCurve> by_stage;
  for (auto& [rank, list] : by_rank) {
    std::stable_sort(list.begin(), list.end(), [](const MemorySample* a, const MemorySample* b) { return a->time_s < b->time_s; });
    MemoryCurve c;
    c.stage = rank_to_coords(rank, plan).pp;
    c.rank = rank;
    double previous = 0;
    for (const MemorySample* m : list) {
      const double gib = m->allocated_bytes / kBytesPerGib;
      if (!c.steps.empty()) c.steps.emplace_back(m->time_s, previous);
      c.steps.emplace_back(m->time_s, gib);
      previous = gib;
      if (gib > c.peak_gib) {
        c.peak_gib = gib;
        c.peak_time_s = m->time_s;
      }
    }
    auto it = by_stage.find(c.stage);
    if (it == by_stage.end() || c.peak_gib > it->second.peak_gib) by_stage[c.stage] = std::move(c);
  }
  std::vector<MemoryCurve> out;
  for (auto& [stage, c] : by_stage) out.push_back(std::move(c));
  return out;
}

MemoryModel::MemoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void MemoryModel::set_report(MemoryReport report) {
  beginResetModel();
  report_ = std::move(report);
  endResetModel();
}

double MemoryModel::gib(int row, Column c) const {
  const StageMemory& s = report_.stages.at(static_cast<size_t>(row));
  switch (c) {
    case kStage: return static_cast<double>(s.stage);
    case kWeights: return s.weights_gib;
    case kGradients: return s.gradients_gib;
    case kOptimizer: return s.optimizer_gib;
    case kActivations: return s.activations_gib;
    case kBuffers: return s.buffers_gib;
    case kTotal: return s.total_gib;
    case kColumnCount: break;
  }
  return 0;
}

int MemoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(report_.stages.size());
}

int MemoryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant MemoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto col = static_cast<Column>(index.column());
  const double v = gib(index.row(), col);
  if (role == kSortRole) return col == kStage ? QVariant(qint64(v)) : QVariant(v);
  if (role == Qt::DisplayRole) {
    if (col == kStage) return qint64(v);
    return QString::number(v, 'f', 2);
  }
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && col == kStage) {
    const int64_t layers = report_.stages.at(static_cast<size_t>(index.row())).layers;
    if (layers > 0) return QStringLiteral("%1 transformer layers").arg(layers);
  }
  if (role == Qt::ForegroundRole && col == kTotal && report_.capacity_gib > 0 && v > report_.capacity_gib)
    return QBrush(QColor(180, 30, 30));
  if (role == Qt::ToolTipRole && col == kTotal && report_.capacity_gib > 0)
    return QStringLiteral("%1% of %2 GiB usable")
        .arg(v / report_.capacity_gib * 100, 0, 'f', 1)
        .arg(report_.capacity_gib, 0, 'f', 1);
  return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* const kNames[kColumnCount] = {"Stage", "Weights (GiB)", "Gradients (GiB)",
                                                   "Optimizer (GiB)", "Activations (GiB)",
                                                   "Buffers (GiB)", "Total (GiB)"};
  if (section < 0 || section >= kColumnCount) return {};
  return QString::fromLatin1(kNames[section]);
}

}  // namespace monarch::gui
