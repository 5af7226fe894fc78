#include <gtest/gtest.h>

#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch {
namespace {

TEST(Names, ScheduleNamesMatchTheSpec) {
  EXPECT_STREQ(to_string(Schedule::kGpipe), "gpipe");
  EXPECT_STREQ(to_string(Schedule::kOneFOneB), "1f1b");
  EXPECT_STREQ(to_string(Schedule::kInterleaved), "interleaved-1f1b");
}

// Plans that differ only in a searched switch have different labels.
TEST(Names, PlanLabelShowsTheSwitches) {
  Plan p;
  p.tp = 4;
  p.dp = 2;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  EXPECT_EQ(describe(p), "tp4 pp1 dp2 cp1 ep1 vpp1 mbs1 1f1b sp recompute=none zero1");
  p.tp_comm_overlap = true;
  EXPECT_EQ(describe(p), "tp4 pp1 dp2 cp1 ep1 vpp1 mbs1 1f1b sp tp-overlap recompute=none zero1");
  EXPECT_EQ(describe(p, PlanDetail::kDegrees), "tp4 pp1 dp2 cp1 ep1 vpp1 mbs1");
  p.tp = 1;  // nothing to overlap
  EXPECT_EQ(describe(p), "tp1 pp1 dp2 cp1 ep1 vpp1 mbs1 1f1b sp recompute=none zero1");
  p.ep_comm_overlap = true;  // nothing to overlap either, until ep > 1
  EXPECT_EQ(describe(p), "tp1 pp1 dp2 cp1 ep1 vpp1 mbs1 1f1b sp recompute=none zero1");
  p.ep = 2;
  EXPECT_EQ(describe(p), "tp1 pp1 dp2 cp1 ep2 vpp1 mbs1 1f1b sp ep-overlap recompute=none zero1");
  p.activation_offload_layers = 20;
  EXPECT_EQ(describe(p), "tp1 pp1 dp2 cp1 ep2 vpp1 mbs1 1f1b sp ep-overlap recompute=none offload=20 zero1");
}

TEST(Names, CollectivesAreNamedTheNcclWay) {
  EXPECT_STREQ(nccl_name(CollectiveKind::kAllReduce), "ncclAllReduce");
  EXPECT_STREQ(nccl_name(CollectiveKind::kReduceScatter), "ncclReduceScatter");
}

TEST(Names, Fp8FallsBackToBf16PeakWhenTheGpuHasNoFp8) {
  GpuSpec a100;
  a100.peak_tflops.bf16 = 312;
  EXPECT_DOUBLE_EQ(peak_tflops(a100, Precision::kFp8), 312);
}

}  // namespace
}  // namespace monarch
