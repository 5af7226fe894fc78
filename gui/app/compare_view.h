// Two runs side by side: pick A and B from the runs on offer (the store's runs and this
// session's results), see the time breakdown as bars and every metric with its difference.
#pragma once

#include <QWidget>
#include <vector>

#include "core/result.h"
#include "gui/models/compare_model.h"

class QComboBox;
class QChartView;
class QLabel;
class QTableView;

namespace monarch::gui {

struct RunChoice {
  QString label;  // "store #12 simgrid tp=8 pp=4 ..." or "this session: #1 analytical ..."
  BackendResult result;
};

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);
  // Replaces the runs on offer; keeps the chosen ones when their labels are still there.
  void set_runs(std::vector<RunChoice> runs);
  void choose(int a, int b);
  CompareModel* model() const { return model_; }
  int run_count() const { return static_cast<int>(runs_.size()); }

 private:
  void refresh();

  std::vector<RunChoice> runs_;
  CompareModel* model_;
  QComboBox* a_;
  QComboBox* b_;
  QTableView* table_;
  QChartView* chart_view_;
  QLabel* note_;
};

}  // namespace monarch::gui
