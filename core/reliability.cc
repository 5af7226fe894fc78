#include "core/reliability.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <random>

#include "core/cost_model.h"
#include "core/framework_rules.h"
#include "core/model_math.h"
#include "core/scenario.h"
#include "core/units.h"

namespace monarch {
namespace {

constexpr double kDay_s = 86400.0;

// Llama 3 405B pre-training, 16,384 H100 GPUs, 54 days: 419 unexpected interruptions by root
// cause (Dubey et al. 2024, "The Llama 3 Herd of Models", Section 3.3.4, Table 5). The 47
// planned interruptions (firmware upgrades, configuration changes) are not failures and are
// left out.
constexpr double kLlama3Gpus = 16384;
constexpr double kLlama3Days = 54;
struct CountedCause {
  const char* name;
  const char* component;
  double interruptions;
};
constexpr CountedCause kLlama3Table5[] = {
    {"faulty-gpu", "gpu", 148},
    {"gpu-hbm3-memory", "hbm", 72},
    {"software-bug", "software", 54},
    {"network-switch-cable", "switch", 35},
    {"host-maintenance", "host", 32},
    {"gpu-sram-memory", "gpu", 19},
    {"gpu-system-processor", "gpu", 17},
    {"nic", "nic", 7},
    {"nccl-watchdog-timeout", "software", 7},
    {"silent-data-corruption", "gpu", 6},
    {"gpu-thermal-interface-sensor", "gpu", 6},
    {"ssd", "host", 3},
    {"power-supply", "host", 3},
    {"server-chassis", "host", 2},
    {"io-expansion-board", "host", 2},
    {"dependency", "software", 2},
    {"cpu", "host", 2},
    {"system-memory", "host", 2},
};

std::vector<FailurePreset> make_presets() {
  FailurePreset llama3;
  llama3.name = "llama3-405b";
  llama3.source =
      "Dubey et al. 2024, The Llama 3 Herd of Models, Section 3.3.4, Table 5: 419 unexpected interruptions "
      "in 54 days on 16,384 H100";
  for (const auto& c : kLlama3Table5)
    llama3.causes.push_back({c.name, c.component, c.interruptions / kLlama3Days / (kLlama3Gpus / 1000.0)});
  return {llama3};
}

double job_rate_per_s(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  return cfg.total_rate_per_day_per_1k_gpus() * static_cast<double>(in.num_gpus) / 1000.0 / kDay_s;
}

// The share of the job's failures that take a node.
double node_failure_share(const ReliabilityConfig& cfg) {
  double node = 0, all = 0;
  for (const FailureCause& c : cfg.causes) {
    all += c.per_day_per_1k_gpus;
    if (takes_node(c.component)) node += c.per_day_per_1k_gpus;
  }
  return all > 0 ? node / all : 0;
}

// Seconds a failure costs waiting for a repaired node, averaged over every failure of the job.
// The wait is a stall without running nodes, so no failure interrupts it (unlike the
// detection and restart, which Daly's model lets failures restart).
double spare_stall_s(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  return node_failure_share(cfg) * expected_spare_wait_s(in, cfg);
}

// Blocking seconds per checkpoint with the wait for the previous asynchronous write (DCP and
// torchtitan keep one save in flight: a save that finds the previous one still writing waits).
double effective_blocking_s(const CheckpointTimes& ct, const ReliabilityConfig& cfg, double interval_s) {
  if (!cfg.async_checkpoint) return ct.blocking_s;
  return ct.blocking_s + std::max(0.0, ct.write_s - interval_s);
}

// Recovery of a full restart: detection, rescheduling, program start, checkpoint load.
double full_recovery_s(const CheckpointTimes& ct, const ReliabilityConfig& cfg) {
  return cfg.detection_s + cfg.reschedule_s + cfg.startup_s + ct.restore_s;
}

bool replica_mode(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  return cfg.recovery == RecoveryMode::kReplica && in.replica_groups >= 2;
}

// Full restart, Daly's model, per segment of `tau` useful seconds: wall seconds and their split.
struct Segment {
  double wall_s = 0;
  Badput badput;
};
Segment full_restart_segment(double lambda, double tau, const CheckpointTimes& ct, const ReliabilityConfig& cfg,
                             double stall_s) {
  Segment s;
  const double c = effective_blocking_s(ct, cfg, tau);
  const double p = tau + c;
  const double r = full_recovery_s(ct, cfg);
  s.badput.checkpoint_save_s = c;
  if (lambda <= 0) {
    s.wall_s = p;
    return s;
  }
  const double failures = std::expm1(lambda * p);  // expected failed attempts before the segment succeeds
  // Mean time into an attempt at which it fails, given that it fails: 1/lambda - p / (e^{lambda p} - 1).
  const double lost_per_failure = lambda * p < 1e-6 ? p / 2 : 1 / lambda - p / failures;
  const double recovery_per_failure = std::expm1(lambda * r) / lambda;  // interrupted recoveries start again
  double wasted = failures * lost_per_failure;
  // Asynchronous save: a failure in the first `lag` seconds after a checkpoint finds it not yet
  // durable and rolls back one more segment (first order in lambda).
  const double lag = cfg.async_checkpoint ? std::min(ct.write_s, p) : 0;
  wasted += lambda * lag * tau;
  const double recovery = failures * recovery_per_failure;
  s.badput.wasted_progress_s = wasted;
  if (r > 0) {
    s.badput.infrastructure_recovery_s = recovery * (cfg.detection_s + cfg.reschedule_s) / r;
    s.badput.startup_s = recovery * cfg.startup_s / r;
    s.badput.checkpoint_restore_s = recovery * ct.restore_s / r;
  }
  s.badput.infrastructure_recovery_s += failures * stall_s;
  s.wall_s = tau + s.badput.total_s();
  return s;
}

// Replica recovery, first order in lambda: capacity-seconds lost per failure.
Badput replica_cost_per_failure(const GoodputInputs& in, const CheckpointTimes& ct, const ReliabilityConfig& cfg,
                                double stall_s) {
  const double g = static_cast<double>(in.replica_groups);
  Badput b;
  b.infrastructure_recovery_s = cfg.detection_s + (cfg.reschedule_s + stall_s) / g;  // every group waits for the detection
  b.startup_s = cfg.startup_s / g;
  b.checkpoint_restore_s = ct.heal_s / g;
  b.wasted_progress_s = in.iteration_time_s / 2;  // the step in flight is discarded by every group
  return b;
}

// Share of replica-mode failures that find every other group already absent, so that the whole
// job restarts: the absent groups are an M/G/infinity queue (arrivals lambda, absence A), their
// number Poisson(lambda A); conditioned on the job running (fewer than g absent), the failure
// is fatal when g - 1 are.
double replica_fatal_share(double lambda, double absence_s, int64_t groups) {
  // An absence ends early when a fatal failure restarts every group: its mean length is
  // (1 - e^{-lambda A}) / lambda, which makes the share exact for two groups.
  const double mean = -std::expm1(-lambda * absence_s);
  double pmf = std::exp(-mean), below = 0, last = 0;
  for (int64_t k = 0; k < groups; ++k) {
    if (k > 0) pmf *= mean / static_cast<double>(k);
    below += pmf;
    last = pmf;
  }
  return below > 0 ? last / below : 1;
}

// Wall seconds per useful second and the badput per useful second, at interval tau.
struct Rates {
  double wall_per_useful = 1;
  Badput per_useful;
};
// stall: spare_stall_s, which does not depend on tau (computed once by the callers).
Rates rates_at(const GoodputInputs& in, const ReliabilityConfig& cfg, const CheckpointTimes& ct, double tau,
               double stall) {
  const double lambda = job_rate_per_s(in, cfg);
  Rates r;
  if (replica_mode(in, cfg)) {
    const double c = effective_blocking_s(ct, cfg, tau);
    const double absence = cfg.detection_s + cfg.reschedule_s + stall + cfg.startup_s + ct.heal_s;
    const double fatal = replica_fatal_share(lambda, absence, in.replica_groups);
    const Badput healed = replica_cost_per_failure(in, ct, cfg, stall);
    // Per second of the job being up: failures at lambda, the healed ones cost capacity, a fatal
    // one loses the progress since the checkpoint (half a period) and adds a full recovery,
    // itself restarted by failures during it (Daly's e^{lambda R}).
    // With two groups any failure during an absence is fatal and ends it early (the whole job
    // restarts): the absence lasts (1 - e^{-lambda A}) / lambda on average instead of A. With
    // more groups that takes g - 1 overlapping absences, and the absence is kept whole.
    const double cut = in.replica_groups == 2 && lambda * absence > 0 ? -std::expm1(-lambda * absence) / (lambda * absence) : 1;
    Badput up;
    up.infrastructure_recovery_s = lambda * (1 - fatal) * healed.infrastructure_recovery_s * cut;
    up.startup_s = lambda * (1 - fatal) * healed.startup_s * cut;
    up.checkpoint_restore_s = lambda * (1 - fatal) * healed.checkpoint_restore_s * cut;
    up.wasted_progress_s = lambda * ((1 - fatal) * healed.wasted_progress_s + fatal * (tau + c) / 2);
    const double r_full = full_recovery_s(ct, cfg);
    const double recovery = lambda * fatal * (r_full > 0 ? std::expm1(lambda * r_full) / lambda : 0);
    const double working = (1 - up.total_s()) * tau / (tau + c);  // useful seconds per up second
    if (working <= 0) {
      r.wall_per_useful = std::numeric_limits<double>::infinity();
      return r;
    }
    const double wall = 1 + recovery;  // wall seconds per up second
    r.wall_per_useful = wall / working;
    r.per_useful.checkpoint_save_s = (1 - up.total_s()) * c / (tau + c) / working;
    r.per_useful.wasted_progress_s = up.wasted_progress_s / working;
    r.per_useful.infrastructure_recovery_s =
        (up.infrastructure_recovery_s + (r_full > 0 ? recovery * (cfg.detection_s + cfg.reschedule_s) / r_full : 0)) / working;
    r.per_useful.startup_s = (up.startup_s + (r_full > 0 ? recovery * cfg.startup_s / r_full : 0)) / working;
    r.per_useful.checkpoint_restore_s = (up.checkpoint_restore_s + (r_full > 0 ? recovery * ct.restore_s / r_full : 0)) / working;
    return r;
  }
  const Segment s = full_restart_segment(lambda, tau, ct, cfg, stall);
  r.wall_per_useful = s.wall_s / tau;
  r.per_useful.checkpoint_save_s = s.badput.checkpoint_save_s / tau;
  r.per_useful.checkpoint_restore_s = s.badput.checkpoint_restore_s / tau;
  r.per_useful.wasted_progress_s = s.badput.wasted_progress_s / tau;
  r.per_useful.infrastructure_recovery_s = s.badput.infrastructure_recovery_s / tau;
  r.per_useful.startup_s = s.badput.startup_s / tau;
  return r;
}

// Shortest interval: one optimizer step (checkpoints are taken between steps).
double min_interval_s(const GoodputInputs& in) { return std::max(in.iteration_time_s, 1e-3); }

// The interval that minimises wall time per useful second: golden-section search on log(tau).
double optimal_interval(const GoodputInputs& in, const ReliabilityConfig& cfg, const CheckpointTimes& ct, double stall) {
  const double lambda = job_rate_per_s(in, cfg);
  const double lo0 = min_interval_s(in);
  double hi0 = lambda > 0 ? std::max(lo0 * 2, 100.0 / lambda) : lo0 * 1e6;
  double a = std::log(lo0), b = std::log(hi0);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  auto f = [&](double x) { return rates_at(in, cfg, ct, std::exp(x), stall).wall_per_useful; };
  double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
  double f1 = f(x1), f2 = f(x2);
  for (int i = 0; i < 100 && b - a > 1e-6; ++i) {
    if (f1 <= f2) {
      b = x2; x2 = x1; f2 = f1; x1 = b - phi * (b - a); f1 = f(x1);
    } else {
      a = x1; x1 = x2; f1 = f2; x2 = a + phi * (b - a); f2 = f(x2);
    }
  }
  return std::exp((a + b) / 2);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  const size_t j = std::min(i + 1, v.size() - 1);
  return v[i] + (v[j] - v[i]) * (pos - static_cast<double>(i));
}

Interval90 interval90(const std::vector<double>& v) {
  Interval90 r;
  if (v.empty()) return r;
  double sum = 0;
  for (double x : v) sum += x;
  r.mean = sum / static_cast<double>(v.size());
  r.p5 = percentile(v, 0.05);
  r.p95 = percentile(v, 0.95);
  return r;
}

}  // namespace

const std::vector<FailurePreset>& failure_presets() {
  static const std::vector<FailurePreset> presets = make_presets();
  return presets;
}

const FailurePreset* find_failure_preset(std::string_view name) {
  for (const auto& p : failure_presets())
    if (p.name == name) return &p;
  return nullptr;
}

double rate_from_mtbf_per_day_per_1k_gpus(double mtbf_hours, int64_t gpus_per_unit) {
  assert(mtbf_hours > 0 && gpus_per_unit > 0);
  const double units_per_1k_gpus = 1000.0 / static_cast<double>(gpus_per_unit);
  return units_per_1k_gpus * 24.0 / mtbf_hours;
}

const char* to_string(RecoveryMode m) { return m == RecoveryMode::kReplica ? "replica" : "full_restart"; }

double ReliabilityConfig::total_rate_per_day_per_1k_gpus() const {
  double sum = 0;
  for (const auto& c : causes) sum += c.per_day_per_1k_gpus;
  return sum;
}

GoodputInputs goodput_inputs(const Scenario& sc, const Plan& plan, double iteration_time_s) {
  GoodputInputs in;
  in.num_gpus = sc.cluster.num_gpus;
  in.gpus_per_node = std::max<int64_t>(sc.cluster.gpus_per_node, 1);
  in.iteration_time_s = iteration_time_s;
  in.tokens_per_iteration = static_cast<double>(sc.training.global_batch_size) * static_cast<double>(sc.model.seq_length);
  in.total_tokens = sc.training.total_tokens;
  const ModelShape m = model_shape(sc.model);
  const std::vector<int64_t> layers = stage_layers(m, plan);
  int64_t most = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] > layers[static_cast<size_t>(most)]) most = static_cast<int64_t>(i);
  for (int64_t st : {int64_t{0}, plan.pp - 1, most}) {
    const MemoryBreakdown mem = stage_memory(m, sc, plan, st, layers[static_cast<size_t>(st)]);
    in.checkpoint_bytes_per_rank = std::max(in.checkpoint_bytes_per_rank, mem.weights_bytes + mem.optimizer_bytes);
  }
  const StateBytesPerParameter sb = state_bytes_per_parameter(sc.training, plan.zero_stage);
  in.checkpoint_bytes_total = static_cast<double>(parameter_counts(m).total) * (sb.weights + sb.optimizer);
  in.replica_groups =
      shards_optimizer_states(sc.training.framework, sc.training.precision, plan.zero_stage) ? 1 : plan.dp;
  const bool multi_node = sc.cluster.num_nodes() > 1;
  in.peer_GBps = multi_node ? sc.cluster.inter_node.bandwidth_GBps * static_cast<double>(sc.cluster.nics_per_node) /
                                  static_cast<double>(in.gpus_per_node) * kInterNodeEfficiency
                            : sc.cluster.intra_node.bandwidth_GBps;
  return in;
}

CheckpointTimes checkpoint_times(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  CheckpointTimes t;
  const double nodes = static_cast<double>(std::max<int64_t>(in.num_nodes(), 1));
  const double copy_s = cfg.host_copy_GBps > 0 ? in.checkpoint_bytes_per_rank / gbps_to_bytes_per_s(cfg.host_copy_GBps) : 0;
  // Write: every shard once, spread evenly over the nodes (DCP's deduplication balances the
  // replicated items over the ranks); the slower of the aggregate and the per-node limit.
  double write_s = cfg.storage_write_GBps > 0 ? in.checkpoint_bytes_total / gbps_to_bytes_per_s(cfg.storage_write_GBps) : 0;
  if (cfg.node_write_GBps > 0)
    write_s = std::max(write_s, in.checkpoint_bytes_total / nodes / gbps_to_bytes_per_s(cfg.node_write_GBps));
  // Read: every rank loads its own shards, replicas included, then copies them to the device.
  const double read_bytes = in.checkpoint_bytes_per_rank * static_cast<double>(in.num_gpus);
  double read_s = cfg.storage_read_GBps > 0 ? read_bytes / gbps_to_bytes_per_s(cfg.storage_read_GBps) : 0;
  if (cfg.node_read_GBps > 0)
    read_s = std::max(read_s, in.checkpoint_bytes_per_rank * static_cast<double>(in.gpus_per_node) /
                                  gbps_to_bytes_per_s(cfg.node_read_GBps));
  t.write_s = write_s;
  t.blocking_s = cfg.async_checkpoint ? copy_s : copy_s + write_s;
  t.restore_s = read_s + copy_s;
  t.heal_s = in.peer_GBps > 0 ? in.checkpoint_bytes_per_rank / gbps_to_bytes_per_s(in.peer_GBps) : 0;
  return t;
}

double young_interval_s(double checkpoint_s, double mtbf_s) { return std::sqrt(2 * checkpoint_s * mtbf_s); }

double daly_interval_s(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2 * mtbf_s) return mtbf_s;
  const double x = checkpoint_s / (2 * mtbf_s);
  return std::sqrt(2 * checkpoint_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - checkpoint_s;
}

bool takes_node(std::string_view component) {
  return component == "gpu" || component == "hbm" || component == "host" || component == "nic";
}

namespace {

// E[wait] for a mean of `a` nodes in repair (see expected_spare_wait_s).
double spare_wait_at_s(double a, int64_t spares, double repair_s) {
  if (a <= 0) return 0;
  // P(N = n) in logs (a may be large: exp(-a) underflows past ~745), over n up to well beyond
  // both the spares and the mean (40 standard deviations).
  const int64_t last = std::max<int64_t>(spares, static_cast<int64_t>(a)) + static_cast<int64_t>(40 * std::sqrt(a)) + 50;
  double wait = 0;
  for (int64_t n = spares; n <= last; ++n) {
    const double dn = static_cast<double>(n);
    const double p = std::exp(-a + dn * std::log(a) - std::lgamma(dn + 1));
    wait += p * static_cast<double>(n + 1 - spares) / (dn + 1) * repair_s;
  }
  return wait;
}

}  // namespace

double expected_spare_wait_s(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  if (!cfg.spare_nodes || cfg.repair_s <= 0) return 0;
  const double lambda = job_rate_per_s(in, cfg);
  const double share = node_failure_share(cfg);
  // Nodes fail only while the job holds them: a job that stalls for nodes a fraction of its
  // time sends fewer to repair. The share of time not stalled, u = 1 / (1 + lambda share W),
  // and the wait W at a = lambda share repair_s u, are solved together (a fixed point; W falls
  // as u falls, so the iteration converges).
  double u = 1, wait = 0;
  for (int i = 0; i < 100; ++i) {
    wait = spare_wait_at_s(lambda * share * cfg.repair_s * u, *cfg.spare_nodes, cfg.repair_s);
    const double next = 1 / (1 + lambda * share * wait);
    if (std::abs(next - u) < 1e-12) break;
    u = 0.5 * (u + next);
  }
  return wait;
}

GoodputEstimate estimate_goodput(const GoodputInputs& in, const ReliabilityConfig& cfg, double horizon_s) {
  GoodputEstimate e;
  e.spare_wait_s = expected_spare_wait_s(in, cfg);
  const double stall = spare_stall_s(in, cfg);
  e.checkpoint = checkpoint_times(in, cfg);
  const double lambda = job_rate_per_s(in, cfg);
  e.interruptions_per_day = lambda * kDay_s;
  e.mtbf_s = lambda > 0 ? 1 / lambda : std::numeric_limits<double>::infinity();
  if (cfg.recovery == RecoveryMode::kReplica && in.replica_groups < 2)
    e.warnings.push_back(
        "recovery \"replica\" needs data-parallel replica groups holding the whole state (dp > 1 with ZeRO 0); "
        "this plan has none, so every failure is a full restart");
  e.young_daly_interval_s = lambda > 0 ? daly_interval_s(e.checkpoint.blocking_s, e.mtbf_s) : 0;
  if (replica_mode(in, cfg)) {
    // Goodput grows with the interval while peers heal every failure; the checkpoints are for
    // the rare loss of every group, so "optimal" takes Daly's interval for the full restart.
    e.optimal_interval_s = lambda > 0 ? std::max(e.young_daly_interval_s, min_interval_s(in))
                                      : std::max(in.useful_s(), min_interval_s(in));
  } else {
    e.optimal_interval_s = optimal_interval(in, cfg, e.checkpoint, stall);
  }
  e.interval_s = cfg.checkpoint_interval_s ? std::max(*cfg.checkpoint_interval_s, min_interval_s(in)) : e.optimal_interval_s;
  if (cfg.async_checkpoint && e.checkpoint.write_s > e.interval_s)
    e.warnings.push_back("the asynchronous checkpoint write takes longer than the interval: each save waits for the previous one");
  const Rates r = rates_at(in, cfg, e.checkpoint, e.interval_s, stall);
  if (!std::isfinite(r.wall_per_useful)) {
    e.warnings.push_back("failures arrive faster than the job recovers: no progress is expected");
    e.wall_time_s = std::numeric_limits<double>::infinity();
    e.expected_interruptions = std::numeric_limits<double>::infinity();
    return e;
  }
  if (horizon_s > 0) {
    e.wall_time_s = horizon_s;
    e.useful_s = std::max(0.0, horizon_s - cfg.startup_s) / r.wall_per_useful;
  } else {
    e.useful_s = in.useful_s();
    e.wall_time_s = cfg.startup_s + e.useful_s * r.wall_per_useful;
  }
  e.badput.checkpoint_save_s = r.per_useful.checkpoint_save_s * e.useful_s;
  e.badput.checkpoint_restore_s = r.per_useful.checkpoint_restore_s * e.useful_s;
  e.badput.wasted_progress_s = r.per_useful.wasted_progress_s * e.useful_s;
  e.badput.infrastructure_recovery_s = r.per_useful.infrastructure_recovery_s * e.useful_s;
  e.badput.startup_s = r.per_useful.startup_s * e.useful_s + cfg.startup_s;
  e.goodput = e.wall_time_s > 0 ? e.useful_s / e.wall_time_s : 0;
  e.expected_interruptions = lambda * e.wall_time_s;
  return e;
}

std::vector<IntervalPoint> goodput_curve(const GoodputInputs& in, const ReliabilityConfig& cfg, int points) {
  std::vector<IntervalPoint> out;
  const CheckpointTimes ct = checkpoint_times(in, cfg);
  const double stall = spare_stall_s(in, cfg);
  const double centre =
      replica_mode(in, cfg) ? estimate_goodput(in, cfg).optimal_interval_s : optimal_interval(in, cfg, ct, stall);
  const double lo = std::max(min_interval_s(in), centre / 30), hi = centre * 30;
  points = std::max(points, 2);
  for (int i = 0; i < points; ++i) {
    const double tau = lo * std::pow(hi / lo, static_cast<double>(i) / (points - 1));
    const Rates r = rates_at(in, cfg, ct, tau, stall);
    out.push_back({tau, std::isfinite(r.wall_per_useful) ? 1 / r.wall_per_useful : 0});
  }
  return out;
}

// ----------------------------------------------------------------------------- Monte Carlo
namespace {

enum class Phase { kRecover, kRun, kCheckpoint, kStall };

// One simulated run: failures drawn per cause, the phases of the job on a wall clock.
class Trial {
 public:
  // cap_s: the wall clock at which a run that trains to the target stops anyway.
  Trial(const GoodputInputs& in, const ReliabilityConfig& cfg, const CheckpointTimes& ct, double tau, double horizon_s,
        double cap_s, uint64_t seed, bool record)
      : in_(in), cfg_(cfg), ct_(ct), tau_(tau), rng_(seed), record_(record) {
    lambda_ = job_rate_per_s(in, cfg);
    double cum = 0;
    for (const auto& c : cfg.causes) cum_.push_back(cum += c.per_day_per_1k_gpus);
    replica_ = replica_mode(in, cfg);
    groups_ = replica_ ? in.replica_groups : 1;
    target_ = horizon_s > 0 ? std::numeric_limits<double>::infinity() : in.useful_s();
    t_end_ = horizon_s > 0 ? horizon_s : cap_s;
  }

  void run() {
    begin_recovery({{cfg_.startup_s, &badput_.startup_s}});
    next_fail_ = draw_failure(0);
    while (t_ < t_end_ && work_ < target_) {
      const double until = std::min(t_ + phase_left(), t_end_);
      const double group_event = next_group_event();
      if (next_fail_ < until && next_fail_ <= group_event) {
        advance(next_fail_ - t_);
        fail();
        next_fail_ = draw_failure(t_);
        continue;
      }
      if (group_event < until) {
        advance(group_event - t_);
        group_phase_done();
        continue;
      }
      advance(until - t_);
      if (t_ >= t_end_) break;
      phase_done();
    }
  }

  double wall_s() const { return t_; }
  double useful_s() const { return work_; }
  int64_t interruptions() const { return interruptions_; }
  const Badput& badput() const { return badput_; }
  std::vector<FailureEvent>& events() { return events_; }

 private:
  struct Step {
    double seconds;
    double* category;
    bool no_failures = false;  // the job holds no running nodes: nothing can fail
  };
  struct DownGroup {
    std::vector<Step> steps;
    size_t at = 0;
    double ends_at = 0;
  };

  double draw_failure(double from) {
    if (lambda_ <= 0) return std::numeric_limits<double>::infinity();
    return from + std::exponential_distribution<double>(lambda_)(rng_);
  }
  size_t draw_cause() {
    const double u = std::uniform_real_distribution<double>(0, cum_.back())(rng_);
    return static_cast<size_t>(std::upper_bound(cum_.begin(), cum_.end(), u) - cum_.begin()) % cum_.size();
  }

  double run_rate() const {
    return static_cast<double>(groups_ - static_cast<int64_t>(down_.size())) / static_cast<double>(groups_);
  }
  double phase_left() const {
    switch (phase_) {
      case Phase::kRecover: return recovery_[recovery_at_].seconds - recovery_done_;
      case Phase::kRun: {
        const double rate = run_rate();
        return rate > 0 ? (std::min(next_checkpoint_, target_) - work_) / rate : std::numeric_limits<double>::infinity();
      }
      case Phase::kCheckpoint:
      case Phase::kStall: return phase_left_;
    }
    return 0;
  }
  double next_group_event() const {
    double t = std::numeric_limits<double>::infinity();
    for (const auto& g : down_) t = std::min(t, g.ends_at);
    return t;
  }

  // Time passes: work, checkpoint, recovery or stall, and the absent groups' share.
  void advance(double dt) {
    if (dt <= 0) return;
    t_ += dt;
    switch (phase_) {
      case Phase::kRecover: recovery_done_ += dt; *recovery_[recovery_at_].category += dt; break;
      case Phase::kRun: {
        work_ += dt * run_rate();
        for (const auto& g : down_) *g.steps[g.at].category += dt / static_cast<double>(groups_);
        break;
      }
      case Phase::kCheckpoint: phase_left_ -= dt; badput_.checkpoint_save_s += dt; break;
      case Phase::kStall: phase_left_ -= dt; badput_.infrastructure_recovery_s += dt; break;
    }
  }

  void begin_recovery(std::vector<Step> steps) {
    phase_ = Phase::kRecover;
    recovery_ = std::move(steps);
    recovery_at_ = 0;
    recovery_done_ = 0;
  }

  void settle_async() {
    if (pending_ && pending_durable_at_ <= t_) {
      durable_ = pending_work_;
      pending_ = false;
    }
  }

  void phase_done() {
    switch (phase_) {
      case Phase::kRecover:
        if (++recovery_at_ < recovery_.size()) {
          recovery_done_ = 0;
          // Exponential failures are memoryless: a stretch with nothing running pushes the next one back.
          if (recovery_[recovery_at_].no_failures) next_fail_ += recovery_[recovery_at_].seconds;
          return;
        }
        if (!events_.empty() && events_.back().downtime_s < 0) events_.back().downtime_s = t_ - events_.back().time_s;
        phase_ = Phase::kRun;
        next_checkpoint_ = work_ + tau_;
        return;
      case Phase::kRun: {
        if (work_ >= target_) return;
        settle_async();
        phase_ = Phase::kCheckpoint;
        phase_left_ = ct_.blocking_s;
        if (cfg_.async_checkpoint && pending_) phase_left_ += pending_durable_at_ - t_;  // one save in flight
        return;
      }
      case Phase::kCheckpoint:
        settle_async();
        if (cfg_.async_checkpoint) {
          pending_ = true;
          pending_work_ = work_;
          pending_durable_at_ = t_ + ct_.write_s;
        } else {
          durable_ = work_;
        }
        phase_ = Phase::kRun;
        next_checkpoint_ = work_ + tau_;
        return;
      case Phase::kStall:
        phase_ = Phase::kRun;
        return;
    }
  }

  void group_phase_done() {
    for (auto it = down_.begin(); it != down_.end(); ++it) {
      if (it->ends_at > t_) continue;
      if (++it->at < it->steps.size()) {
        it->ends_at = t_ + it->steps[it->at].seconds;
      } else {
        down_.erase(it);
      }
      return;
    }
  }

  void record(size_t cause, double lost, bool full) {
    if (!record_) return;
    FailureEvent ev;
    ev.time_s = t_;
    ev.cause = cfg_.causes[cause].name;
    ev.component = cfg_.causes[cause].component;
    ev.lost_s = lost;
    ev.downtime_s = -1;
    ev.full_restart = full;
    events_.push_back(std::move(ev));
  }

  // A failure that takes a node sends it to repair; the seconds the job then waits for a
  // healthy node (0 while a spare is free).
  double node_wait(size_t cause) {
    if (!cfg_.spare_nodes || cfg_.repair_s <= 0 || !takes_node(cfg_.causes[cause].component)) return 0;
    std::erase_if(in_repair_, [&](double back_at) { return back_at <= t_; });
    in_repair_.push_back(t_ + cfg_.repair_s);
    const size_t spares = static_cast<size_t>(*cfg_.spare_nodes);
    if (in_repair_.size() <= spares) return 0;
    // The job is short of (in repair - spares) nodes: it runs again when that many are back.
    std::sort(in_repair_.begin(), in_repair_.end());
    return in_repair_[in_repair_.size() - spares - 1] - t_;
  }

  void fail() {
    ++interruptions_;
    const size_t cause = draw_cause();
    const double wait_s = node_wait(cause);
    const bool job_down = phase_ == Phase::kRecover;
    if (replica_ && !job_down && static_cast<int64_t>(down_.size()) + 1 < groups_) {
      // One group is lost; the others wait for the detection, drop the step in flight, go on.
      const double lost = std::min(work_ - durable_, std::uniform_real_distribution<double>(0, 1)(rng_) * in_.iteration_time_s);
      work_ -= lost;
      badput_.wasted_progress_s += lost;
      record(cause, lost, false);
      DownGroup g;
      g.steps = {{cfg_.reschedule_s + wait_s, &badput_.infrastructure_recovery_s},
                 {cfg_.startup_s, &badput_.startup_s},
                 {ct_.heal_s, &badput_.checkpoint_restore_s}};
      g.ends_at = t_ + cfg_.detection_s + g.steps[0].seconds;
      if (record_) events_.back().downtime_s = cfg_.detection_s + cfg_.reschedule_s + wait_s + cfg_.startup_s + ct_.heal_s;
      down_.push_back(std::move(g));
      if (phase_ == Phase::kCheckpoint) next_checkpoint_ = work_;  // the interrupted save starts again
      phase_ = Phase::kStall;
      phase_left_ = cfg_.detection_s;
      return;
    }
    // Full restart from the last durable checkpoint.
    settle_async();
    pending_ = false;
    const double lost = work_ - durable_;
    badput_.wasted_progress_s += lost;
    work_ = durable_;
    down_.clear();
    record(cause, lost, true);
    begin_recovery({{cfg_.detection_s, &badput_.infrastructure_recovery_s},
                    {cfg_.reschedule_s, &badput_.infrastructure_recovery_s},
                    {wait_s, &badput_.infrastructure_recovery_s, true},
                    {cfg_.startup_s, &badput_.startup_s},
                    {ct_.restore_s, &badput_.checkpoint_restore_s}});
  }

  const GoodputInputs& in_;
  const ReliabilityConfig& cfg_;
  const CheckpointTimes& ct_;
  double tau_;
  std::mt19937_64 rng_;
  bool record_;
  double lambda_ = 0;
  std::vector<double> cum_;
  bool replica_ = false;
  int64_t groups_ = 1;
  double target_ = 0, t_end_ = 0;

  double t_ = 0, work_ = 0, durable_ = 0, next_checkpoint_ = 0, next_fail_ = 0;
  Phase phase_ = Phase::kRecover;
  double phase_left_ = 0;
  std::vector<Step> recovery_;
  size_t recovery_at_ = 0;
  double recovery_done_ = 0;
  bool pending_ = false;
  double pending_work_ = 0, pending_durable_at_ = 0;
  std::vector<DownGroup> down_;
  std::vector<double> in_repair_;  // when each node in repair is back
  int64_t interruptions_ = 0;
  Badput badput_;
  std::vector<FailureEvent> events_;
};

// A trial that trains to a target stops at this multiple of the closed form's wall time (a
// guard against a run that barely progresses; far beyond any 90% interval).
constexpr double kMonteCarloCapFactor = 100;

}  // namespace

MonteCarloResult simulate_goodput(const GoodputInputs& in, const ReliabilityConfig& cfg, double horizon_s) {
  MonteCarloResult out;
  const GoodputEstimate closed = estimate_goodput(in, cfg, horizon_s);
  if (!std::isfinite(closed.wall_time_s) || cfg.causes.empty()) return out;
  const CheckpointTimes ct = checkpoint_times(in, cfg);
  std::vector<double> goodput, wall, interruptions;
  const int64_t trials = std::max<int64_t>(cfg.trials, 1);
  for (int64_t i = 0; i < trials; ++i) {
    // Trial i draws from its own stream, so a trial does not depend on how many ran before.
    std::seed_seq seq{cfg.seed, static_cast<uint64_t>(i)};
    std::mt19937_64 seeder(seq);
    Trial trial(in, cfg, ct, closed.interval_s, horizon_s, kMonteCarloCapFactor * closed.wall_time_s, seeder(), i == 0);
    trial.run();
    goodput.push_back(trial.wall_s() > 0 ? trial.useful_s() / trial.wall_s() : 0);
    wall.push_back(trial.wall_s());
    interruptions.push_back(static_cast<double>(trial.interruptions()));
    const Badput& b = trial.badput();
    out.badput_mean.checkpoint_save_s += b.checkpoint_save_s / static_cast<double>(trials);
    out.badput_mean.checkpoint_restore_s += b.checkpoint_restore_s / static_cast<double>(trials);
    out.badput_mean.wasted_progress_s += b.wasted_progress_s / static_cast<double>(trials);
    out.badput_mean.infrastructure_recovery_s += b.infrastructure_recovery_s / static_cast<double>(trials);
    out.badput_mean.startup_s += b.startup_s / static_cast<double>(trials);
    if (i == 0) out.timeline = std::move(trial.events());
  }
  out.trials = trials;
  out.goodput = interval90(goodput);
  out.wall_time_s = interval90(wall);
  out.interruptions = interval90(interruptions);
  return out;
}

std::vector<FailureEvent> month_timeline(const GoodputInputs& in, const ReliabilityConfig& cfg) {
  ReliabilityConfig one = cfg;
  one.trials = 1;
  return simulate_goodput(in, one, kMonth_s).timeline;
}

}  // namespace monarch
