// Time-to-pixel math of the timeline.
#include "gui/models/time_axis.h"

#include <gtest/gtest.h>

namespace monarch::gui {
namespace {

TEST(TimeAxis, FitShowsEverything) {
  TimeAxis a = TimeAxis::fit(2.0, 1000);
  EXPECT_DOUBLE_EQ(a.start_s, 0);
  EXPECT_DOUBLE_EQ(a.end_s(), 2.0);
  EXPECT_DOUBLE_EQ(a.x_of(1.0), 500);
  EXPECT_DOUBLE_EQ(a.t_of(250), 0.5);
  TimeAxis empty = TimeAxis::fit(0, 0);
  EXPECT_GT(empty.span_s, 0);
  EXPECT_GT(empty.width_px, 0);
}

TEST(TimeAxis, ZoomKeepsTheInstantUnderTheCursor) {
  TimeAxis a = TimeAxis::fit(10.0, 1000);
  const double t_before = a.t_of(300);
  a.zoom(4, 300);
  EXPECT_NEAR(a.span_s, 2.5, 1e-12);
  EXPECT_NEAR(a.t_of(300), t_before, 1e-12);
  a.zoom(0.25, 300);
  EXPECT_NEAR(a.span_s, 10, 1e-12);
  EXPECT_NEAR(a.start_s, 0, 1e-12);
}

TEST(TimeAxis, ZoomAndPanStayInsideTheData) {
  TimeAxis a = TimeAxis::fit(10.0, 1000);
  a.zoom(0.1, 500);  // cannot zoom out past everything
  EXPECT_DOUBLE_EQ(a.span_s, 10);
  a.zoom(1e15, 0);  // cannot zoom in past 1 ns
  EXPECT_DOUBLE_EQ(a.span_s, TimeAxis::kMinSpan_s);
  a = TimeAxis::fit(10.0, 1000);
  a.zoom(2, 0);
  a.pan_px(250);  // 250 px = 1.25 s at 5 s per 1000 px
  EXPECT_NEAR(a.start_s, 1.25, 1e-12);
  a.pan_px(1e9);
  EXPECT_NEAR(a.end_s(), 10, 1e-12);
  a.pan_px(-1e9);
  EXPECT_DOUBLE_EQ(a.start_s, 0);
  a.zoom(0, 0);  // ignored
  a.zoom(-3, 0);
  EXPECT_NEAR(a.span_s, 5, 1e-12);
}

TEST(TimeAxis, TicksFollowTheOneTwoFiveSeries) {
  TimeAxis a = TimeAxis::fit(1.0, 1000);  // 1000 px per s
  EXPECT_NEAR(a.tick_step_s(80), 0.1, 1e-12);   // 80 px -> 0.08 s -> 0.1
  EXPECT_NEAR(a.tick_step_s(150), 0.2, 1e-12);  // 0.15 -> 0.2
  EXPECT_NEAR(a.tick_step_s(300), 0.5, 1e-12);  // 0.3 -> 0.5
  EXPECT_NEAR(a.tick_step_s(100), 0.1, 1e-12);  // exact
  const auto ticks = a.ticks(100);
  ASSERT_EQ(ticks.size(), 11u);
  EXPECT_NEAR(ticks.front(), 0, 1e-12);
  EXPECT_NEAR(ticks.back(), 1.0, 1e-12);
  a.zoom(1000, 500);  // 1 ms visible around 0.5 s
  const auto fine = a.ticks(100);
  ASSERT_FALSE(fine.empty());
  EXPECT_GE(fine.front(), a.start_s);
  EXPECT_LE(fine.back(), a.end_s() + 1e-12);
  EXPECT_NEAR(fine[1] - fine[0], 1e-4, 1e-12);
}

TEST(RowWindow, OnlyRowsInTheViewport) {
  RowWindow w{2048, 20, 0, 400};
  EXPECT_EQ(w.first_visible(), 0);
  EXPECT_EQ(w.last_visible(), 20);
  w.offset_px = 10010;  // row 500 starts at 10000
  EXPECT_EQ(w.first_visible(), 500);
  EXPECT_EQ(w.last_visible(), 521);
  EXPECT_EQ(w.row_at(0), 500);
  EXPECT_EQ(w.row_at(15), 501);
  EXPECT_DOUBLE_EQ(w.y_of(501), 10);
  w.offset_px = 2048 * 20;  // scrolled past the end
  EXPECT_EQ(w.first_visible(), 2048);
  EXPECT_EQ(w.last_visible(), 2048);
  EXPECT_EQ(w.row_at(5), -1);
  RowWindow empty;
  EXPECT_EQ(empty.first_visible(), 0);
  EXPECT_EQ(empty.last_visible(), 0);
}

}  // namespace
}  // namespace monarch::gui
