// Finished results of one backend for one plan, in the shape of the result file
// (docs/spec/cli.md). Backends produce them; the store, the CLI and the GUI consume them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch {

struct StageMemory {
  int64_t stage = 0;
  double weights_gib = 0;
  double gradients_gib = 0;
  double optimizer_gib = 0;
  double activations_gib = 0;
  double buffers_gib = 0;  // communication buckets, logits, workspace
  double total_gib = 0;
  int64_t layers = 0;  // transformer layers on the stage (0 = not known)
};

struct MemoryReport {
  bool fits = true;
  double peak_gib = 0;
  double capacity_gib = 0;  // GPU memory usable after the framework reserve
  std::vector<StageMemory> stages;
};

struct TimeBreakdown {
  double compute = 0;
  double tp_comm = 0;
  double cp_comm = 0;
  double pp_comm = 0;
  double dp_comm = 0;
  double ep_comm = 0;
  double bubble = 0;
  double optimizer = 0;
  double exposed_comm = 0;  // communication not hidden behind compute
  double host = 0;          // GPU idle while the host dispatches kernels (CPU-bound layers), not in compute
};

// One (kind, group) line of a result's communication. The result file names the kind and the
// group with to_string(); a measured group that is none of the plan's keeps its trace's name.
struct CommEntry {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::optional<GroupKind> group = {};  // empty: a measured group that is none of the plan's groups
  int64_t bytes = 0;       // sent per rank per iteration
  int64_t count = 0;       // operations per iteration
  double time_s = 0;
  int64_t group_size = 0;  // ranks in the group; 0 = not known
  std::string group_label = {};  // without `group`: the group as the trace names it ("[0, 4]", a process group)
};

// The group's name in results: to_string(*group), else the label.
std::string group_name(const CommEntry& e);
// Ranks in the entry's group: its group_size, else (results stored without it) the size of its
// plan group under `plan`; 0 when neither is known.
int64_t comm_group_size(const CommEntry& e, const Plan& plan);
// The entry of `kind` over the plan group `group`; null when the result has none.
const CommEntry* find_comm(const std::vector<CommEntry>& entries, CollectiveKind kind, GroupKind group);
// Entries of the same collective over the same group (the key a comparison matches them by).
bool same_key(const CommEntry& a, const CommEntry& b);
// The time term a group's communication counts in: expert blocks (ep, etp) and a
// recommendation model's embedding exchanges over every rank (world) in ep_comm; the gradient
// reductions (dp, dp-cp, edp and the tied-embedding all-reduce) in dp_comm.
double TimeBreakdown::*comm_time_term(GroupKind group);

// One span of a timeline: what one rank's stream did between two instants.
struct TimelineSpan {
  int32_t rank = 0;
  std::string stream;  // "compute", "tp", "dp", "pp-send", ...
  std::string name;    // "fwd L3 mb2", "ncclAllReduce tp", ...
  std::string category;  // "compute", "collective", "p2p", "optimizer"; injected failures: "failure", "stall"
  double start_s = 0;
  double end_s = 0;
  int32_t peer = -1;     // point-to-point: the rank on the other side, else -1
  int64_t flow_id = -1;  // point-to-point: same id on a send and its receive (trace arrows)
};

// Memory allocated on one rank from one instant on (simulators: from the plan's alloc/free).
struct MemorySample {
  int32_t rank = 0;
  double time_s = 0;
  double allocated_bytes = 0;
};

// Failures, checkpoints and goodput of a plan (the scenario's reliability block): the closed
// form for every result, the Monte Carlo for the chosen plan (core/goodput.h).
struct ReliabilityReport {
  double goodput = 0;             // useful time / wall time
  double time_to_train_s = 0;     // expected wall time to train training.total_tokens; 0 = no target
  double horizon_s = 0;           // without a target: the wall time the figures are for (30 days)
  double useful_s = 0;
  double expected_interruptions = 0;
  double interruptions_per_day = 0;
  double mtbf_s = 0;
  double spare_wait_s = 0;        // expected wait for a repaired node per node failure (with spares)
  double interval_s = 0;          // checkpoint interval used
  double optimal_interval_s = 0;
  double young_daly_interval_s = 0;
  double checkpoint_bytes_per_rank = 0;
  double checkpoint_bytes_total = 0;
  CheckpointTimes checkpoint;
  Badput badput;
  // Monte Carlo (trials > 0): mean and 90% interval of goodput, wall time, interruptions.
  int64_t trials = 0;
  Interval90 mc_goodput, mc_wall_time_s, mc_interruptions;
  std::vector<std::string> warnings;
};

// A failure injected during a simulated iteration (SimGrid, reliability.inject_failure): what
// each rank was doing when it stopped, and when the framework's timeout declared the job failed.
struct RankStall {
  int32_t rank = 0;
  int64_t node = 0;
  std::string state;         // "failed" (on the failed host), "stalled" (waits on a failed peer), "completed"
  double stalled_at_s = 0;   // failed: the failure; stalled: its last progress (its last task's end)
  std::string blocked_in;    // stalled: the operation it waits in ("ncclAllReduce dp"); else empty
  double blocked_since_s = 0;  // when it entered that operation
};

struct FailureReport {
  std::string component;     // "host" or "link"
  int64_t node = 0;
  double at_s = 0;           // seconds after the iteration's start
  double detection_s = 0;    // the framework's timeout (reliability.detection_s)
  bool affected = false;     // false: the iteration ended before the failure, nothing changed
  double timeout_at_s = 0;   // affected: at_s + detection_s, the job declared failed
  double lost_s = 0;         // affected: wall time since the last completed iteration, all of it lost
  double lost_compute_gpu_s = 0;  // compute done in that time and discarded, GPU-seconds
  std::vector<RankStall> ranks;   // every simulated rank, by rank
};

struct BackendResult {
  std::string backend;  // "analytical", "simgrid", "real-cpu", "real-gpu"
  Plan plan;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double model_flops_per_iteration = 0;
  double hardware_flops_per_iteration = 0;
  MemoryReport memory;
  TimeBreakdown time_breakdown_s;
  std::vector<CommEntry> communication;
  bool measured = false;      // real backends
  std::vector<double> losses;  // real backends: loss after each step
  std::vector<TimelineSpan> timeline;  // simulators and real runs; may be empty
  std::vector<MemorySample> memory_timeline;  // simulators; may be empty
  // Why the plan is valid but unwise (TP across nodes, a tiny micro-batch): predicted and
  // ranked like any other, the reasons shown beside it.
  std::vector<std::string> warnings;
  std::optional<ReliabilityReport> reliability;  // when the scenario has a reliability block
  // SimGrid with reliability.inject_failure: the failed iteration. The figures above stay the
  // healthy iteration's; the timeline is the failed one's (categories "failure" and "stall").
  std::optional<FailureReport> failure;
};

struct RejectedPlan {
  Plan plan;
  std::string reason;
};

}  // namespace monarch
