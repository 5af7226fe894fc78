// How the ranks of a GPU run find each other (host only: no CUDA, no MPI, testable anywhere).
//
// The GPU runtime needs one thing from a bootstrap: rank 0's ncclUniqueId (128 bytes) on every
// rank, after which NCCL builds the communicators itself. Three ways, as torch.distributed:
//   --init-method mpi              MPI_Bcast over MPI_COMM_WORLD (launched by mpirun); default
//   --init-method tcp://HOST:PORT  rank 0 listens on PORT, the others connect to HOST:PORT
//   --init-method file://PATH      rank 0 writes PATH (a shared file system), the others read it
// Without MPI, rank and world size come from the launcher's environment (rank_from_env).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/problem.h"

namespace monarch::realrt {

struct InitMethod {
  enum class Kind { kMpi, kTcp, kFile };
  Kind kind = Kind::kMpi;
  std::string host;  // kTcp
  int port = 0;      // kTcp, 1..65535
  std::string path;  // kFile
};

// "mpi", "tcp://HOST:PORT" (HOST may be [v6-address]) or "file://PATH"; problems name `where`.
Expected<InitMethod> parse_init_method(const std::string& text, const std::string& where = "--init-method");

// Rank, world size and node-local rank given by a launcher, the first set found of
//   RANK / WORLD_SIZE / LOCAL_RANK                                    (torchrun and most launchers)
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_RANK   (OpenMPI's mpirun)
//   SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID                       (Slurm's srun)
// local_rank falls back to rank when its variable is absent. nullopt when no set is present;
// problems (naming the variables) when one is malformed or inconsistent.
struct RankEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string source;  // "RANK/WORLD_SIZE", "OMPI_COMM_WORLD_RANK/SIZE", "SLURM_PROCID/NTASKS"
};
using GetEnv = std::function<const char*(const char*)>;
Expected<std::optional<RankEnv>> rank_from_env(const GetEnv& getenv);

// Hands rank 0's `blob` to every rank over a tcp:// or file:// method (not kMpi); returns it
// (rank 0 gets its own back). Gives up after timeout_s with a problem naming the method.
// file://: rank 0 refuses a PATH that already exists (left by an earlier run: remove it); every
// rank acknowledges with PATH.ack.R and rank 0 removes all of them once everyone has read it.
Expected<std::string> share_from_rank0(const InitMethod& method, int64_t rank, int64_t world_size,
                                       const std::string& blob, double timeout_s);

}  // namespace monarch::realrt
