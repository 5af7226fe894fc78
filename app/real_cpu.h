// The real-cpu backend as monarch-sim runs it: the chosen plan is trained for real on this
// machine by `mpirun -np WORLD monarch-run`, and its measured result comes back as an entry.
#pragma once

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch::app {

// Largest plan monarch-sim launches on this machine itself (one process per rank); larger
// plans are run by hand with mpirun on a cluster.
inline constexpr int64_t kMaxLocalRealCpuRanks = 16;
// Largest model it trains here: fp32 weights, gradients and Adam states take 16 bytes per
// parameter per replica, so 50M parameters stay under 1 GiB per rank.
inline constexpr int64_t kMaxLocalRealCpuParameters = 50'000'000;

Expected<BackendResult> run_real_cpu_backend(const Scenario& scenario, const Plan& plan, bool show_progress);

}  // namespace monarch::app
