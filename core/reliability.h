// Failures, checkpoints and goodput: what a plan delivers over weeks on a cluster that breaks.
//
// Two methods that must agree:
//  - estimate_goodput: a closed form. Full restart follows Daly's model ("A higher order
//    estimate of the optimum checkpoint interval for restart dumps", FGCS 2006): Poisson
//    interruptions at rate lambda, a segment of `interval` useful seconds then a blocking
//    checkpoint, a failure anywhere in the segment loses it, every recovery can itself be
//    interrupted: expected wall time per segment (e^{lambda P} - 1) / lambda x e^{lambda R}.
//    Replica recovery (torchft) is first order in lambda: each failure costs the detection
//    stall of every replica group plus the failed group's absence.
//  - simulate_goodput: a seeded discrete-event Monte Carlo of the whole run (failures drawn
//    per cause, recoveries, lost work, checkpoints, the async write lag), mean and a 90%
//    interval over trials.
// Badput follows the taxonomy of Google's ml-goodput-measurement: checkpoint save, checkpoint
// restore, wasted progress since the last durable checkpoint, infrastructure recovery
// (failure detection and rescheduling) and program startup.
//
// Standard library only; plain structs. The plan enters through GoodputInputs
// (goodput_inputs() builds it from a scenario and a plan: checkpoint bytes after
// ZeRO / FSDP / TP / PP / EP sharding from the memory model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace monarch {

struct Scenario;
struct Plan;

// One cause of interruptions, as a rate per day per 1,000 GPUs of the job.
struct FailureCause {
  std::string name;       // "faulty-gpu", "gpu-hbm", "software-bug", ...
  std::string component;  // "gpu", "hbm", "host", "nic", "switch", "software", "storage", "other"
  double per_day_per_1k_gpus = 0;
};

// A published fleet: its causes and where the figures come from.
struct FailurePreset {
  std::string name;
  std::string source;
  std::vector<FailureCause> causes;
};
const std::vector<FailurePreset>& failure_presets();
const FailurePreset* find_failure_preset(std::string_view name);

// Whether a failure of `component` takes its node out for repair (a GPU, its HBM, the host, its
// NIC); a switch, storage, software or other failure leaves the nodes healthy.
bool takes_node(std::string_view component);

// Rate of a component given as a mean time between failures of one unit (a GPU or a node),
// converted to interruptions per day per 1,000 GPUs.
double rate_from_mtbf_per_day_per_1k_gpus(double mtbf_hours, int64_t gpus_per_unit);

enum class RecoveryMode {
  kFullRestart,  // every rank stops, the job restarts from the last durable checkpoint
  // torchft-style: the failed data-parallel replica group is replaced and heals its state from
  // a peer group while the other groups go on with fewer replicas; a full restart only when
  // every group is down.
  kReplica,
};
const char* to_string(RecoveryMode);

// Defaults of the scenario's reliability block.
// Failure detection: PyTorch's default timeout of an NCCL process group (10 minutes,
// torch.distributed.constants.default_pg_nccl_timeout), after which the watchdog aborts.
inline constexpr double kDefaultDetection_s = 600;
inline constexpr int64_t kDefaultMonteCarloTrials = 200;
inline constexpr int64_t kMaxMonteCarloTrials = 100000;

// A failure injected into one simulated iteration (SimGrid backend): at `at_s` seconds after the
// iteration starts, node `node`'s host (its GPUs and NICs) or its links (its NIC ports) go down.
// The job is declared failed detection_s later (the NCCL / c10d timeout of the block).
struct FailureInjection {
  std::string component;  // "host" or "link"
  int64_t node = 0;
  double at_s = 0;
};

struct ReliabilityConfig {
  std::string preset;                // empty when the causes are given one by one
  std::vector<FailureCause> causes;  // the preset's causes, or the scenario's own
  // Useful seconds between two checkpoints; absent: the interval that maximises goodput.
  std::optional<double> checkpoint_interval_s;
  // PyTorch DCP async_save: only the device-to-host copy blocks training, the write to storage
  // runs behind it; the checkpoint is durable when the write ends.
  bool async_checkpoint = false;
  double storage_write_GBps = 0;  // aggregate over the job, 1e9 bytes/s
  double storage_read_GBps = 0;
  double node_write_GBps = 0;     // per node; 0 = only the aggregate limits
  double node_read_GBps = 0;
  double host_copy_GBps = 0;      // device-to-host copy per GPU (default: the GPU's host link, core/dlrm_model.h)
  double detection_s = 0;         // failure to detection (NCCL / framework timeout, heartbeat)
  double reschedule_s = 0;        // detection to replacement nodes allocated
  double startup_s = 0;           // program start to first step (imports, NCCL init, compile)
  RecoveryMode recovery = RecoveryMode::kFullRestart;
  // Spare nodes and repair. A failure of a node's own part (components gpu, hbm, host, nic;
  // takes_node) sends the node to repair for repair_s; its replacement comes from the
  // spare_nodes healthy spares beside the job's nodes, or, when every spare is itself in
  // repair, the job waits for the first repaired node. The wait follows the rescheduling.
  // Absent: the scheduler always finds a replacement (reschedule_s only).
  std::optional<int64_t> spare_nodes;
  double repair_s = 0;
  std::optional<FailureInjection> inject_failure;  // SimGrid: a failure during the iteration
  int64_t trials = 200;           // Monte-Carlo trials
  uint64_t seed = 1;

  double total_rate_per_day_per_1k_gpus() const;
};

// What the reliability model needs from the plan.
struct GoodputInputs {
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 1;
  double iteration_time_s = 0;
  double tokens_per_iteration = 0;
  double checkpoint_bytes_per_rank = 0;  // weights + optimizer state the busiest rank holds
  double checkpoint_bytes_total = 0;     // the job's state, each shard once (DCP deduplicates replicas)
  int64_t replica_groups = 1;            // data-parallel groups holding a full copy of the state
  double peer_GBps = 0;                  // per GPU, between nodes: healing from a peer group
  double total_tokens = 0;               // training target; 0 = none
  int64_t num_nodes() const { return gpus_per_node > 0 ? (num_gpus + gpus_per_node - 1) / gpus_per_node : 0; }
  double useful_s() const {
    return tokens_per_iteration > 0 ? total_tokens / tokens_per_iteration * iteration_time_s : 0;
  }
};

// The plan's inputs: checkpoint bytes from the memory model (core/model_math.h), replica groups
// = dp when ZeRO 0 (replicas hold the whole state), else 1. Transformer models only.
GoodputInputs goodput_inputs(const Scenario& scenario, const Plan& plan, double iteration_time_s);

// Seconds of each kind of lost time, over the whole run (or the horizon).
struct Badput {
  double checkpoint_save_s = 0;
  double checkpoint_restore_s = 0;
  double wasted_progress_s = 0;
  double infrastructure_recovery_s = 0;
  double startup_s = 0;
  double total_s() const {
    return checkpoint_save_s + checkpoint_restore_s + wasted_progress_s + infrastructure_recovery_s + startup_s;
  }
};

struct CheckpointTimes {
  double blocking_s = 0;  // training stopped per checkpoint (sync: copy + write; async: copy)
  double write_s = 0;     // storage write of one checkpoint
  double restore_s = 0;   // read back after a full restart
  double heal_s = 0;      // replica recovery: a replaced group copies its state from a peer
};
CheckpointTimes checkpoint_times(const GoodputInputs& in, const ReliabilityConfig& cfg);

struct GoodputEstimate {
  double goodput = 0;                 // useful time / wall time
  Badput badput;                      // seconds over the run
  double useful_s = 0;                // the training itself, no failures
  double wall_time_s = 0;             // expected wall time to train total_tokens (or the horizon)
  double expected_interruptions = 0;
  double interruptions_per_day = 0;
  double mtbf_s = 0;                  // of the job
  double interval_s = 0;              // checkpoint interval used
  double optimal_interval_s = 0;      // maximises goodput (numerically, this model)
  double young_daly_interval_s = 0;   // Daly's higher-order closed form, the cross-check
  double spare_wait_s = 0;            // expected wait for a repaired node per node failure
  CheckpointTimes checkpoint;
  std::vector<std::string> warnings;
};

// Closed form. horizon_s > 0: a run of that wall time (goodput, interruptions over it);
// else the run that trains in.total_tokens.
GoodputEstimate estimate_goodput(const GoodputInputs& in, const ReliabilityConfig& cfg, double horizon_s = 0);

// Expected wait for a repaired node per failure that takes a node, seconds (0 without spare
// nodes or repair). Nodes in repair form an M/G/infinity queue: at a failure the others in
// repair number N ~ Poisson(a), a = (node failure rate of the job) x repair_s, with residual
// repair times uniform on (0, repair_s) (PASTA, and the ages of an M/D/infinity queue). With
// S spares, N >= S means waiting for the (N + 1 - S)-th of N uniform residuals:
// E[wait] = sum over n >= S of P(N = n) (n + 1 - S) repair_s / (n + 1).
double expected_spare_wait_s(const GoodputInputs& in, const ReliabilityConfig& cfg);

// Young (1974): sqrt(2 C M). Daly (2006) eq. 37: sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C
// for C < 2M, else M. C: blocking checkpoint seconds, M: mean time between interruptions.
double young_interval_s(double checkpoint_s, double mtbf_s);
double daly_interval_s(double checkpoint_s, double mtbf_s);

struct IntervalPoint {
  double interval_s = 0;
  double goodput = 0;
};
// Goodput against the checkpoint interval, log-spaced around the optimum.
std::vector<IntervalPoint> goodput_curve(const GoodputInputs& in, const ReliabilityConfig& cfg, int points = 48);

struct FailureEvent {
  double time_s = 0;      // wall clock from the job's start
  std::string cause;
  std::string component;
  double lost_s = 0;      // progress lost (since the last durable checkpoint, or the step in flight)
  double downtime_s = 0;  // until training resumed (full restart) or the group rejoined (replica)
  bool full_restart = true;
};

struct Interval90 {
  double mean = 0, p5 = 0, p95 = 0;
};
struct MonteCarloResult {
  int64_t trials = 0;
  Interval90 goodput, wall_time_s, interruptions;
  Badput badput_mean;
  std::vector<FailureEvent> timeline;  // the first trial's events
};
// Monte Carlo over cfg.trials trials from cfg.seed. horizon_s as for estimate_goodput; the
// checkpoint interval is the one estimate_goodput uses.
MonteCarloResult simulate_goodput(const GoodputInputs& in, const ReliabilityConfig& cfg, double horizon_s = 0);

// One simulated month (30 days) of the run: its failure events, for a timeline view.
inline constexpr double kMonth_s = 30.0 * 86400.0;
std::vector<FailureEvent> month_timeline(const GoodputInputs& in, const ReliabilityConfig& cfg);

}  // namespace monarch
