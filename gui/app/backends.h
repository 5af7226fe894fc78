// The GUI's only door to the backends (strategy search, analytical model, SimGrid, store).
// Everything returned here was computed by a backend; the GUI shows it as it is.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "gui/models/plan_space.h"
#include "gui/models/whatif_sweep.h"

namespace monarch::gui {

// Shared between the UI thread and a worker: the worker reports progress, the UI cancels.
struct JobControl {
  std::atomic<bool> cancel{false};
  std::atomic<double> fraction{0};  // 0..1, or < 0 when unknown
};

struct SearchOutcome {
  std::vector<BackendResult> ranked;  // best first, full analytical result of each plan
  std::vector<RejectedPlan> rejected;
  std::optional<BackendResult> baseline;  // the plain FSDP / ZeRO-3 plan, when it can run
  std::string note;  // the search's summary: plans looked at, why nothing fits, ...
  // Every plan the cost model estimated (transformer plans), for the plan-space view; past
  // kMaxPlanSpacePoints an even sample of them (estimated_total counts them all).
  std::vector<PlanPoint> estimated;
  int64_t estimated_total = 0;
};

// Plans kept for the plan-space view: 300,000 points take about 80 MB and draw in well under
// a second (bench/gui_plan_space_bench); larger spaces are sampled evenly.
inline constexpr size_t kMaxPlanSpacePoints = 300000;

// Ranks the scenario's plans with the analytical model (strategies/search).
Expected<SearchOutcome> search_plans(const Scenario& scenario, JobControl& job);

// The analytical model on one plan (fast: used live by the what-if view).
Expected<BackendResult> estimate(const Scenario& scenario, const Plan& plan);

// A what-if sweep: the knob's values, and which curves to compute at each.
struct SweepRequest {
  Knob knob = Knob::kInterNodeBandwidth;
  std::vector<KnobValue> values;
  bool selected = true;  // the selected plan, analytical model
  bool best = false;     // the best plan of an analytical search at each value
  bool simgrid = false;  // the selected plan simulated by SimGrid at each value
};
// Runs the sweep value by value (progress per value; cancel stops between values and inside
// searches and simulations, returning the points done). A value the plan cannot take gets its
// problem and no curve points.
std::vector<SweepPoint> run_sweep(const Scenario& scenario, const Plan& plan, const SweepRequest& request, JobControl& job);

// True when this build has the SimGrid backend.
bool simgrid_built();
// Simulates one plan with SimGrid (lowered to the task graph); the result has a timeline.
Expected<BackendResult> simulate_simgrid(const Scenario& scenario, const Plan& plan, JobControl& job);

// The results store (SQLite, written by monarch-sim): its default path, its runs newest
// first as (id, one-line label), and one run in full.
struct StoredRunLabel {
  int64_t id = 0;
  std::string label;  // "#12 2026-11-29 17:46 simgrid small-gpt-8 tp2 pp2 ..."
  Plan plan;
  bool measured = false;  // a real or imported run, not a prediction
};
std::string default_store_path();
Expected<std::vector<StoredRunLabel>> list_store_runs(const std::string& path);
Expected<BackendResult> load_store_run(const std::string& path, int64_t id);

}  // namespace monarch::gui
