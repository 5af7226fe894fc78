// The plan space of a search: a scatter of every estimated plan (peak memory per GPU against
// iteration time or tokens/s) with the GPU's capacity line, the Pareto front, the fitting plans
// coloured by a chosen dimension and the rejected ones faint (their reason in the tooltip); and
// a grid over two chosen dimensions coloured by the best iteration time of each cell. Clicking
// a point or a cell chooses that plan; the window then selects it in every view.
#pragma once

#include <QWidget>
#include <optional>
#include <vector>

#include "gui/models/plan_space.h"

class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QScatterSeries;

namespace monarch::gui {

class PlanSpaceView : public QWidget {
  Q_OBJECT
 public:
  // Markers closer than this many pixels (same colour class) are drawn as one: the fastest.
  static constexpr double kMarkerCellPx = 3.0;

  explicit PlanSpaceView(QWidget* parent = nullptr);
  // Every estimated plan of a search, the GPU's usable memory and a line on where they come from.
  void set_points(std::vector<PlanPoint> points, double capacity_gib, const QString& note);
  void clear(const QString& why);
  // Marks the plan (when it is one of the points) without emitting plan_chosen.
  void set_selected(const Plan& plan);

  void set_colour_by(PlanDimension d);
  void set_metric(SpeedMetric m);
  void set_grid_dimensions(PlanDimension x, PlanDimension y);

  const std::vector<PlanPoint>& points() const { return points_; }
  const PlanSpaceGeometry& geometry() const { return geometry_; }
  const PlanGrid& grid() const { return grid_; }
  std::optional<size_t> selected() const { return selected_; }
  QChartView* scatter_view() const { return scatter_view_; }
  QChartView* grid_view() const { return grid_view_; }
  // Markers in the scatter's series after thinning (rejected included).
  int64_t markers_drawn() const { return markers_drawn_; }
  // Chooses the plan drawn nearest to a point in chart values (memory GiB, speed); false when
  // none is within a few pixels. Emits plan_chosen.
  bool choose_at(double memory_gib, double speed);
  // Chooses the fastest fitting plan of grid cell (x, y) (positions in grid().x_values / y_values).
  bool choose_cell(int x, int y);

 protected:
  // A left click on the scatter chooses the plan drawn nearest to it (wherever the click lands:
  // on a marker, on the Pareto front's line or on the selection ring).
  bool eventFilter(QObject* watched, QEvent* event) override;

 signals:
  void plan_chosen(const monarch::Plan& plan);

 private:
  void rebuild_scatter();
  void rebuild_grid();
  void mark_selected();
  PlotFrame frame() const;
  QString tooltip_of(size_t i) const;
  void choose(size_t i);

  std::vector<PlanPoint> points_;
  double capacity_gib_ = 0;
  PlanDimension colour_by_ = PlanDimension::kTp;
  SpeedMetric metric_ = SpeedMetric::kIterationTime;
  PlanDimension grid_x_ = PlanDimension::kTp, grid_y_ = PlanDimension::kPp;
  PlanSpaceGeometry geometry_;
  PlanGrid grid_;
  std::optional<size_t> selected_;
  int64_t markers_drawn_ = 0;

  QComboBox* colour_box_;
  QComboBox* metric_box_;
  QComboBox* grid_x_box_;
  QComboBox* grid_y_box_;
  QLabel* summary_;
  QLabel* grid_summary_;
  QChartView* scatter_view_;
  QChartView* grid_view_;
  QScatterSeries* selected_series_ = nullptr;
};

}  // namespace monarch::gui
