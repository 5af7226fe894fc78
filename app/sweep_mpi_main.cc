// monarch-sweep-mpi: the MPI side of `mpirun -np N monarch-sim sweep SWEEP.json`. monarch-sim,
// started by an MPI launcher, execs this program in place (realrt/sweep_mpi.h says why it is a
// separate executable: no SimGrid here). Rank 0 hands out the points and writes the store; the
// other ranks each compute one point at a time in a monarch-sim child process.
//
//   monarch-sweep-mpi --monarch-sim PATH SWEEP.json [--db FILE] [--resume]
#include <CLI/CLI.hpp>

#include <iostream>

#include "app/commands.h"
#include "app/sweep_driver.h"
#include "realrt/sweep_mpi.h"
#include "run/sweep.h"

int main(int argc, char** argv) {
  using namespace monarch;
  CLI::App app{"The MPI side of monarch-sim sweep (started by monarch-sim under mpirun).", "monarch-sweep-mpi"};
  app::SweepDriverOptions options;
  std::string sweep_path;
  app.add_option("--monarch-sim", options.monarch_sim, "the monarch-sim executable of the point processes")->required();
  app.add_option("sweep", sweep_path, "sweep file")->required();
  app.add_option("--db", options.db_path, "the results store");
  app.add_flag("--resume", options.resume, "compute only the points the store lacks");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : app::kExitInvalid;
  }
  auto transport = realrt::init_mpi_transport();
  if (!transport) {
    for (const auto& p : transport.problems()) app::print_error(p.where, p.message);
    return app::kExitInvalid;
  }
  const Expected<run::SweepSpec> spec =
      (*transport)->rank() == 0 ? run::read_sweep_file(sweep_path) : Expected<run::SweepSpec>(run::SweepSpec{});
  return app::run_sweep_over_mpi(options, **transport, spec, sweep_path);
}
