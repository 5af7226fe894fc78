// Internal to the SimGrid backend: the simulation itself (platform, actors, result assembly).
// Runs in the current process and may be called once per process (SimGrid keeps global
// state); simgrid_backend.cc forks a child for it unless options.isolate_process is false.
// Inputs are validated by the caller.
#pragma once

#include <vector>

#include "sim/simgrid_backend.h"

namespace monarch::simgrid_backend {

// The SimGrid command-line configuration used for every run (see docs/simgrid_backend.md).
std::vector<std::string> simgrid_config_args();

Expected<std::vector<BackendResult>> simulate(const ClusterConfig& cluster, const WhatIf& whatif,
                                              const std::vector<SimgridJob>& jobs,
                                              const SimgridOptions& options);

}  // namespace monarch::simgrid_backend
