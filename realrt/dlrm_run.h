// A recommendation-model scenario trained on CPUs: `mpirun -np N monarch-run SCENARIO.json
// [--sharding "t0:rw t1:tw@1 t2:dp"]` builds realrt/dlrm_cpu's DLRM from the scenario's dlrm
// keys and the sharding plan (given, or the best plan of strategies/dlrm_sharding that the
// CPU runtime can run), trains training.steps steps and writes the result.
//
// What the CPU DLRM can be (anything else is refused naming the scenario key): fp32, dot
// interaction, row-wise Adagrad embeddings, SGD for the MLPs, every table of the same dim =
// the bottom MLP's last width, integer pooling factors, top MLP ending in 1, global batch
// divisible by the ranks, tables data-parallel, table-wise or row-wise (no column-wise), and
// small enough for this machine (kMaxCpuEmbeddingElements, kMaxCpuExchangeElements).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dlrm_model.h"
#include "core/problem.h"
#include "core/scenario.h"
#include "realrt/dlrm_cpu.h"

namespace monarch::realrt {

// Embedding elements (all tables' rows x dim, fp32) one process may hold: 64 Mi x 4 B = 256 MiB,
// what a CI runner with 7 GiB can give each of a few ranks.
inline constexpr int64_t kMaxCpuEmbeddingElements = int64_t{64} << 20;
// Elements of one embedding exchange buffer (global batch x tables x dim), same budget.
inline constexpr int64_t kMaxCpuExchangeElements = int64_t{64} << 20;

struct DlrmCpuSetup {
  DlrmCpuConfig config;
  std::vector<CpuTablePlacement> placements;
};

// The CPU DLRM of a scenario and plan, or the problems (JSON paths of the scenario, "--sharding").
Expected<DlrmCpuSetup> dlrm_cpu_setup(const Scenario& scenario, const DlrmShardingPlan& plan, int64_t steps);

// Whether the CPU runtime places tables this way (no column-wise).
bool cpu_runs_plan(const DlrmShardingPlan& plan);

// monarch-run's DLRM path on MPI_COMM_WORLD. Returns the exit status (0 trained, 2 bad input,
// 1 output not written); messages on rank 0's stderr.
int run_dlrm_scenario(const Scenario& scenario, const std::string& sharding, int64_t steps, const std::string& output);

}  // namespace monarch::realrt
