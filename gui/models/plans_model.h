// Table models over finished search results: ranked plans (PlansModel, with a filtering and
// sorting proxy) and rejected plans with their reasons (RejectedModel). Both hold copies of
// the values a backend computed; they compute nothing themselves.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <vector>

#include "core/result.h"

namespace monarch::gui {

// Every model in this folder answers this role with the raw value (double, qint64, QString,
// bool) so that sorting is numeric rather than by the formatted text.
inline constexpr int kSortRole = Qt::UserRole + 1;

class PlansModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kRank, kTp, kPp, kDp, kCp, kEp, kVpp, kMicroBatch, kSchedule, kSequenceParallel,
    kRecompute, kZero, kIterationTime, kTokensPerS, kMfu, kPeakMemory, kFits, kBackend,
    kWarnings,  // why a valid plan is unwise (TP across nodes, a tiny micro-batch); empty when none
    kColumnCount
  };

  explicit PlansModel(QObject* parent = nullptr);

  // Results ranked best first (the order the search returned); rank = position + 1.
  void set_results(std::vector<BackendResult> results);
  const std::vector<BackendResult>& results() const { return results_; }
  const BackendResult& result(int row) const { return results_.at(static_cast<size_t>(row)); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<BackendResult> results_;
};

// Sorts PlansModel by raw values and filters it: "fits only" and a case-insensitive text that
// must appear in one of the row's cells (e.g. "interleaved", "selective").
class PlansFilterModel : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit PlansFilterModel(QObject* parent = nullptr);
  void set_fits_only(bool on);
  bool fits_only() const { return fits_only_; }
  void set_text(const QString& text);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  bool fits_only_ = false;
  QString text_;
};

class RejectedModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kTp, kPp, kDp, kCp, kEp, kVpp, kMicroBatch, kSchedule, kRecompute, kZero, kReason, kColumnCount };

  explicit RejectedModel(QObject* parent = nullptr);
  void set_rejected(std::vector<RejectedPlan> rejected);
  const RejectedPlan& rejected(int row) const { return rejected_.at(static_cast<size_t>(row)); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<RejectedPlan> rejected_;
};

}  // namespace monarch::gui
