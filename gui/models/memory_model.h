// Memory per pipeline stage and category (weights, gradients, optimizer, activations,
// buffers, total) of one result, in GiB, plus the GPU's usable capacity.
#pragma once

#include <QAbstractTableModel>

#include "core/result.h"

namespace monarch::gui {

class MemoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kStage, kWeights, kGradients, kOptimizer, kActivations, kBuffers, kTotal, kColumnCount };
  // The stacked categories, bottom to top (everything but kStage and kTotal).
  static constexpr Column kCategories[] = {kWeights, kGradients, kOptimizer, kActivations, kBuffers};

  explicit MemoryModel(QObject* parent = nullptr);
  void set_report(MemoryReport report);
  const MemoryReport& report() const { return report_; }
  double capacity_gib() const { return report_.capacity_gib; }
  double peak_gib() const { return report_.peak_gib; }
  bool fits() const { return report_.fits; }
  // The value of a category column for one stage row, GiB.
  double gib(int row, Column c) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  MemoryReport report_;
};

}  // namespace monarch::gui
