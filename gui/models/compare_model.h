// Two results side by side (plan vs plan, or simulation vs real run of one plan): time
// breakdown, throughput, memory per stage and communication per (kind, group), with the
// difference B - A and the relative difference (B - A) / A.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <optional>
#include <vector>

#include "core/result.h"

namespace monarch::gui {

struct CompareRow {
  QString section;  // "Throughput", "Time breakdown", "Memory", "Communication"
  QString metric;   // "iteration time (s)", "stage 0 total (GiB)", "all-reduce tp time (s)"
  std::optional<double> a, b;  // absent when one side lacks the item (e.g. a stage)
  // (b - a) / a in percent; absent when a side is missing or a == 0 with b != 0.
  std::optional<double> percent() const;
};

std::vector<CompareRow> compare_rows(const BackendResult& a, const BackendResult& b);

// The rows that differ most, at most `count`, largest |(B - A) / A| first: rows present on both
// sides with a difference; a row that is 0 in A and not in B (nothing to divide by) comes
// first. Rows equal on both sides are left out.
std::vector<CompareRow> differs_most(const std::vector<CompareRow>& rows, size_t count);
// One line per row: "dp comm (s): 0.12 -> 0.31 (+158.3%)".
QString differs_most_text(const std::vector<CompareRow>& rows);

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kSection, kMetric, kA, kB, kDifference, kPercent, kColumnCount };

  explicit CompareModel(QObject* parent = nullptr);
  void set_results(const BackendResult& a, QString label_a, const BackendResult& b, QString label_b);
  void clear();
  const std::vector<CompareRow>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<CompareRow> rows_;
  QString label_a_ = QStringLiteral("A"), label_b_ = QStringLiteral("B");
};

}  // namespace monarch::gui
