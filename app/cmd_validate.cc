// monarch-sim validate: predictions of the analytical model (or SimGrid) against published
// measurements.
#include <iostream>

#include "app/commands.h"
#include "sim/analytical_backend.h"
#include "sim/validate.h"
#include "core/graph_check.h"
#include "strategies/plan_costs.h"

#ifdef MONARCH_HAVE_SIMGRID
#include "sim/simgrid_backend.h"
#endif

namespace monarch::app {

namespace {

// Cases above this many GPUs are skipped under SimGrid unless --max-gpus says otherwise: the
// simulated step of a 1024-GPU plan takes seconds to minutes, beyond that far longer.
constexpr int64_t kSimgridDefaultMaxGpus = 1024;

#ifdef MONARCH_HAVE_SIMGRID
Expected<BackendResult> simulate_case(const Scenario& s, const Plan& plan) {
  Expected<PlanGraph> g = lower_plan(s, plan);
  if (!g) return g.problems();
  const Problems pr = check_graph(*g);
  if (!pr.empty()) return pr;  // a lowering bug: report, do not simulate a broken graph
  SimgridOptions options;
  options.record_timeline = false;
  return run_simgrid(s, *g, options);
}
#endif

}  // namespace

int cmd_validate(const ValidateOptions& opts) {
  ValidationSettings settings;
  settings.max_mape_pct = opts.max_mape_pct;
  settings.max_gpus = opts.max_gpus;
  if (opts.backends.size() > 1) {
    print_error("--backend", "validate runs one backend at a time (analytical or simgrid)");
    return kExitInvalid;
  }
  const Backend b = opts.backends.empty() ? Backend::kAnalytical : opts.backends.front();
  if (b == Backend::kSimgrid) {
#ifdef MONARCH_HAVE_SIMGRID
    settings.predictor = simulate_case;
    if (!settings.max_gpus) settings.max_gpus = kSimgridDefaultMaxGpus;
#else
    print_error("--backend", "this build has no SimGrid backend (configure with -DMONARCH_WITH_SIMGRID=ON)");
    return kExitInvalid;
#endif
  } else if (b != Backend::kAnalytical) {
    print_error("--backend", std::string("validate runs the analytical or the simgrid backend; found \"") + to_string(b) + "\"");
    return kExitInvalid;
  }
  return run_validate(opts.cases_path, settings, std::cout, std::cerr);
}

}  // namespace monarch::app
