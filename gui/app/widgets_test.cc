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

#include <QLineSeries>
#include <QScatterSeries>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/scenario_io.h"
#include "gui/app/backends.h"
#include "gui/app/compare_view.h"
#include "gui/app/plan_space_view.h"
#include "gui/app/reliability_view.h"
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
  r.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 1 << 30, 96, 0.2}};
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

// llama3-8b on 32 H100 (4 nodes, tp 1 pp 1 cp 2 as shipped, dp searched) with its best plan:
// data parallelism across nodes.
std::pair<Scenario, Plan> four_nodes() {
  std::ifstream in(MONARCH_SOURCE_DIR "/scenarios/llama3-8b-8-h100.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["cluster"]["num_gpus"] = 32;
  j["parallelism"].erase("dp");
  Expected<Scenario> s = scenario_from_json(j);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.problems()[0].to_string());
  JobControl job;
  Expected<SearchOutcome> found = search_plans(*s, job);
  EXPECT_TRUE(found.ok());
  EXPECT_FALSE(found->ranked.empty());
  return {*s, found->ranked.front().plan};
}

bool non_increasing(const std::vector<SweepPoint>& points, bool best) {
  double last = std::numeric_limits<double>::infinity();
  for (const SweepPoint& p : points) {
    const std::optional<CurveMetrics>& c = best ? p.best : p.selected;
    if (!c) continue;
    if (c->iteration_time_s > last * (1 + 1e-12)) return false;
    last = c->iteration_time_s;
  }
  return true;
}

TEST(WhatIfSweep, IterationTimeNeverRisesWithInterNodeBandwidth) {
  app();
  auto [scenario, plan] = four_nodes();
  ASSERT_GT(plan.dp * plan.pp, 1);
  SweepRequest request;
  request.knob = Knob::kInterNodeBandwidth;
  request.values = sweep_values(Knob::kInterNodeBandwidth, scenario, plan, 9);
  ASSERT_EQ(request.values.size(), 9u);
  for (size_t i = 1; i < request.values.size(); ++i) EXPECT_GT(request.values[i].x, request.values[i - 1].x);
  request.best = true;
  JobControl job;
  const std::vector<SweepPoint> points = run_sweep(scenario, plan, request, job);
  ASSERT_EQ(points.size(), 9u);
  for (const SweepPoint& p : points) {
    ASSERT_TRUE(p.selected) << p.problem;
    ASSERT_TRUE(p.best) << p.problem;
    // The best plan found at a value is never slower than the selected plan there.
    EXPECT_LE(p.best->iteration_time_s, p.selected->iteration_time_s * (1 + 1e-9));
  }
  EXPECT_TRUE(non_increasing(points, false));
  EXPECT_TRUE(non_increasing(points, true));
  // The plan communicates across nodes: 1/16 of the bandwidth costs time.
  EXPECT_GT(points.front().selected->iteration_time_s, points.back().selected->iteration_time_s);
  EXPECT_DOUBLE_EQ(job.fraction.load(), 1.0);
  // Cancelled before it starts: no values done.
  JobControl cancelled;
  cancelled.cancel = true;
  EXPECT_TRUE(run_sweep(scenario, plan, request, cancelled).empty());
}

TEST(WhatIfSweep, KnobsChangeTheScenarioAndThePlan) {
  auto [scenario, plan] = four_nodes();
  // Weak scaling doubles the global batch with the GPUs; strong scaling keeps it.
  const KnobValue gpus64{64, "64 GPUs"};
  Expected<SweepInput> weak = apply_knob(Knob::kGpuCountWeak, gpus64, scenario, plan);
  ASSERT_TRUE(weak.ok()) << weak.problems()[0].to_string();
  EXPECT_EQ(weak->scenario.cluster.num_gpus, 64);
  EXPECT_EQ(weak->plan.dp, plan.dp * 2);
  EXPECT_EQ(weak->scenario.training.global_batch_size, scenario.training.global_batch_size * 2);
  Expected<SweepInput> strong = apply_knob(Knob::kGpuCountStrong, gpus64, scenario, plan);
  if (strong.ok()) EXPECT_EQ(strong->scenario.training.global_batch_size, scenario.training.global_batch_size);
  // A GPU count the plan's model-parallel size does not divide: a problem at the JSON path.
  const int64_t mp = plan.tp * plan.pp * plan.cp;
  if (mp > 1) {
    Expected<SweepInput> odd = apply_knob(Knob::kGpuCountStrong, {static_cast<double>(mp + 1), ""}, scenario, plan);
    ASSERT_FALSE(odd.ok());
    EXPECT_EQ(odd.problems()[0].where, "/cluster/num_gpus");
  }
  // Every GPU preset is a value of the GPU-kind knob, and applying one changes the GPU.
  const std::vector<KnobValue> kinds = sweep_values(Knob::kGpuKind, scenario, plan, 5);
  ASSERT_GE(kinds.size(), 2u);
  Expected<SweepInput> kind = apply_knob(Knob::kGpuKind, kinds.back(), scenario, plan);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(kind->scenario.cluster.gpu.name, kinds.back().label);
  // Micro-batch values divide the per-replica batch.
  for (const KnobValue& v : sweep_values(Knob::kMicroBatch, scenario, plan, 9))
    EXPECT_EQ((scenario.training.global_batch_size / plan.dp) % static_cast<int64_t>(v.x), 0);
}

TEST(WhatIfView, DrawsCurvesAndAddsTheBestPlanOnAWorker) {
  app();
  auto [scenario, plan] = four_nodes();
  WhatIfView view(&estimate);
  view.set_sweeper(&run_sweep, false);
  view.resize(1200, 900);
  Expected<BackendResult> base = estimate(scenario, plan);
  ASSERT_TRUE(base.ok());
  view.set_baseline(scenario, *base);
  ASSERT_EQ(view.curve_points().size(), 9u);  // the bandwidth sweep of the selected plan, at once
  for (const SweepPoint& p : view.curve_points()) EXPECT_TRUE(p.selected) << p.problem;
  auto* chart = view.curve_view(CurveMetric::kIterationTime)->chart();
  auto* line = qobject_cast<QLineSeries*>(chart->series().at(0));
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->count(), 9);
  ASSERT_TRUE(view.start_sweep(/*best=*/true, /*simgrid=*/false));
  EXPECT_TRUE(view.sweeping());
  EXPECT_FALSE(view.start_sweep(true, false));  // one at a time
  view.wait_for_sweep();
  for (const SweepPoint& p : view.curve_points()) EXPECT_TRUE(p.best) << p.problem;
  // Cancel frees the view at once and keeps the curves drawn so far.
  view.set_knob(Knob::kGpuCountWeak);
  ASSERT_TRUE(view.start_sweep(true, false));
  view.cancel_sweep();
  EXPECT_FALSE(view.sweeping());
  EXPECT_FALSE(view.curve_points().empty());
}

TEST(MemoryView, SimulatedMemoryTimelinePerStageWithThePeak) {
  app();
  BackendResult r = hand_result(1.0);
  r.plan.tp = 1;
  r.plan.pp = 2;
  r.plan.dp = 2;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  // Stage 0: ranks 0 and 1 (rank 1 peaks higher); stage 1: ranks 2 and 3.
  r.memory_timeline = {{0, 0.0, 10 * gib}, {0, 0.2, 30 * gib}, {0, 0.6, 12 * gib},
                       {1, 0.0, 10 * gib}, {1, 0.3, 40 * gib}, {1, 0.7, 11 * gib},
                       {2, 0.0, 8 * gib},  {2, 0.5, 20 * gib}, {9, 0.1, 99 * gib}};
  const std::vector<MemoryCurve> curves = memory_curves(r.memory_timeline, r.plan);
  ASSERT_EQ(curves.size(), 2u);  // rank 9 is not in the plan
  EXPECT_EQ(curves[0].rank, 1);
  EXPECT_DOUBLE_EQ(curves[0].peak_gib, 40);
  EXPECT_DOUBLE_EQ(curves[0].peak_time_s, 0.3);
  ASSERT_EQ(curves[0].steps.size(), 5u);  // a step: the old value holds until the change
  EXPECT_DOUBLE_EQ(curves[0].steps[1].second, 10);
  EXPECT_DOUBLE_EQ(curves[0].steps[2].second, 40);
  EXPECT_EQ(curves[1].stage, 1);
  MemoryView view;
  view.resize(900, 800);
  view.show_memory_timeline(r, "hand-made");
  EXPECT_EQ(view.curves().size(), 2u);
  EXPECT_TRUE(view.timeline_view()->chart()->title().contains("peak 40.0 GiB on rank 1"));
  view.show_memory_timeline(hand_result(1.0), "analytical");
  EXPECT_TRUE(view.curves().empty());
}

TEST(CompareView, SaysWhatDiffersMostFirst) {
  app();
  BackendResult a = hand_result(1.0), b = hand_result(1.1);
  b.time_breakdown_s.compute = a.time_breakdown_s.compute;  // equal: left out
  b.communication[0].time_s = 0.8;                          // +300%
  b.time_breakdown_s.bubble = 0.05;                         // 0 in A
  CompareView view;
  view.set_runs({{"a", a}, {"b", b}});
  const std::vector<CompareRow>& most = view.most_different();
  ASSERT_GE(most.size(), 3u);
  EXPECT_EQ(most[0].metric, "pipeline bubble (s)");
  EXPECT_EQ(most[1].metric, "all-reduce tp time (s)");
  EXPECT_EQ(most[2].metric, "iteration time (s)");
  for (const CompareRow& r : most) EXPECT_NE(r.metric, "compute (s)");
  EXPECT_TRUE(differs_most_text(most).contains("all-reduce tp time (s): 0.2000 -> 0.8000 (+300.0%)"))
      << differs_most_text(most).toStdString();
}

TEST(PlanSpaceView, ScatterGridAndSelection) {
  app();
  PlanSpaceView view;
  view.resize(1200, 700);
  std::vector<PlanPoint> pts;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2})
      for (int k = 0; k < 3; ++k) {
        PlanPoint p;
        p.plan.tp = tp;
        p.plan.pp = pp;
        p.plan.micro_batch_size = k + 1;
        p.iteration_time_s = 10.0 / (tp * pp) + k;
        p.tokens_per_s = 1e5 / p.iteration_time_s;
        p.peak_memory_gib = 80.0 / (tp * pp) + 5 * k;
        p.fits = p.peak_memory_gib < 70;
        p.reason = p.fits ? "" : "needs more";
        pts.push_back(p);
      }
  std::vector<Plan> chosen;
  QObject::connect(&view, &PlanSpaceView::plan_chosen, [&chosen](const Plan& p) { chosen.push_back(p); });
  view.set_points(pts, 70, QString());
  QChart* chart = view.scatter_view()->chart();
  int scatter = 0, lines = 0;
  for (QAbstractSeries* s : chart->series()) {
    scatter += qobject_cast<QScatterSeries*>(s) ? 1 : 0;
    lines += qobject_cast<QLineSeries*>(s) && !qobject_cast<QScatterSeries*>(s) ? 1 : 0;
  }
  EXPECT_EQ(scatter, 1 + 3 + 1);  // rejected, tp 1 / 2 / 4, selected
  EXPECT_EQ(lines, 2);            // Pareto front, capacity
  EXPECT_EQ(view.markers_drawn(), static_cast<int64_t>(pts.size()));
  view.set_colour_by(PlanDimension::kMicroBatch);
  EXPECT_EQ(view.geometry().classes.size(), 3u);
  // The grid's best cell is tp4 pp2 and a click on it chooses its fastest plan.
  ASSERT_TRUE(view.grid().best_cell);
  const PlanGrid::Cell& best = view.grid().cells[*view.grid().best_cell];
  EXPECT_EQ(view.grid().x_values[static_cast<size_t>(best.x)], 4);
  EXPECT_EQ(view.grid().y_values[static_cast<size_t>(best.y)], 2);
  ASSERT_TRUE(view.choose_cell(best.x, best.y));
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen.back().tp * chosen.back().pp, 8);
  EXPECT_EQ(chosen.back().micro_batch_size, 1);
  // Choosing at a point's coordinates picks that plan; empty space picks none.
  ASSERT_TRUE(pts[15].fits);  // tp4 pp2 mbs1, alone at its coordinates
  EXPECT_TRUE(view.choose_at(pts[15].peak_memory_gib, pts[15].iteration_time_s));
  EXPECT_EQ(chosen.back(), pts[15].plan);
  EXPECT_FALSE(view.choose_at(view.geometry().memory_gib.max, view.geometry().speed.max));
  view.set_selected(pts[5].plan);
  EXPECT_EQ(view.selected(), std::optional<size_t>(5));
  if (qEnvironmentVariableIsSet("MONARCH_GUI_SHOTS")) view.grab().save(qEnvironmentVariable("MONARCH_GUI_SHOTS") + "/plan_space_view.png");
}

TEST(ReliabilityView, GoodputCurveBadputAndAMonthOfFailures) {
  app();
  auto [scenario, plan] = four_nodes();
  Expected<BackendResult> r = estimate(scenario, plan);
  ASSERT_TRUE(r.ok());
  ReliabilityView view;
  view.resize(1200, 800);
  view.show_plan(scenario, plan, r->iteration_time_s, "no block");
  EXPECT_FALSE(view.picture());  // the scenario has no reliability block
  ReliabilityConfig cfg;
  cfg.causes = {{"faulty-gpu", "gpu", 40}, {"software-bug", "software", 10}};  // per day per 1k GPUs
  cfg.storage_write_GBps = 20;
  cfg.storage_read_GBps = 40;
  cfg.detection_s = 300;
  cfg.reschedule_s = 600;
  cfg.startup_s = 300;
  scenario.reliability = cfg;
  view.show_plan(scenario, plan, r->iteration_time_s, "with block");
  ASSERT_TRUE(view.picture());
  const ReliabilityPicture& p = *view.picture();
  EXPECT_GT(p.estimate.goodput, 0);
  EXPECT_LT(p.estimate.goodput, 1);
  // The curve peaks at the model's optimum interval (within one of its log-spaced steps).
  ASSERT_GE(p.curve.size(), 8u);
  size_t peak = 0;
  for (size_t k = 0; k < p.curve.size(); ++k)
    if (p.curve[k].goodput > p.curve[peak].goodput) peak = k;
  const double step = std::log(p.curve[1].interval_s / p.curve[0].interval_s);
  EXPECT_LE(std::abs(std::log(p.curve[peak].interval_s / p.estimate.optimal_interval_s)), step * 1.01);
  for (size_t k = 1; k < p.curve.size(); ++k) EXPECT_GT(p.curve[k].interval_s, p.curve[k - 1].interval_s);
  // Badput: the five ml-goodput kinds; together with goodput they fill the wall time.
  ASSERT_EQ(p.badput.size(), 5u);
  double lost = 0;
  for (const BadputBar& b : p.badput) lost += b.share_of_wall;
  EXPECT_NEAR(lost + p.estimate.goodput, 1.0, 1e-3);
  // 50 failures a day per 1,000 GPUs on 32 GPUs: about 48 in a month, each on its component's row.
  EXPECT_GT(p.month.size(), 10u);
  for (const FailureEvent& e : p.month) {
    EXPECT_GE(p.component_row(e.component), 0);
    EXPECT_LE(e.time_s, kMonth_s);
  }
  EXPECT_FALSE(view.month_view()->chart()->series().isEmpty());
  if (qEnvironmentVariableIsSet("MONARCH_GUI_SHOTS")) view.grab().save(qEnvironmentVariable("MONARCH_GUI_SHOTS") + "/reliability_view.png");
}

}  // namespace
}  // namespace monarch::gui
