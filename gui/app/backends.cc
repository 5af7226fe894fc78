#include "gui/app/backends.h"

#include <exception>

#include "core/cost_model.h"
#include "core/scenario_io.h"
#include "results/store.h"
#include "strategies/plan_costs.h"
#include "strategies/search.h"
#if defined(MONARCH_GUI_WITH_SIMGRID)
#include "sim/simgrid_backend.h"
#endif

namespace monarch::gui {

Expected<SearchOutcome> search_plans(const Scenario& scenario, JobControl& job) {
  SearchOptions options;
  options.evaluate = analytical_evaluator();  // the same evaluator as monarch-sim
  options.cancelled = [&job] { return job.cancel.load(); };
  options.progress = [&job](int64_t done, int64_t total) {
    job.fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : -1.0;
  };
  const SearchResult found = monarch::search_plans(scenario, options);
  if (found.cancelled) return Expected<SearchOutcome>::fail("", "search cancelled");
  SearchOutcome out;
  out.ranked.reserve(found.ranked.size());
  for (const RankedPlan& rp : found.ranked) {
    if (job.cancel) return Expected<SearchOutcome>::fail("", "search cancelled");
    out.ranked.push_back(estimate_plan(scenario, rp.plan));
  }
  out.rejected = found.rejected_for_report(options.max_rejected_listed);
  if (found.baseline) out.baseline = estimate_plan(scenario, found.baseline->plan);
  out.note = "looked at " + std::to_string(found.plans_in_space) + " plans, estimated " +
             std::to_string(found.plans_evaluated) + ", " + std::to_string(found.plans_fitting) + " fit";
  if (!found.any_fits() && !found.no_fit_message.empty()) out.note += ". " + found.no_fit_message;
  job.fraction = 1;
  return out;
}

Expected<BackendResult> estimate(const Scenario& scenario, const Plan& plan) {
  // Pin the plan into the scenario and validate it as a file would be: the what-if knobs get
  // the command line's messages (a GPU count the degrees do not divide, a batch that does not
  // split into micro-batches, ...).
  Scenario pinned = scenario;
  ParallelismConstraints& c = pinned.parallelism;
  c.tp = plan.tp;
  c.pp = plan.pp;
  c.dp = plan.dp;
  c.cp = plan.cp;
  c.ep = plan.ep;
  if (plan.etp > 0) c.etp = plan.etp;
  c.vpp = plan.vpp;
  c.schedule = plan.schedule;
  c.sequence_parallel = plan.sequence_parallel;
  c.recompute = plan.recompute;
  c.zero_stage = plan.zero_stage;
  pinned.training.micro_batch_size = plan.micro_batch_size;
  Expected<Scenario> checked = scenario_from_json(scenario_to_json(pinned));
  if (!checked.ok()) return checked.problems();
  if (plan.micro_batch_size <= 0 || plan.dp <= 0 ||
      checked->training.global_batch_size % (plan.micro_batch_size * plan.dp) != 0)
    return Expected<BackendResult>::fail(
        "/training/micro_batch_size",
        "global batch " + std::to_string(checked->training.global_batch_size) + " does not split into micro-batches of " +
            std::to_string(plan.micro_batch_size) + " over " + std::to_string(plan.dp) + " data-parallel ranks");
  return estimate_plan(*checked, plan);
}

#if defined(MONARCH_GUI_WITH_SIMGRID)

bool simgrid_built() { return true; }

Expected<BackendResult> simulate_simgrid(const Scenario& scenario, const Plan& plan, JobControl& job) {
  job.fraction = -1;  // SimGrid reports no progress: a busy indicator
  Expected<PlanGraph> graph = lower_plan(scenario, plan);
  if (!graph.ok()) return graph.problems();
  if (job.cancel) return Expected<BackendResult>::fail("", "simulation cancelled");
  SimgridOptions options;
  options.record_timeline = true;
  options.cancelled = [&job] { return job.cancel.load(); };  // Cancel kills the forked simulation
  Expected<BackendResult> result = run_simgrid(scenario, *graph, options);
  job.fraction = 1;
  return result;
}

#else

bool simgrid_built() { return false; }

Expected<BackendResult> simulate_simgrid(const Scenario&, const Plan&, JobControl&) {
  return Expected<BackendResult>::fail("", "this build has no SimGrid backend (configure with MONARCH_WITH_SIMGRID=ON)");
}

#endif

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
    out.push_back({run.id, std::move(label)});
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
