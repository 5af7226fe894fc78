// What-if: change the inter-node bandwidth, the GPU count or the micro-batch size of the
// selected plan and see the analytical model's answer at once, next to the baseline; and
// curves: sweep one knob over a range and draw iteration time, tokens/s, MFU and peak memory
// of the selected plan (analytical, at once), of the best plan a search finds at each value and
// of SimGrid simulations of the selected plan (both on a worker thread, with progress and cancel).
#pragma once

#include <QWidget>
#include <functional>
#include <memory>
#include <optional>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "gui/app/backends.h"
#include "gui/models/compare_model.h"
#include "gui/models/whatif_sweep.h"

class QChartView;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QProgressBar;
class QPushButton;
class QLabel;
class QSlider;
class QSpinBox;
class QTableView;

namespace monarch::gui {

// Evaluates one plan of one scenario (the analytical model); problems for invalid inputs.
using Estimator = std::function<Expected<BackendResult>(const Scenario&, const Plan&)>;
// Runs a sweep (gui/app/backends.h run_sweep); called on a worker thread for searches and SimGrid.
using Sweeper = std::function<std::vector<SweepPoint>(const Scenario&, const Plan&, const SweepRequest&, JobControl&)>;

class WhatIfView : public QWidget {
  Q_OBJECT
 public:
  explicit WhatIfView(Estimator estimator, QWidget* parent = nullptr);
  ~WhatIfView() override;
  // The starting point: a valid scenario, one of its plans and that plan's result.
  void set_baseline(const Scenario& scenario, const BackendResult& baseline);
  bool has_baseline() const { return scenario_.has_value(); }

  // The knobs (also driven by the widgets).
  void set_inter_node_bandwidth_GBps(double v);
  void set_num_gpus(int64_t n);
  void set_micro_batch_size(int64_t n);

  // Emitted when a knob changes the answer (not when a new baseline is set).
  // The last successful what-if result, and the problems of the last attempt (empty when ok).
  const std::optional<BackendResult>& result() const { return result_; }
  const Problems& problems() const { return problems_; }
  double last_eval_ms() const { return last_eval_ms_; }
  CompareModel* model() const { return model_; }

  // Curves. The sweeper computes them (without one, only the selected plan's curves, from the
  // estimator); SimGrid points are offered when `simgrid` is true.
  void set_sweeper(Sweeper sweeper, bool simgrid);
  void set_knob(Knob k);
  Knob knob() const { return knob_; }
  void set_sweep_points(int n);
  // Redraws the selected plan's curves at once (analytical model, UI thread).
  void sweep_selected();
  // Adds the best plan at each value (searches) or SimGrid points, on a worker thread; false
  // when one is already running or there is no sweeper.
  bool start_sweep(bool best, bool simgrid);
  void cancel_sweep();
  bool sweeping() const;
  // Spins the event loop until the worker is done (tests, --screenshot).
  void wait_for_sweep();
  const std::vector<SweepPoint>& curve_points() const { return curve_points_; }
  QChartView* curve_view(CurveMetric m) const;

 signals:
  void result_changed(const monarch::BackendResult& result);

 private:
  // Runs the estimator on the what-if inputs; emits result_changed when `announce`.
  void recompute(bool announce = true);
  void draw_curves();
  QWidget* build_curves_panel();
  struct SweepJob;

  Estimator estimator_;
  std::optional<Scenario> scenario_;  // baseline scenario
  BackendResult baseline_;
  double baseline_bandwidth_GBps_ = 0;
  Scenario whatif_scenario_;
  Plan whatif_plan_;
  std::optional<BackendResult> result_;
  Problems problems_;
  double last_eval_ms_ = 0;
  CompareModel* model_;
  QDoubleSpinBox* bandwidth_;
  QSlider* bandwidth_slider_;
  QSpinBox* gpus_;
  QSpinBox* mbs_;
  QLabel* status_;
  QTableView* table_;

  Sweeper sweeper_;
  bool simgrid_available_ = false;
  Knob knob_ = Knob::kInterNodeBandwidth;
  int sweep_point_count_ = 9;
  std::vector<SweepPoint> curve_points_;
  std::unique_ptr<SweepJob> sweep_job_;
  QComboBox* knob_box_;
  QSpinBox* points_box_;
  QPushButton* best_button_;
  QPushButton* simgrid_button_;
  QPushButton* cancel_button_;
  QProgressBar* sweep_progress_;
  QLabel* curve_status_;
  std::vector<std::pair<CurveMetric, QChartView*>> curve_views_;
};

}  // namespace monarch::gui
