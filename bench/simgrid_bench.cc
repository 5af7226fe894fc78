// SimGrid backend speed and memory on large cases:
//   GPT-3 175B on 1024 A100 (TP 8, PP 8, DP 16, 1F1B, 64 micro-batches): <= 10 s, <= 2 GiB
//   Llama-3 405B on 16384 H100 (TP 8, PP 16, DP 128, 16 micro-batches):  <= 60 s, <= 4 GiB
//   Llama-3 405B on 131072 H100 (TP 8, PP 16, DP 1024, rail-optimized, replica lowering):
//                                                                        <= 10 min, <= 16 GiB
// The graph is lowered once (strategies' lower_plan with the cost model's costs, every rank or
// the simulated replica's; lower_cpu_s and check_cpu_s: lowering and check_graph, one core); each
// iteration of the benchmark simulates it once in a forked child (run_simgrid). Counters:
//   sim_cpu_s      CPU seconds of the simulation process (one core; wall time is this plus
//                  whatever else the machine runs)
//   sim_rss_MiB    peak resident memory of the simulation process (includes the parent's
//                  pages it inherits: the lowered graph)
//   simulated_s    the simulated iteration time; ranks_simulated, tasks: size of the problem;
//   collectives, flows, solver_steps: the simulation's work (SimgridStats)
// Run: build/bench/monarch_bench_simgrid [--benchmark_filter=Gpt3]
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>

#include "core/scenario_io.h"
#include "sim/analytical_backend.h"
#include "sim/simgrid_backend.h"
#include "sim/simgrid_symmetry.h"
#include "core/graph_check.h"
#include "strategies/plan_costs.h"

namespace monarch {
namespace {

struct Usage {
  double cpu_s = 0;
  double max_rss_mib = 0;
};
Usage children_usage() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec),
          static_cast<double>(ru.ru_maxrss) / 1024.0};
}

struct Case {
  const char* file = "";
  int64_t global_batch_size = 0;
  SimgridSymmetry symmetry = SimgridSymmetry::kAuto;
  int64_t num_gpus = 0;  // > 0: resize the cluster (data parallelism takes the rest)
  Topology topology = Topology::kFatTree;
  bool set_topology = false;
  bool replica_only = false;  // lower the simulated replica's ranks only, as monarch-sim does
};

double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void simulate_case(benchmark::State& state, const Case& k) {
  auto sc = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + k.file);
  if (!sc) {
    state.SkipWithError(sc.problems().front().to_string().c_str());
    return;
  }
  sc->training.global_batch_size = k.global_batch_size;
  if (k.num_gpus > 0) {
    sc->cluster.num_gpus = k.num_gpus;
    sc->parallelism.dp = k.num_gpus / (sc->parallelism.tp.value_or(1) * sc->parallelism.pp.value_or(1) * sc->parallelism.cp.value_or(1));
  }
  if (k.set_topology) sc->cluster.topology = k.topology;
  auto plan = resolve_plan(*sc);
  if (!plan) {
    state.SkipWithError(plan.problems().front().to_string().c_str());
    return;
  }
  SimgridOptions options;
  options.symmetry = k.symmetry;
  options.record_timeline = false;
  const double lower_start_s = process_cpu_s();
  const std::vector<char> only = k.replica_only ? simgrid_backend::replica_ranks_to_lower(*sc, *plan, options) : std::vector<char>{};
  auto graph = lower_plan(*sc, *plan, only);
  if (!graph) {
    state.SkipWithError(graph.problems().front().to_string().c_str());
    return;
  }
  const double check_start_s = process_cpu_s();
  if (const Problems pr = check_graph(*graph); !pr.empty()) {
    state.SkipWithError(pr.front().to_string().c_str());
    return;
  }
  state.counters["lower_cpu_s"] = check_start_s - lower_start_s;
  state.counters["check_cpu_s"] = process_cpu_s() - check_start_s;
  int64_t tasks = 0;
  for (const auto& r : graph->ranks) tasks += static_cast<int64_t>(r.tasks.size());
  SimgridStats stats;
  options.stats = &stats;
  double simulated = 0;
  const Usage before = children_usage();
  int runs = 0;
  for (auto _ : state) {
    auto r = run_simgrid(*sc, *graph, options);
    if (!r) {
      state.SkipWithError(r.problems().front().to_string().c_str());
      return;
    }
    simulated = r->iteration_time_s;
    ++runs;
  }
  const Usage after = children_usage();
  state.counters["sim_cpu_s"] = (after.cpu_s - before.cpu_s) / std::max(runs, 1);
  state.counters["sim_rss_MiB"] = after.max_rss_mib;
  state.counters["simulated_s"] = simulated;
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["micro_batches"] = static_cast<double>(graph->num_micro_batches);
  state.counters["ranks_simulated"] = static_cast<double>(stats.ranks_simulated);
  state.counters["collectives"] = static_cast<double>(stats.collectives_run);
  state.counters["flows"] = static_cast<double>(stats.flows);
  state.counters["solver_steps"] = static_cast<double>(stats.solver_steps);
  state.counters["coarse_collectives"] = static_cast<double>(stats.coarse_collectives);
}

// GPT-3 175B, 1024 A100, TP 8 PP 8 DP 16, batch 1024 -> 64 micro-batches of 1.
void BM_SimgridGpt3_175B_1024xA100(benchmark::State& state) {
  simulate_case(state, {"gpt3-175b-1024-a100.json", 1024, SimgridSymmetry::kAuto});
}
BENCHMARK(BM_SimgridGpt3_175B_1024xA100)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// The same with every rank simulated (no replica symmetry), for reference.
void BM_SimgridGpt3_175B_1024xA100_AllRanks(benchmark::State& state) {
  simulate_case(state, {"gpt3-175b-1024-a100.json", 1024, SimgridSymmetry::kOff});
}
BENCHMARK(BM_SimgridGpt3_175B_1024xA100_AllRanks)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// Llama-3 405B, 16384 H100, TP 8 PP 16 DP 128, batch 2048 -> 16 micro-batches of 1.
void BM_SimgridLlama3_405B_16384xH100(benchmark::State& state) {
  simulate_case(state, {"llama3-405b-16384-h100.json", 2048, SimgridSymmetry::kAuto});
}
BENCHMARK(BM_SimgridLlama3_405B_16384xH100)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// The same lowering the simulated replica's 128 ranks only (as monarch-sim's re-rank does).
void BM_SimgridLlama3_405B_16384xH100_ReplicaLowering(benchmark::State& state) {
  simulate_case(state, {"llama3-405b-16384-h100.json", 2048, SimgridSymmetry::kAuto, 0, Topology::kFatTree, false, true});
}
BENCHMARK(BM_SimgridLlama3_405B_16384xH100_ReplicaLowering)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// Llama-3 405B, 131072 H100 (TP 8 PP 16 DP 1024, rail-optimized fat tree), batch 16384 -> 16
// micro-batches of 1; only the simulated replica is lowered (the whole graph would be ~107M
// tasks). Target: <= 10 min wall, <= 16 GiB.
void BM_SimgridLlama3_405B_131072xH100(benchmark::State& state) {
  simulate_case(state, {"llama3-405b-16384-h100.json", 16384, SimgridSymmetry::kAuto, 131072, Topology::kRailOptimized, true, true});
}
BENCHMARK(BM_SimgridLlama3_405B_131072xH100)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace monarch

BENCHMARK_MAIN();
