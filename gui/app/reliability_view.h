// Goodput of the selected plan for a scenario with a reliability block (core/reliability.h):
// goodput against the checkpoint interval with the interval used, the optimum and Daly's
// estimate marked; the badput breakdown (checkpoint save and restore, wasted progress,
// infrastructure recovery, startup); one simulated month with each failure on its component's
// row. Scenarios without the block show why there is nothing to draw.
#pragma once

#include <QWidget>
#include <optional>

#include "gui/models/reliability_picture.h"

class QChartView;
class QLabel;

namespace monarch::gui {

class ReliabilityView : public QWidget {
  Q_OBJECT
 public:
  explicit ReliabilityView(QWidget* parent = nullptr);
  // The plan's goodput under the scenario's reliability block, from its predicted iteration time.
  void show_plan(const Scenario& scenario, const Plan& plan, double iteration_time_s, const QString& title);
  void clear(const QString& why);
  const std::optional<ReliabilityPicture>& picture() const { return picture_; }
  QChartView* curve_view() const { return curve_view_; }
  QChartView* badput_view() const { return badput_view_; }
  QChartView* month_view() const { return month_view_; }

 private:
  void draw_curve();
  void draw_badput();
  void draw_month();

  std::optional<ReliabilityPicture> picture_;
  QLabel* summary_;
  QChartView* curve_view_;
  QChartView* badput_view_;
  QChartView* month_view_;
};

}  // namespace monarch::gui
