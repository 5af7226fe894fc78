// MPI as the transport of `monarch-sim sweep` (mpirun -np N monarch-sim sweep SWEEP.json): rank 0
// hands out point indices and receives each point's outcome (JSON text); the other ranks
// compute. No MPI types here: app/ includes this header, not mpi.h.
//
// Why a separate executable (monarch-sweep-mpi, app/sweep_mpi_main.cc): monarch-sim links
// SimGrid, and libsimgrid exports the whole MPI API (SMPI, its simulated MPI), so MPI_Init in
// monarch-sim would bind to SimGrid's and abort ("use smpirun"). monarch-sim started by an MPI
// launcher execs monarch-sweep-mpi (same process, same rank), which links OpenMPI and no
// SimGrid and starts monarch-sim again for each point.
//
// Failure model (OpenMPI 4.1): the communicator's error handler is MPI_ERRORS_RETURN, so a
// failed send or receive is a returned problem, not an abort. A point's computation runs in a
// child process of its rank (app/cmd_sweep.cc), so a point that crashes or is killed loses
// only itself: the rank reports it lost and rank 0 hands it out again. A rank that dies itself
// ends the job (OpenMPI's runtime aborts every rank when one exits abnormally); the points
// already recorded stay in the store and `--resume` computes the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/problem.h"

namespace monarch::realrt {

class SweepTransport {
 public:
  virtual ~SweepTransport() = default;  // MPI_Finalize
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank 0: hands point `index` to `worker`; index -1 tells it to stop.
  virtual Problems send_point(int worker, int64_t index) = 0;
  // Rank 0: a message from a worker when one has arrived, without waiting: (worker, text).
  virtual Expected<std::optional<std::pair<int, std::string>>> poll_message() = 0;
  // Workers: the next point index (-1: stop), waiting for it.
  virtual Expected<int64_t> receive_point() = 0;
  // Workers: the outcome message of the point just computed.
  virtual Problems send_message(const std::string& text) = 0;
};

// MPI_Init and the transport over MPI_COMM_WORLD (error handler MPI_ERRORS_RETURN).
Expected<std::unique_ptr<SweepTransport>> init_mpi_transport();

}  // namespace monarch::realrt
