// monarch-sim SCENARIO.json: read and validate the scenario, choose the backends, evaluate.
#include <iostream>

#include "app/commands.h"
#include "core/scenario_io.h"

namespace monarch::app {
namespace {

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

}  // namespace

int cmd_run(const RunOptions& opts) {
  auto scenario = read_scenario_file(opts.scenario_path, opts.overrides);
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

  // No backend is linked into this build yet (the analytical model is the next issue): say so,
  // and show the scenario as it was understood. Nothing is predicted, so nothing is written.
  for (const auto& [path, option] : {std::pair{opts.output_path, "--output"}, std::pair{opts.emit_plan_path, "--emit-plan"},
                                     std::pair{opts.trace_path, "--trace"}}) {
    if (!path.empty()) {
      print_error(option, "not built yet: no backend can evaluate plans in this build, so " + path + " was not written");
      return kExitInvalid;
    }
  }
  if (!opts.quiet) std::cout << scenario_to_json(s).dump(2) << "\n";
  std::cerr << "monarch-sim: note: the scenario is valid; no backend is built yet, so no plan was evaluated "
               "(printed the normalized scenario)\n";
  return kExitOk;
}

}  // namespace monarch::app
