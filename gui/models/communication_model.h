// Communication of one result per (collective kind, group): bytes, operations, time, and the
// nccl-tests bandwidths. algbw = bytes / time; busbw = algbw x collective_bus_factor(kind, n)
// with n the group's size under the result's plan. `bytes` is the NCCL "size" (buffer bytes
// per rank) summed over the iteration's operations, so the ratio bytes/time equals nccl-tests'
// size/time per operation.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "core/result.h"

namespace monarch::gui {

struct CommRow {
  CommEntry entry;
  int64_t group_ranks = 0;     // 0 = unknown group
  double algbw_GBps = 0;       // 1e9 bytes/s; 0 when time is 0
  double busbw_GBps = 0;       // 0 when unknown
};

// The rows of CommunicationModel, computed from a result (exposed for tests and charts).
std::vector<CommRow> communication_rows(const BackendResult& result);

class CommunicationModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kKind, kGroup, kRanks, kCount, kBytes, kTime, kAlgBw, kBusBw, kColumnCount };

  explicit CommunicationModel(QObject* parent = nullptr);
  void set_result(const BackendResult& result);
  const std::vector<CommRow>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<CommRow> rows_;
};

}  // namespace monarch::gui
