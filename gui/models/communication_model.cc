#include "gui/models/communication_model.h"

#include "core/collectives.h"
#include "core/units.h"
#include "gui/models/format.h"
#include "gui/models/plans_model.h"  // kSortRole

namespace monarch::gui {

std::vector<CommRow> communication_rows(const BackendResult& result) {
  std::vector<CommRow> rows;
  rows.reserve(result.communication.size());
  for (const CommEntry& e : result.communication) {
    CommRow row;
    row.entry = e;
    row.group_ranks = comm_group_size(e, result.plan);
    if (e.time_s > 0) {
      row.algbw_GBps = static_cast<double>(e.bytes) / e.time_s / kGB;
      if (row.group_ranks > 0)
        row.busbw_GBps = row.algbw_GBps * collective_bus_factor(e.kind, static_cast<double>(row.group_ranks));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

CommunicationModel::CommunicationModel(QObject* parent) : QAbstractTableModel(parent) {}

void CommunicationModel::set_result(const BackendResult& result) {
  beginResetModel();
  rows_ = communication_rows(result);
  endResetModel();
}

int CommunicationModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CommunicationModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant CommunicationModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const CommRow& r = rows_[static_cast<size_t>(index.row())];
  const int col = index.column();
  const bool busbw_known = r.busbw_GBps > 0;
  if (role == kSortRole) {
    switch (col) {
      case kKind: return QString::fromLatin1(to_string(r.entry.kind));
      case kGroup: return QString::fromStdString(group_name(r.entry));
      case kRanks: return qint64(r.group_ranks);
      case kCount: return qint64(r.entry.count);
      case kBytes: return qint64(r.entry.bytes);
      case kTime: return r.entry.time_s;
      case kAlgBw: return r.algbw_GBps;
      case kBusBw: return r.busbw_GBps;
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (col) {
      case kRanks: return r.group_ranks > 0 ? QVariant(qint64(r.group_ranks)) : QVariant(QStringLiteral("?"));
      case kBytes: return format_bytes(static_cast<double>(r.entry.bytes));
      case kTime: return format_seconds(r.entry.time_s);
      case kAlgBw: return r.entry.time_s > 0 ? QVariant(QString::number(r.algbw_GBps, 'f', 1)) : QVariant(QStringLiteral("—"));
      case kBusBw: return busbw_known ? QVariant(QString::number(r.busbw_GBps, 'f', 1)) : QVariant(QStringLiteral("—"));
      default: return data(index, kSortRole);
    }
  }
  if (role == Qt::TextAlignmentRole) {
    if (col == kKind || col == kGroup) return int(Qt::AlignLeft | Qt::AlignVCenter);
    return int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole && (col == kAlgBw || col == kBusBw))
    return QStringLiteral("algbw = bytes / time; busbw = algbw x %1 (nccl-tests, n = %2)")
        .arg(collective_bus_factor(r.entry.kind, static_cast<double>(r.group_ranks)), 0, 'f', 3)
        .arg(r.group_ranks);
  return {};
}

QVariant CommunicationModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* const kNames[kColumnCount] = {"Kind", "Group", "Ranks", "Ops", "Bytes",
                                                   "Time", "algbw (GB/s)", "busbw (GB/s)"};
  if (section < 0 || section >= kColumnCount) return {};
  return QString::fromLatin1(kNames[section]);
}

}  // namespace monarch::gui
