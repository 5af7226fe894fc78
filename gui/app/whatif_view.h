// What-if: change the inter-node bandwidth, the GPU count or the micro-batch size of the
// selected plan and see the analytical model's answer at once, next to the baseline.
#pragma once

#include <QWidget>
#include <functional>
#include <optional>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "gui/models/compare_model.h"

class QDoubleSpinBox;
class QLabel;
class QSlider;
class QSpinBox;
class QTableView;

namespace monarch::gui {

// Evaluates one plan of one scenario (the analytical model); problems for invalid inputs.
using Estimator = std::function<Expected<BackendResult>(const Scenario&, const Plan&)>;

class WhatIfView : public QWidget {
  Q_OBJECT
 public:
  explicit WhatIfView(Estimator estimator, QWidget* parent = nullptr);
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

 signals:
  void result_changed(const monarch::BackendResult& result);

 private:
  // Runs the estimator on the what-if inputs; emits result_changed when `announce`.
  void recompute(bool announce = true);

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
};

}  // namespace monarch::gui
