#include "core/pipeline_schedule.h"

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

std::string torch_order(Schedule s, int64_t pp, int64_t stage, int64_t m, int64_t v) {
  return to_string(pipeline_order(s, pp, stage, m, v, Framework::kTorchtitan), v > 1);
}

// torch.distributed.pipelining ScheduleInterleaved1F1B with 10 micro-batches on pp 4: rounds of
// r = 10 / max(1, 10 / 4) = 5; forward op k runs chunk (k / 5) mod 2, backward op k chunk
// 1 - (k / 5) mod 2; the last stage warms up with (2 - 1) x 5 + 2 x 0 = 5 forwards.
// Megatron-Core's combined 1F1B (EP communication overlap) runs the interleaved warm-up and one
// more forward alone, and as many backwards at the end; without a pipeline the first forward and
// the last backward.
TEST(Schedule, EpOverlapPairsAllButTheWarmUpAndOneMoreForward) {
  Plan p;
  p.pp = 4;
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  p.ep_comm_overlap = true;
  EXPECT_EQ(extra_warmup_forwards(p), 1);
  // 4 stages, 2 chunks, 8 micro-batches: warm-up (4 - s - 1) x 2 + (2 - 1) x 4, plus one.
  EXPECT_EQ(ep_overlap_unpaired_passes(p, 0, 8), 6 + 4 + 1);
  EXPECT_EQ(ep_overlap_unpaired_passes(p, 3, 8), 0 + 4 + 1);
  // Never more than every pass: 2 micro-batches of 2 chunks are 4 passes.
  EXPECT_EQ(ep_overlap_unpaired_passes(p, 0, 2), 4);
  // The order runs that one more forward before the steady state, and holds one more pass.
  EXPECT_EQ(order(Schedule::kInterleaved, 4, 3, 8, 2).substr(0, 29), "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1");
  EXPECT_EQ(to_string(pipeline_order(Schedule::kInterleaved, 4, 3, 8, 2, Framework::kMegatron, 1), true).substr(0, 34),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 B0.1");
  EXPECT_EQ(peak_in_flight(Schedule::kInterleaved, 4, 3, 8, 2, Framework::kMegatron, 1).chunk_passes,
            peak_in_flight(Schedule::kInterleaved, 4, 3, 8, 2).chunk_passes + 1);
  // Without a pipeline: the first forward alone, then each forward beside the previous backward.
  Plan flat;
  flat.ep_comm_overlap = true;
  EXPECT_EQ(ep_overlap_unpaired_passes(flat, 0, 16), 1);
  EXPECT_EQ(order(Schedule::kOneFOneB, 1, 0, 3, 1), "F0 B0 F1 B1 F2 B2");
  EXPECT_EQ(to_string(pipeline_order(Schedule::kOneFOneB, 1, 0, 3, 1, Framework::kMegatron, 1), false), "F0 F1 B0 F2 B1 B2");
}

TEST(Schedule, TorchInterleavedRunsRoundsOfMicroBatches) {
  EXPECT_EQ(torch_order(Schedule::kInterleaved, 4, 3, 10, 2),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 F4.1 B4.1 F5.0 B0.0 F6.0 B1.0 "
            "F7.0 B2.0 F8.0 B3.0 F9.0 B4.0 F5.1 B5.1 F6.1 B6.1 F7.1 B7.1 F8.1 B8.1 F9.1 B9.1 "
            "B5.0 B6.0 B7.0 B8.0 B9.0");
  // With m a multiple of p the rounds are p micro-batches: Megatron's order, except that
  // Megatron runs every forward first when m = p.
  EXPECT_EQ(torch_order(Schedule::kInterleaved, 4, 0, 8, 2), order(Schedule::kInterleaved, 4, 0, 8, 2));
  EXPECT_EQ(torch_order(Schedule::kInterleaved, 4, 3, 8, 2), order(Schedule::kInterleaved, 4, 3, 8, 2));
  EXPECT_NE(torch_order(Schedule::kInterleaved, 4, 3, 4, 2), order(Schedule::kInterleaved, 4, 3, 4, 2));
  // 1F1B and GPipe: the same orders as Megatron's (torch's Schedule1F1B warms up with p - s
  // forwards and runs B before F: the same sequence).
  EXPECT_EQ(torch_order(Schedule::kOneFOneB, 4, 1, 8, 1), order(Schedule::kOneFOneB, 4, 1, 8, 1));
  EXPECT_EQ(torch_order(Schedule::kGpipe, 4, 1, 8, 1), order(Schedule::kGpipe, 4, 1, 8, 1));
  // Every forward and backward once, backward after forward, for counts Megatron refuses.
  for (int64_t m : {5, 6, 10, 12, 14}) {
    if (!schedule_problem(Schedule::kInterleaved, 4, m, 3, Framework::kTorchtitan).empty()) continue;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const auto steps = pipeline_order(Schedule::kInterleaved, 4, stage, m, 3, Framework::kTorchtitan);
      ASSERT_EQ(steps.size(), static_cast<size_t>(2 * m * 3));
      std::vector<int> seen_f(static_cast<size_t>(m * 3), 0), seen_b(static_cast<size_t>(m * 3), 0);
      for (const auto& st : steps) {
        const auto i = static_cast<size_t>(st.micro_batch * 3 + st.chunk);
        if (!st.forward) EXPECT_EQ(seen_f[i], 1) << "m " << m << " stage " << stage;
        ++(st.forward ? seen_f : seen_b)[i];
      }
      for (int x : seen_f) EXPECT_EQ(x, 1);
      for (int x : seen_b) EXPECT_EQ(x, 1);
    }
  }
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
  const Framework tt = Framework::kTorchtitan;
  EXPECT_NE(schedule_problem(Schedule::kOneFOneB, 4, 3, 1, tt).find("at least as many micro-batches (3)"), std::string::npos);
  EXPECT_EQ(schedule_problem(Schedule::kGpipe, 4, 3, 1, tt), "");
  EXPECT_EQ(schedule_problem(Schedule::kInterleaved, 4, 6, 2, tt), "");  // 1 round of 6
  EXPECT_EQ(schedule_problem(Schedule::kInterleaved, 4, 3, 2, tt), "");  // 1 round of 3
  EXPECT_NE(schedule_problem(Schedule::kInterleaved, 4, 9, 2, tt).find("rounds"), std::string::npos);
}

}  // namespace
}  // namespace monarch
