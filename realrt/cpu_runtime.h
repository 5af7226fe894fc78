// The CPU runtime: trains the reference GPT over MPI following a plan — data parallel with ZeRO
// 0-3, Megatron tensor parallel (+ sequence parallel), GPipe / 1F1B / interleaved 1F1B pipeline
// parallel over point-to-point messages, recompute none / selective / full, gradient
// accumulation over micro-batches — and measures it (per rank step and compute time, time and
// bytes per collective kind and group, peak memory per category).
//
// Ranks are placed tp fastest, then dp, then pp (order tp-cp-ep-dp-pp with cp = ep = 1):
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank).
// Stage s holds the model chunks v = 0 .. vpp-1, chunk v being virtual stage v * pp + s.
//
// ZeRO (per model chunk, the chunk's parameters being two flat segments: the tied token
// embedding, and the rest, each split evenly over the data-parallel group):
//   0  all-reduce of gradients after the last micro-batch; replicated Adam.
//   1  reduce-scatter of gradients after the last micro-batch; Adam on this rank's shard
//      (sharded optimizer states); all-gather of the updated parameters.
//   2  as 1, but gradients are reduce-scattered after every micro-batch's backward pass and only
//      the shard is kept (sharded gradients, DeepSpeed ZeRO-2 with gradient accumulation): m
//      reduce-scatters per step for m micro-batches.
//   3  as 2, and parameters are sharded too: all-gathered before every forward and backward pass
//      of a chunk and dropped after it (FSDP with reshard after forward).
// After the data-parallel reduction: with sequence parallelism, an all-reduce over the TP group
// of the gradients of TP-replicated parameters (LayerNorms, row-parallel biases, positions);
// with pp > 1, an all-reduce of the tied embedding's gradient between the first and last stage
// (Megatron's embedding group; counted under group "pp").
//
// Mixture of experts (realrt/moe.h): the expert layout of core/placement (Megatron-Core's
// expert RankGenerator, core/placement.h): inside a stage, expert-TP groups of plan.expert_tp()
// consecutive ranks, EP groups of stride etp, expert-DP groups of stride etp x ep. Each EP rank
// holds num_experts / ep experts of every layer, sharded over its expert-TP group; tokens go out
// and back with MPI_Alltoall (group "ep", 2 per layer and micro-batch forward, 2 backward, 2 more
// under full recompute) and, with etp > 1, an all-gather and a reduce-scatter around the experts
// (group "etp", 1 + 1 forward, 1 + 1 backward, +1 + 1 under full recompute). With tp > 1 (sequence
// parallel) each TP rank routes its own sequence shard. Dense gradients are reduced over DP,
// expert gradients over the expert-data-parallel group (group "edp"); ZeRO shards them the same
// way (three segments: tied embedding and dense over DP, experts over expert-DP).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "realrt/gpt.h"
#include "realrt/memory.h"
#include "realrt/reference.h"
#include "realrt/span_recorder.h"
#include "realrt/watchdog.h"

namespace monarch::realrt {

// One forward or backward pass of a model chunk on a micro-batch, as the runtime runs it.
struct PipeOp {
  bool forward = true;
  int64_t chunk = 0;  // model chunk on this stage (0 .. vpp-1); virtual stage = chunk * pp + stage
  int64_t mb = 0;     // micro-batch
  bool operator==(const PipeOp&) const = default;
};
// "F(c0,mb3)": the pass as the watchdog names it.
std::string to_string(const PipeOp& op);

struct RuntimeConfig {
  GptConfig model;
  TrainSettings train;
  Plan plan;
};

// Problems that make the plan impossible to run on this model (degrees that do not divide, ...),
// naming the plan key.
Problems check_runtime_config(const RuntimeConfig& cfg);

// Coordinates of a rank in the plan.
struct RankCoords {
  int64_t tp = 0, dp = 0, pp = 0;
  int64_t ep = 0, edp = 0;  // expert-parallel and expert-data-parallel index (core/placement.h)
  int64_t etp = 0;          // expert-tensor-parallel index (core/placement.h)
};
RankCoords rank_coords(const Plan& plan, int64_t rank);
int64_t rank_of(const Plan& plan, const RankCoords& c);

// Time and bytes of one kind of communication in one group, summed over the measured steps.
// bytes follow NCCL's "size": the whole buffer of an all-reduce, the gathered output of an
// all-gather, the input of a reduce-scatter, the send buffer of an all-to-all, the message of a
// send. Groups: "tp", "dp", "pp" (point-to-point), "embedding" (tied-embedding all-reduce
// between first and last stage), "ep" (MoE all-to-all), "edp" (expert gradient reduction),
// "etp" (MoE expert-tensor-parallel all-gather / reduce-scatter).
struct CommStat {
  int64_t bytes = 0;
  double wire_bytes = 0;  // sent by this rank on the wire (ring algorithms, collective_wire_bytes)
  int64_t count = 0;
  double time_s = 0;
};

// What one rank measured.
struct RankReport {
  int64_t rank = 0;
  int64_t stage = 0;
  std::vector<double> losses;          // mean training loss of each step run (same on every rank)
  std::vector<double> step_times_s;    // wall time of each step
  double compute_time_s = 0;           // forward, backward, optimizer; TP collectives excluded
  std::map<std::pair<std::string, std::string>, CommStat> comm;  // (kind, group) -> totals
  MemoryCounters memory;               // peaks since initialisation, bytes
  int64_t steps = 0;                   // steps measured
};

class CpuRuntime {
 public:
  // Builds this rank's part of the model (deterministic initialisation from the seed). world
  // must have plan.world_size() ranks. Collective: every rank must call it. wd (may be null)
  // hears of every activity and wait, and must outlive the runtime.
  // program (may be null): this rank's task list from the plan graph; the runtime then runs the
  // forward and backward passes in the order of its compute tasks and checks that its
  // point-to-point messages (peer, tag) are the ones the graph names.
  static Expected<std::unique_ptr<CpuRuntime>> create(MPI_Comm world, const RuntimeConfig& cfg, Watchdog* wd = nullptr,
                                                      const RankProgram* program = nullptr);
  ~CpuRuntime();

  // Runs optimizer steps [next_step(), last_step); returns the loss of each.
  std::vector<double> train(int64_t last_step);
  int64_t next_step() const { return step_; }

  // Checkpoint of this rank's state (parameters, Adam moments, step) in dir/rank-R.bin.
  // Collective. Returns problems naming the path on failure.
  Problems save_checkpoint(const std::string& dir) const;
  Problems load_checkpoint(const std::string& dir);

  RankReport report() const;

  // Records the timeline of step `step` (realrt/span_recorder.h) when train() runs it: every
  // rank must name the same step (the runtime adds a barrier before it). -1: none.
  void record_timeline(int64_t step) { record_step_ = step; }
  const SpanRecorder& spans() const;

  // Test hooks: a fault injected on this rank at a given step ("crash" or "hang").
  void inject_fault(const std::string& kind, int64_t step) { fault_kind_ = kind; fault_step_ = step; }

 private:
  struct Impl;
  explicit CpuRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int64_t step_ = 0;
  int64_t record_step_ = -1;
  std::string fault_kind_;
  int64_t fault_step_ = -1;
};

// The forward / backward order of a rank program: one PipeOp per (phase, chunk, micro-batch) of
// its compute tasks, in task-list order (recompute tasks belong to the backward pass).
std::vector<PipeOp> schedule_from_program(const RankProgram& program);

// Gathers every rank's report on rank 0 and turns them into a BackendResult (backend
// "real-cpu", measured, losses). Collective; the result is meaningful on rank 0 only.
// per_rank (may be null) receives every rank's summary on rank 0.
struct RankSummary;
BackendResult gather_result(MPI_Comm world, const RuntimeConfig& cfg, const RankReport& mine,
                            std::vector<RankSummary>* per_rank = nullptr);

}  // namespace monarch::realrt
