// The GUI's table models over hand-built result values: Qt's model contract
// (QAbstractItemModelTester), what each cell shows, sorting and filtering, and the
// nccl-tests bandwidth arithmetic.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QBrush>

#include "core/collectives.h"
#include "gui/models/communication_model.h"
#include "gui/models/compare_model.h"
#include "gui/models/format.h"
#include "gui/models/memory_model.h"
#include "gui/models/plans_model.h"
#include "gui/models/timeline_rows.h"

namespace monarch::gui {
namespace {

using Tester = QAbstractItemModelTester;

BackendResult make_result(int64_t tp, int64_t pp, int64_t dp, double iteration_s, bool fits,
                          Schedule schedule = Schedule::kOneFOneB) {
  BackendResult r;
  r.backend = "analytical";
  r.plan.tp = tp;
  r.plan.pp = pp;
  r.plan.dp = dp;
  r.plan.schedule = schedule;
  r.iteration_time_s = iteration_s;
  r.tokens_per_s = 1000.0 / iteration_s;
  r.mfu = 0.4;
  r.memory.fits = fits;
  r.memory.capacity_gib = 76;
  r.memory.peak_gib = fits ? 60 : 91.2;
  for (int64_t s = 0; s < pp; ++s) {
    StageMemory m;
    m.stage = s;
    m.weights_gib = 10 + s;
    m.gradients_gib = 5;
    m.optimizer_gib = 20;
    m.activations_gib = 15 - s;
    m.buffers_gib = 1;
    m.total_gib = m.weights_gib + m.gradients_gib + m.optimizer_gib + m.activations_gib + m.buffers_gib;
    r.memory.stages.push_back(m);
  }
  r.time_breakdown_s.compute = iteration_s * 0.7;
  r.time_breakdown_s.bubble = iteration_s * 0.1;
  return r;
}

QString cell(const QAbstractItemModel& m, int row, int col, int role = Qt::DisplayRole) {
  return m.data(m.index(row, col), role).toString();
}

// A valid but unwise plan is listed with its warnings, in the cell and the row's tooltip; the
// text filter finds it by them.
TEST(PlansModel, ShowsEachPlansWarnings) {
  PlansModel model;
  BackendResult unwise = make_result(16, 1, 4, 20.0, true);
  unwise.warnings = {"TP 16 crosses nodes of 8 GPUs", "micro-batch 1: small GEMMs"};
  model.set_results({make_result(8, 8, 1, 13.8, true), unwise});
  EXPECT_EQ(model.headerData(PlansModel::kWarnings, Qt::Horizontal).toString(), "Warnings");
  EXPECT_EQ(cell(model, 0, PlansModel::kWarnings), "");
  EXPECT_EQ(cell(model, 1, PlansModel::kWarnings), "TP 16 crosses nodes of 8 GPUs; micro-batch 1: small GEMMs");
  const QString tip = model.data(model.index(1, PlansModel::kTp), Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains("warning: TP 16 crosses nodes of 8 GPUs\nwarning: micro-batch 1")) << tip.toStdString();
  PlansFilterModel filter;
  filter.setSourceModel(&model);
  filter.set_text(QStringLiteral("crosses nodes"));
  EXPECT_EQ(filter.rowCount(), 1);
}

// The recompute column says what the plan does with its activations, offloading included.
TEST(PlansModel, RecomputeColumnShowsActivationOffloading) {
  PlansModel model;
  BackendResult offloaded = make_result(1, 1, 64, 6.5, true);
  offloaded.plan.activation_offload_layers = 38;
  model.set_results({make_result(8, 8, 1, 13.8, true), offloaded});
  EXPECT_EQ(cell(model, 0, PlansModel::kRecompute), QString::fromLatin1(to_string(model.result(0).plan.recompute)));
  EXPECT_EQ(cell(model, 1, PlansModel::kRecompute), "none, offload 38 layers");
  EXPECT_TRUE(model.data(model.index(1, PlansModel::kTp), Qt::ToolTipRole).toString().contains("offload=38"));
}

TEST(PlansModel, PassesModelTesterAndShowsEachPlan) {
  PlansModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.set_results({make_result(8, 8, 1, 13.8, true, Schedule::kInterleaved),
                     make_result(4, 16, 1, 15.0, true), make_result(2, 4, 8, 9.0, false)});
  ASSERT_EQ(model.rowCount(), 3);
  ASSERT_EQ(model.columnCount(), PlansModel::kColumnCount);
  EXPECT_EQ(cell(model, 0, PlansModel::kRank), "1");
  EXPECT_EQ(cell(model, 0, PlansModel::kTp), "8");
  EXPECT_EQ(cell(model, 0, PlansModel::kSchedule), "interleaved-1f1b");
  EXPECT_EQ(cell(model, 0, PlansModel::kIterationTime), "13.8 s");
  EXPECT_EQ(cell(model, 0, PlansModel::kMfu), "40.0%");
  EXPECT_EQ(cell(model, 2, PlansModel::kFits), "no");
  EXPECT_EQ(cell(model, 2, PlansModel::kPeakMemory), "91.2 GiB");
  EXPECT_TRUE(model.data(model.index(2, 0), Qt::ForegroundRole).value<QBrush>().color().red() > 150);
  EXPECT_FALSE(model.data(model.index(0, 0), Qt::ForegroundRole).isValid());
  EXPECT_EQ(model.headerData(PlansModel::kIterationTime, Qt::Horizontal).toString(), "Iteration");
  EXPECT_EQ(cell(model, 0, PlansModel::kWarnings), "");
  model.set_results({});
  EXPECT_EQ(model.rowCount(), 0);
}

TEST(PlansFilterModel, SortsNumericallyAndFilters) {
  PlansModel model;
  model.set_results({make_result(8, 8, 1, 10.0, true), make_result(4, 16, 1, 9.0, true),
                     make_result(2, 4, 8, 100.0, false, Schedule::kGpipe)});
  PlansFilterModel proxy;
  proxy.setSourceModel(&model);
  Tester tester(&proxy, Tester::FailureReportingMode::Fatal);
  proxy.sort(PlansModel::kIterationTime, Qt::AscendingOrder);
  // Text order would put "10 s" and "100 s" before "9 s".
  EXPECT_EQ(cell(proxy, 0, PlansModel::kIterationTime), "9 s");
  EXPECT_EQ(cell(proxy, 1, PlansModel::kIterationTime), "10 s");
  EXPECT_EQ(cell(proxy, 2, PlansModel::kIterationTime), "100 s");
  proxy.sort(PlansModel::kTp, Qt::DescendingOrder);
  EXPECT_EQ(cell(proxy, 0, PlansModel::kTp), "8");

  proxy.set_fits_only(true);
  EXPECT_EQ(proxy.rowCount(), 2);
  proxy.set_fits_only(false);
  proxy.set_text("GPIPE");
  ASSERT_EQ(proxy.rowCount(), 1);
  EXPECT_EQ(cell(proxy, 0, PlansModel::kTp), "2");
  proxy.set_text("");
  EXPECT_EQ(proxy.rowCount(), 3);
}

TEST(RejectedModel, ShowsPlanAndReason) {
  RejectedModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  RejectedPlan r;
  r.plan.tp = 2;
  r.plan.pp = 1;
  r.plan.dp = 32;
  r.reason = "needs 91.2 GiB per GPU, A100-80GB has 80";
  model.set_rejected({r, r});
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(cell(model, 0, RejectedModel::kDp), "32");
  EXPECT_EQ(cell(model, 1, RejectedModel::kReason), "needs 91.2 GiB per GPU, A100-80GB has 80");
  EXPECT_TRUE(cell(model, 0, RejectedModel::kReason, Qt::ToolTipRole).contains("tp2 pp1 dp32"));
}

TEST(MemoryModel, OneRowPerStageOneColumnPerCategory) {
  MemoryModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  BackendResult r = make_result(8, 4, 1, 10, true);
  r.memory.stages[3].total_gib = 80;  // over the 76 GiB capacity
  model.set_report(r.memory);
  ASSERT_EQ(model.rowCount(), 4);
  EXPECT_EQ(model.capacity_gib(), 76);
  EXPECT_EQ(cell(model, 1, MemoryModel::kStage), "1");
  EXPECT_EQ(cell(model, 1, MemoryModel::kWeights), "11.00");
  EXPECT_DOUBLE_EQ(model.gib(1, MemoryModel::kActivations), 14);
  EXPECT_DOUBLE_EQ(model.data(model.index(2, MemoryModel::kOptimizer), kSortRole).toDouble(), 20);
  EXPECT_TRUE(model.data(model.index(3, MemoryModel::kTotal), Qt::ForegroundRole).isValid());
  EXPECT_FALSE(model.data(model.index(0, MemoryModel::kTotal), Qt::ForegroundRole).isValid());
}

TEST(CommunicationModel, AlgbwAndBusbwTheNcclTestsWay) {
  BackendResult r = make_result(8, 1, 4, 1, true);
  r.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 8'000'000'000, 10, 0.1},
                     {CollectiveKind::kAllGather, GroupKind::kDp, 2'000'000'000, 1, 0.05},
                     {CollectiveKind::kAllReduce, std::nullopt, 1'000'000'000, 1, 0.1, 0, "mystery"},
                     {CollectiveKind::kReduceScatter, GroupKind::kDp, 1'000, 1, 0.0}};
  CommunicationModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.set_result(r);
  ASSERT_EQ(model.rowCount(), 4);
  const auto& rows = model.rows();
  EXPECT_EQ(rows[0].group_ranks, 8);
  EXPECT_NEAR(rows[0].algbw_GBps, 80.0, 1e-9);
  EXPECT_NEAR(rows[0].busbw_GBps, 80.0 * 2 * 7 / 8, 1e-9);  // 140
  EXPECT_EQ(cell(model, 0, CommunicationModel::kBusBw), "140.0");
  EXPECT_NEAR(rows[1].algbw_GBps, 40.0, 1e-9);
  EXPECT_NEAR(rows[1].busbw_GBps, 30.0, 1e-9);
  EXPECT_EQ(cell(model, 2, CommunicationModel::kRanks), "?");
  EXPECT_EQ(cell(model, 2, CommunicationModel::kGroup), "mystery");
  EXPECT_EQ(cell(model, 2, CommunicationModel::kAlgBw), "10.0");
  EXPECT_EQ(cell(model, 2, CommunicationModel::kBusBw), "—");  // unknown group size
  EXPECT_EQ(cell(model, 3, CommunicationModel::kAlgBw), "—");  // zero time
  EXPECT_EQ(cell(model, 0, CommunicationModel::kBytes), "7.45 GiB");
  EXPECT_EQ(cell(model, 0, CommunicationModel::kTime), "100 ms");
}

TEST(CompareModel, SideBySideWithDifferences) {
  BackendResult a = make_result(8, 2, 1, 10.0, true);
  BackendResult b = make_result(8, 3, 1, 12.5, true);
  a.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 100, 1, 2.0}};
  b.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 100, 1, 1.0}, {CollectiveKind::kAllReduce, GroupKind::kDp, 50, 1, 0.5}};
  CompareModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.set_results(a, "analytical", b, "simgrid");
  EXPECT_EQ(model.headerData(CompareModel::kA, Qt::Horizontal).toString(), "analytical");
  EXPECT_EQ(model.headerData(CompareModel::kB, Qt::Horizontal).toString(), "simgrid");
  auto find = [&](const QString& metric) {
    for (int r = 0; r < model.rowCount(); ++r)
      if (cell(model, r, CompareModel::kMetric) == metric) return r;
    return -1;
  };
  const int it = find("iteration time (s)");
  ASSERT_GE(it, 0);
  EXPECT_EQ(cell(model, it, CompareModel::kPercent), "+25.0%");
  EXPECT_DOUBLE_EQ(model.data(model.index(it, CompareModel::kDifference), kSortRole).toDouble(), 2.5);
  const int stage2 = find("stage 2 total (GiB)");
  ASSERT_GE(stage2, 0);
  EXPECT_EQ(cell(model, stage2, CompareModel::kA), "—");
  EXPECT_EQ(cell(model, stage2, CompareModel::kPercent), "—");
  const int tp = find("all-reduce tp time (s)");
  ASSERT_GE(tp, 0);
  EXPECT_EQ(cell(model, tp, CompareModel::kPercent), "-50.0%");
  const int dp = find("all-reduce dp time (s)");
  ASSERT_GE(dp, 0);
  EXPECT_EQ(cell(model, dp, CompareModel::kA), "—");
  EXPECT_EQ(cell(model, find("cp comm (s)"), CompareModel::kPercent), "+0.0%");  // 0 vs 0
  model.clear();
  EXPECT_EQ(model.rowCount(), 0);
}

TEST(CompareRow, PercentNeedsANonZeroBase) {
  EXPECT_FALSE((CompareRow{"", "", 0.0, 1.0}.percent()));
  EXPECT_DOUBLE_EQ(*CompareRow({"", "", 4.0, 3.0}).percent(), -25.0);
  EXPECT_FALSE((CompareRow{"", "", std::nullopt, 1.0}.percent()));
}

TEST(Format, UnitsAreAlwaysPrinted) {
  EXPECT_EQ(format_seconds(13.8), "13.8 s");
  EXPECT_EQ(format_seconds(0.0125), "12.5 ms");
  EXPECT_EQ(format_seconds(3.5e-5), "35 us");
  EXPECT_EQ(format_seconds(0), "0 s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  Plan p;
  p.sequence_parallel = true;
  EXPECT_EQ(plan_summary(p), "tp1 pp1 dp1 cp1 ep1 vpp1 mbs1 1f1b sp recompute=none zero0");
}

TEST(TimelineRows, OneRowPerRankAndStreamComputeFirst) {
  std::vector<TimelineSpan> spans = {
      {1, "tp", "ncclAllReduce tp", "collective", 0.5, 0.6},
      {0, "compute", "fwd L0 mb1", "compute", 1.0, 2.0},
      {0, "compute", "fwd L0 mb0", "compute", 0.0, 1.0},
      {0, "dp", "ncclAllReduce dp", "collective", 2.0, 3.0},
      {1, "compute", "fwd L1 mb0", "compute", 1.0, 2.0},
  };
  TimelineRows rows(spans);
  ASSERT_EQ(rows.row_count(), 4);
  EXPECT_EQ(rows.rows()[0].stream, "compute");
  EXPECT_EQ(rows.rows()[1].stream, "dp");
  EXPECT_EQ(rows.rows()[2].rank, 1);
  EXPECT_EQ(rows.rows()[2].stream, "compute");
  EXPECT_EQ(rows.rows()[3].stream, "tp");
  EXPECT_DOUBLE_EQ(rows.end_s(), 3.0);
  // Row 0 sorted by start.
  EXPECT_EQ(rows.spans()[rows.rows()[0].spans[0]].name, "fwd L0 mb0");
  EXPECT_EQ(rows.spans()[rows.span_at(0, 1.5)].name, "fwd L0 mb1");
  EXPECT_EQ(rows.span_at(1, 1.5), -1);
  EXPECT_EQ(rows.span_at(99, 1.5), -1);
}

TEST(TimelineRows, VisibleWindowFindsExactlyTheIntersectingSpans) {
  // One rank, 10000 back-to-back spans of 1 ms, plus one long span overlapping many.
  std::vector<TimelineSpan> spans;
  for (int i = 0; i < 10000; ++i)
    spans.push_back({0, "compute", "k", "compute", i * 1e-3, (i + 1) * 1e-3});
  TimelineRows rows(spans);
  auto [f, l] = rows.visible(0, 5.0005, 5.0025);
  // Spans 5000, 5001, 5002 intersect [5.0005, 5.0025].
  EXPECT_EQ(f, 5000);
  EXPECT_EQ(l, 5003);
  auto [f2, l2] = rows.visible(0, 20, 30);
  EXPECT_EQ(f2, l2);
  spans.push_back({0, "compute", "long", "compute", 1.0, 9.0});
  TimelineRows with_long(spans);
  auto [f3, l3] = with_long.visible(0, 8.5, 8.5);
  bool has_long = false;
  for (int i = f3; i < l3; ++i) has_long |= with_long.spans()[with_long.rows()[0].spans[i]].name == "long";
  EXPECT_TRUE(has_long);
  EXPECT_LT(l3 - f3, 7600);  // does not return the whole row
}

// pp 2, dp 2 (tp 1): ranks 0, 1 are stage 0 (dp replicas 0 and 1), ranks 2, 3 stage 1.
std::vector<TimelineSpan> two_stage_spans(double rank1_shift_s) {
  std::vector<TimelineSpan> spans;
  for (int32_t rank = 0; rank < 4; ++rank) {
    const double stage_start = rank >= 2 ? 1.0 : 0.0;
    const double shift = rank == 1 ? rank1_shift_s : 0.0;
    spans.push_back({rank, "compute", "fwd L0 mb0", "compute", stage_start + shift, stage_start + 1 + shift});
    spans.push_back({rank, "dp", "ncclAllReduce dp", "collective", 3.0 + shift, 3.5 + shift});
  }
  return spans;
}

TEST(TimelineRows, GroupedByStageWithAlikeReplicasFolded) {
  Plan plan;
  plan.pp = 2;
  plan.dp = 2;
  const TimelineRows rows(two_stage_spans(0), plan);
  ASSERT_TRUE(rows.grouped());
  EXPECT_EQ(rows.folded_ranks(), 2);  // ranks 1 and 3
  ASSERT_EQ(rows.row_count(), 4);     // (rank 0, rank 2) x (compute, dp)
  EXPECT_EQ(rows.rows()[0].rank, 0);
  EXPECT_EQ(rows.rows()[0].stage, 0);
  EXPECT_EQ(rows.rows()[0].ranks, 2);
  EXPECT_EQ(rows.rows()[2].rank, 2);
  EXPECT_EQ(rows.rows()[2].stage, 1);
  ASSERT_EQ(rows.stages().size(), 2u);
  EXPECT_EQ(rows.stages()[1].first_row, 2);
  EXPECT_EQ(rows.stages()[1].end_row, 4);
  // Replica 1 of stage 0 runs 0.1 s late: not alike, so it keeps its own rows.
  const TimelineRows apart(two_stage_spans(0.1), plan);
  EXPECT_EQ(apart.folded_ranks(), 1);  // only rank 3
  ASSERT_EQ(apart.row_count(), 6);
  EXPECT_EQ(apart.rows()[2].rank, 1);
  EXPECT_EQ(apart.rows()[0].ranks, 1);
  EXPECT_EQ(apart.stages()[0].end_row, 4);
  // A measured rank's rows go on top, on the same time axis; the stages move down.
  TimelineRows with_measured(two_stage_spans(0), plan);
  with_measured.prepend_measured({{0, "compute", "kernel", "compute", 0.0, 1.2}, {0, "nccl", "ncclAllReduce", "collective", 3.0, 4.0}});
  ASSERT_EQ(with_measured.row_count(), 6);
  EXPECT_EQ(with_measured.measured_rows(), 2);
  EXPECT_TRUE(with_measured.rows()[0].measured);
  EXPECT_FALSE(with_measured.rows()[2].measured);
  EXPECT_EQ(with_measured.stages()[0].first_row, 2);
  EXPECT_DOUBLE_EQ(with_measured.end_s(), 4.0);
  EXPECT_EQ(with_measured.spans()[static_cast<size_t>(with_measured.span_at(1, 3.5))].name, "ncclAllReduce");
  EXPECT_EQ(with_measured.spans()[static_cast<size_t>(with_measured.span_at(2, 0.5))].name, "fwd L0 mb0");
  // Spans of ranks the plan does not have: left as they are.
  Plan small;
  const TimelineRows ungrouped(two_stage_spans(0), small);
  EXPECT_FALSE(ungrouped.grouped());
  EXPECT_EQ(ungrouped.row_count(), 8);
}

}  // namespace
}  // namespace monarch::gui
