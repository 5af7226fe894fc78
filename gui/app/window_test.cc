// The whole window under QT_QPA_PLATFORM=offscreen, on a shipped scenario with the real
// search and analytical model: open, search, check the table, visit every view, save a
// screenshot of each and fail on a blank one; bad input shows a message and keeps edits;
// cancel frees the window; `monarch-gui --screenshot` writes one PNG per view.
#include <gtest/gtest.h>

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QTableView>
#include <QScatterSeries>
#include <QTemporaryDir>
#include <QTest>
#include <unordered_map>

#include "gui/app/backends.h"
#include "gui/app/compare_view.h"
#include "gui/app/main_window.h"
#include "gui/app/plan_space_view.h"
#include "gui/app/reliability_view.h"
#include "gui/app/result_views.h"
#include "gui/app/scenario_editor.h"
#include "gui/app/timeline_view.h"
#include "gui/app/whatif_view.h"
#include "results/store.h"

namespace monarch::gui {
namespace {

QApplication& app() {
  static int argc = 1;
  static char name[] = "window_test";
  static char* argv[] = {name, nullptr};
  // Never destroyed: tearing Qt down during static destruction at exit crashes.
  static QApplication* a = new QApplication(argc, argv);
  return *a;
}

const QString kScenario = QStringLiteral(MONARCH_SOURCE_DIR "/scenarios/llama3-8b-8-h100.json");

// Share of pixels that differ from the most common colour: 0 for a blank image.
double non_background_fraction(const QImage& image) {
  const QImage img = image.convertToFormat(QImage::Format_RGB32);
  std::unordered_map<QRgb, int64_t> counts;
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) ++counts[line[x]];
  }
  int64_t top = 0;
  for (const auto& [c, n] : counts) top = std::max(top, n);
  const int64_t total = int64_t{img.width()} * img.height();
  return total > 0 ? 1.0 - static_cast<double>(top) / static_cast<double>(total) : 0.0;
}

// Views must show real content: more than 2% of their pixels off the background colour.
constexpr double kMinContentFraction = 0.02;

TEST(NonBackgroundFraction, SeesBlankImages) {
  QImage blank(100, 100, QImage::Format_RGB32);
  blank.fill(Qt::white);
  EXPECT_EQ(non_background_fraction(blank), 0.0);
  for (int x = 0; x < 100; ++x) blank.setPixel(x, 50, qRgb(0, 0, 0));
  EXPECT_NEAR(non_background_fraction(blank), 0.01, 1e-9);
}

TEST(MainWindow, SearchThenEveryViewWithANonBlankScreenshot) {
  app();
  ASSERT_TRUE(QFile::exists(kScenario)) << kScenario.toStdString();
  MainWindow w;
  w.resize(1400, 900);
  w.show();
  ASSERT_FALSE(w.open_scenario(kScenario));
  ASSERT_TRUE(w.editor()->scenario()) << w.message().toStdString();
  ASSERT_TRUE(w.start_search());
  EXPECT_TRUE(w.busy());
  w.wait_for_work();
  ASSERT_FALSE(w.busy());
  PlansModel* plans = w.plans()->model();
  ASSERT_GT(plans->rowCount(), 0) << w.message().toStdString();
  EXPECT_LE(plans->rowCount(), w.editor()->scenario()->search.top_k);
  // Ranked best first by iteration time (the scenario's objective).
  for (int r = 1; r < plans->rowCount(); ++r)
    EXPECT_LE(plans->result(r - 1).iteration_time_s, plans->result(r).iteration_time_s);
  for (int r = 0; r < plans->rowCount(); ++r) {
    EXPECT_TRUE(plans->result(r).memory.fits);
    EXPECT_EQ(plans->result(r).plan.world_size(), w.editor()->scenario()->cluster.num_gpus);
  }
  EXPECT_EQ(w.plans()->table()->model()->rowCount(), plans->rowCount());
  // The best plan is selected and shown by the per-result views.
  EXPECT_EQ(w.memory()->model()->rowCount(), plans->result(0).plan.pp);
  EXPECT_EQ(w.communication()->model()->rowCount(), static_cast<int>(plans->result(0).communication.size()));
  ASSERT_TRUE(w.whatif()->result());
  EXPECT_DOUBLE_EQ(w.whatif()->result()->iteration_time_s, plans->result(0).iteration_time_s);

  if (simgrid_built()) {
    // The timeline of the best plan, simulated by SimGrid: rows grouped by pipeline stage, one
    // per rank and stream once alike DP replicas are folded, so the compute rows stand for
    // every rank.
    ASSERT_TRUE(w.start_simulation());
    w.wait_for_work();
    const TimelineRows& rows = w.timeline()->canvas()->rows();
    EXPECT_TRUE(rows.grouped());
    int64_t ranks_shown = 0;
    for (const TimelineRows::Row& row : rows.rows()) ranks_shown += row.stream == "compute" ? row.ranks : 0;
    EXPECT_EQ(ranks_shown, plans->result(0).plan.world_size()) << w.message().toStdString();
    EXPECT_EQ(static_cast<int64_t>(rows.stages().size()), plans->result(0).plan.pp);
    EXPECT_GT(rows.end_s(), 0);
    EXPECT_FALSE(w.timeline()->minimap()->overview().isNull());
    // SimGrid's memory timeline: one curve per stage, its peak within the plan's capacity.
    ASSERT_EQ(static_cast<int64_t>(w.memory()->curves().size()), plans->result(0).plan.pp);
    for (const MemoryCurve& c : w.memory()->curves()) EXPECT_GT(c.peak_gib, 0);
  }
  for (const QString& name : MainWindow::view_names()) {
    ASSERT_TRUE(w.show_view(name));
    QCoreApplication::processEvents();
    EXPECT_TRUE(w.view(name)->isVisible()) << name.toStdString();
  }
  w.show_view(QStringLiteral("compare"));
  EXPECT_GE(w.compare()->run_count(), plans->rowCount());
  EXPECT_GT(w.compare()->model()->rowCount(), 0);
  EXPECT_FALSE(w.compare()->most_different().empty());
  // The plan space holds every estimated plan, the ranked ones among them.
  EXPECT_GT(w.plan_space()->points().size(), static_cast<size_t>(plans->rowCount()));
  EXPECT_FALSE(w.plan_space()->geometry().front.empty());
  ASSERT_TRUE(w.plan_space()->selected());
  EXPECT_TRUE(same_plan_degrees(w.plan_space()->points()[*w.plan_space()->selected()].plan, plans->result(0).plan));
  // The what-if curves of the selected plan are drawn.
  EXPECT_FALSE(w.whatif()->curve_points().empty());

  QTemporaryDir dir;
  ASSERT_TRUE(w.save_screenshots(dir.path()).empty());
  for (const QString& name : MainWindow::view_names()) {
    QImage shot(QDir(dir.path()).filePath(name + ".png"));
    ASSERT_FALSE(shot.isNull()) << name.toStdString();
    EXPECT_GT(shot.width(), 400) << name.toStdString();
    EXPECT_GT(non_background_fraction(shot), kMinContentFraction) << name.toStdString() << " looks blank";
  }
}

// Position in the chart view's viewport of a value point of a series.
QPoint viewport_pos(QChartView* view, QAbstractSeries* series, QPointF value) {
  QChart* chart = view->chart();
  const QPointF in_chart = chart->mapToPosition(value, series);
  return view->mapFromScene(chart->mapToScene(in_chart));
}

TEST(MainWindow, ClickingAPlanSpacePointSelectsThatPlanEverywhere) {
  app();
  MainWindow w;
  w.resize(1400, 900);
  w.show();
  ASSERT_FALSE(w.open_scenario(kScenario));
  ASSERT_TRUE(w.start_search());
  w.wait_for_work();
  ASSERT_GT(w.plans()->model()->rowCount(), 0);
  ASSERT_TRUE(w.show_view(QStringLiteral("planspace")));
  QCoreApplication::processEvents();
  PlanSpaceView* ps = w.plan_space();
  QChartView* view = ps->scatter_view();
  const Plan best = w.plans()->model()->result(0).plan;
  // A drawn fitting plan other than the selected best one, preferably one the table does not rank.
  QScatterSeries* series = nullptr;
  QPointF target;
  for (QAbstractSeries* s : view->chart()->series()) {
    auto* scatter = qobject_cast<QScatterSeries*>(s);
    if (!scatter || scatter->name() == "selected" || scatter->name().startsWith("rejected")) continue;
    for (int i = 0; i < scatter->count(); ++i) {
      const auto hit = nearest_point(ps->points(), scatter->at(i).x(), scatter->at(i).y(),
                                     PlotFrame{ps->geometry().memory_gib, ps->geometry().speed, 1000, 1000, ps->geometry().log_speed},
                                     SpeedMetric::kIterationTime, 0.5);
      if (hit && !same_plan_degrees(ps->points()[*hit].plan, best)) {
        series = scatter;
        target = scatter->at(i);
      }
    }
  }
  ASSERT_NE(series, nullptr);
  (void)view->grab();  // lays the chart out and places its markers
  QTest::qWait(50);
  const QPoint at = viewport_pos(view, series, target);
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
  QCoreApplication::processEvents();
  ASSERT_TRUE(ps->selected());
  const Plan chosen = ps->points()[*ps->selected()].plan;
  EXPECT_FALSE(same_plan_degrees(chosen, best));
  // Memory, what-if and the selection marker follow the clicked plan.
  EXPECT_EQ(w.memory()->model()->rowCount(), chosen.pp);
  ASSERT_TRUE(w.whatif()->result());
  EXPECT_TRUE(same_plan_degrees(w.whatif()->result()->plan, chosen));
  // The table selects it too when it is ranked there.
  const int row = w.plans()->selected_row();
  if (row >= 0) EXPECT_TRUE(same_plan_degrees(w.plans()->model()->result(row).plan, chosen));
  // A grid cell chooses the fastest fitting plan of the cell.
  ASSERT_TRUE(ps->grid().best_cell);
  const PlanGrid::Cell& cell = ps->grid().cells[*ps->grid().best_cell];
  ASSERT_TRUE(ps->choose_cell(cell.x, cell.y));
  EXPECT_TRUE(same_plan_degrees(w.whatif()->result()->plan, ps->points()[*cell.best].plan));
  EXPECT_EQ(w.plans()->selected_row(), 0);  // the fastest plan is ranked first
}

TEST(MainWindow, ReliabilityViewOfAShippedGoodputScenario) {
  app();
  MainWindow w;
  w.resize(1400, 900);
  w.show();
  ASSERT_FALSE(w.open_scenario(QStringLiteral(MONARCH_SOURCE_DIR "/scenarios/llama3-405b-16384-goodput.json")));
  ASSERT_TRUE(w.editor()->scenario()) << w.message().toStdString();
  ASSERT_TRUE(w.editor()->scenario()->reliability);
  ASSERT_TRUE(w.start_search());
  w.wait_for_work();
  ASSERT_GT(w.plans()->model()->rowCount(), 0) << w.message().toStdString();
  ASSERT_TRUE(w.reliability()->picture());
  const ReliabilityPicture& p = *w.reliability()->picture();
  EXPECT_GT(p.estimate.goodput, 0.5);
  EXPECT_LT(p.estimate.goodput, 1.0);
  // Table 5's 419 interruptions in 54 days on 16,384 GPUs: about 230 in a simulated month.
  EXPECT_GT(p.month.size(), 150u);
  EXPECT_LT(p.month.size(), 320u);
  ASSERT_TRUE(w.show_view(QStringLiteral("reliability")));
  QCoreApplication::processEvents();
  EXPECT_GT(non_background_fraction(w.view(QStringLiteral("reliability"))->grab().toImage()), kMinContentFraction);
}

TEST(MainWindow, WhatIfReRunsTheAnalyticalModel) {
  app();
  MainWindow w;
  ASSERT_FALSE(w.open_scenario(kScenario));
  ASSERT_TRUE(w.start_search());
  w.wait_for_work();
  ASSERT_GT(w.plans()->model()->rowCount(), 0);
  const BackendResult best = w.plans()->model()->result(0);
  const double bw = w.editor()->scenario()->cluster.inter_node.bandwidth_GBps;
  w.whatif()->set_inter_node_bandwidth_GBps(bw / 100);
  ASSERT_TRUE(w.whatif()->result()) << (w.whatif()->problems().empty() ? "" : w.whatif()->problems()[0].to_string());
  // A plan that communicates across nodes cannot get faster with 100x less bandwidth.
  EXPECT_GE(w.whatif()->result()->iteration_time_s, best.iteration_time_s);
  w.whatif()->set_inter_node_bandwidth_GBps(bw);
  EXPECT_DOUBLE_EQ(w.whatif()->result()->iteration_time_s, best.iteration_time_s);
  // An impossible micro-batch: a message with the JSON path, no crash, no result.
  w.whatif()->set_micro_batch_size(1000003);
  EXPECT_FALSE(w.whatif()->result());
  ASSERT_FALSE(w.whatif()->problems().empty());
}

TEST(MainWindow, BadInputShowsAMessageAndKeepsEdits) {
  app();
  QTemporaryDir dir;
  MainWindow w;
  ASSERT_FALSE(w.open_scenario(kScenario));
  w.editor()->set_field_text("/training/global_batch_size", "64");
  const nlohmann::json edited = w.editor()->document();

  const QString broken = dir.filePath("broken.json");
  QFile f(broken);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write("{ \"model\": { \"num_layers\": 2,, } }");
  f.close();
  ASSERT_TRUE(w.open_scenario(broken));
  EXPECT_TRUE(w.message().contains("Could not open")) << w.message().toStdString();
  EXPECT_EQ(w.editor()->document(), edited);
  EXPECT_TRUE(w.editor()->modified());
  ASSERT_TRUE(w.open_scenario(dir.filePath("does-not-exist.json")));
  EXPECT_EQ(w.editor()->document(), edited);

  // A field out of range: the search refuses with a message, the edit stays.
  w.editor()->set_field_text("/cluster/num_gpus", "0");
  EXPECT_FALSE(w.editor()->scenario());
  EXPECT_FALSE(w.editor()->field_problem("/cluster/num_gpus").isEmpty());
  EXPECT_FALSE(w.start_search());
  EXPECT_TRUE(w.message().contains("problem")) << w.message().toStdString();
  EXPECT_EQ(w.editor()->document()["cluster"]["num_gpus"], 0);
}

TEST(MainWindow, CancelFreesTheWindowAndKeepsThePreviousResults) {
  app();
  MainWindow w;
  ASSERT_FALSE(w.open_scenario(kScenario));
  ASSERT_TRUE(w.start_search());
  w.wait_for_work();
  const int rows = w.plans()->model()->rowCount();
  ASSERT_GT(rows, 0);
  ASSERT_TRUE(w.start_search());
  EXPECT_FALSE(w.start_search());  // one piece of work at a time
  w.cancel_work();
  EXPECT_FALSE(w.busy());
  EXPECT_TRUE(w.message().contains("cancelled")) << w.message().toStdString();
  EXPECT_EQ(w.plans()->model()->rowCount(), rows);
  // The window takes new work at once.
  ASSERT_TRUE(w.start_search());
  w.wait_for_work();
  EXPECT_EQ(w.plans()->model()->rowCount(), rows);
}

TEST(MainWindow, ComparesTwoRunsOfTheResultsStore) {
  app();
  QTemporaryDir dir;
  const std::string db = dir.filePath("runs.db").toStdString();
  {
    Expected<Store> store = Store::open(db);
    ASSERT_TRUE(store.ok());
    // A simulated and a measured run of one plan, as monarch-sim records them.
    RunRecord sim;
    sim.scenario_name = "s";
    sim.scenario_json = R"({"name": "s"})";
    sim.result.backend = "simgrid";
    sim.result.plan.tp = 2;
    sim.result.plan.dp = 4;
    sim.result.iteration_time_s = 2.0;
    sim.result.memory.stages = {{0, 1, 1, 1, 1, 1, 5}};
    sim.result.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 1000, 10, 0.5}};
    RunRecord real = sim;
    real.result.backend = "real-gpu";
    real.result.measured = true;
    real.result.iteration_time_s = 2.5;
    // Only the measured run recorded a timeline: two ranks' compute and one all-reduce.
    real.result.timeline = {{0, "compute", "fwd L0 mb0", "compute", 0.0, 1.0},
                            {1, "compute", "fwd L0 mb0", "compute", 0.0, 1.2},
                            {0, "tp", "ncclAllReduce tp", "collective", 1.2, 1.5}};
    ASSERT_TRUE(store->record_run(sim).ok());
    ASSERT_TRUE(store->record_run(real).ok());
  }
  MainWindow w;
  w.set_store_path(QString::fromStdString(db));
  ASSERT_EQ(w.compare()->run_count(), 2);
  w.compare()->choose(1, 0);  // newest first: 0 = real-gpu, 1 = simgrid
  const CompareModel* m = w.compare()->model();
  ASSERT_GT(m->rowCount(), 0);
  EXPECT_EQ(m->data(m->index(0, CompareModel::kMetric)).toString(), "iteration time (s)");
  EXPECT_EQ(m->data(m->index(0, CompareModel::kPercent)).toString(), "+25.0%");
  // The stored measured run's timeline opens in the Timeline tab; the simulated one has none.
  EXPECT_FALSE(w.compare()->has_timeline(0));
  EXPECT_FALSE(w.compare()->open_timeline(0));
  ASSERT_TRUE(w.compare()->has_timeline(1));
  ASSERT_TRUE(w.compare()->open_timeline(1));
  const TimelineRows& rows = w.timeline()->canvas()->rows();
  EXPECT_EQ(rows.row_count(), 3);  // rank 0 compute, rank 0 tp, rank 1 compute
  EXPECT_DOUBLE_EQ(rows.end_s(), 1.5);
  // A file that is not a store: a message, no runs, no crash.
  const QString junk = dir.filePath("junk.db");
  QFile f(junk);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write("not a database at all, just text");
  f.close();
  w.set_store_path(junk);
  EXPECT_EQ(w.compare()->run_count(), 0);
  EXPECT_TRUE(w.message().contains("Cannot read the results store")) << w.message().toStdString();
}

TEST(MonarchGuiCommand, ScreenshotWritesOnePngPerViewAndRejectsBadInput) {
  app();
  QTemporaryDir dir;
  QProcess p;
  p.setProcessChannelMode(QProcess::SeparateChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(MONARCH_GUI_EXE), {"--screenshot", dir.filePath("shots"), kScenario});
  ASSERT_TRUE(p.waitForFinished(120000));
  EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
  for (const QString& name : MainWindow::view_names()) {
    QImage shot(dir.filePath("shots/" + name + ".png"));
    ASSERT_FALSE(shot.isNull()) << name.toStdString();
    EXPECT_GT(non_background_fraction(shot), kMinContentFraction) << name.toStdString();
  }
  // An invalid scenario: exit 2 and the JSON path on stderr, no PNGs.
  const QString bad = dir.filePath("bad.json");
  QFile f(bad);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(R"({"model": {"preset": "llama3-8b"}, "cluster": {"gpu": "H100-SXM", "num_gpus": -8, "gpus_per_node": 8},
              "training": {"global_batch_size": 8}})");
  f.close();
  p.start(QStringLiteral(MONARCH_GUI_EXE), {"--screenshot", dir.filePath("bad-shots"), bad});
  ASSERT_TRUE(p.waitForFinished(60000));
  EXPECT_EQ(p.exitCode(), 2);
  EXPECT_TRUE(p.readAllStandardError().contains("/cluster/num_gpus"));
  EXPECT_FALSE(QDir(dir.filePath("bad-shots")).exists());
}

}  // namespace
}  // namespace monarch::gui
