// monarch-sim sweep SWEEP.json [--jobs N] [--resume] [--db FILE]: every point of a sweep
// (run/sweep.h) through the run library, recorded in the store with the sweep's id
// (app/sweep_driver.h: the coordinator and its worker processes).
//
// Three roles of this command:
//   --point K --point-output FILE: the worker process of one point: computes it through the run
//       library and writes its outcome to FILE;
//   started by an MPI launcher: execs monarch-sweep-mpi in place (same process, same rank),
//       which links OpenMPI without SimGrid (realrt/sweep_mpi.h);
//   otherwise: the coordinator of --jobs N worker processes on this machine.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "app/interrupt.h"
#include "app/sweep_driver.h"
#include "core/text_file.h"
#include "run/sweep.h"

#ifndef MONARCH_SWEEP_MPI_DEFAULT
#define MONARCH_SWEEP_MPI_DEFAULT "monarch-sweep-mpi"
#endif

namespace monarch::app {
namespace {

constexpr int kExitInterrupted = 130;

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("monarch-sim") : p.string();
}

// The child of one point: computes it and writes its outcome to `output`.
int run_point_child(const SweepOptions& opts) {
  InterruptGuard guard({SIGINT, SIGTERM});
  auto spec = run::read_sweep_file(opts.sweep_path);
  if (!spec) {
    for (const auto& p : spec.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  if (*opts.point < 0 || static_cast<size_t>(*opts.point) >= spec->points.size()) {
    print_error("--point", "found " + std::to_string(*opts.point) + ", the sweep has " + std::to_string(spec->points.size()) + " points");
    return kExitInvalid;
  }
  run::RunControl control;
  control.cancelled = [] { return interrupted(); };
  run::PointOutcome out = run::run_sweep_point(*spec, static_cast<size_t>(*opts.point), control);
  if (out.cancelled) return kExitInterrupted;
  const std::string err = write_text_file_atomically(opts.point_output, run::point_outcome_to_json(out));
  if (!err.empty()) {
    print_error("--point-output", err);
    return 1;
  }
  return kExitOk;
}

// Replaces this process with monarch-sweep-mpi (MONARCH_SWEEP_MPI, else the one built with
// this monarch-sim); returns only when that fails.
int exec_mpi_driver(const SweepOptions& opts) {
  const char* env = std::getenv("MONARCH_SWEEP_MPI");
  const std::string exe = env && *env ? env : MONARCH_SWEEP_MPI_DEFAULT;
  std::vector<std::string> args = {exe, "--monarch-sim", self_executable(), opts.sweep_path};
  if (!opts.db_path.empty()) args.insert(args.end(), {"--db", opts.db_path});
  if (opts.resume) args.push_back("--resume");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  print_error("mpirun", "cannot start " + exe + " (" + std::strerror(errno) +
                            "), the MPI side of monarch-sim sweep; set MONARCH_SWEEP_MPI to its path");
  return kExitInvalid;
}

}  // namespace

int cmd_sweep(const SweepOptions& opts) {
  if (opts.point) return run_point_child(opts);
  if (launched_by_mpi()) return exec_mpi_driver(opts);
  auto spec = run::read_sweep_file(opts.sweep_path);
  if (!spec) {
    for (const auto& p : spec.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  SweepDriverOptions options;
  options.monarch_sim = self_executable();
  options.db_path = opts.db_path;
  options.resume = opts.resume;
  options.jobs = opts.jobs > 0 ? static_cast<size_t>(opts.jobs) : std::max(1u, std::thread::hardware_concurrency());
  return run_sweep_locally(options, *spec);
}

}  // namespace monarch::app
