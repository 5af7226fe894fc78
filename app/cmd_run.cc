// monarch-sim SCENARIO.json: read and validate the scenario, search the plans it leaves open
// with the analytical model, re-rank the best few with every other selected backend, report
// the chosen plan against the FSDP baseline, and write the result file, the plan file, the
// trace and the store as asked.
//
// Order of work, so that bad input and interruption leave nothing half-written:
//   1. scenario and options are checked, the store is opened (bad --db: exit 2, nothing done);
//   2. everything is computed in memory (Ctrl-C here: exit 130, nothing written);
//   3. files are written through a temporary file renamed into place, then the store records
//      every (plan, backend) entry, each in one transaction.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "app/commands.h"
#include "core/model_math.h"
#include "core/plan_io.h"
#include "core/result_io.h"
#include "core/scenario_io.h"
#include "results/store.h"
#include "sim/analytical_backend.h"
#include "sim/chrome_trace_io.h"
#include "strategies/dlrm_lowering.h"
#include "strategies/dlrm_sharding.h"
#include "strategies/graph_check.h"
#include "strategies/plan_costs.h"
#include "strategies/search.h"
#ifdef MONARCH_HAVE_SIMGRID
#include "sim/simgrid_backend.h"
#endif
#ifdef MONARCH_HAVE_REAL_CPU
#include "realrt/launch.h"
#endif

namespace monarch::app {
namespace {

#ifndef MONARCH_HAVE_SIMGRID
struct SimgridOptions {};  // this build has no SimGrid backend
#endif

// How many of the analytically best plans the slower backends re-rank.
constexpr size_t kRerankTopPlans = 3;
constexpr int kExitInterrupted = 130;

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Installs a SIGINT handler for the life of the object; the previous one is restored after.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted.store(false);
    previous_ = std::signal(SIGINT, on_sigint);
  }
  ~InterruptGuard() { std::signal(SIGINT, previous_); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
};

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

// Backends this build can run; `where` names the option or JSON path they came from.
bool check_backends_built(const std::vector<Backend>& backends, const std::string& where) {
  const BuildFeatures f = build_features();
  bool ok = true;
  for (Backend b : backends) {
    const char* missing = nullptr;
    if (b == Backend::kSimgrid && !f.simgrid) missing = "SimGrid (configure with MONARCH_WITH_SIMGRID=ON; Debian package libsimgrid-dev)";
    if (b == Backend::kRealCpu && !f.real_cpu) missing = "the CPU runtime (MONARCH_WITH_MPI=ON; libopenmpi-dev openmpi-bin libopenblas-dev)";
    if (b == Backend::kRealGpu && !f.real_gpu) missing = "the GPU runtime (MONARCH_WITH_GPU=ON; CUDA toolkit with cuBLAS and NCCL)";
    if (missing) {
      print_error(where, std::string("backend \"") + to_string(b) + "\" needs " + missing + ", which this build lacks");
      ok = false;
    }
  }
  return ok;
}

bool has_backend(const std::vector<Backend>& v, Backend b) { return std::find(v.begin(), v.end(), b) != v.end(); }

// Splits `--set simgrid.KEY=VALUE` (backend options, not scenario keys) from the scenario's.
void split_overrides(const std::vector<std::string>& all, std::vector<std::string>& scenario,
                     std::vector<std::pair<std::string, std::string>>& simgrid) {
  for (const auto& o : all) {
    if (o.rfind("simgrid.", 0) == 0) {
      const auto eq = o.find('=');
      const std::string key = o.substr(8, eq == std::string::npos ? std::string::npos : eq - 8);
      simgrid.emplace_back(key, eq == std::string::npos ? std::string() : o.substr(eq + 1));
    } else {
      scenario.push_back(o);
    }
  }
}

// Writes `text` to `path` through a temporary file renamed into place.
bool write_file_atomically(const std::string& path, const std::string& text, const std::string& option) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      print_error(option, "cannot write " + path + " (check the directory exists and is writable)");
      return false;
    }
    out << text;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      print_error(option, "writing " + path + " failed (disk full?)");
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    print_error(option, "cannot write " + path + ": " + ec.message());
    return false;
  }
  return true;
}

std::string fixed(double v, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

std::string short_plan(const Plan& p) {
  std::ostringstream o;
  o << "tp" << p.tp << " pp" << p.pp << " dp" << p.dp << " cp" << p.cp;
  if (p.ep > 1) o << " ep" << p.ep;
  if (p.expert_tp() != p.tp) o << " etp" << p.expert_tp();  // expert TP, shown when it differs from tp
  if (p.vpp > 1) o << " vpp" << p.vpp;
  o << " mbs" << p.micro_batch_size << ' ' << to_string(p.schedule) << (p.sequence_parallel ? " sp" : "")
    << " rc=" << to_string(p.recompute) << " z" << p.zero_stage;
  return o.str();
}

void print_table(const Scenario& s, const std::vector<BackendResult>& results, const std::optional<BackendResult>& baseline,
                 const SearchResult& sr) {
  std::cout << "scenario " << s.name << ": " << s.cluster.num_gpus << " x " << s.cluster.gpu.name << ", "
            << to_string(s.training.precision) << ", global batch " << s.training.global_batch_size << "\n";
  std::cout << "searched " << sr.plans_in_space << " plans, evaluated " << sr.plans_evaluated << ", "
            << sr.plans_fitting << " fit, " << sr.plans_rejected << " rejected\n\n";
  // The plan column: 64 wide, wider when a plan string needs it (e.g. with " etpN"), so the
  // backend column never runs into it.
  int plan_w = 64;
  for (const auto& r : results) plan_w = std::max(plan_w, static_cast<int>(short_plan(r.plan).size()) + 1);
  std::cout << std::left << std::setw(4) << "#" << std::setw(plan_w) << "plan" << std::setw(12) << "backend" << std::right
            << std::setw(11) << "iter s" << std::setw(12) << "tokens/s" << std::setw(7) << "MFU" << std::setw(10)
            << "peak GiB" << std::setw(11) << "exposed s" << "\n";
  int rank = 0;
  const Plan* last = nullptr;
  for (const auto& r : results) {
    const bool same_plan = last && *last == r.plan;
    if (!same_plan) ++rank;
    last = &r.plan;
    std::cout << std::left << std::setw(4) << (same_plan ? "" : std::to_string(rank))
              << std::setw(plan_w) << (same_plan ? "" : short_plan(r.plan)) << std::setw(12) << r.backend << std::right
              << std::setw(11) << fixed(r.iteration_time_s, 3) << std::setw(12) << fixed(r.tokens_per_s, 0)
              << std::setw(7) << fixed(100 * r.mfu, 1) << std::setw(10) << fixed(r.memory.peak_gib, 1)
              << std::setw(11) << fixed(r.time_breakdown_s.exposed_comm, 3) << "\n";
    if (!same_plan)
      for (const std::string& w : r.warnings) std::cout << "    warning: " << w << "\n";
  }
  if (!results.empty() && !results.front().plan.layers_per_stage.empty()) {
    const Plan& first = results.front().plan;
    std::cout << (static_cast<int64_t>(first.layers_per_stage.size()) == first.pp ? "\nlayers per pipeline stage of plan 1:"
                                                                                  : "\nlayers per model chunk of plan 1 (model order):");
    for (auto n : results.front().plan.layers_per_stage) std::cout << ' ' << n;
    std::cout << "\n";
  }
  if (baseline && !results.empty()) {
    const auto& best = results.front();
    auto pct = [](double a, double b) { return b > 0 ? fixed(100.0 * (a - b) / b, 1) + "%" : std::string("-"); };
    std::cout << "\nchosen plan vs the FSDP / ZeRO-3 baseline (" << short_plan(baseline->plan) << ")\n";
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


// One (plan, backend) entry as the store records it.
RunRecord make_record(const Scenario& s, const std::string& scenario_json, int64_t parameters, const BackendResult& r,
                      std::chrono::system_clock::time_point started_at) {
  RunRecord rec;
  rec.scenario_name = s.name;
  rec.scenario_json = scenario_json;
  rec.parameters = parameters;
  rec.result = r;
  rec.started_at = started_at;
  rec.ended_at = std::chrono::system_clock::now();
  return rec;
}

#ifdef MONARCH_HAVE_SIMGRID
// SimGrid on one lowered graph. On Ctrl-C or a problem: says so, sets `exit_status`
// (kExitInterrupted / kExitInvalid) and returns nullopt.
std::optional<BackendResult> simulate(const Scenario& s, const PlanGraph& g, const SimgridOptions& options,
                                      int& exit_status) {
  auto r = run_simgrid(s, g, options);
  if (g_interrupted.load()) {
    std::cerr << "\nmonarch-sim: interrupted; nothing was written\n";
    exit_status = kExitInterrupted;
    return std::nullopt;
  }
  if (!r) {
    for (const auto& p : r.problems()) print_error(p.where, p.message);
    exit_status = kExitInvalid;
    return std::nullopt;
  }
  return std::move(r).value();
}
#endif

// Recommendation models: embedding-table sharding plans (strategies/dlrm_sharding.h), ranked
// by the analytical DLRM model; with SimGrid, the best few are lowered
// (strategies/dlrm_lowering.h), simulated and re-ranked as LLM plans are. Written to the result
// file and the store like LLM plans, one entry per (plan, backend).
int run_dlrm(const Scenario& s, const RunOptions& opts, const std::vector<Backend>& backends,
             [[maybe_unused]] const SimgridOptions& sg_options, std::optional<Store>& store,
             std::chrono::system_clock::time_point started_at) {
  if (!opts.emit_plan_path.empty()) {
    print_error("--emit-plan", "plan files are for transformer plans; dlrm sharding plans have none in this version");
    return kExitInvalid;
  }
  [[maybe_unused]] const bool want_simgrid = has_backend(backends, Backend::kSimgrid);
  [[maybe_unused]] const bool tty = stderr_is_terminal();
  DlrmSearchResult dr = search_dlrm_sharding(s);
  if (!dr.any_fits()) {
    print_error(opts.scenario_path, dr.no_fit_message);
    return kExitNoPlanFits;
  }
  struct Entry {
    BackendResult result;
    std::string sharding;
  };
  struct Row {
    size_t ranked = 0;           // index into dr.ranked
    std::vector<Entry> entries;  // analytical first, then the other backends
  };
  std::vector<Row> per_plan;
  auto add_row = [&](size_t k) {
    const auto& rp = dr.ranked[k];
    per_plan.push_back({k, {{rp.result, rp.sharding.name + ": " + describe(rp.sharding)}}});
  };
  for (size_t k = 0; k < dr.ranked.size() && static_cast<int64_t>(k) < s.search.top_k; ++k) add_row(k);

  // --- SimGrid re-ranks the best few
  std::optional<BackendResult> traced;
#ifdef MONARCH_HAVE_SIMGRID
  if (want_simgrid || !opts.trace_path.empty()) {
    const size_t n = want_simgrid ? std::min(kRerankTopPlans, per_plan.size()) : 1;
    for (size_t i = 0; i < n; ++i) {
      if (tty) std::fprintf(stderr, "\rsimulating sharding plan %zu of %zu with SimGrid...", i + 1, n);
      auto g = lower_dlrm(s, dr.ranked[i].sharding);
      Problems pr = g ? check_graph(*g) : g.problems();
      if (!pr.empty()) {  // a lowering bug: report, do not simulate a broken graph
        for (const auto& p : pr) print_error("lowering " + per_plan[i].entries.front().sharding, p.to_string());
        return 1;
      }
      int sim_status = 0;
      auto r = simulate(s, *g, sg_options, sim_status);
      if (!r) return sim_status;
      // "Tokens" are samples for a recommendation model, as in the analytical result.
      r->tokens_per_s = r->iteration_time_s > 0 ? s.training.global_batch_size / r->iteration_time_s : 0;
      if (i == 0) traced = *r;
      if (!want_simgrid) break;
      per_plan[i].entries.push_back({std::move(r).value(), per_plan[i].entries.front().sharding});
    }
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    if (want_simgrid && s.search.objective == Objective::kIterationTime)
      std::stable_sort(per_plan.begin(), per_plan.begin() + static_cast<long>(std::min(kRerankTopPlans, per_plan.size())),
                       [](const Row& a, const Row& b) {
                         return a.entries.back().result.iteration_time_s < b.entries.back().result.iteration_time_s;
                       });
  }
#endif

  // --- the CPU runtime trains the best plan it can run (no column-wise tables), recorded next
  // to the analytical prediction of the same plan; a failed run is recorded as failed.
#ifdef MONARCH_HAVE_REAL_CPU
  if (has_backend(backends, Backend::kRealCpu)) {
    size_t k = 0;
    while (k < dr.ranked.size() && !std::none_of(dr.ranked[k].sharding.tables.begin(), dr.ranked[k].sharding.tables.end(),
                                                 [](const TablePlacement& p) { return p.kind == TableSharding::kColumnWise; }))
      ++k;
    if (k == dr.ranked.size()) {
      print_error("--backend real-cpu", "every fitting sharding plan has column-wise tables, which the CPU runtime does not run");
      return kExitInvalid;
    }
    auto row = std::find_if(per_plan.begin(), per_plan.end(), [&](const Row& r) { return r.ranked == k; });
    if (row == per_plan.end()) {
      add_row(k);
      row = per_plan.end() - 1;
    }
    if (tty) std::fprintf(stderr, "training sharding plan %s on %lld CPU processes...\n",
                          describe(dr.ranked[k].sharding).c_str(), static_cast<long long>(s.cluster.num_gpus));
    auto real = realrt::run_real_cpu_dlrm(s, dr.ranked[k].sharding, realrt::RealCpuOptions{});
    if (!real) {
      std::string why;
      for (const auto& p : real.problems()) {
        print_error("--backend real-cpu", p.to_string());
        why += (why.empty() ? "" : "; ") + p.to_string();
      }
      if (store) {
        BackendResult failed;
        failed.backend = "real-cpu";
        failed.plan = dr.ranked[k].result.plan;
        failed.measured = true;
        RunRecord rec = make_record(s, scenario_to_json(s).dump(), 0, failed, started_at);
        rec.status = RunStatus::kFailed;
        rec.error_message = why;
        if (auto id = store->record_run(rec)) std::cerr << "monarch-sim: recorded the failed run as " << *id << "\n";
      }
      return 1;
    }
    row->entries.insert(row->entries.begin() + 1, {std::move(real).value(), row->entries.front().sharding});
  }
#endif
  if (!opts.trace_path.empty() && traced) {
    TraceMetadata meta;
    meta.scenario = s.name;
    meta.world_size = s.cluster.num_gpus;
    const Problems pr = write_chrome_trace(opts.trace_path, *traced, meta);
    if (!pr.empty()) {
      for (const auto& p : pr) print_error(p.where.empty() ? "--trace" : p.where, p.message);
      return kExitInvalid;
    }
  }

  const nlohmann::json scenario_json = scenario_to_json(s);
  int64_t parameters = 0;
  for (const auto& t : s.model.dlrm.tables) parameters += t.rows * t.dim;
  parameters += dlrm_dense_shape(s.model.dlrm).dense_params();
  if (!opts.output_path.empty()) {
    nlohmann::json out;
    out["format"] = "monarch-sim-result/1";
    out["scenario"] = scenario_json;
    out["parameters"] = parameters;
    out["results"] = nlohmann::json::array();
    for (size_t i = 0; i < per_plan.size(); ++i)
      for (const Entry& en : per_plan[i].entries) {
        nlohmann::json e = result_to_json(en.result);
        e["rank"] = static_cast<int64_t>(i + 1);
        e["sharding"] = en.sharding;
        out["results"].push_back(std::move(e));
      }
    out["rejected"] = nlohmann::json::array();
    for (const auto& rj : dr.rejected) out["rejected"].push_back(rejected_to_json(rj));
    if (!write_file_atomically(opts.output_path, out.dump(2) + "\n", "--output")) return kExitInvalid;
  }
  if (store) {
    std::vector<int64_t> ids;
    for (const auto& plan : per_plan)
      for (const Entry& en : plan.entries) {
        auto id = store->record_run(make_record(s, scenario_json.dump(), parameters, en.result, started_at));
        if (!id) {
          for (const auto& p : id.problems()) print_error("--db " + store->path(), p.to_string());
          return kExitInvalid;
        }
        ids.push_back(*id);
      }
    if (!opts.quiet && !ids.empty())
      std::cerr << "monarch-sim: recorded runs " << ids.front() << ".." << ids.back() << " in " << store->path() << "\n";
  }
  if (!opts.quiet) {
    std::cout << "scenario " << s.name << ": dlrm with " << s.model.dlrm.tables.size() << " tables on "
              << s.cluster.num_gpus << " x " << s.cluster.gpu.name << "\n\n";
    std::cout << std::left << std::setw(4) << "#" << std::setw(70) << "sharding" << std::setw(12) << "backend"
              << std::right << std::setw(12) << "iter ms" << std::setw(14) << "samples/s" << std::setw(10) << "peak GiB"
              << "\n";
    for (size_t i = 0; i < per_plan.size(); ++i)
      for (size_t k = 0; k < per_plan[i].entries.size(); ++k) {
        const BackendResult& r = per_plan[i].entries[k].result;
        std::cout << std::left << std::setw(4) << (k == 0 ? std::to_string(i + 1) : "") << std::setw(70)
                  << (k == 0 ? per_plan[i].entries[k].sharding.substr(0, 68) : "") << std::setw(12) << r.backend << std::right
                  << std::setw(12) << fixed(1e3 * r.iteration_time_s, 3) << std::setw(14)
                  << fixed(r.iteration_time_s > 0 ? s.training.global_batch_size / r.iteration_time_s : 0, 0)
                  << std::setw(10) << fixed(r.memory.peak_gib, 2) << "\n";
      }
    if (!dr.rejected.empty()) {
      std::cout << "\nrejected:\n";
      for (const auto& r : dr.rejected) std::cout << "  " << r.reason << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

int cmd_run(const RunOptions& opts) {
  std::vector<std::string> scenario_overrides;
  std::vector<std::pair<std::string, std::string>> simgrid_overrides;
  split_overrides(opts.overrides, scenario_overrides, simgrid_overrides);

  auto scenario = read_scenario_file(opts.scenario_path, scenario_overrides);
  if (!scenario) {
    for (const auto& p : scenario.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  Scenario s = std::move(scenario).value();
  if (opts.top_k) s.search.top_k = *opts.top_k;

  std::vector<Backend> backends = s.backends;
  std::string backends_from = opts.scenario_path + ": /backends";
  if (!opts.backends.empty()) {
    backends = opts.backends;
    backends_from = "--backend";
  } else if (backends.empty()) {
    backends = default_backends(build_features().simgrid);
    backends_from = "default backends";
  }
  if (!check_backends_built(backends, backends_from)) return kExitInvalid;
  SimgridOptions sg_options;
#ifdef MONARCH_HAVE_SIMGRID
  for (const auto& [key, value] : simgrid_overrides) {
    const Problems pr = apply_simgrid_option(sg_options, key, value);
    if (!pr.empty()) {
      for (const auto& p : pr) print_error(p.where, p.message);
      return kExitInvalid;
    }
  }
#else
  if (!simgrid_overrides.empty()) {
    print_error("--set simgrid." + simgrid_overrides.front().first, "this build has no SimGrid backend");
    return kExitInvalid;
  }
#endif
  const bool want_simgrid = has_backend(backends, Backend::kSimgrid);
  const bool want_real_cpu = has_backend(backends, Backend::kRealCpu);
  const bool want_real_gpu = has_backend(backends, Backend::kRealGpu);
  // --trace: the measured step of the real run when there is one, else the SimGrid simulation.
  if (!opts.trace_path.empty() && !build_features().simgrid && !want_real_cpu) {
    print_error("--trace", "the trace is of the SimGrid simulation, which this build lacks (libsimgrid-dev), or of a "
                           "real run (--backend real-cpu)");
    return kExitInvalid;
  }

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

  if (s.model.architecture == Architecture::kDlrm) return run_dlrm(s, opts, backends, sg_options, store, started_at);

  // --- search with the analytical model
  SearchOptions so;
  so.top_k = s.search.top_k;
  so.jobs = opts.jobs;
  so.cancelled = [] { return g_interrupted.load(); };
  if (tty)
    so.progress = [](int64_t done, int64_t total) {
      std::fprintf(stderr, "\rsearching plans: %lld / %lld", static_cast<long long>(done), static_cast<long long>(total));
    };
  SearchResult sr = search_plans_analytical(s, so);
  if (tty) std::fprintf(stderr, "\r%60s\r", "");
  if (sr.cancelled || g_interrupted.load()) {
    std::cerr << "monarch-sim: interrupted; nothing was written\n";
    return kExitInterrupted;
  }
  if (!sr.any_fits()) {
    print_error(opts.scenario_path, sr.no_fit_message);
    return kExitNoPlanFits;
  }

  // --- analytical entries for the ranked plans
  std::vector<BackendResult> analytical;
  for (const auto& rp : sr.ranked) analytical.push_back(run_analytical(s, rp.plan));

  // --- the slower backends re-rank the best few
  std::map<size_t, BackendResult> simgrid_results;  // index into analytical
  std::optional<PlanGraph> best_graph;
  auto lower = [&](const Plan& plan) -> Expected<PlanGraph> {
    auto g = lower_plan(s, plan);
    if (!g) return g;
    const Problems pr = check_graph(*g);
    if (!pr.empty()) return pr;  // a lowering bug: report, do not simulate a broken graph
    return g;
  };
#ifdef MONARCH_HAVE_SIMGRID
  if (want_simgrid || (!opts.trace_path.empty() && !want_real_cpu)) {
    const size_t n = want_simgrid ? std::min(kRerankTopPlans, analytical.size()) : 1;
    for (size_t i = 0; i < n; ++i) {
      if (tty) std::fprintf(stderr, "\rsimulating plan %zu of %zu with SimGrid...", i + 1, n);
      auto g = lower(analytical[i].plan);
      if (!g) {
        for (const auto& p : g.problems()) print_error("lowering " + short_plan(analytical[i].plan), p.to_string());
        return 1;
      }
      int sim_status = 0;
      auto r = simulate(s, *g, sg_options, sim_status);
      if (!r) return sim_status;
      simgrid_results.emplace(i, std::move(r).value());
      if (i == 0) best_graph = std::move(g).value();
    }
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
  }
#endif

  // Order: the re-ranked plans by their slowest-backend time first, then the rest; one entry
  // per (plan, backend), analytical first.
  std::vector<size_t> order(analytical.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (want_simgrid && !simgrid_results.empty() && s.search.objective == Objective::kIterationTime) {
    std::stable_sort(order.begin(), order.begin() + static_cast<long>(simgrid_results.size()), [&](size_t a, size_t b) {
      return simgrid_results.at(a).iteration_time_s < simgrid_results.at(b).iteration_time_s;
    });
  }
  std::vector<BackendResult> results;
  for (size_t i : order) {
    results.push_back(analytical[i]);
    if (want_simgrid && simgrid_results.count(i)) results.push_back(simgrid_results.at(i));
  }

  // --- the real CPU runtime trains the chosen plan; a failed run is recorded as failed
#ifdef MONARCH_HAVE_REAL_CPU
  // (real-gpu: the same launcher with monarch-run --device gpu; built where MONARCH_HAVE_REAL_GPU)
  for (const char* device : {"cpu", "gpu"}) {
    const bool gpu = std::string(device) == "gpu";
    if (!(gpu ? want_real_gpu : want_real_cpu)) continue;
#ifndef MONARCH_HAVE_REAL_GPU
    if (gpu) continue;  // refused by check_backends_built already
#endif
    const std::string backend = std::string("real-") + device;
    auto g = lower(results.front().plan);
    if (!g) {
      for (const auto& p : g.problems()) print_error("lowering " + short_plan(results.front().plan), p.to_string());
      return 1;
    }
    if (tty) std::fprintf(stderr, "training the chosen plan on %lld %s processes...\n",
                          static_cast<long long>(results.front().plan.world_size()), gpu ? "GPU" : "CPU");
    auto real = gpu ? realrt::run_real_gpu(s, *g, realrt::RealCpuOptions{}) : realrt::run_real_cpu(s, *g, realrt::RealCpuOptions{});
    if (!real) {
      std::string why;
      for (const auto& p : real.problems()) {
        print_error("--backend " + backend, p.to_string());
        why += (why.empty() ? "" : "; ") + p.to_string();
      }
      if (store) {
        BackendResult failed;
        failed.backend = backend;
        failed.plan = results.front().plan;
        failed.measured = true;
        RunRecord rec = make_record(s, scenario_to_json(s).dump(), 0, failed, started_at);
        rec.status = RunStatus::kFailed;
        rec.error_message = why;
        if (auto id = store->record_run(rec)) std::cerr << "monarch-sim: recorded the failed run as " << *id << "\n";
      }
      return 1;
    }
    results.insert(results.begin() + 1, std::move(real).value());
  }
#endif

  std::optional<BackendResult> baseline;
  if (sr.baseline) baseline = run_analytical(s, sr.baseline->plan);
  const int64_t parameters = parameter_counts(model_shape(s.model)).total;

  // --- files
  if (!opts.emit_plan_path.empty()) {
    if (!best_graph) {
      auto g = lower(results.front().plan);
      if (!g) {
        for (const auto& p : g.problems()) print_error("--emit-plan", p.to_string());
        return 1;
      }
      best_graph = std::move(g).value();
    }
    const Problems pr = write_plan_file(opts.emit_plan_path, *best_graph, &s);
    if (!pr.empty()) {
      for (const auto& p : pr) print_error(p.where.empty() ? "--emit-plan" : p.where, p.message);
      return kExitInvalid;
    }
  }
  if (!opts.trace_path.empty()) {
    const BackendResult* traced = nullptr;
    for (const auto& r : results)
      if (r.backend == "real-cpu" && !r.timeline.empty()) traced = &r;
    if (!traced)
      for (const auto& [i, r] : simgrid_results)
        if (analytical[i].plan == results.front().plan) traced = &r;
    if (!traced && !simgrid_results.empty()) traced = &simgrid_results.begin()->second;
    if (!traced) {
      print_error("--trace", "no backend of this run recorded a timeline");
      return 1;
    }
    {
      TraceMetadata meta;
      meta.scenario = s.name;
      meta.world_size = traced->plan.world_size();
      const Problems pr = write_chrome_trace(opts.trace_path, *traced, meta);
      if (!pr.empty()) {
        for (const auto& p : pr) print_error(p.where.empty() ? "--trace" : p.where, p.message);
        return kExitInvalid;
      }
    }
  }
  const nlohmann::json scenario_json = scenario_to_json(s);
  if (!opts.output_path.empty()) {
    nlohmann::json out;
    out["format"] = "monarch-sim-result/1";
    out["scenario"] = scenario_json;
    out["parameters"] = parameters;
    out["results"] = nlohmann::json::array();
    int rank = 0;
    const Plan* last = nullptr;
    for (const auto& r : results) {
      if (!last || !(*last == r.plan)) ++rank;
      last = &r.plan;
      nlohmann::json e = result_to_json(r);
      e["rank"] = rank;
      out["results"].push_back(std::move(e));
    }
    out["rejected"] = nlohmann::json::array();
    for (const auto& rj : sr.rejected_for_report(100)) out["rejected"].push_back(rejected_to_json(rj));
    if (baseline) {
      out["baseline"] = result_to_json(*baseline);
      out["baseline"]["note"] = sr.baseline_note;
    }
    out["search"] = {{"plans_in_space", sr.plans_in_space},
                     {"plans_evaluated", sr.plans_evaluated},
                     {"plans_fitting", sr.plans_fitting},
                     {"plans_rejected", sr.plans_rejected}};
    if (!write_file_atomically(opts.output_path, out.dump(2) + "\n", "--output")) return kExitInvalid;
  }

  // --- the store
  if (store) {
    std::vector<int64_t> ids;
    for (const auto& r : results) {
      auto id = store->record_run(make_record(s, scenario_json.dump(), parameters, r, started_at));
      if (!id) {
        for (const auto& p : id.problems()) print_error("--db " + store->path(), p.to_string());
        return kExitInvalid;
      }
      ids.push_back(*id);
    }
    if (!opts.quiet && !ids.empty())
      std::cerr << "monarch-sim: recorded runs " << ids.front() << ".." << ids.back() << " in " << store->path() << "\n";
  }

  if (!opts.quiet) print_table(s, results, baseline, sr);
  return kExitOk;
}

}  // namespace monarch::app
