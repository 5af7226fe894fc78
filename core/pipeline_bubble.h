// The pipeline's fill, steady state and drain with stages (and model chunks) of different
// times: how long the schedule takes to run every micro-batch's forward and backward through
// every stage, as the schedule's own order runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch {

struct PipelineShape {
  Schedule schedule = Schedule::kOneFOneB;
  Framework framework = Framework::kMegatron;  // the interleaved order: Megatron's or torch's
  int64_t pp = 1, micro_batches = 1;
  int64_t vpp = 1;  // model chunks per stage: 1 unless interleaved (Plan::chunks_per_stage)
  int64_t extra_warmup = 0;  // extra_warmup_forwards of the plan (core/pipeline_schedule.h)
  // Per model chunk in model order (chunk c of stage s at c x pp + s), one micro-batch: the
  // forward and the backward (with recomputation) time, compute, host and exposed comm.
  std::vector<double> forward_s, backward_s;
  // Per model chunk: the blocking send of its activation to the next chunk's stage (none from
  // the last chunk) and of its input gradient to the previous chunk's stage (none from chunk 0).
  std::vector<double> forward_send_s, backward_send_s;
};

// Makespan of one iteration's pipeline: every stage runs its steps in the schedule's order
// (core/pipeline_schedule.h), a forward of chunk i starts when the stage is free and chunk
// i - 1's activation has arrived, a backward when chunk i + 1's gradient has; a sender is busy
// for its send, and the message arrives when the send ends. This is the longest path through
// the schedule's dependency graph, so it holds for stages of any times: a slow stage paces the
// steady state, the others wait in their warm-up for the first backward and in their cool-down
// for each backward to come back through the later stages.
// Many micro-batches are not run to the end. 1F1B and interleaved schedules repeat lap after
// lap (pp micro-batches) once their steady state has settled: the schedule runs
// kPipelineSettleLaps laps (twice as many while it has not settled, within the budget below),
// and where every step of two laps ends one same time after the same step a lap before
// (within kPipelineSettledTolerance of the makespan), the state has become its own shift and
// the makespan grows by that lap's time to `micro_batches`, exactly. A search times a million
// plans of 8-128 micro-batches; this is most of its time.
// Beyond `max_cells` chunk x micro-batch cells (memory and time grow with them; a step may
// hold millions of micro-batches) without a settled lap, and under GPipe, the schedule runs at
// two micro-batch counts a lap apart at the end of that budget, and the makespan grows from the
// larger by their difference per lap.
// Precondition: schedule_problem(schedule, pp, micro_batches, vpp, framework) is empty.
inline constexpr int64_t kPipelineExactCells = int64_t{1} << 14;
inline constexpr int64_t kPipelineSettleLaps = 8;
inline constexpr double kPipelineSettledTolerance = 1e-12;
double pipeline_makespan_s(const PipelineShape& shape, int64_t max_cells = kPipelineExactCells);

// The same makespan with every step of every micro-batch run: the reference that the
// extrapolation above is checked against (its time and memory grow with the micro-batches).
double pipeline_makespan_every_step_s(const PipelineShape& shape);

// Three laps of the pipeline (3 pp micro-batches over pp x vpp chunks) must fit in this many
// cells, about 40 MB of steps and arrival times; why a longer pipeline cannot be timed, or
// empty. Pipelines of a few hundred stages fit (pp 512 at vpp 1, pp 180 at vpp 8).
inline constexpr int64_t kPipelineMaxCells = int64_t{1} << 20;
std::string pipeline_length_problem(int64_t pp, int64_t vpp);

}  // namespace monarch
