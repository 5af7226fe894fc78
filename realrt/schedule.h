// Pipeline schedules of the real runtime: the order in which one pipeline stage runs the forward
// and backward passes of its model chunks over the micro-batches of a step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch::realrt {

struct PipeOp {
  bool forward = true;
  int64_t chunk = 0;  // model chunk on this stage (0 .. vpp-1); virtual stage = chunk * pp + stage
  int64_t mb = 0;     // micro-batch
  bool operator==(const PipeOp&) const = default;
};

// GPipe: all forwards, then all backwards. 1F1B (PipeDream-Flush): pp - stage - 1 warm-up
// forwards, then alternate one forward and one backward, then the remaining backwards.
// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's schedule): vpp chunks per stage,
// micro-batches in groups of pp; needs num_mb % pp == 0.
std::vector<PipeOp> pipeline_schedule(Schedule schedule, int64_t pp, int64_t vpp, int64_t stage, int64_t num_mb);

std::string to_string(const PipeOp& op);

}  // namespace monarch::realrt
