#include "core/pipeline_bubble.h"

#include <gtest/gtest.h>

#include <random>

#include "core/pipeline_schedule.h"

namespace monarch {
namespace {

// One chunk per stage; every send (all but the last stage's forward and stage 0's backward)
// takes hop_s.
PipelineShape one_f_one_b(std::vector<double> forward_s, std::vector<double> backward_s, int64_t m, double hop_s = 0) {
  PipelineShape sh;
  sh.pp = static_cast<int64_t>(forward_s.size());
  sh.micro_batches = m;
  sh.forward_send_s.assign(forward_s.size(), hop_s);
  sh.backward_send_s.assign(forward_s.size(), hop_s);
  sh.forward_send_s.back() = 0;
  sh.backward_send_s.front() = 0;
  sh.forward_s = std::move(forward_s);
  sh.backward_s = std::move(backward_s);
  return sh;
}

// Equal stages without messages: the textbook (m + p - 1) (f + b), 1F1B and GPipe alike, and
// m (f + b) + (p - 1) / v (f + b) interleaved.
TEST(PipelineMakespan, EqualStagesGiveTheTextbookBubble) {
  PipelineShape sh = one_f_one_b({1, 1, 1, 1}, {2, 2, 2, 2}, 8);
  EXPECT_NEAR(pipeline_makespan_s(sh), 11 * 3.0, 1e-12);
  sh.schedule = Schedule::kGpipe;
  EXPECT_NEAR(pipeline_makespan_s(sh), 11 * 3.0, 1e-12);
  PipelineShape v = sh;
  v.schedule = Schedule::kInterleaved;
  v.vpp = 2;
  v.forward_s.assign(8, 0.5);
  v.backward_s.assign(8, 1.0);
  v.forward_send_s.assign(8, 0.0);
  v.backward_send_s.assign(8, 0.0);
  EXPECT_NEAR(pipeline_makespan_s(v), 8 * 3.0 + 3 * 1.5, 1e-12);
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({1}, {2}, 8)), 8 * 3.0, 1e-12);
}

// Blocking sends: each stage is busy for the messages it sends. On two stages stage 0 sends
// activations and stage 1 gradients, each paces f + b + h, and the pipeline takes the textbook
// (m + p - 1) (f + b + h):
//   stage 0: F0 0-1.1, F1 1.1-2.2, B0 4.2-6.2, F2 6.2-7.3, B1 7.3-9.3, ...
//   stage 1: F0 1.1-2.1, B0 2.1-4.2, F1 4.2-5.2, B1 5.2-7.3, ...
TEST(PipelineMakespan, BlockingSendsLengthenTheStagesThatSendThem) {
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({1, 1}, {2, 2}, 8, 0.1)), 9 * 3.1, 1e-12);
}

// The slowest stage last: the others fill and drain, the bubble is their sum (not p - 1 times
// the slowest).
TEST(PipelineMakespan, ASlowLastStageLeavesTheOthersToFillAndDrain) {
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({1, 1, 1, 2}, {2, 2, 2, 4}, 8)), 8 * 6.0 + 3 * 3.0, 1e-12);
}

// The slowest stage first: nothing fills before it and nothing drains after it, but its
// warm-up (p forwards) ends before the first backward has come back through the other stages:
// it waits f0 + sum_{s > 0} (f_s + b_s) - p f0 = 3 + 3 x 3 - 4 x 3 = 0 here, and with lighter
// forwards on stage 0 the wait shows: 1 + 3 x 3 - 4 x 1 = 6.
TEST(PipelineMakespan, ASlowFirstStageWaitsForTheFirstBackward) {
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({3, 1, 1, 1}, {6, 2, 2, 2}, 8)), 8 * 9.0, 1e-12);
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({1, 1, 1, 1}, {8, 2, 2, 2}, 8)), 8 * 9.0 + 6.0, 1e-12);
}

// In its cool-down a stage's last backwards come back no faster than a later stage runs a
// forward and a backward: stage 0 (f 3, b 1) paces the steady state at 4, but its last backward
// waits for stage 1's last forward and backward (1.5 + 1.5) after its own last forward.
//   stage 0: F0 0-3, F1 3-6, B0 6-7, F2 7-10, B1 10-11, B2 13-14
//   stage 1: F0 3-4.5, B0 4.5-6, F1 6-7.5, B1 7.5-9, F2 10-11.5, B2 11.5-13
TEST(PipelineMakespan, TheCoolDownWaitsForTheLaterStagesForwardAndBackward) {
  EXPECT_NEAR(pipeline_makespan_s(one_f_one_b({3, 1.5}, {1, 1.5}, 3)), 14.0, 1e-12);
}

// Many micro-batches: past its budget of cells the makespan grows lap by lap from the last two
// laps run step by step, and matches running every step; a step of 16M micro-batches takes
// no more memory or time than the budget.
TEST(PipelineMakespan, ManyMicroBatchesGrowByTheSteadyStatesLap) {
  PipelineShape sh;
  sh.schedule = Schedule::kInterleaved;
  sh.pp = 4;
  sh.vpp = 2;
  sh.micro_batches = 64;
  sh.forward_s = {1.2, 1, 1, 2, 1, 1, 1, 1.5};  // a 2x chunk in lap 0, the output layer last
  sh.backward_s = {2, 2, 2, 4, 2, 2, 2, 3};
  sh.forward_send_s.assign(8, 0.1);
  sh.backward_send_s.assign(8, 0.1);
  sh.forward_send_s.back() = 0;
  sh.backward_send_s.front() = 0;
  const double every_step_s = pipeline_makespan_s(sh);
  EXPECT_NEAR(pipeline_makespan_s(sh, 8 * 4 * 4), every_step_s, 1e-9 * every_step_s);
  sh.micro_batches = int64_t{1} << 24;
  const double long_s = pipeline_makespan_s(sh);
  // Stage 3 paces it: 2 + 4 + 1.5 + 3 and three sends, 10.8 per micro-batch.
  EXPECT_GT(long_s, static_cast<double>(sh.micro_batches) * 10.8);
  EXPECT_LT(long_s, static_cast<double>(sh.micro_batches) * 10.8 * 1.001);
}

// The settled-lap extrapolation (and the kept shapes) match running every step, on pipelines
// of random chunk and message times under every schedule and every framework's order, the extra
// warm-up forward included, at micro-batch counts from one lap to several hundred; a shape
// timed again gives the same makespan.
TEST(PipelineMakespan, TheSettledLapExtrapolationMatchesEveryStep) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> chunk_s(0.5, 2.0), hop_s(0.0, 0.3);
  int64_t checked = 0;
  for (const Framework framework : {Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepspeed})
    for (const Schedule schedule : {Schedule::kOneFOneB, Schedule::kGpipe, Schedule::kInterleaved})
      for (const int64_t pp : {2, 3, 4, 8})
        for (const int64_t m : {1, 5, 8, 24, 40, 64, 96, 100, 264}) {
          PipelineShape sh;
          sh.schedule = schedule;
          sh.framework = framework;
          sh.pp = pp;
          sh.vpp = schedule == Schedule::kInterleaved ? 1 + m % 3 : 1;
          sh.micro_batches = m;
          sh.extra_warmup = m % 2;
          if (!schedule_problem(schedule, pp, m, sh.vpp, framework).empty()) continue;
          const auto chunks = static_cast<size_t>(pp * sh.vpp);
          for (size_t i = 0; i < chunks; ++i) {
            sh.forward_s.push_back(chunk_s(rng));
            sh.backward_s.push_back(2 * chunk_s(rng));
            sh.forward_send_s.push_back(i + 1 < chunks ? hop_s(rng) : 0.0);
            sh.backward_send_s.push_back(i > 0 ? hop_s(rng) : 0.0);
          }
          const double exact_s = pipeline_makespan_every_step_s(sh);
          EXPECT_NEAR(pipeline_makespan_s(sh), exact_s, 1e-9 * exact_s)
              << to_string(schedule) << " " << to_string(framework) << " pp " << pp << " vpp " << sh.vpp << " m " << m;
          EXPECT_EQ(pipeline_makespan_s(sh), pipeline_makespan_s(sh));
          ++checked;
        }
  EXPECT_GT(checked, 150);
}

// A pipeline too long to time (three laps over more than 2^20 cells) is named, not run: a few
// hundred stages fit.
TEST(PipelineMakespan, APipelineTooLongToTimeIsNamed) {
  EXPECT_EQ(pipeline_length_problem(512, 1), "");
  EXPECT_EQ(pipeline_length_problem(180, 8), "");
  EXPECT_NE(pipeline_length_problem(1024, 1).find("1024 stages x 1 chunks is too long to time"), std::string::npos)
      << pipeline_length_problem(1024, 1);
  EXPECT_NE(pipeline_length_problem(256, 8), "");
}

}  // namespace
}  // namespace monarch
