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
};

// Ranks the scenario's plans with the analytical model (strategies/search).
Expected<SearchOutcome> search_plans(const Scenario& scenario, JobControl& job);

// The analytical model on one plan (fast: used live by the what-if view).
Expected<BackendResult> estimate(const Scenario& scenario, const Plan& plan);

// True when this build has the SimGrid backend.
bool simgrid_built();
// Simulates one plan with SimGrid (lowered to the task graph); the result has a timeline.
Expected<BackendResult> simulate_simgrid(const Scenario& scenario, const Plan& plan, JobControl& job);

// The results store (SQLite, written by monarch-sim): its default path, its runs newest
// first as (id, one-line label), and one run in full.
struct StoredRunLabel {
  int64_t id = 0;
  std::string label;  // "#12 2026-11-29 17:46 simgrid small-gpt-8 tp2 pp2 ..."
};
std::string default_store_path();
Expected<std::vector<StoredRunLabel>> list_store_runs(const std::string& path);
Expected<BackendResult> load_store_run(const std::string& path, int64_t id);

}  // namespace monarch::gui
