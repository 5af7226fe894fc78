// The coordinator and workers of `monarch-sim sweep`, shared by monarch-sim (local worker
// processes) and monarch-sweep-mpi (under mpirun; realrt/sweep_mpi.h says why it is a separate
// executable). No backends here: points are computed by child processes,
// `MONARCH_SIM sweep SWEEP.json --point K --point-output FILE` (app/cmd_sweep.cc), and the
// coordinator is the only writer of the store.
//
// A child that crashes or is killed loses only its point, which is handed out again (at most
// kMaxPointAttempts times, then recorded as failed). Ctrl-C / SIGTERM: no new points, running
// children are stopped and their points left unrecorded, so the store holds whole points only
// and --resume computes the rest.
#pragma once

#include <cstddef>
#include <string>

#include "core/problem.h"
#include "realrt/sweep_mpi.h"
#include "run/sweep.h"

namespace monarch::app {

// How often a point is handed out before a child that keeps dying records it as failed: a point
// that crashes its process every time must not stall the sweep.
inline constexpr int kMaxPointAttempts = 3;

struct SweepDriverOptions {
  std::string monarch_sim;  // the executable the point processes run
  std::string db_path;      // empty: the default store path
  bool resume = false;
  size_t jobs = 1;          // local: worker processes at a time
};

// True when an MPI launcher (mpirun, mpiexec, srun with PMI) started this process in a job of
// more than one process; the environment says so before MPI_Init.
bool launched_by_mpi();

// The points of `spec` in up to options.jobs child processes of this one; the exit status.
int run_sweep_locally(const SweepDriverOptions& options, const run::SweepSpec& spec);

// Under MPI: rank 0 coordinates (spec: the sweep it read, or its problems, which are printed and
// stop every rank), the others compute one point at a time; the exit status.
int run_sweep_over_mpi(const SweepDriverOptions& options, realrt::SweepTransport& transport,
                       const Expected<run::SweepSpec>& spec, const std::string& sweep_path);

}  // namespace monarch::app
