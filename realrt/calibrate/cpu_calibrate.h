// CPU-runtime calibration: OpenBLAS sgemm over a grid of shapes, STREAM-triad memory bandwidth
// and MPI collectives between the ranks of the communicator (nccl-tests style).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/profile.h"
#include "realrt/calibrate/calibrate_common.h"

namespace monarch::calibrate {

// The sgemm grid: every (m, n, k) with each of them in this list.
std::vector<int64_t> cpu_matmul_axis(bool quick);
// The collective message sizes, bytes.
std::vector<int64_t> cpu_collective_sizes(bool quick);

// Every function below is collective over `comm` (all ranks call it; all ranks get the same
// result) and returns std::nullopt when Ctrl-C was pressed on any rank. Tables go to stdout on
// rank 0.

// sgemm throughput, measured by every rank at once; per shape the median time over
// repetitions, averaged over ranks.
std::optional<std::vector<MatmulSample>> measure_cpu_matmul(const Settings&, MPI_Comm, Progress&);

// STREAM triad a[i] = b[i] + s c[i] over doubles, best of several passes, 24 bytes per element,
// measured by every rank at once and averaged: GB/s of one process.
std::optional<double> measure_cpu_triad_GBps(const Settings&, MPI_Comm, int64_t* working_set_bytes);

// MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall over the sizes; empty
// for a single rank.
std::optional<std::vector<CollectiveSample>> measure_mpi_collectives(const Settings&, MPI_Comm, Progress&);

// "model name" of /proc/cpuinfo, or "unknown CPU".
std::string cpu_model_name();

}  // namespace monarch::calibrate
