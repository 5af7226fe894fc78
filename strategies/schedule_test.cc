#include "strategies/schedule.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

std::string order(Schedule s, int64_t pp, int64_t stage, int64_t m, int64_t v) {
  return to_string(pipeline_order(s, pp, stage, m, v), v > 1);
}

TEST(Schedule, GpipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(order(Schedule::kGpipe, 4, 2, 4, 1), "F0 F1 F2 F3 B0 B1 B2 B3");
}

// PipeDream-Flush / Megatron 1F1B, p = 4, m = 8 (Narayanan et al. 2021, figure 4 top).
TEST(Schedule, OneFOneBMatchesMegatronPerStage) {
  EXPECT_EQ(order(Schedule::kOneFOneB, 4, 0, 8, 1), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(order(Schedule::kOneFOneB, 4, 1, 8, 1), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(order(Schedule::kOneFOneB, 4, 2, 8, 1), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(order(Schedule::kOneFOneB, 4, 3, 8, 1), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(Schedule, OneFOneBWithFewerMicroBatchesThanStagesWarmsUpWithAll) {
  EXPECT_EQ(order(Schedule::kOneFOneB, 4, 0, 2, 1), "F0 F1 B0 B1");
}

// Interleaved 1F1B, p = 4, v = 2, m = 8, as Megatron-LM's
// forward_backward_pipelining_with_interleaving issues it: stage 0 warms up with
// (4 - 0 - 1) * 2 + (2 - 1) * 4 = 10 forwards, stage 3 with 4; in the steady state each
// forward k + warmup is followed by backward k; backward chunks run in reverse order.
// Device 4 reads as the paper's figure 4 (bottom): 1 2 3 4 1 1 2 2 3 3 4 4 5 1 6 2 7 3 8 4 ...
TEST(Schedule, InterleavedMatchesMegatron) {
  EXPECT_EQ(order(Schedule::kInterleaved, 4, 0, 8, 2),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 "
            "F6.1 B0.0 F7.1 B1.0 B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(order(Schedule::kInterleaved, 4, 3, 8, 2),
            "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 F4.0 B0.0 F5.0 B1.0 F6.0 B2.0 F7.0 B3.0 "
            "F4.1 B4.1 F5.1 B5.1 F6.1 B6.1 F7.1 B7.1 B4.0 B5.0 B6.0 B7.0");
}

TEST(Schedule, EveryStepRunsOnceForwardAndOnceBackward) {
  for (Schedule s : {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved}) {
    const int64_t v = s == Schedule::kInterleaved ? 3 : 1;
    for (int64_t stage = 0; stage < 4; ++stage) {
      auto steps = pipeline_order(s, 4, stage, 12, v);
      ASSERT_EQ(steps.size(), static_cast<size_t>(2 * 12 * v));
      std::vector<int> seen_f(12 * v, 0), seen_b(12 * v, 0);
      for (const auto& st : steps) {
        auto& seen = st.forward ? seen_f : seen_b;
        if (!st.forward) EXPECT_EQ(seen_f[st.micro_batch * v + st.chunk], 1) << "backward before forward";
        ++seen[st.micro_batch * v + st.chunk];
      }
      for (int x : seen_f) EXPECT_EQ(x, 1);
      for (int x : seen_b) EXPECT_EQ(x, 1);
    }
  }
}

TEST(Schedule, ExplainsWhatCannotRun) {
  EXPECT_NE(schedule_problem(Schedule::kInterleaved, 4, 6, 2).find("multiple of the pipeline degree"), std::string::npos);
  EXPECT_NE(schedule_problem(Schedule::kOneFOneB, 4, 8, 2).find("needs the interleaved"), std::string::npos);
  EXPECT_NE(schedule_problem(Schedule::kInterleaved, 1, 8, 2).find("at least 2"), std::string::npos);
  EXPECT_EQ(schedule_problem(Schedule::kInterleaved, 4, 8, 2), "");
}

}  // namespace
}  // namespace monarch
