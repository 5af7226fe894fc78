// Pipeline schedules: the order in which one pipeline stage runs the forward and backward
// passes of its micro-batches (and model chunks, when interleaved) in one iteration.
//
//   GPipe (torch.distributed.pipelining.ScheduleGPipe): all forwards, then all backwards,
//     both in micro-batch order.
//   1F1B (Megatron-LM forward_backward_pipelining_without_interleaving, PipeDream-Flush):
//     stage s of p runs min(p - s - 1, m) warm-up forwards, then alternates one forward and
//     one backward, then drains the remaining backwards.
//   Interleaved 1F1B (Megatron-LM forward_backward_pipelining_with_interleaving): each stage
//     holds v model chunks; virtual micro-batch k (of m * v) runs chunk (k mod p*v) / p on
//     micro-batch (k / (p*v)) * p + k mod p (backward chunks in reverse order). Warm-up is
//     (p - s - 1) * 2 + (v - 1) * p virtual steps (all of them when m == p), then 1F1B.
//     Megatron requires m to be a multiple of p; so do we.
//
// With training.framework torchtitan the schedules are torch.distributed.pipelining's
// (torch/distributed/pipelining/schedules.py), which torchtitan builds (torchtitan
// distributed/pipeline_parallel.py, build_pipeline_schedule):
//   ScheduleGPipe: the order above.
//   Schedule1F1B: stage s warms up with min(p - s, m) forwards and then runs backward before
//     forward ("1B1F"), the same order as Megatron's; its __init__ refuses m < p.
//   ScheduleInterleaved1F1B: micro-batches in rounds of r = m / max(1, m / p) (the "flex_pp"
//     relaxation, m a multiple of the round count, not of p); forward op k runs chunk
//     (k / r) mod v, backward op k chunk v - 1 - (k / r) mod v, each chunk's micro-batches in
//     order; warm-up min((v - 1) r + 2 (p - 1 - s), m v) forwards (_get_warmup_ops,
//     _get_1f1b_rank_ops), also when m = p (Megatron then runs every forward first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch {

struct PipelineStep {
  bool forward = true;
  int32_t micro_batch = 0;
  int32_t chunk = 0;  // model chunk on this stage (0 unless interleaved)
  bool operator==(const PipelineStep&) const = default;
};

// Why `schedule` of `framework` cannot run p stages, m micro-batches and v chunks; empty when it can.
std::string schedule_problem(Schedule schedule, int64_t pp, int64_t num_micro_batches, int64_t vpp,
                             Framework framework = Framework::kMegatron);

// Forwards a schedule runs in its warm-up beyond its usual ones: 1 under EP communication overlap
// (Plan::ep_comm_overlap), whose Megatron-Core combined 1F1B schedules "one extra micro-batch
// forward step before the 1f1b stages" (pipeline_parallel/schedules.py) so that each steady-state
// step pairs a forward with an independent backward; without a pipeline its first forward runs
// alone (combined_1f1b_schedule_for_no_pipelining). 0 otherwise. Every function below takes it.
int64_t extra_warmup_forwards(const Plan& plan);

// Steps of `stage` (0-based) in execution order: m * v forwards and m * v backwards.
// Precondition: schedule_problem(...) is empty.
std::vector<PipelineStep> pipeline_order(Schedule schedule, int64_t pp, int64_t stage,
                                         int64_t num_micro_batches, int64_t vpp,
                                         Framework framework = Framework::kMegatron, int64_t extra_warmup = 0);

// Forwards stage `stage` runs before the schedule's steady state (the warm-up): GPipe all of
// them, 1F1B min(p - s - 1, m), Megatron's interleaved (p - s - 1) 2 + (v - 1) p (every one when
// m = p), torch's (v - 1) r + 2 (p - 1 - s), each at most m x v.
int64_t warmup_forwards(Schedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t vpp,
                        Framework framework = Framework::kMegatron, int64_t extra_warmup = 0);

// Chunk passes of each direction that Megatron-Core's combined 1F1B (EP communication overlap)
// runs alone on `stage` of `plan`, the rest pairing one forward with one backward: its warm-up
// forwards (extra_warmup_forwards included) and as many cool-down backwards. At most m x v.
int64_t ep_overlap_unpaired_passes(const Plan& plan, int64_t stage, int64_t num_micro_batches);

// The most model-chunk forward passes stage `stage` holds at once (run, their backward not yet):
// the warm-up and the steady state's first forward, every one when the warm-up is all of them;
// and how many of them are of its last chunk at that moment (the output layer on the last stage).
struct PipelineInFlight {
  int64_t chunk_passes = 0;
  int64_t last_chunk_passes = 0;
};
PipelineInFlight peak_in_flight(Schedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t vpp,
                                Framework framework = Framework::kMegatron, int64_t extra_warmup = 0);

// The same steps appended to `out` (no allocation when it has room).
void append_pipeline_order(std::vector<PipelineStep>& out, Schedule schedule, int64_t pp, int64_t stage,
                           int64_t num_micro_batches, int64_t vpp, Framework framework = Framework::kMegatron,
                           int64_t extra_warmup = 0);

// Compact text form, e.g. "F0 F1 B0 F2 B1 B2" (chunks as "F0.1" when vpp > 1), for tests and logs.
std::string to_string(const std::vector<PipelineStep>& steps, bool show_chunk);

}  // namespace monarch
