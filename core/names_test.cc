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
