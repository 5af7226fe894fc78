// monarch-sim validate: predictions of the analytical model (or SimGrid) against published
// measurements.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "app/interrupt.h"
#include "run/backend.h"
#include "sim/validate.h"

namespace monarch::app {

namespace {

// Cases above this many GPUs are skipped under SimGrid unless --max-gpus says otherwise: the
// simulated step of a 1024-GPU plan takes seconds to minutes, beyond that far longer.
constexpr int64_t kSimgridDefaultMaxGpus = 1024;

}  // namespace

int cmd_validate(const ValidateOptions& opts) {
  ValidationSettings settings;
  settings.max_mape_pct = opts.max_mape_pct;
  settings.max_gpus = opts.max_gpus;
  settings.show_plans = opts.show_plans;
  settings.save_path = opts.save_path;
  settings.against_path = opts.against_path;
  if (opts.backends.size() > 1) {
    print_error("--backend", "validate runs one backend at a time (analytical or simgrid)");
    return kExitInvalid;
  }
  const Backend b = opts.backends.empty() ? Backend::kAnalytical : opts.backends.front();
  if (b != Backend::kAnalytical && b != Backend::kSimgrid) {
    print_error("--backend", std::string("validate runs the analytical or the simgrid backend; found \"") + to_string(b) + "\"");
    return kExitInvalid;
  }
  settings.backend_name = to_string(b);
  // Ctrl-C stops between cases (exit 130, nothing written); on a terminal, a progress line.
  InterruptGuard guard;
  settings.cancelled = [] { return interrupted(); };
  if (::isatty(STDERR_FILENO) == 1)
    settings.progress = [](size_t done, size_t total) {
      if (total > 0) std::fprintf(stderr, "\rvalidate: %zu / %zu cases", done, total);
      else std::fprintf(stderr, "\r%40s\r", "");
    };
  if (b == Backend::kSimgrid) {
    // The run library's SimGrid backend (it lowers and verifies each plan), as `monarch-sim
    // --backend simgrid` runs it, without the per-task timeline.
    run::BackendSettings backend_settings;
    backend_settings.record_timeline = false;
    auto made = run::make_backend(Backend::kSimgrid, backend_settings, "--backend");
    if (!made) {
      for (const Problem& p : made.problems()) print_error(p.where, p.message);
      return kExitInvalid;
    }
    std::shared_ptr<const run::ExecutionBackend> simgrid = std::move(*made);
    settings.predictor = [simgrid](const Scenario& s, const Plan& plan) {
      run::RunControl control;
      control.cancelled = [] { return interrupted(); };  // Ctrl-C stops the simulation too
      return simgrid->run(s, run::Candidate(plan), control);
    };
    if (!settings.max_gpus) settings.max_gpus = kSimgridDefaultMaxGpus;
  }
  return run_validate(opts.cases_path, settings, std::cout, std::cerr);
}

}  // namespace monarch::app
