#include "measured/trace_analysis.h"

#include <gtest/gtest.h>

namespace monarch::measured {
namespace {

TEST(Intervals, UnionAndOverlap) {
  EXPECT_DOUBLE_EQ(union_length_us({{0, 10}, {5, 15}, {20, 25}}), 20);
  EXPECT_DOUBLE_EQ(union_length_us({}), 0);
  EXPECT_DOUBLE_EQ(overlap_length_us({{0, 10}, {20, 30}}, {{5, 25}}), 10);
  EXPECT_DOUBLE_EQ(overlap_length_us({{0, 10}}, {{10, 20}}), 0);
}

TEST(CollectiveNames, NcclAndGlooSpellings) {
  CommOp op;
  ASSERT_TRUE(parse_collective_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL", op));
  EXPECT_EQ(op.kind, CollectiveKind::kAllReduce);
  ASSERT_TRUE(parse_collective_name("_allgather_base", op));
  EXPECT_EQ(op.kind, CollectiveKind::kAllGather);
  ASSERT_TRUE(parse_collective_name("reduce_scatter_tensor_coalesced", op));
  EXPECT_EQ(op.kind, CollectiveKind::kReduceScatter);
  ASSERT_TRUE(parse_collective_name("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", op));
  EXPECT_TRUE(op.p2p);
  EXPECT_FALSE(parse_collective_name("ampere_sgemm_128x64_tn", op));
}

// Two iterations kept out of three steps: compute 0-60, comm 40-100 in step 1 (20 us hidden).
// The last kept iteration's device work becomes the rank's timeline, from its step's start.
TEST(AnalyzeTrace, TimelineOfTheLastKeptIteration) {
  TraceReadout t;
  t.rank = 3;
  t.steps = {{1, 0, 100}, {2, 100, 100}, {3, 200, 100}};
  t.comm_ops.push_back({CollectiveKind::kAllGather, false, 4096, 2, "[2,3]"});
  t.comm_ops.push_back({CollectiveKind::kAllReduce, true, 512, 2, "[1,3]"});
  t.activities.push_back({10, 20, ActivityClass::kCompute, -1, -1});  // step 1: not drawn
  t.activities.push_back({110, 50, ActivityClass::kCompute, -1, -1});
  t.activities.push_back({150, 30, ActivityClass::kComm, -1, 0});
  t.activities.push_back({185, 5, ActivityClass::kComm, -1, 1});
  t.activities.push_back({190, 4, ActivityClass::kMemory, -1, -1});
  t.activities.push_back({210, 50, ActivityClass::kCompute, -1, -1});  // the dropped step
  const RankStats s = analyze_trace(t);
  ASSERT_EQ(s.timeline.size(), 4u);
  const TimelineSpan& k = s.timeline[0];
  EXPECT_EQ(k.rank, 3);
  EXPECT_EQ(k.stream, "compute");
  EXPECT_EQ(k.category, "compute");
  EXPECT_NEAR(k.start_s, 10e-6, 1e-15);
  EXPECT_NEAR(k.end_s, 60e-6, 1e-15);
  EXPECT_EQ(s.timeline[1].name, "ncclAllGather");
  EXPECT_EQ(s.timeline[1].stream, "nccl");
  EXPECT_EQ(s.timeline[2].category, "p2p");
  EXPECT_EQ(s.timeline[3].stream, "memcpy");
  EXPECT_NEAR(s.timeline[3].end_s, 94e-6, 1e-15);
}

TEST(AnalyzeTrace, BreakdownOverlapAndDroppedLastStep) {
  TraceReadout t;
  t.rank = 0;
  t.steps = {{1, 0, 100}, {2, 100, 100}, {3, 200, 100}};
  t.comm_ops.push_back({CollectiveKind::kAllReduce, false, 4096, 2, "[0,1]"});
  t.activities.push_back({0, 60, ActivityClass::kCompute, -1, -1});
  t.activities.push_back({40, 60, ActivityClass::kComm, -1, 0});
  t.activities.push_back({110, 50, ActivityClass::kCompute, -1, -1});
  t.activities.push_back({170, 10, ActivityClass::kMemory, -1, -1});
  t.activities.push_back({210, 50, ActivityClass::kCompute, -1, -1});  // in the dropped step
  // A kernel running in step 2's time but launched in step 1 belongs to step 1.
  t.launches.push_back({77, 30});
  t.activities.push_back({150, 5, ActivityClass::kCompute, 77, -1});
  t.memory = {{10, 1e9}, {120, 2e9}, {250, 3e9}};
  const RankStats s = analyze_trace(t);
  ASSERT_EQ(s.iterations.size(), 2u);
  const IterationStats& a = s.iterations[0];
  EXPECT_EQ(a.step, 1);
  EXPECT_DOUBLE_EQ(a.iteration_s, 100e-6);
  EXPECT_NEAR(a.compute_s, 65e-6, 1e-12);
  EXPECT_NEAR(a.comm_s, 60e-6, 1e-12);
  EXPECT_NEAR(a.exposed_comm_s, 40e-6, 1e-12);
  EXPECT_NEAR(a.overlap_ratio, 20.0 / 60.0, 1e-12);
  EXPECT_NEAR(a.idle_s, 0, 1e-12);  // 0-100 busy, plus 150-155
  ASSERT_EQ(a.comm.size(), 1u);
  EXPECT_EQ(a.comm[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(a.comm[0].buffer_bytes, 4096);
  EXPECT_DOUBLE_EQ(a.peak_allocated_bytes, 1e9);
  const IterationStats& b = s.iterations[1];
  EXPECT_NEAR(b.compute_s, 50e-6, 1e-12);
  EXPECT_NEAR(b.memory_s, 10e-6, 1e-12);
  EXPECT_NEAR(b.idle_s, 40e-6, 1e-12);
  EXPECT_EQ(b.overlap_ratio, 0);
  EXPECT_DOUBLE_EQ(b.peak_allocated_bytes, 2e9);
}

// A pipeline stage: forward compute, a receive that waits for the next stage while nothing else
// runs, a receive hidden behind compute, a gradient all-reduce that overlaps a receive, an idle gap.
TEST(AnalyzeTrace, PipelineWaitIsIdlePlusSendReceiveThatNothingOverlaps) {
  TraceReadout t;
  t.steps = {{1, 0, 200}, {2, 200, 100}};
  t.comm_ops.push_back({CollectiveKind::kAllReduce, true, 1024, 2, "[0,1]"});    // send / receive
  t.comm_ops.push_back({CollectiveKind::kAllReduce, false, 4096, 2, "[0,2]"});   // DP all-reduce
  t.activities.push_back({0, 50, ActivityClass::kCompute, -1, -1});
  t.activities.push_back({50, 40, ActivityClass::kComm, -1, 0});    // 50-90: exposed wait, 40
  t.activities.push_back({90, 30, ActivityClass::kCompute, -1, -1});
  t.activities.push_back({100, 10, ActivityClass::kComm, -1, 0});   // hidden behind compute
  t.activities.push_back({130, 30, ActivityClass::kComm, -1, 1});   // 130-160 all-reduce
  t.activities.push_back({150, 20, ActivityClass::kComm, -1, 0});   // 160-170 exposed, 10
  // 120-130 and 170-200 idle: 40
  const RankStats s = analyze_trace(t);
  ASSERT_EQ(s.iterations.size(), 1u);
  const IterationStats& it = s.iterations[0];
  EXPECT_NEAR(it.idle_s, 40e-6, 1e-12);
  EXPECT_NEAR(it.pipeline_wait_s, 90e-6, 1e-12);
  EXPECT_NEAR(it.exposed_comm_s, 80e-6, 1e-12);  // 40 + 30 + 10: the all-reduce counts here, not in the wait
}

TEST(AnalyzeTrace, OneStepLeavesNothing) {
  TraceReadout t;
  t.steps = {{1, 0, 100}};
  EXPECT_TRUE(analyze_trace(t).iterations.empty());
}

}  // namespace
}  // namespace monarch::measured
