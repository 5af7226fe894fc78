#include "core/pipeline_bubble.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

PipelineShape one_f_one_b(std::vector<double> forward_s, std::vector<double> backward_s, int64_t m) {
  PipelineShape sh;
  sh.pp = static_cast<int64_t>(forward_s.size());
  sh.micro_batches = m;
  for (size_t i = 0; i < forward_s.size(); ++i) sh.stage_s.push_back(forward_s[i] + backward_s[i]);
  sh.forward_s = std::move(forward_s);
  sh.backward_s = std::move(backward_s);
  return sh;
}

// Equal stages: the textbook (p - 1) x (f + b + 2 hops), 1F1B and GPipe alike.
TEST(PipelineBubble, EqualStagesGiveTheTextbookBubble) {
  PipelineShape sh = one_f_one_b({1, 1, 1, 1}, {2, 2, 2, 2}, 8);
  sh.hop_s = 0.1;
  EXPECT_NEAR(pipeline_bubble_s(sh), 3 * 3.2, 1e-12);
  sh.schedule = Schedule::kGpipe;
  EXPECT_NEAR(pipeline_bubble_s(sh), 3 * 3.2, 1e-12);
  // Interleaved, 2 chunks per stage of half the layers: (p - 1) x one chunk.
  PipelineShape v = sh;
  v.schedule = Schedule::kInterleaved;
  v.vpp = 2;
  v.forward_s.assign(8, 0.5);
  v.backward_s.assign(8, 1.0);
  EXPECT_NEAR(pipeline_bubble_s(v), 3 * (1.5 + 0.2), 1e-12);
  sh.pp = 1;
  EXPECT_EQ(pipeline_bubble_s(one_f_one_b({1}, {2}, 8)), 0.0);
}

// The slowest stage last: the others fill and drain, the bubble is their sum (not p - 1 times
// the slowest).
TEST(PipelineBubble, ASlowLastStageLeavesTheOthersToFillAndDrain) {
  const PipelineShape sh = one_f_one_b({1, 1, 1, 2}, {2, 2, 2, 4}, 8);
  EXPECT_NEAR(pipeline_bubble_s(sh), 3 * 3.0, 1e-12);
}

// The slowest stage first: nothing fills before it and nothing drains after it, but its
// warm-up (p forwards) ends before the first backward has come back through the other stages:
// it waits f0 + sum_{s > 0} (f_s + b_s) - p f0 = 3 + 3 x 3 - 4 x 3 = 0 here, and with lighter
// forwards on stage 0 the wait shows.
TEST(PipelineBubble, ASlowFirstStageWaitsForTheFirstBackward) {
  EXPECT_NEAR(pipeline_bubble_s(one_f_one_b({3, 1, 1, 1}, {6, 2, 2, 2}, 8)), 0.0, 1e-12);
  // f0 = 1, b0 = 8: the path is 1 + 3 x 3 = 10, the warm-up 4 x 1 = 4: a wait of 6.
  EXPECT_NEAR(pipeline_bubble_s(one_f_one_b({1, 1, 1, 1}, {8, 2, 2, 2}, 8)), 6.0, 1e-12);
}

}  // namespace
}  // namespace monarch
