// The widgets under QT_QPA_PLATFORM=offscreen: the timeline draws only what is in view, the
// memory chart has its stacks and capacity line, and compare / what-if views follow their inputs.
#include <gtest/gtest.h>

#include <QApplication>
#include <QChart>
#include <QBarSet>
#include <QChartView>
#include <QLineSeries>
#include <QMenu>
#include <QScrollBar>
#include <QStackedBarSeries>
#include <QTemporaryDir>
#include <QToolButton>

#include <fstream>
#include <sstream>

#include "gui/app/compare_view.h"
#include "gui/app/result_views.h"
#include "gui/app/timeline_view.h"
#include "gui/app/whatif_view.h"

namespace monarch::gui {
namespace {

QApplication& app() {
  static int argc = 1;
  static char name[] = "widgets_test";
  static char* argv[] = {name, nullptr};
  // Never destroyed: tearing Qt down during static destruction at exit crashes.
  static QApplication* a = new QApplication(argc, argv);
  return *a;
}

// A timeline of `ranks` ranks, each with a compute stream of `per_rank` back-to-back 1 ms
// kernels (a 10 ms gap in the middle: the bubble) and a tp stream of all-reduces.
std::vector<TimelineSpan> big_timeline(int ranks, int per_rank) {
  std::vector<TimelineSpan> spans;
  spans.reserve(static_cast<size_t>(ranks) * per_rank * 2);
  for (int r = 0; r < ranks; ++r) {
    double t = 0;
    for (int i = 0; i < per_rank; ++i) {
      if (i == per_rank / 2) t += 0.010;
      spans.push_back({r, "compute", (i < per_rank / 2 ? "fwd L" : "bwd L") + std::to_string(i), "compute", t, t + 1e-3});
      spans.push_back({r, "tp", "ncclAllReduce tp", "collective", t + 1e-3, t + 1.2e-3});
      t += 1e-3;
    }
  }
  return spans;
}

TEST(TimelineCanvas, DrawsOnlyVisibleRowsOf2048) {
  app();
  TimelineCanvas canvas;
  canvas.resize(1000, 600);
  canvas.set_spans(big_timeline(1024, 200));
  ASSERT_EQ(canvas.rows().row_count(), 2048);
  (void)canvas.grab();  // paints
  const int visible_rows = (canvas.viewport()->height() - TimelineCanvas::kRulerPx) / TimelineCanvas::kRowHeightPx + 2;
  EXPECT_GT(canvas.last_paint().rows_drawn, 0);
  EXPECT_LE(canvas.last_paint().rows_drawn, visible_rows);
  // At most about one rectangle per pixel column per drawn row, never the 409600 spans.
  EXPECT_LE(canvas.last_paint().spans_drawn, int64_t{canvas.last_paint().rows_drawn} * 1000);
  // Scrolled to the bottom: still only the rows in view.
  canvas.verticalScrollBar()->setValue(canvas.verticalScrollBar()->maximum());
  (void)canvas.grab();
  EXPECT_LE(canvas.last_paint().rows_drawn, visible_rows);
  EXPECT_GT(canvas.last_paint().rows_drawn, 0);
}

TEST(TimelineCanvas, ZoomAndTooltipFindTheSpan) {
  app();
  TimelineCanvas canvas;
  canvas.resize(1000, 400);
  canvas.set_spans(big_timeline(4, 20));
  if (qEnvironmentVariableIsSet("MONARCH_GUI_SHOTS")) canvas.grab().save(qEnvironmentVariable("MONARCH_GUI_SHOTS") + "/timeline_canvas.png");
  (void)canvas.grab();
  const double full = canvas.axis().span_s;
  canvas.zoom_in();
  EXPECT_LT(canvas.axis().span_s, full);
  canvas.fit();
  EXPECT_DOUBLE_EQ(canvas.axis().span_s, full);
  // Row 0 is rank 0's compute stream; the first kernel covers [0, 1 ms].
  const int x = TimelineCanvas::kGutterPx + static_cast<int>(canvas.axis().x_of(0.5e-3));
  const int y = TimelineCanvas::kRulerPx + TimelineCanvas::kRowHeightPx / 2;
  const QString tip = canvas.tooltip_at(QPoint(x, y));
  EXPECT_TRUE(tip.contains("fwd L0")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("rank 0")) << tip.toStdString();
  EXPECT_TRUE(canvas.tooltip_at(QPoint(5, y)).isEmpty());  // the gutter
  // In the bubble (the 10 ms gap after kernel 9) there is no span.
  const int xb = TimelineCanvas::kGutterPx + static_cast<int>(canvas.axis().x_of(10e-3 + 5e-3));
  EXPECT_TRUE(canvas.tooltip_at(QPoint(xb, y)).isEmpty());
}

BackendResult hand_result(double iteration_s) {
  BackendResult r;
  r.backend = "analytical";
  r.plan.tp = 4;
  r.plan.pp = 2;
  r.plan.dp = 2;
  r.iteration_time_s = iteration_s;
  r.memory.capacity_gib = 70;
  r.memory.peak_gib = 50;
  for (int s = 0; s < 2; ++s) r.memory.stages.push_back({s, 10, 5, 20, 14.0 - s, 1, 50.0 - s});
  r.time_breakdown_s.compute = iteration_s * 0.8;
  r.communication = {{"all-reduce", "tp", 1 << 30, 96, 0.2}};
  return r;
}

TEST(MemoryView, StackedBarsPerStageAndCapacityLine) {
  app();
  MemoryView view;
  view.resize(900, 600);
  view.show_result(hand_result(1.0), "hand-made");
  if (qEnvironmentVariableIsSet("MONARCH_GUI_SHOTS")) view.grab().save(qEnvironmentVariable("MONARCH_GUI_SHOTS") + "/memory_view.png");
  QChart* chart = view.chart_view()->chart();
  ASSERT_EQ(chart->series().size(), 2);
  auto* bars = qobject_cast<QStackedBarSeries*>(chart->series()[0]);
  ASSERT_NE(bars, nullptr);
  EXPECT_EQ(bars->count(), 5);               // weights, gradients, optimizer, activations, buffers
  EXPECT_EQ(bars->barSets()[0]->count(), 2);  // two stages
  auto* cap = qobject_cast<QLineSeries*>(chart->series()[1]);
  ASSERT_NE(cap, nullptr);
  EXPECT_DOUBLE_EQ(cap->at(0).y(), 70);
  EXPECT_TRUE(chart->title().contains("fits"));
}

TEST(CompareView, ComparesTheChosenRuns) {
  app();
  CompareView view;
  view.set_runs({{"a", hand_result(1.0)}, {"b", hand_result(1.5)}});
  ASSERT_GT(view.model()->rowCount(), 0);
  EXPECT_EQ(view.model()->data(view.model()->index(0, CompareModel::kPercent)).toString(), "+50.0%");
  view.choose(1, 0);
  EXPECT_EQ(view.model()->data(view.model()->index(0, CompareModel::kPercent)).toString(), "-33.3%");
  view.set_runs({});
  EXPECT_EQ(view.model()->rowCount(), 0);
}

TEST(WhatIfView, ReRunsTheEstimatorOnEachKnob) {
  app();
  // A stand-in estimator for the view's wiring: time grows as bandwidth shrinks.
  std::vector<std::pair<Scenario, Plan>> calls;
  Estimator est = [&calls](const Scenario& s, const Plan& p) -> Expected<BackendResult> {
    calls.emplace_back(s, p);
    if (p.micro_batch_size > 8) return Expected<BackendResult>::fail("/training/micro_batch_size", "too big");
    BackendResult r = hand_result(100.0 / s.cluster.inter_node.bandwidth_GBps);
    r.plan = p;
    return r;
  };
  WhatIfView view(est);
  Scenario s;
  s.cluster.num_gpus = 16;
  s.cluster.inter_node.bandwidth_GBps = 50;
  view.set_baseline(s, hand_result(2.0));
  ASSERT_TRUE(view.result());
  view.set_inter_node_bandwidth_GBps(25);
  ASSERT_TRUE(view.result());
  EXPECT_DOUBLE_EQ(view.result()->iteration_time_s, 4.0);
  EXPECT_DOUBLE_EQ(calls.back().first.cluster.inter_node.bandwidth_GBps, 25);
  view.set_num_gpus(32);  // tp 4 x pp 2 x cp 1 = 8 per replica: dp 4
  EXPECT_EQ(calls.back().second.dp, 4);
  EXPECT_EQ(calls.back().first.cluster.num_gpus, 32);
  const size_t before = calls.size();
  view.set_num_gpus(12);  // not a multiple of 8: a problem, no call
  EXPECT_EQ(calls.size(), before);
  ASSERT_EQ(view.problems().size(), 1u);
  EXPECT_EQ(view.problems()[0].where, "/cluster/num_gpus");
  view.set_num_gpus(16);
  view.set_micro_batch_size(16);
  EXPECT_FALSE(view.result());
  EXPECT_EQ(view.problems()[0].message, "too big");
}

TEST(PlansView, ExportsTheSelectedPlan) {
  app();
  PlansView view;
  Scenario s;
  s.name = "export";
  s.model.architecture = Architecture::kLlama;
  s.model.num_layers = 32;
  s.model.hidden_size = 4096;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 8;
  s.model.ffn_hidden_size = 14336;
  s.model.vocab_size = 128256;
  s.model.seq_length = 8192;
  s.model.tie_embeddings = false;
  s.cluster.num_gpus = 16;
  s.cluster.gpus_per_node = 8;
  s.training.global_batch_size = 64;
  BackendResult first = hand_result(2.0), second = hand_result(3.0);
  first.plan.tp = 8;
  first.plan.dp = 2;
  first.plan.sequence_parallel = true;
  second.plan.tp = 4;
  second.plan.pp = 2;
  second.plan.dp = 2;
  second.plan.vpp = 2;
  second.plan.schedule = Schedule::kInterleaved;
  view.set_search({first, second}, {});
  EXPECT_FALSE(view.export_button()->isEnabled());  // no scenario, no selection
  view.set_scenario(s);
  view.select_row(1);
  EXPECT_TRUE(view.export_button()->isEnabled());
  ASSERT_EQ(view.export_button()->menu()->actions().size(), 4);

  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("plan.sh"));
  EXPECT_EQ(view.save_export(ConfigFormat::kMegatron, path), QString());
  std::ifstream in(path.toStdString());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("--tensor-model-parallel-size 4"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("--num-virtual-stages-per-pipeline-rank 2"), std::string::npos) << text.str();
  // DeepSpeed's pipeline engine cannot interleave: refused, nothing written.
  const QString ds = dir.filePath(QStringLiteral("ds.sh"));
  EXPECT_NE(view.save_export(ConfigFormat::kDeepspeed, ds).indexOf(QStringLiteral("interleaved")), -1);
  EXPECT_FALSE(QFile::exists(ds));
}

}  // namespace
}  // namespace monarch::gui
