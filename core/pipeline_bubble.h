// The pipeline's fill and drain with stages (and model chunks) of different times: what an
// iteration takes beyond m micro-batches at the slowest stage's pace, as the schedule runs it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario.h"

namespace monarch {

struct PipelineShape {
  Schedule schedule = Schedule::kOneFOneB;
  Framework framework = Framework::kMegatron;  // the interleaved order: Megatron's or torch's
  int64_t pp = 1, vpp = 1, micro_batches = 1;
  // Per model chunk in model order (chunk c of stage s at c x pp + s), one micro-batch: the
  // forward and the backward (with recomputation) time, compute, host and exposed comm.
  std::vector<double> forward_s, backward_s;
  std::vector<double> stage_s;  // per stage, one micro-batch: the sum of its chunks
  double hop_s = 0;             // one point-to-point message between neighbouring stages
};

// Makespan of the pipeline minus m x (slowest stage + its 2 v messages per micro-batch).
// Stage s starts when micro-batch 0 has passed the stages before it (chunk 0), runs its m
// micro-batches, waits in the warm-up when the first backward comes back later than its
// warm-up forwards end, and the iteration ends when its last backward has passed the stages
// before it again:
//   M_s = F_<s + W_s + m (T_s + 2 v hop) + B_<s,  makespan = max_s M_s
//   W_s = max(path_s, paced warm-up) - own warm-up: path_s is micro-batch 0's forward from
//   stage s through every later chunk and its backward back from the last stage (chunk v - 1);
//   the warm-up is the forwards stage s runs before its first backward (the schedule's warm-up
//   plus one), each paced by the slowest chunk of its lap on the stages before s. The
//   cool-down's backwards wait likewise for the slowest chunk of their lap after s.
// GPipe runs all forwards, then all backwards: two such passes. Equal stages (no embedding or
// output weight) give the textbook (p - 1) / v x (T + 2 v hop).
double pipeline_bubble_s(const PipelineShape& shape);

}  // namespace monarch
