// monarch-run --device gpu: the GPU runtime behind the same command line as the CPU runtime.
//   mpirun -np N monarch-run PLAN.json --scenario S.json --device gpu [--precision bf16]
//   RANK=r WORLD_SIZE=n monarch-run PLAN.json --scenario S.json --device gpu --init-method tcp://HOST:PORT
//   srun -n N monarch-run ... --device gpu --init-method file:///shared/job/init
// One GPU per rank (node-local rank modulo the visible GPUs); one NCCL communicator for the
// data-parallel group, bootstrapped over MPI or the init method (dist_init.h). Prints and writes
// the result as the CPU path does, with backend "real-gpu".
#pragma once

#include <string>

#include "realrt/run_io.h"

namespace monarch::realrt {

struct GpuRunOptions {
  std::string init_method = "mpi";  // --init-method
  std::string math;                 // --precision: fp32 | tf32 | bf16; empty: training.precision
  std::string output;               // --output
  double init_timeout_s = 300;      // waiting for the other ranks at start-up
};

// MPI is initialised by the caller (monarch-run). Returns monarch-run's exit status: 0 trained;
// 2 the plan, an option or the machine cannot run it (no GPU, wrong number of ranks, a
// parallelism the GPU runtime lacks; reason on stderr); 1 a CUDA / cuBLAS / NCCL call failed
// (named with file:line) or the output could not be written.
int run_gpu_main(const RunInput& in, const GpuRunOptions& options);

}  // namespace monarch::realrt
