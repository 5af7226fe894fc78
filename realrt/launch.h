// Running a plan on the CPU runtime from another program (monarch-sim --backend real-cpu, the
// GUI): starts `mpirun -np N monarch-run ...` for a scenario small enough for this machine,
// waits for it and reads its result. No MPI in the caller: this library only spawns processes.
#pragma once

#include <cstdint>
#include <string>

#include "core/dlrm_model.h"
#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch::realrt {

struct RealCpuOptions {
  std::string monarch_run;  // monarch-run executable; empty: $MONARCH_RUN, else the one built with this library
  std::string mpirun;       // empty: $MONARCH_MPIEXEC, else the mpiexec found at configure time
  int64_t steps = 0;        // optimizer steps; 0: the scenario's training.steps
  int64_t max_ranks = 16;   // refuse larger plans: one process per rank on this machine
  double timeout_s = 1800;  // wall-clock limit of the whole run
  double watchdog_timeout_s = 120;  // monarch-run --watchdog-timeout
  std::string work_dir;     // input, plan, output and log files; empty: a fresh temporary directory
};

// Trains `graph` (lowered from `scenario`) for real on CPUs. Problems name what is wrong: the
// scenario or plan the runtime cannot run (its message, exit status 2), a rank that crashed or
// hung (the watchdog's message naming it), a run that timed out, missing executables.
Expected<BackendResult> run_real_cpu(const Scenario& scenario, const PlanGraph& graph, const RealCpuOptions& options);

// Trains a recommendation model (architecture "dlrm") with this embedding sharding plan:
// `mpirun -np num_gpus monarch-run scenario.json --sharding "<describe(plan)>"` (realrt/dlrm_run.h).
Expected<BackendResult> run_real_cpu_dlrm(const Scenario& scenario, const DlrmShardingPlan& plan,
                                          const RealCpuOptions& options);
// The same on GPUs: `mpirun -np N monarch-run ... --device gpu` (one GPU per rank; monarch-run
// must have been built with the GPU runtime, else it refuses with its reason).
Expected<BackendResult> run_real_gpu(const Scenario& scenario, const PlanGraph& graph, const RealCpuOptions& options);

}  // namespace monarch::realrt
