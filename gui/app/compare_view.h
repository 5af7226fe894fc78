// Two runs side by side: pick A and B from the runs on offer (the store's runs and this
// session's results), see the time breakdown as bars and every metric with its difference.
#pragma once

#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

#include "core/problem.h"

#include "core/result.h"
#include "gui/models/compare_model.h"

class QComboBox;
class QChartView;
class QLabel;
class QPushButton;
class QTableView;

namespace monarch::gui {

struct RunChoice {
  QString label;  // "store #12 simgrid tp=8 pp=4 ..." or "plan #1 analytical ..."
  std::optional<BackendResult> result;  // absent until loaded (store runs load on demand)
  int64_t store_id = -1;                // >= 0: a run of the results store
};

// Loads a store run by id (the store's problems when it cannot).
using RunLoader = std::function<Expected<BackendResult>(int64_t id)>;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);
  void set_loader(RunLoader loader) { loader_ = std::move(loader); }
  // Replaces the runs on offer; keeps the chosen ones when their labels are still there.
  void set_runs(std::vector<RunChoice> runs);
  void choose(int a, int b);
  CompareModel* model() const { return model_; }
  // The "what differs most" lines at the top (empty when nothing is compared).
  const std::vector<CompareRow>& most_different() const { return most_different_; }
  // Position of the run with this label among those on offer, -1 when absent.
  int find_run(const QString& label) const;
  int run_count() const { return static_cast<int>(runs_.size()); }
  // Asks for the timeline of run A (which = 0) or B (1): emits timeline_requested when that run
  // recorded one (simgrid and real runs do; analytical ones have none). False when it has none.
  bool open_timeline(int which);
  // Whether run A (0) or B (1) has a timeline to open.
  bool has_timeline(int which) const;

 signals:
  void timeline_requested(const BackendResult& result, const QString& title);

 private:
  void refresh();
  // Loads runs_[i] when needed; false (with the reason in `why`) when it cannot.
  bool ensure_loaded(int i, QString* why);

  std::vector<RunChoice> runs_;
  RunLoader loader_;
  CompareModel* model_;
  QComboBox* a_;
  QComboBox* b_;
  QTableView* table_;
  QChartView* chart_view_;
  QLabel* note_;
  QLabel* most_;
  std::vector<CompareRow> most_different_;
  QPushButton* timeline_a_;
  QPushButton* timeline_b_;
};

}  // namespace monarch::gui
