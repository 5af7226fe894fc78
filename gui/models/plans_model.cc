#include "gui/models/plans_model.h"

#include <QBrush>
#include <QColor>
#include <QStringList>

#include "gui/models/format.h"

namespace monarch::gui {
namespace {

QString yes_no(bool b) { return b ? QStringLiteral("yes") : QStringLiteral("no"); }

QString joined(const std::vector<std::string>& texts, const QString& separator) {
  QStringList parts;
  for (const std::string& t : texts) parts << QString::fromStdString(t);
  return parts.join(separator);
}

}  // namespace

// ---- PlansModel ----

PlansModel::PlansModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlansModel::set_results(std::vector<BackendResult> results) {
  beginResetModel();
  results_ = std::move(results);
  endResetModel();
}

int PlansModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(results_.size());
}

int PlansModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant PlansModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const BackendResult& r = results_[static_cast<size_t>(index.row())];
  const Plan& p = r.plan;
  const int col = index.column();
  if (role == kSortRole) {
    switch (col) {
      case kRank: return index.row() + 1;
      case kTp: return qint64(p.tp);
      case kPp: return qint64(p.pp);
      case kDp: return qint64(p.dp);
      case kCp: return qint64(p.cp);
      case kEp: return qint64(p.ep);
      case kVpp: return qint64(p.vpp);
      case kMicroBatch: return qint64(p.micro_batch_size);
      case kSchedule: return QString::fromLatin1(to_string(p.schedule));
      case kSequenceParallel: return p.sequence_parallel;
      case kRecompute: return static_cast<int>(p.recompute);
      case kZero: return qint64(p.zero_stage);
      case kIterationTime: return r.iteration_time_s;
      case kTokensPerS: return r.tokens_per_s;
      case kMfu: return r.mfu;
      case kPeakMemory: return r.memory.peak_gib;
      case kFits: return r.memory.fits;
      case kBackend: return QString::fromStdString(r.backend);
      case kWarnings: return joined(r.warnings, QStringLiteral("; "));
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (col) {
      case kSchedule:
      case kBackend:
      case kWarnings: return data(index, kSortRole);
      case kSequenceParallel: return yes_no(p.sequence_parallel);
      case kRecompute: return activations_text(p);
      case kFits: return yes_no(r.memory.fits);
      case kIterationTime: return format_seconds(r.iteration_time_s);
      case kTokensPerS: return QString::number(r.tokens_per_s, 'f', 0);
      case kMfu: return QString::number(r.mfu * 100, 'f', 1) + QLatin1Char('%');
      case kPeakMemory: return QString::number(r.memory.peak_gib, 'f', 1) + QStringLiteral(" GiB");
      default: return data(index, kSortRole);
    }
  }
  if (role == Qt::TextAlignmentRole) {
    if (col == kSchedule || col == kRecompute || col == kBackend || col == kWarnings)
      return int(Qt::AlignLeft | Qt::AlignVCenter);
    return int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ForegroundRole && !r.memory.fits) return QBrush(QColor(180, 30, 30));
  if (role == Qt::ToolTipRole) {
    QString tip = plan_summary(p);
    if (col == kPeakMemory || col == kFits)
      tip += QStringLiteral("\npeak %1 GiB of %2 GiB usable")
                 .arg(r.memory.peak_gib, 0, 'f', 1)
                 .arg(r.memory.capacity_gib, 0, 'f', 1);
    if (!r.warnings.empty()) tip += QStringLiteral("\nwarning: ") + joined(r.warnings, QStringLiteral("\nwarning: "));
    return tip;
  }
  return {};
}

QVariant PlansModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* const kNames[kColumnCount] = {
      "Rank", "TP", "PP", "DP", "CP", "EP", "VPP", "MBS", "Schedule", "SP", "Recompute",
      "ZeRO", "Iteration", "Tokens/s", "MFU", "Peak mem", "Fits", "Backend", "Warnings"};
  if (section < 0 || section >= kColumnCount) return {};
  return QString::fromLatin1(kNames[section]);
}

// ---- PlansFilterModel ----

PlansFilterModel::PlansFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(kSortRole);
}

void PlansFilterModel::set_fits_only(bool on) {
  if (on == fits_only_) return;
  fits_only_ = on;
  invalidateFilter();
}

void PlansFilterModel::set_text(const QString& text) {
  const QString t = text.trimmed();
  if (t == text_) return;
  text_ = t;
  invalidateFilter();
}

bool PlansFilterModel::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  const QAbstractItemModel* m = sourceModel();
  if (fits_only_) {
    const QVariant fits = m->data(m->index(source_row, PlansModel::kFits, source_parent), kSortRole);
    if (!fits.toBool()) return false;
  }
  if (text_.isEmpty()) return true;
  for (int c = 0; c < m->columnCount(source_parent); ++c) {
    const QString cell = m->data(m->index(source_row, c, source_parent), Qt::DisplayRole).toString();
    if (cell.contains(text_, Qt::CaseInsensitive)) return true;
  }
  return false;
}

// ---- RejectedModel ----

RejectedModel::RejectedModel(QObject* parent) : QAbstractTableModel(parent) {}

void RejectedModel::set_rejected(std::vector<RejectedPlan> rejected) {
  beginResetModel();
  rejected_ = std::move(rejected);
  endResetModel();
}

int RejectedModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rejected_.size());
}

int RejectedModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant RejectedModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RejectedPlan& r = rejected_[static_cast<size_t>(index.row())];
  const Plan& p = r.plan;
  if (role == kSortRole || role == Qt::DisplayRole) {
    switch (index.column()) {
      case kTp: return qint64(p.tp);
      case kPp: return qint64(p.pp);
      case kDp: return qint64(p.dp);
      case kCp: return qint64(p.cp);
      case kEp: return qint64(p.ep);
      case kVpp: return qint64(p.vpp);
      case kMicroBatch: return qint64(p.micro_batch_size);
      case kSchedule: return QString::fromLatin1(to_string(p.schedule));
      case kRecompute: return activations_text(p);
      case kZero: return qint64(p.zero_stage);
      case kReason: return QString::fromStdString(r.reason);
    }
    return {};
  }
  if (role == Qt::ToolTipRole) return plan_summary(p) + QStringLiteral("\n") + QString::fromStdString(r.reason);
  return {};
}

QVariant RejectedModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* const kNames[kColumnCount] = {"TP", "PP", "DP", "CP", "EP", "VPP", "MBS",
                                                   "Schedule", "Recompute", "ZeRO", "Reason"};
  if (section < 0 || section >= kColumnCount) return {};
  return QString::fromLatin1(kNames[section]);
}

}  // namespace monarch::gui
