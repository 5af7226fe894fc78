#include "gui/app/backends.h"

#include <cstdio>
#include <exception>
#include <random>

#include "core/cost_model.h"
#include "core/scenario_io.h"
#include "results/store.h"
#include "run/run_library.h"
#include "strategies/plan_check.h"
#include "strategies/search.h"

namespace monarch::gui {

namespace {

run::RunControl control_of(JobControl& job) {
  run::RunControl control;
  control.cancelled = [&job] { return job.cancel.load(); };
  control.progress = [&job](const std::string&, int64_t done, int64_t total) {
    job.fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : -1.0;
  };
  return control;
}

}  // namespace

Expected<SearchOutcome> search_plans(const Scenario& scenario, JobControl& job) {
  run::RunRequest request;
  request.backends = {Backend::kAnalytical};  // the same search and model as monarch-sim
  run::RunEvents events;
  events.control = control_of(job);
  std::vector<PlanPoint> estimated;
  int64_t estimated_total = 0;
  std::mt19937_64 sampler(1);  // reservoir sampling past kMaxPlanSpacePoints, the same every run
  const double tokens_per_iteration =
      static_cast<double>(scenario.training.global_batch_size) * static_cast<double>(scenario.model.seq_length);
  events.estimated = [&](const Plan& plan, const PlanEstimate& e) {
    if (e.peak_memory_gib <= 0 || e.iteration_time_s <= 0) return;  // the cost model could not run it
    ++estimated_total;
    size_t slot = estimated.size();
    if (estimated.size() >= kMaxPlanSpacePoints) {
      slot = static_cast<size_t>(sampler() % static_cast<uint64_t>(estimated_total));
      if (slot >= kMaxPlanSpacePoints) return;
    }
    PlanPoint p{plan, e.iteration_time_s, tokens_per_iteration / e.iteration_time_s, e.peak_memory_gib, e.fits,
                e.reject_reason};
    if (!p.fits && p.reason.empty()) {
      char text[96];
      std::snprintf(text, sizeof text, "needs %.1f GiB per GPU", e.peak_memory_gib);
      p.reason = text;
    }
    if (slot == estimated.size()) estimated.push_back(std::move(p));
    else estimated[slot] = std::move(p);
  };
  run::RunOutcome found = run::run_scenario(scenario, request, events);
  if (found.end == run::RunEnd::kCancelled) return Expected<SearchOutcome>::fail("", "search cancelled");
  if (found.end == run::RunEnd::kInvalid || found.end == run::RunEnd::kFailed) return found.problems;
  const run::RunReport& report = found.report;
  SearchOutcome out;
  out.ranked.reserve(report.entries.size());
  for (const run::RunEntry& e : report.entries) out.ranked.push_back(e.result);
  out.rejected = report.rejected;
  out.baseline = report.baseline;
  out.estimated = std::move(estimated);
  out.estimated_total = estimated_total;
  const SearchResult& sr = report.search;
  if (report.recommendation)
    out.note = "ranked " + std::to_string(report.entries.size()) + " sharding plans, " +
               std::to_string(report.rejected.size()) + " rejected";
  else
    out.note = "looked at " + std::to_string(sr.plans_in_space) + " plans, estimated " +
               std::to_string(sr.plans_evaluated) + ", " + std::to_string(sr.plans_fitting) + " fit";
  if (found.end == run::RunEnd::kNoPlanFits && !found.problems.empty() && !found.problems.front().message.empty())
    out.note += ". " + found.problems.front().message;
  job.fraction = 1;
  return out;
}

Expected<BackendResult> estimate(const Scenario& scenario, const Plan& plan) {
  // The what-if knobs change the scenario and the plan together: a plan that no longer runs
  // (a GPU count the degrees do not divide, a batch that does not split into micro-batches,
  // ...) gets the rule it breaks, at its JSON path, as on the command line.
  if (Problems bad = check_plan(scenario, plan); !bad.empty()) return bad;
  return estimate_plan(scenario, plan);
}

namespace {

CurveMetrics metrics_of(const BackendResult& r) {
  return CurveMetrics{r.iteration_time_s, r.mfu, r.memory.peak_gib, r.tokens_per_s, r.memory.fits};
}

std::string first_problem(const Problems& problems) {
  return problems.empty() ? std::string("failed") : problems.front().to_string();
}

}  // namespace

std::vector<SweepPoint> run_sweep(const Scenario& scenario, const Plan& plan, const SweepRequest& request, JobControl& job) {
  std::vector<SweepPoint> out;
  const size_t n = request.values.size();
  run::RunControl control = control_of(job);
  control.progress = nullptr;  // progress counts values, set below
  for (size_t i = 0; i < n && !job.cancel.load(); ++i) {
    job.fraction = static_cast<double>(i) / static_cast<double>(n);
    SweepPoint point;
    point.value = request.values[i];
    Expected<SweepInput> in = apply_knob(request.knob, point.value, scenario, plan);
    if (!in.ok()) {
      point.problem = first_problem(in.problems());
      out.push_back(std::move(point));
      continue;
    }
    if (request.selected || request.simgrid) {
      // The analytical estimate checks the changed scenario as a file would be checked.
      Expected<BackendResult> r = estimate(in->scenario, in->plan);
      if (r.ok()) point.selected = metrics_of(*r);
      else point.problem = first_problem(r.problems());
    }
    if (request.best) {
      run::RunRequest search;
      search.backends = {Backend::kAnalytical};
      run::RunEvents events;
      events.control = control;
      run::RunOutcome found = run::run_scenario(in->scenario, search, events);
      if (found.end == run::RunEnd::kDone && !found.report.entries.empty()) {
        point.best = metrics_of(found.report.entries.front().result);
        point.best_plan = describe(found.report.entries.front().result.plan, PlanDetail::kFull);
      } else if (found.end != run::RunEnd::kCancelled && point.problem.empty()) {
        point.problem = "best plan: " + first_problem(found.problems);
      }
    }
    if (request.simgrid && point.selected && simgrid_built()) {
      run::BackendSettings settings;
      Expected<BackendResult> r = run::run_plan(in->scenario, run::Candidate{in->plan}, Backend::kSimgrid, settings, control);
      if (r.ok()) point.simgrid = metrics_of(*r);
      else if (!job.cancel.load()) point.problem = "SimGrid: " + first_problem(r.problems());
    }
    out.push_back(std::move(point));
  }
  job.fraction = 1;
  return out;
}

bool simgrid_built() { return run::build_features().simgrid; }

Expected<BackendResult> simulate_simgrid(const Scenario& scenario, const Plan& plan, JobControl& job) {
  run::RunControl control = control_of(job);
  control.progress = nullptr;
  job.fraction = -1;  // SimGrid reports no progress: a busy indicator
  run::BackendSettings settings;
  settings.record_timeline = true;
  // Cancel kills the forked simulation.
  Expected<BackendResult> result = run::run_plan(scenario, run::Candidate{plan}, Backend::kSimgrid, settings, control);
  job.fraction = 1;
  return result;
}

// Newest runs listed in the Compare view; older ones stay in the store (monarch-sim runs list).
constexpr size_t kMaxStoreRunsListed = 500;

std::string default_store_path() { return monarch::default_store_path(); }

Expected<std::vector<StoredRunLabel>> list_store_runs(const std::string& path) {
  Expected<Store> store = Store::open(path, /*create=*/false);
  if (!store.ok()) return store.problems();
  Expected<std::vector<StoredRun>> runs = store->list_runs();
  if (!runs.ok()) return runs.problems();
  std::vector<StoredRunLabel> out;
  for (const StoredRun& run : *runs) {
    if (out.size() == kMaxStoreRunsListed) break;
    const BackendResult& r = run.record.result;
    std::string when = format_utc(run.record.started_at);
    if (when.size() > 16) when = when.substr(0, 16);  // "2026-11-29T17:46"
    std::string label = "#" + std::to_string(run.id) + " " + when + " " + r.backend + " " + run.record.scenario_name +
                        " " + describe(r.plan);
    if (r.measured) label += " (measured)";
    if (run.record.status != RunStatus::kOk) label += " (failed)";
    out.push_back({run.id, std::move(label), r.plan, r.measured && run.record.status == RunStatus::kOk});
  }
  return out;
}

Expected<BackendResult> load_store_run(const std::string& path, int64_t id) {
  Expected<Store> store = Store::open(path, /*create=*/false);
  if (!store.ok()) return store.problems();
  Expected<StoredRun> run = store->load_run(id);
  if (!run.ok()) return run.problems();
  return std::move(run->record.result);
}

}  // namespace monarch::gui
