// The backends the run library calls, behind one interface: the analytical model, SimGrid, the
// real CPU runtime and the real GPU runtime. Which of them this build has is decided in
// run/backend.cc, the one place with the #ifdefs for optional parts; callers ask
// build_features() and make_backend() instead.
//
//   auto b = make_backend(Backend::kSimgrid, settings, "--backend");
//   if (!b) ... b.problems() ...;
//   Expected<BackendResult> r = (*b)->run(scenario, Candidate{plan}, control);
//
// Public types are plain structs (no JSON, no SimGrid or MPI types), so that any front end (the
// command line, the GUI, a later Python binding) can sit on them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dlrm_model.h"
#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch::run {

// Which optional backends this build contains (configure-time options).
struct BuildFeatures {
  bool simgrid = false;
  bool real_cpu = false;
  bool real_gpu = false;
};
BuildFeatures build_features();

// What the caller lets a running job know and do: stop it, and hear how far it got.
struct RunControl {
  // Polled while searching and simulating; true stops the work (Ctrl-C, the GUI's Cancel).
  std::function<bool()> cancelled;
  // (what is being done, units done, units in all); total 0: no measure of progress.
  std::function<void(const std::string& stage, int64_t done, int64_t total)> progress;

  bool is_cancelled() const { return cancelled && cancelled(); }
  void report(const std::string& stage, int64_t done, int64_t total) const {
    if (progress) progress(stage, done, total);
  }
};

// One plan a backend runs: a transformer plan, or (recommendation models) an embedding-table
// sharding with the data-parallel plan it implies.
struct Candidate {
  Candidate(Plan p = {}, std::optional<DlrmShardingPlan> s = std::nullopt) : plan(std::move(p)), sharding(std::move(s)) {}
  Plan plan;
  std::optional<DlrmShardingPlan> sharding;
  // The candidate already lowered and verified (lower_candidate), so that a backend does not
  // lower it again; null: the backend lowers it when it needs the graph. Must outlive run().
  const PlanGraph* graph = nullptr;
};

// Backend options from the front end.
struct BackendSettings {
  // SimGrid options as (KEY, VALUE) of `--set simgrid.KEY=VALUE` (sim/simgrid_backend.h,
  // apply_simgrid_option); refused by make_backend when this build has no SimGrid.
  std::vector<std::pair<std::string, std::string>> simgrid;
  bool record_timeline = true;  // SimGrid: keep the per-task timeline (traces, the GUI)
};

// Splits `simgrid.KEY=VALUE` overrides (backend options, not scenario keys) from the scenario's
// `PATH=VALUE` ones: the former go to `simgrid` as (KEY, VALUE), the others to `scenario`.
void split_simgrid_overrides(const std::vector<std::string>& all, std::vector<std::string>& scenario,
                             std::vector<std::pair<std::string, std::string>>& simgrid);

// Problems with the settings, whichever backends run: a SimGrid option that is unknown or out of
// range, or any SimGrid option in a build without SimGrid.
Problems check_settings(const BackendSettings& settings);

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;
  virtual Backend kind() const = 0;
  // Runs one candidate. Problems: the input the backend cannot run, a run that failed, or a
  // cancelled one (then control.is_cancelled() is true).
  virtual Expected<BackendResult> run(const Scenario& scenario, const Candidate& candidate,
                                      const RunControl& control) const = 0;
};

// The backend `kind` as this build has it. Problems: the build lacks it (named at `where`, e.g.
// "--backend" or "/backends"), or a setting is wrong ("--set simgrid.KEY").
Expected<std::unique_ptr<ExecutionBackend>> make_backend(Backend kind, const BackendSettings& settings,
                                                         const std::string& where);

// The candidate lowered to its per-rank task graph and verified (core/graph_check.h): a
// graph that fails verification is a lowering bug, reported rather than run.
Expected<PlanGraph> lower_candidate(const Scenario& scenario, const Candidate& candidate);

}  // namespace monarch::run
