// monarch-sim runs import PATH... [--scenario S.json | --plan P.json] [--db FILE] [--rank R]
//                                  [--name NAME] [--profile OUT.json]
// Reads the evidence of a real training job into the results store as one run of backend
// "measured": per-rank PyTorch profiler traces (files or folders as torchtitan and Megatron-LM
// write them), Megatron-LM / torchtitan logs. nccl-tests results among the inputs go into the
// calibration profile named by --profile instead (their collective samples).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <zlib.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/plan_io.h"
#include "core/profile_io.h"
#include "core/scenario_io.h"
#include "core/sha256.h"
#include "measured/kineto_io.h"
#include "measured/measured_run.h"
#include "measured/nccl_tests_io.h"
#include "measured/training_log.h"
#include "results/runs_command.h"
#include "results/store.h"
#include "strategies/plan_costs.h"

namespace monarch::app {
namespace {

namespace fs = std::filesystem;
using measured::NcclTestsResult;
using measured::RankStats;
using measured::TrainingLog;

// How much of a file is looked at to tell a trace from a log or an nccl-tests table.
constexpr size_t kSniffBytes = 4096;

enum class InputKind { kTrace, kLog, kNcclTests };

struct Input {
  std::string path;
  InputKind kind = InputKind::kLog;
};

// The first bytes of a file, decompressed when it is gzip.
std::string head_of(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return {};
  std::string buf(kSniffBytes, '\0');
  const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
  gzclose(f);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

InputKind classify(const std::string& path) {
  const std::string head = head_of(path);
  const size_t first = head.find_first_not_of(" \t\r\n");
  // A bare event array opens with "[{" (or is empty); a log line may open with "[timestamp]".
  const size_t second = first == std::string::npos ? first : head.find_first_not_of(" \t\r\n", first + 1);
  const bool json_text = first != std::string::npos &&
                         (head[first] == '{' || (head[first] == '[' && second != std::string::npos &&
                                                 (head[second] == '{' || head[second] == ']')));
  if (json_text) {
    // Kineto's distributedInfo also carries an "nccl_version"; its top-level keys tell it apart.
    for (const char* key : {"\"traceEvents\"", "\"schemaVersion\"", "\"distributedInfo\"", "\"deviceProperties\""})
      if (head.find(key) != std::string::npos) return InputKind::kTrace;
    if (head.find("\"nccl_version\"") != std::string::npos) return InputKind::kNcclTests;
    return InputKind::kTrace;
  }
  if (measured::looks_like_nccl_tests(head)) return InputKind::kNcclTests;
  return InputKind::kLog;
}

// Files of a folder that can be evidence: traces (.json, .json.gz), logs and tables (.log, .txt, .out).
Expected<std::vector<Input>> collect_inputs(const std::vector<std::string>& paths) {
  std::vector<Input> inputs;
  Problems problems;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> files;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const std::string f = it->path().string();
        if (ends_with(f, ".json") || ends_with(f, ".json.gz") || ends_with(f, ".log") || ends_with(f, ".txt") ||
            ends_with(f, ".out"))
          files.push_back(f);
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) problems.push_back({p, "the folder holds no trace (.json, .json.gz) or log (.log, .txt, .out)"});
      for (const std::string& f : files) inputs.push_back({f, classify(f)});
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back({p, classify(p)});
    } else {
      problems.push_back({p, "no such file or folder"});
    }
  }
  if (!problems.empty()) return problems;
  return inputs;
}

struct PlanContext {
  std::optional<Plan> plan;
  std::optional<Scenario> scenario;
};

Expected<PlanContext> plan_context(const std::string& scenario_path, const std::string& plan_path) {
  PlanContext ctx;
  if (!plan_path.empty()) {
    Expected<PlanFile> f = read_plan_file_full(plan_path);
    if (!f) return f.problems();
    ctx.plan = f->graph.plan;
    ctx.scenario = f->scenario;
  } else if (!scenario_path.empty()) {
    Expected<Scenario> s = read_scenario_file(scenario_path);
    if (!s) return s.problems();
    SearchOptions so;
    so.top_k = 1;
    SearchResult sr = search_plans_analytical(*s, so);
    if (!sr.any_fits())
      return Expected<PlanContext>::fail(scenario_path, "no plan of the scenario fits: " + sr.no_fit_message);
    ctx.plan = sr.ranked.front().plan;
    ctx.scenario = *s;
  }
  return ctx;
}

// One rank's statistics, merging the profiling windows torchtitan writes per rank
// (profiling/traces/iteration_N/rankR_trace.json.gz) in the order read.
void add_rank(std::vector<RankStats>& ranks, RankStats r, std::map<int32_t, std::string>& folder_of) {
  const std::string folder = fs::path(r.source).parent_path().string();
  for (RankStats& have : ranks) {
    if (have.rank == r.rank && r.rank >= 0 && folder_of[r.rank] != folder) {
      have.iterations.insert(have.iterations.end(), r.iterations.begin(), r.iterations.end());
      return;
    }
  }
  if (r.rank >= 0) folder_of[r.rank] = folder;
  ranks.push_back(std::move(r));
}

int import_nccl_tests(const std::vector<NcclTestsResult>& results, const std::string& profile_path) {
  CalibrationProfile profile;
  std::error_code ec;
  if (fs::exists(profile_path, ec)) {
    Expected<CalibrationProfile> old = read_profile(profile_path);
    if (!old) {
      for (const Problem& p : old.problems()) print_error(p.where, p.message);
      return kExitInvalid;
    }
    profile = *old;
  } else {
    profile.device_kind = DeviceKind::kGpu;
    profile.device_name = results.front().device_name;
    profile.device_count = results.front().ranks;
    profile.tool = "monarch-sim runs import (nccl-tests) " + software_version();
    profile.created_utc = format_utc(std::chrono::system_clock::now());
  }
  for (const NcclTestsResult& r : results) {
    measured::merge_collectives(profile, r);
    std::cout << "nccl-tests " << r.source << ": " << r.samples.size() << " " << to_string(r.kind) << " sizes over "
              << r.ranks << " ranks -> " << profile_path << "\n";
  }
  Problems written = write_profile(profile_path, profile);
  if (!written.empty()) {
    for (const Problem& p : written) print_error(p.where, p.message);
    return kExitInvalid;
  }
  return kExitOk;
}

void print_summary(const BackendResult& r, const std::vector<RankStats>& ranks) {
  std::printf("measured: %zu rank trace(s), iteration %.6g s, compute %.6g s, exposed comm %.6g s, peak %.3f GiB\n",
              ranks.size(), r.iteration_time_s, r.time_breakdown_s.compute, r.time_breakdown_s.exposed_comm,
              r.memory.peak_gib);
  for (const RankStats& rk : ranks) {
    double it = 0, overlap = 0, idle = 0;
    for (const auto& i : rk.iterations) {
      it += i.iteration_s;
      overlap += i.overlap_ratio;
      idle += i.idle_s;
    }
    const double n = static_cast<double>(std::max<size_t>(rk.iterations.size(), 1));
    std::printf("  rank %d: %zu iterations, %.6g s each, idle %.6g s, comm-compute overlap %.1f%%  (%s)\n", rk.rank,
                rk.iterations.size(), it / n, idle / n, 100.0 * overlap / n, rk.source.c_str());
  }
  for (const CommEntry& c : r.communication)
    std::printf("  %-14s %-10s %14lld bytes %6lld ops %10.6g s per rank per iteration\n", to_string(c.kind),
                group_name(c).c_str(), static_cast<long long>(c.bytes), static_cast<long long>(c.count), c.time_s);
}

}  // namespace

int cmd_runs_import(const std::vector<std::string>& args, const std::string& db_path_in) {
  CLI::App app{"Import a real training job's traces and logs as a measured run.", "monarch-sim runs import"};
  std::vector<std::string> paths;
  std::string scenario_path, plan_path, db_path = db_path_in, name, profile_path;
  std::optional<int32_t> rank;
  app.add_option("PATH", paths, "trace files or folders (.json, .json.gz), training logs, nccl-tests output")
      ->required();
  auto* sc = app.add_option("--scenario", scenario_path, "the scenario the job ran (its best plan is the run's plan)");
  app.add_option("--plan", plan_path, "the plan file the job ran (monarch-plan/2 from --emit-plan)")->excludes(sc);
  app.add_option("--db", db_path, "the results store (default: " + default_store_path() + ")");
  app.add_option("--rank", rank, "the rank of a single trace that does not name it");
  app.add_option("--name", name, "scenario name for the run when neither --scenario nor --plan is given");
  app.add_option("--profile", profile_path, "calibration profile that nccl-tests results are merged into");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, std::cout, std::cerr);
  } catch (const CLI::ParseError& e) {
    print_error("runs import", e.what());
    return kExitInvalid;
  }

  Expected<std::vector<Input>> inputs = collect_inputs(paths);
  if (!inputs) {
    for (const Problem& p : inputs.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  Expected<PlanContext> ctx = plan_context(scenario_path, plan_path);
  if (!ctx) {
    for (const Problem& p : ctx.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }

  const bool tty = ::isatty(STDERR_FILENO) == 1;
  measured::MeasuredEvidence evidence;
  std::vector<NcclTestsResult> nccl;
  std::vector<std::string> run_files;
  std::map<int32_t, std::string> folder_of;
  Problems problems;
  size_t traces = 0;
  for (const Input& in : *inputs) traces += in.kind == InputKind::kTrace;
  if (rank && traces != 1) problems.push_back({"--rank", "names the rank of one trace, but " + std::to_string(traces) + " traces are given"});
  for (const Input& in : *inputs) {
    if (in.kind == InputKind::kNcclTests) {
      Expected<NcclTestsResult> r = measured::read_nccl_tests(in.path);
      if (r) nccl.push_back(*r);
      else problems.insert(problems.end(), r.problems().begin(), r.problems().end());
      continue;
    }
    run_files.push_back(in.path);
    if (in.kind == InputKind::kLog) {
      Expected<TrainingLog> log = measured::read_training_log(in.path);
      if (!log) problems.insert(problems.end(), log.problems().begin(), log.problems().end());
      else if (evidence.log) problems.push_back({in.path, "a second training log; import one log per run"});
      else evidence.log = *log;
      continue;
    }
    measured::TraceReadOptions opt;
    opt.rank = rank;
    if (tty)
      opt.progress = [&](int64_t done, int64_t total) {
        std::fprintf(stderr, "\rreading %s: %lld / %lld MB", in.path.c_str(), static_cast<long long>(done >> 20),
                     static_cast<long long>(total >> 20));
      };
    Expected<measured::TraceReadout> t = measured::read_kineto_trace(in.path, opt);
    if (tty) std::fprintf(stderr, "\r%*s\r", 100, "");
    if (!t) {
      problems.insert(problems.end(), t.problems().begin(), t.problems().end());
      continue;
    }
    RankStats stats = measured::analyze_trace(*t);
    stats.source = in.path;
    add_rank(evidence.ranks, std::move(stats), folder_of);
  }
  if (!nccl.empty() && profile_path.empty())
    problems.push_back({nccl.front().source, "is nccl-tests output; give --profile FILE.json to merge it into"});
  if (!problems.empty()) {
    for (const Problem& p : problems) print_error(p.where, p.message);
    std::cerr << "monarch-sim: nothing was imported\n";
    return kExitInvalid;
  }
  if (!nccl.empty()) {
    const int rc = import_nccl_tests(nccl, profile_path);
    if (rc != kExitOk || run_files.empty()) return rc;
  }

  // Without a plan the job is taken as plain data parallelism over its ranks.
  std::optional<Plan> plan = ctx->plan;
  if (!plan) {
    int32_t world = static_cast<int32_t>(evidence.ranks.size());
    for (const RankStats& r : evidence.ranks) world = std::max(world, r.world_size);
    Plan p;
    p.dp = std::max(world, 1);
    plan = p;
    std::cerr << "monarch-sim: no --plan or --scenario: recorded as data parallelism over " << p.dp << " rank(s)\n";
  }
  const Scenario* scenario = ctx->scenario ? &*ctx->scenario : nullptr;
  Expected<BackendResult> result = measured::measured_result(evidence, plan, scenario);
  if (!result) {
    for (const Problem& p : result.problems()) print_error(p.where, p.message);
    std::cerr << "monarch-sim: nothing was imported\n";
    return kExitInvalid;
  }

  RunRecord rec;
  for (const std::string& f : run_files) {
    Expected<FileDigest> d = sha256_file(f);
    if (!d) {
      print_error(d.problems()[0].where, d.problems()[0].message);
      return kExitInvalid;
    }
    rec.sources.push_back({f, d->sha256, d->bytes});
  }
  Expected<Store> store = db_path.empty() ? Store::open_default() : Store::open(db_path);
  if (!store) {
    for (const Problem& p : store.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  Expected<std::optional<int64_t>> known = store->find_imported(rec.sources);
  if (!known) {
    for (const Problem& p : known.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  if (*known) {
    std::cout << "already imported: these files are run " << **known << " (nothing was added)\n";
    return kExitOk;
  }
  if (scenario) {
    rec.scenario_name = scenario->name;
    rec.scenario_json = scenario_to_json(*scenario).dump();
  } else {
    rec.scenario_name = name.empty() ? "imported" : name;
    rec.scenario_json = nlohmann::json({{"name", rec.scenario_name}}).dump();
  }
  rec.result = *result;
  rec.started_at = rec.ended_at = std::chrono::system_clock::now();
  Expected<int64_t> id = store->record_run(rec);
  if (!id) {
    for (const Problem& p : id.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  print_summary(*result, evidence.ranks);
  std::cout << "recorded as run " << *id << " (backend measured, plan " << describe(result->plan, PlanDetail::kFull) << ") in "
            << store->path() << "\n";
  return kExitOk;
}

}  // namespace monarch::app
