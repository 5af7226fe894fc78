// monarch-sim SCENARIO.json: read and validate the scenario, hand it to the run library
// (run/run_library.h: search, re-rank, real runs) and print what it finds: the analytical
// ranking as soon as the search ends, each slower backend's entry as it arrives, then the final
// table; the run library writes the result file, the plan file and the trace and records the
// store entries.
//
// Order of work, so that bad input and interruption leave nothing half-written:
//   1. scenario and options are checked, the store is opened (bad --db: exit 2, nothing done);
//   2. everything is computed in memory (Ctrl-C here: exit 130, nothing written);
//   3. files are written through a temporary file renamed into place, then the store records
//      every (plan, backend) entry, each in one transaction.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/commands.h"
#include "app/interrupt.h"
#include "core/scenario_io.h"
#include "results/store.h"
#include "run/run_library.h"
#include "strategies/search.h"

namespace monarch::app {
namespace {

constexpr int kExitInterrupted = 130;

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

bool has_backend(const std::vector<Backend>& v, Backend b) { return std::find(v.begin(), v.end(), b) != v.end(); }

std::string fixed(double v, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

// The transformer table: one row per (plan, backend), the baseline comparison, the rejections.
void print_table(const run::RunReport& report) {
  const Scenario& s = report.scenario;
  const SearchResult& sr = report.search;
  std::cout << "scenario " << s.name << ": " << s.cluster.num_gpus << " x " << s.cluster.gpu.name << ", "
            << to_string(s.training.precision) << ", global batch " << s.training.global_batch_size << "\n";
  std::cout << "searched " << sr.plans_in_space << " plans, evaluated " << sr.plans_evaluated << ", "
            << sr.plans_fitting << " fit, " << sr.plans_rejected << " rejected\n\n";
  // The plan column: 64 wide, wider when a plan string needs it (e.g. with " etpN"), so the
  // backend column never runs into it.
  int plan_w = 64;
  for (const auto& e : report.entries) plan_w = std::max(plan_w, static_cast<int>(describe(e.result.plan, PlanDetail::kFull).size()) + 1);
  const bool reliability = s.reliability.has_value();
  const bool to_train = reliability && s.training.total_tokens > 0;
  std::cout << std::left << std::setw(4) << "#" << std::setw(plan_w) << "plan" << std::setw(12) << "backend" << std::right
            << std::setw(11) << "iter s";
  if (reliability) std::cout << std::setw(9) << "goodput";
  if (to_train) std::cout << std::setw(10) << "train d";
  std::cout << std::setw(12) << "tokens/s" << std::setw(7) << "MFU" << std::setw(10) << "peak GiB" << std::setw(11)
            << "exposed s" << "\n";
  int64_t last_rank = 0;
  for (const auto& e : report.entries) {
    const BackendResult& r = e.result;
    const bool same_plan = e.rank == last_rank;
    last_rank = e.rank;
    std::cout << std::left << std::setw(4) << (same_plan ? "" : std::to_string(e.rank))
              << std::setw(plan_w) << (same_plan ? "" : describe(r.plan, PlanDetail::kFull)) << std::setw(12) << r.backend << std::right
              << std::setw(11) << fixed(r.iteration_time_s, 3);
    if (reliability) std::cout << std::setw(9) << (r.reliability ? fixed(100 * r.reliability->goodput, 1) + "%" : "-");
    if (to_train) std::cout << std::setw(10) << (r.reliability ? fixed(r.reliability->time_to_train_s / 86400, 1) : "-");
    std::cout << std::setw(12) << fixed(r.tokens_per_s, 0)
              << std::setw(7) << fixed(100 * r.mfu, 1) << std::setw(10) << fixed(r.memory.peak_gib, 1)
              << std::setw(11) << fixed(r.time_breakdown_s.exposed_comm, 3) << "\n";
    if (!same_plan)
      for (const std::string& w : r.warnings) std::cout << "    warning: " << w << "\n";
  }
  if (!report.entries.empty() && !report.entries.front().result.plan.layers_per_stage.empty()) {
    const Plan& first = report.entries.front().result.plan;
    std::cout << (static_cast<int64_t>(first.layers_per_stage.size()) == first.pp ? "\nlayers per pipeline stage of plan 1:"
                                                                                  : "\nlayers per model chunk of plan 1 (model order):");
    for (auto n : first.layers_per_stage) std::cout << ' ' << n;
    std::cout << "\n";
  }
  const std::optional<BackendResult>& baseline = report.baseline;
  if (baseline && !report.entries.empty()) {
    const auto& best = report.entries.front().result;
    auto pct = [](double a, double b) { return b > 0 ? fixed(100.0 * (a - b) / b, 1) + "%" : std::string("-"); };
    std::cout << "\nchosen plan vs the FSDP / ZeRO-3 baseline (" << describe(baseline->plan, PlanDetail::kFull) << ")\n";
    std::cout << std::left << std::setw(22) << "" << std::right << std::setw(12) << "chosen" << std::setw(12) << "baseline"
              << std::setw(10) << "diff" << "\n";
    auto row = [&](const char* name, double a, double b, int d) {
      std::cout << std::left << std::setw(22) << name << std::right << std::setw(12) << fixed(a, d) << std::setw(12)
                << fixed(b, d) << std::setw(10) << pct(a, b) << "\n";
    };
    row("iteration time s", best.iteration_time_s, baseline->iteration_time_s, 3);
    row("exposed comm s", best.time_breakdown_s.exposed_comm, baseline->time_breakdown_s.exposed_comm, 3);
    row("peak memory GiB", best.memory.peak_gib, baseline->memory.peak_gib, 1);
    if (!baseline->memory.fits) std::cout << "(the baseline does not fit in memory)\n";
  } else if (!sr.baseline_note.empty()) {
    std::cout << "\nbaseline: " << sr.baseline_note << "\n";
  }
  if (!sr.rejection_groups.empty()) {
    std::cout << "\nrejected plans by reason:\n";
    for (const auto& g : sr.rejection_groups)
      std::cout << "  " << std::setw(8) << g.count << "  " << g.example.reason << "\n";
  }
}

// The recommendation-model table: one row per (sharding plan, backend), then the rejections.
void print_dlrm_table(const run::RunReport& report) {
  const Scenario& s = report.scenario;
  std::cout << "scenario " << s.name << ": dlrm with " << s.model.dlrm.tables.size() << " tables on "
            << s.cluster.num_gpus << " x " << s.cluster.gpu.name << "\n\n";
  std::cout << std::left << std::setw(4) << "#" << std::setw(70) << "sharding" << std::setw(12) << "backend"
            << std::right << std::setw(12) << "iter ms" << std::setw(14) << "samples/s" << std::setw(10) << "peak GiB"
            << "\n";
  int64_t last_rank = 0;
  for (const auto& e : report.entries) {
    const BackendResult& r = e.result;
    const bool first = e.rank != last_rank;
    last_rank = e.rank;
    std::cout << std::left << std::setw(4) << (first ? std::to_string(e.rank) : "") << std::setw(70)
              << (first ? e.sharding.substr(0, 68) : "") << std::setw(12) << r.backend << std::right
              << std::setw(12) << fixed(1e3 * r.iteration_time_s, 3) << std::setw(14)
              << fixed(r.iteration_time_s > 0 ? s.training.global_batch_size / r.iteration_time_s : 0, 0)
              << std::setw(10) << fixed(r.memory.peak_gib, 2) << "\n";
  }
  if (!report.rejected.empty()) {
    std::cout << "\nrejected:\n";
    for (const auto& r : report.rejected) std::cout << "  " << r.reason << "\n";
  }
}

// "2.861 ms", "14.52 s": 4 significant digits, so that small and large runs both read.
std::string seconds_text(double s) {
  char buf[32];
  if (s < 1) std::snprintf(buf, sizeof buf, "%.4g ms", 1e3 * s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%.4g s", s);
  else std::snprintf(buf, sizeof buf, "%.4g h", s / 3600);
  return buf;
}

// Goodput of the chosen plan: the checkpoint, the badput breakdown, time to train, and the
// Monte Carlo's 90% interval beside the closed form.
void print_reliability(const run::RunReport& report) {
  const Scenario& s = report.scenario;
  if (!s.reliability || report.entries.empty() || !report.entries.front().result.reliability) return;
  const ReliabilityConfig& cfg = *s.reliability;
  const BackendResult& best = report.entries.front().result;
  const ReliabilityReport& r = *best.reliability;
  auto pct = [](double x) { return fixed(100 * x, 1) + "%"; };
  auto gb = [](double bytes) { return bytes >= 1e12 ? fixed(bytes / 1e12, 2) + " TB" : fixed(bytes / 1e9, 2) + " GB"; };
  const double wall = r.time_to_train_s > 0 ? r.time_to_train_s : r.horizon_s;
  std::cout << "\nreliability of plan 1 (" << best.backend << "; "
            << (cfg.preset.empty() ? std::to_string(cfg.causes.size()) + " failure causes" : "failure rates " + cfg.preset) << ": "
            << fixed(r.interruptions_per_day, 2) << " interruptions/day, job MTBF " << fixed(r.mtbf_s / 3600, 2) << " h; "
            << to_string(cfg.recovery) << ", " << (cfg.async_checkpoint ? "async" : "sync") << " checkpoints)\n";
  if (cfg.spare_nodes)
    std::cout << "  spares: " << *cfg.spare_nodes << " nodes, repair " << seconds_text(cfg.repair_s)
              << "; expected wait for a repaired node " << seconds_text(r.spare_wait_s) << " per node failure\n";
  std::cout << "  checkpoint: " << gb(r.checkpoint_bytes_per_rank) << " per rank, " << gb(r.checkpoint_bytes_total)
            << " in all; blocks " << seconds_text(r.checkpoint.blocking_s) << ", write " << seconds_text(r.checkpoint.write_s)
            << ", restore " << seconds_text(r.checkpoint.restore_s) << "; every " << seconds_text(r.interval_s)
            << " (optimal " << seconds_text(r.optimal_interval_s) << ", Young/Daly " << seconds_text(r.young_daly_interval_s)
            << ")\n";
  std::cout << "  goodput " << pct(r.goodput);
  if (r.trials > 0)
    std::cout << " (Monte Carlo, " << r.trials << " trials: " << pct(r.mc_goodput.mean) << ", 90% interval "
              << pct(r.mc_goodput.p5) << " - " << pct(r.mc_goodput.p95) << ")";
  std::cout << "\n  badput: checkpoint save " << pct(r.badput.checkpoint_save_s / wall) << ", checkpoint restore "
            << pct(r.badput.checkpoint_restore_s / wall) << ", wasted progress " << pct(r.badput.wasted_progress_s / wall)
            << ", infrastructure recovery " << pct(r.badput.infrastructure_recovery_s / wall) << ", startup "
            << pct(r.badput.startup_s / wall) << "\n";
  std::cout << "  expected interruptions " << fixed(r.expected_interruptions, 0);
  if (r.trials > 0) std::cout << " (90%: " << fixed(r.mc_interruptions.p5, 0) << " - " << fixed(r.mc_interruptions.p95, 0) << ")";
  if (r.time_to_train_s > 0) {
    std::cout << "; time to train " << s.training.total_tokens << " tokens: " << fixed(r.time_to_train_s / 86400, 2) << " days";
    if (r.trials > 0)
      std::cout << " (90%: " << fixed(r.mc_wall_time_s.p5 / 86400, 2) << " - " << fixed(r.mc_wall_time_s.p95 / 86400, 2) << ")";
    std::cout << " vs " << fixed(r.useful_s / 86400, 2) << " days without failures";
  } else {
    std::cout << " in " << fixed(r.horizon_s / 86400, 0) << " days (no training.total_tokens: no time to train)";
  }
  std::cout << "\n";
  for (const std::string& w : r.warnings) std::cout << "  warning: " << w << "\n";
}

// Groups of ranks listed in the failure summary; the rest are counted.
constexpr size_t kFailureRanksListed = 8;

// The injected failure of the best plan SimGrid simulated (reliability.inject_failure): which
// ranks failed, which stalled and in what, when the timeout fired, what was lost.
void print_failure(const run::RunReport& report) {
  const Scenario& s = report.scenario;
  if (!s.reliability || !s.reliability->inject_failure) return;
  const run::RunEntry* entry = nullptr;
  for (const auto& e : report.entries)
    if (e.result.failure && !entry) entry = &e;
  if (!entry) {
    std::cout << "\ninjected failure: simulated by the SimGrid backend only (--backend simgrid); not run\n";
    return;
  }
  const FailureReport& f = *entry->result.failure;
  std::cout << "\ninjected failure (SimGrid, plan " << entry->rank << "): " << f.component << " of node " << f.node << " down at "
            << seconds_text(f.at_s) << " into the iteration";
  if (!f.affected) {
    std::cout << "; the iteration (" << seconds_text(entry->result.iteration_time_s)
              << ") ends first: nothing changes\n";
    return;
  }
  std::cout << "; timeout " << seconds_text(f.detection_s) << " (reliability.detection_s): job declared failed at "
            << seconds_text(f.timeout_at_s) << "\n";
  // Ranks of one state that wait in the same operation since the same instants, as ranges.
  for (const char* state : {"failed", "stalled", "running", "completed"}) {
    std::vector<std::string> groups;
    size_t count = 0;
    for (size_t i = 0; i < f.ranks.size();) {
      const RankStall& a = f.ranks[i];
      size_t j = i + 1;
      auto alike = [&](const RankStall& b) {
        return b.state == a.state && b.blocked_in == a.blocked_in && b.blocked_since_s == a.blocked_since_s &&
               b.stalled_at_s == a.stalled_at_s && b.rank == f.ranks[j - 1].rank + 1;
      };
      while (j < f.ranks.size() && alike(f.ranks[j])) ++j;
      if (a.state == state) {
        count += j - i;
        std::string g = j - i == 1 ? "rank " + std::to_string(a.rank)
                                   : "ranks " + std::to_string(a.rank) + "-" + std::to_string(f.ranks[j - 1].rank);
        if (!a.blocked_in.empty())
          g += " in " + a.blocked_in + " since " + seconds_text(a.blocked_since_s) + " (idle from " + seconds_text(a.stalled_at_s) + ")";
        else if (a.state != "failed")
          g += " at " + seconds_text(a.stalled_at_s);
        groups.push_back(std::move(g));
      }
      i = j;
    }
    if (groups.empty()) continue;
    std::cout << "  " << state << " (" << count << "):";
    for (size_t k = 0; k < groups.size() && k < kFailureRanksListed; ++k) std::cout << (k ? "; " : " ") << groups[k];
    if (groups.size() > kFailureRanksListed) std::cout << "; ... " << groups.size() - kFailureRanksListed << " more";
    std::cout << "\n";
  }
  std::cout << "  lost since the last completed iteration: " << seconds_text(f.lost_s) << " of wall time, "
            << fixed(f.lost_compute_gpu_s, 3) << " GPU-s of compute (the stalls are spans of category \"stall\" on the timeline)\n";
}

// The analytical ranking, printed as soon as the search ends when slower backends follow.
void print_ranking(const run::RunReport& report) {
  std::cout << "analytical ranking (" << report.entries.size() << " plans); the slower backends follow:\n";
  for (const auto& e : report.entries) {
    const BackendResult& r = e.result;
    std::cout << "  " << std::left << std::setw(4) << e.rank
              << (report.recommendation ? e.sharding.substr(0, 68) : describe(r.plan, PlanDetail::kFull)) << "  "
              << seconds_text(r.iteration_time_s) << ", " << fixed(r.memory.peak_gib, 2) << " GiB\n";
  }
  std::cout << std::flush;
}

// One slower backend's entry, printed as it arrives.
void print_arrival(const run::RunEntry& e) {
  std::cout << "  " << e.result.backend << " on plan " << e.rank << ": " << seconds_text(e.result.iteration_time_s) << ", "
            << fixed(e.result.memory.peak_gib, 2) << " GiB\n"
            << std::flush;
}

}  // namespace

int cmd_run(const RunOptions& opts) {
  std::vector<std::string> scenario_overrides;
  run::RunRequest request;
  run::split_simgrid_overrides(opts.overrides, scenario_overrides, request.settings.simgrid);

  auto scenario = read_scenario_file(opts.scenario_path, scenario_overrides);
  if (!scenario) {
    for (const auto& p : scenario.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  Scenario s = std::move(scenario).value();
  if (opts.top_k) s.search.top_k = *opts.top_k;

  request.backends = s.backends;
  std::string backends_from = opts.scenario_path + ": /backends";
  if (!opts.backends.empty()) {
    request.backends = opts.backends;
    backends_from = "--backend";
  } else if (request.backends.empty()) {
    request.backends = default_backends(build_features().simgrid);
    backends_from = "default backends";
  }
  if (const Problems pr = run::check_request(request, backends_from); !pr.empty()) {
    for (const auto& p : pr) print_error(p.where, p.message);
    return kExitInvalid;
  }
  const bool want_real_cpu = has_backend(request.backends, Backend::kRealCpu);
  // --trace: the measured step of the real run when there is one, else the SimGrid simulation.
  if (!opts.trace_path.empty() && !build_features().simgrid && !want_real_cpu) {
    print_error("--trace", "the trace is of the SimGrid simulation, which this build lacks (libsimgrid-dev), or of a "
                           "real run (--backend real-cpu)");
    return kExitInvalid;
  }
  request.lower_chosen_plan = !opts.emit_plan_path.empty();
  request.want_trace = !opts.trace_path.empty();
  request.search_jobs = opts.jobs;

  // The store is opened first so that a bad --db fails before any work.
  std::optional<Store> store;
  if (!opts.no_db) {
    auto st = opts.db_path.empty() ? Store::open_default() : Store::open(opts.db_path);
    if (!st) {
      for (const auto& p : st.problems()) print_error(opts.db_path.empty() ? "--db" : "--db " + opts.db_path, p.to_string());
      return kExitInvalid;
    }
    store.emplace(std::move(st).value());
  }

  InterruptGuard guard;
  const bool tty = stderr_is_terminal();
  const auto started_at = std::chrono::system_clock::now();
  const bool slower_backends = std::any_of(request.backends.begin(), request.backends.end(),
                                           [](Backend b) { return b != Backend::kAnalytical; });

  run::RunEvents events;
  events.control.cancelled = [] { return interrupted(); };
  if (tty)
    events.control.progress = [](const std::string& stage, int64_t done, int64_t total) {
      if (total > 0)
        std::fprintf(stderr, "\r%s: %lld / %lld", stage.c_str(), static_cast<long long>(done), static_cast<long long>(total));
      else
        std::fprintf(stderr, "\r%-60s", (stage + "...").c_str());
    };
  auto clear_progress = [tty] {
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
  };
  if (!opts.quiet && slower_backends) {
    events.ranked = [&](const run::RunReport& report) {
      clear_progress();
      print_ranking(report);
    };
    events.entry = [&](const run::RunEntry& e) {
      clear_progress();
      print_arrival(e);
    };
  }

  run::RunOutcome out = run::run_scenario(s, request, events);
  clear_progress();
  if (!opts.quiet && slower_backends && out.end == run::RunEnd::kDone) std::cout << "\n";
  switch (out.end) {
    case run::RunEnd::kDone:
      break;
    case run::RunEnd::kCancelled:
      std::cerr << "monarch-sim: interrupted; nothing was written\n";
      return kExitInterrupted;
    case run::RunEnd::kNoPlanFits:
      print_error(opts.scenario_path, out.problems.front().message);
      return kExitNoPlanFits;
    case run::RunEnd::kInvalid:
      for (const auto& p : out.problems) print_error(p.where, p.message);
      return kExitInvalid;
    case run::RunEnd::kFailed: {
      std::string why;
      for (const auto& p : out.problems) {
        print_error(p.where, p.message);
        why += (why.empty() ? "" : "; ") + p.message;
      }
      if (store && out.failed_run) {
        if (auto id = run::record_failed_run(*store, s, *out.failed_run, why, started_at))
          std::cerr << "monarch-sim: recorded the failed run as " << *id << "\n";
      }
      return 1;
    }
  }

  const Problems written = run::write_outputs(out.report, {opts.output_path, opts.emit_plan_path, opts.trace_path});
  if (!written.empty()) {
    for (const auto& p : written) print_error(p.where, p.message);
    return kExitInvalid;
  }
  if (store) {
    auto ids = run::record_runs(*store, out.report, started_at);
    if (!ids) {
      for (const auto& p : ids.problems()) print_error(p.where, p.message);
      return kExitInvalid;
    }
    if (!opts.quiet && !ids->empty())
      std::cerr << "monarch-sim: recorded runs " << ids->front() << ".." << ids->back() << " in " << store->path() << "\n";
  }
  if (!opts.quiet) {
    if (out.report.recommendation) {
      print_dlrm_table(out.report);
    } else {
      print_table(out.report);
      print_reliability(out.report);
      print_failure(out.report);
    }
  }
  return kExitOk;
}

}  // namespace monarch::app
