// Memory per pipeline stage and category (weights, gradients, optimizer, activations,
// buffers, total) of one result, in GiB, plus the GPU's usable capacity.
#pragma once

#include <QAbstractTableModel>

#include <utility>
#include <vector>

#include "core/result.h"

namespace monarch::gui {

// The memory timeline of a simulation, per pipeline stage: the allocated memory over the
// iteration of the stage's rank with the highest peak, as steps (each sample holds until the
// next), and where that peak is.
struct MemoryCurve {
  int64_t stage = 0;
  int32_t rank = 0;
  std::vector<std::pair<double, double>> steps;  // (time s, GiB), two points per change
  double peak_gib = 0;
  double peak_time_s = 0;
};
// One curve per stage holding samples, by stage; ranks outside the plan are ignored.
std::vector<MemoryCurve> memory_curves(const std::vector<MemorySample>& samples, const Plan& plan);

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
