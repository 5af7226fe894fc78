// The plan-space geometry on hand-made plan sets: the Pareto front, the axis ranges with the
// capacity line, colour classes, thinning of a dense cloud, hit-testing and the grid's cells.
#include <gtest/gtest.h>

#include "gui/models/plan_space.h"

#include <cmath>

namespace monarch::gui {
namespace {

PlanPoint point(int64_t tp, int64_t pp, double time_s, double memory_gib, bool fits = true) {
  PlanPoint p;
  p.plan.tp = tp;
  p.plan.pp = pp;
  p.iteration_time_s = time_s;
  p.tokens_per_s = 1e6 / time_s;
  p.peak_memory_gib = memory_gib;
  p.fits = fits;
  if (!fits) p.reason = "needs more memory than the GPU has";
  return p;
}

// (memory, time): the front is a (10, 9), c (20, 5), e (40, 2); b (15, 9.5), d (30, 6) and f
// (45, 2.5) are beaten, g (5, 1) does not fit.
std::vector<PlanPoint> known_set() {
  return {point(1, 1, 9, 10), point(2, 1, 9.5, 15), point(2, 2, 5, 20), point(4, 1, 6, 30),
          point(4, 2, 2, 40), point(8, 1, 2.5, 45), point(8, 2, 1, 5, /*fits=*/false)};
}

TEST(ParetoFront, KnownPlanSet) {
  const std::vector<PlanPoint> pts = known_set();
  EXPECT_EQ(pareto_front(pts, SpeedMetric::kIterationTime), (std::vector<size_t>{0, 2, 4}));
  // Tokens/s is 1e6 / time: the same plans are best.
  EXPECT_EQ(pareto_front(pts, SpeedMetric::kTokensPerS), (std::vector<size_t>{0, 2, 4}));
  // A tie on memory keeps the faster one only.
  std::vector<PlanPoint> tie = {point(1, 1, 3, 10), point(2, 1, 2, 10)};
  EXPECT_EQ(pareto_front(tie, SpeedMetric::kIterationTime), (std::vector<size_t>{1}));
  EXPECT_TRUE(pareto_front({}, SpeedMetric::kIterationTime).empty());
}

TEST(PlanSpaceGeometry, RangesClassesAndRejected) {
  const std::vector<PlanPoint> pts = known_set();
  const PlanSpaceGeometry g = plan_space_geometry(pts, 76, SpeedMetric::kIterationTime, PlanDimension::kTp);
  // The capacity line (76 GiB) lies inside the memory axis, as do all points.
  EXPECT_TRUE(g.memory_gib.contains(76));
  EXPECT_TRUE(g.memory_gib.contains(5));
  EXPECT_GE(g.memory_gib.min, 0);
  EXPECT_TRUE(g.speed.contains(1));
  EXPECT_TRUE(g.speed.contains(9.5));
  EXPECT_EQ(g.rejected, (std::vector<size_t>{6}));
  ASSERT_EQ(g.classes.size(), 4u);  // tp 1, 2, 4, 8
  EXPECT_EQ(g.classes[0].label, "1");
  EXPECT_EQ(g.classes[1].points, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(g.classes[3].points, (std::vector<size_t>{5}));  // tp8's rejected plan is not in its class
  EXPECT_FALSE(g.log_speed);  // 1 s to 9.5 s
  EXPECT_EQ(g.rejected_off_chart, 0);
  // A rejected plan needing 10x the capacity is left off (counted), and a 100x spread of
  // speeds puts the axis on a log scale.
  std::vector<PlanPoint> wide = pts;
  wide.push_back(point(1, 2, 0.05, 760, /*fits=*/false));
  wide.push_back(point(1, 4, 200, 50));
  const PlanSpaceGeometry w = plan_space_geometry(wide, 76, SpeedMetric::kIterationTime, PlanDimension::kTp);
  EXPECT_EQ(w.rejected_off_chart, 1);
  EXPECT_EQ(w.rejected, (std::vector<size_t>{6}));
  EXPECT_LT(w.memory_gib.max, 200);
  EXPECT_TRUE(w.log_speed);
  EXPECT_TRUE(w.speed.contains(200));
  EXPECT_TRUE(w.speed.contains(1));
  EXPECT_GT(w.speed.min, 0);
  PlotFrame log_frame{w.memory_gib, w.speed, 100, 100, true};
  EXPECT_NEAR(log_frame.px_y(std::sqrt(w.speed.min * w.speed.max)), 50, 1e-9);  // the geometric middle
  const PlanSpaceGeometry by_pp = plan_space_geometry(pts, 76, SpeedMetric::kIterationTime, PlanDimension::kRecompute);
  ASSERT_EQ(by_pp.classes.size(), 1u);
  EXPECT_EQ(by_pp.classes[0].label, "none");
}

TEST(PlanSpaceGeometry, ThinningKeepsTheFastestPerCellAndHitTestingFindsIt) {
  std::vector<PlanPoint> pts;
  // 10,000 plans in one 1-GiB x 0.01-s patch and one plan far away.
  for (int i = 0; i < 10000; ++i) pts.push_back(point(1, 1, 5.0 + (i % 100) * 1e-4, 20.0 + (i / 100) * 1e-2));
  pts.push_back(point(2, 1, 1.0, 70));
  PlotFrame frame{{0, 80}, {0, 10}, 800, 500};
  std::vector<size_t> all(pts.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const std::vector<size_t> kept = thin_to_cells(pts, all, frame, 4, SpeedMetric::kIterationTime);
  EXPECT_LT(kept.size(), 20u);
  EXPECT_NE(std::find(kept.begin(), kept.end(), size_t{10000}), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), size_t{0}), kept.end());  // fastest of its cell
  // A click on the far plan finds it; a click in empty space finds nothing.
  EXPECT_EQ(nearest_point(pts, 70.05, 1.01, frame, SpeedMetric::kIterationTime, 6), std::optional<size_t>(10000));
  EXPECT_FALSE(nearest_point(pts, 50, 8, frame, SpeedMetric::kIterationTime, 6));
}

TEST(PlanGrid, BestCellAndPerCellBest) {
  const std::vector<PlanPoint> pts = known_set();
  const PlanGrid g = plan_grid(pts, PlanDimension::kTp, PlanDimension::kPp);
  EXPECT_EQ(g.x_values, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(g.y_values, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g.cells.size(), 7u);
  // tp4 pp2 at 2 s is the fastest fitting plan; tp8 pp2 (1 s) does not fit.
  ASSERT_TRUE(g.best_cell);
  const PlanGrid::Cell& best = g.cells[*g.best_cell];
  EXPECT_EQ(g.x_values[static_cast<size_t>(best.x)], 4);
  EXPECT_EQ(g.y_values[static_cast<size_t>(best.y)], 2);
  EXPECT_DOUBLE_EQ(best.best_time_s, 2);
  EXPECT_DOUBLE_EQ(g.shade(best), 0);
  const PlanGrid::Cell* none_fit = g.cell(3, 1);  // tp8 pp2
  ASSERT_NE(none_fit, nullptr);
  EXPECT_FALSE(none_fit->best);
  EXPECT_EQ(none_fit->plans, 1);
  EXPECT_EQ(none_fit->fitting, 0);
  const PlanGrid::Cell* tp2pp1 = g.cell(1, 0);
  ASSERT_NE(tp2pp1, nullptr);
  EXPECT_DOUBLE_EQ(g.shade(*tp2pp1), 1);  // 9.5 s, the slowest cell
  EXPECT_EQ(g.cell(0, 1), nullptr);         // tp1 pp2: no plan
  // Two plans in one cell: the faster fitting one is the cell's best.
  std::vector<PlanPoint> two = {point(2, 2, 4, 10), point(2, 2, 3, 12), point(2, 2, 1, 90, false)};
  const PlanGrid g2 = plan_grid(two, PlanDimension::kTp, PlanDimension::kPp);
  ASSERT_EQ(g2.cells.size(), 1u);
  EXPECT_EQ(g2.cells[0].best, std::optional<size_t>(1));
  EXPECT_EQ(g2.cells[0].plans, 3);
}

TEST(PlanDimension, LabelsAndSamePlan) {
  Plan p;
  p.recompute = Recompute::kSelective;
  p.schedule = Schedule::kInterleaved;
  EXPECT_EQ(dimension_label(PlanDimension::kRecompute, dimension_value(p, PlanDimension::kRecompute)), "selective");
  EXPECT_EQ(dimension_label(PlanDimension::kSchedule, dimension_value(p, PlanDimension::kSchedule)),
            QString::fromLatin1(to_string(Schedule::kInterleaved)));
  Plan q = p;
  q.layers_per_stage = {4, 4};
  EXPECT_TRUE(same_plan_degrees(p, q));
  q.tp = 2;
  EXPECT_FALSE(same_plan_degrees(p, q));
}

}  // namespace
}  // namespace monarch::gui
