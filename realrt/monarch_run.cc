// monarch-run: trains a plan for real on CPUs. Launch with mpirun, one process per rank:
//   mpirun -np N monarch-run PLAN.json [options]       (monarch-plan/2: carries its scenario)
//   mpirun -np N monarch-run PLAN.json --scenario SCENARIO.json [options]   (monarch-plan/1)
//   mpirun -np N monarch-run SCENARIO.json [--steps S] [--output result.json]
//          [--checkpoint-every K --checkpoint-dir DIR] [--resume] [--watchdog-timeout SEC]
//   mpirun -np N monarch-run DLRM_SCENARIO.json [--sharding "t0:rw t1:tw@1 t2:dp"] [--steps S]
//          [--output result.json]   (recommendation models: realrt/dlrm_run.h)
// Inputs: see realrt/run_io.h. Exit status: 0 trained; 2 the input or an option is invalid
// (malformed JSON, another plan-file version, a task graph that does not match the plan, a
// --scenario that disagrees with the plan file's), or the plan needs another number of ranks
// (nothing trained, reason on stderr); 3 the watchdog ended the run (a rank crashed or hung; the message names it);
// 1 a checkpoint or the output could not be written.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/scenario_io.h"
#include "realrt/cpu_runtime.h"
#include "realrt/dlrm_run.h"
#ifdef MONARCH_HAVE_REAL_GPU
#include "realrt/gpu/gpu_run.h"
#endif
#include "realrt/run_io.h"
#include "realrt/span_recorder.h"
#include "realrt/watchdog.h"

extern "C" void openblas_set_num_threads(int);

using namespace monarch;
using namespace monarch::realrt;

namespace {

// Default seconds without progress before the watchdog ends the run: far above one step of the
// models this runtime is for (a step of the CI model takes well under a second per rank).
constexpr double kDefaultWatchdogTimeoutS = 120;

int g_rank = 0;

void report(const Problems& pr) {
  if (g_rank != 0) return;
  for (const auto& p : pr) std::fprintf(stderr, "monarch-run: error: %s\n", p.to_string().c_str());
}

int finish(int status) {
  MPI_Finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  openblas_set_num_threads(1);  // one process per core; BLAS threads would oversubscribe

  CLI::App app{"monarch-run: train a plan for real on CPUs (launch with mpirun -np N)"};
  std::string input, scenario, output, ckpt_dir = "monarch-checkpoint", fault, sharding;
  int64_t steps = 0, ckpt_every = 0, fault_rank = -1, fault_step = -1;
  bool resume = false;
  double watchdog_s = kDefaultWatchdogTimeoutS;
  app.add_option("input", input, "plan file (monarch-plan/2; monarch-plan/1 needs --scenario), or a scenario with a fixed plan")
      ->required();
  app.add_option("--scenario", scenario, "the scenario the plan was made for: required with a monarch-plan/1 file; with monarch-plan/2 it must agree with the file's");
  app.add_option("--steps", steps, "optimizer steps to reach (default: training.steps)")->check(CLI::PositiveNumber);
  app.add_option("--output", output, "write the measured result (JSON) here");
  app.add_option("--checkpoint-every", ckpt_every, "save a checkpoint every K steps")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-dir", ckpt_dir, "where checkpoints go (one file per rank)");
  app.add_flag("--resume", resume, "continue from the checkpoint in --checkpoint-dir");
  app.add_option("--watchdog-timeout", watchdog_s, "seconds without progress before every rank is ended")
      ->check(CLI::PositiveNumber);
  app.add_option("--sharding", sharding,
                 "dlrm scenarios: the embedding sharding plan, e.g. \"t0:rw t1:tw@1 t2:dp\" "
                 "(default: the best plan of the sharding search the CPU runtime runs)");
  std::string device = "cpu", init_method = "mpi", precision;
  app.add_option("--device", device, "cpu (MPI + OpenBLAS) or gpu (CUDA + cuBLAS + NCCL, one GPU per rank)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  app.add_option("--init-method", init_method, "gpu: how ranks meet: mpi, tcp://HOST:PORT or file://PATH");
  app.add_option("--precision", precision, "gpu: fp32, tf32 or bf16 (default: training.precision)");
  app.add_option("--inject-fault", fault, "testing: crash | hang")->check(CLI::IsMember({"crash", "hang"}));
  app.add_option("--fault-rank", fault_rank, "testing: the rank that fails");
  app.add_option("--fault-step", fault_step, "testing: the step at which it fails");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    if (g_rank == 0) app.exit(e);
    return finish(0);
  } catch (const CLI::ParseError& e) {
    if (g_rank == 0) std::fprintf(stderr, "monarch-run: error: %s\n", e.what());
    return finish(2);
  }

  // Recommendation models: the scenario's dlrm keys and a sharding plan.
  if (scenario.empty()) {
    auto sc = read_scenario_file(input, {});
    if (sc && sc->model.architecture == Architecture::kDlrm) {
      if (device != "cpu") {
        report({{"--device " + device, "dlrm models run on the CPU runtime only in this version"}});
        return finish(2);
      }
      return finish(run_dlrm_scenario(*sc, sharding, steps, output));
    }
  }
  if (!sharding.empty()) {
    report({{"--sharding", "is for dlrm scenarios; " + input + " is not one"}});
    return finish(2);
  }

  auto in = read_run_input(input, steps, scenario);
  if (!in) {
    report(in.problems());
    return finish(2);
  }
  if (device == "gpu") {
    for (const auto& [set, name] : {std::pair{ckpt_every > 0, "--checkpoint-every"}, std::pair{resume, "--resume"},
                                    std::pair{!fault.empty(), "--inject-fault"}})
      if (set) {
        report({{name, "is not supported with --device gpu yet"}});
        return finish(2);
      }
#ifdef MONARCH_HAVE_REAL_GPU
    GpuRunOptions gopt;
    gopt.init_method = init_method;
    gopt.math = precision;
    gopt.output = output;
    return finish(run_gpu_main(*in, gopt));
#else
    report({{"--device gpu", "this monarch-run was built without the GPU runtime (MONARCH_WITH_GPU=ON, CUDA with cuBLAS and NCCL)"}});
    return finish(2);
#endif
  }
  if (init_method != "mpi" || !precision.empty()) {
    report({{init_method != "mpi" ? "--init-method" : "--precision", "applies to --device gpu only"}});
    return finish(2);
  }
  if (in->graph.world_size != world) {
    report({{input, "the plan needs " + std::to_string(in->graph.world_size) + " ranks (tp x pp x dp x cp), mpirun started " +
                        std::to_string(world)}});
    return finish(2);
  }
  RuntimeConfig cfg{in->model, in->train, in->graph.plan};
  if (Problems pr = check_runtime_config(cfg); !pr.empty()) {
    report(pr);
    return finish(2);
  }

  Watchdog::install_crash_handlers(g_rank);
  auto wd = std::make_unique<Watchdog>(MPI_COMM_WORLD, watchdog_s);
  // Everything that holds MPI objects lives inside train(), so it is gone before MPI_Finalize.
  auto train = [&]() -> int {
    auto rt = CpuRuntime::create(MPI_COMM_WORLD, cfg, wd.get(), &in->graph.ranks[static_cast<size_t>(g_rank)]);
    if (!rt) {
      Problems pr = rt.problems();
      for (Problem& p : pr)  // the graph's rank programs: name the file they come from
        if (p.where.rfind("/ranks/", 0) == 0) p.where = input + ":" + p.where;
      report(pr);
      return 2;
    }
    CpuRuntime& run = **rt;
    if (resume) {
      if (Problems pr = run.load_checkpoint(ckpt_dir); !pr.empty()) {
        report(pr);
        return 2;
      }
    }
    if (g_rank == fault_rank) run.inject_fault(fault, fault_step);
    const int64_t first_step = run.next_step();
    const int64_t last = cfg.train.steps;
    run.record_timeline(last - 1);  // the result's timeline: the last step (warm, like the step time)
    const bool tty = isatty(2) && g_rank == 0;
    int status = 0;
    while (run.next_step() < last && status == 0) {
      int64_t until = last;
      if (ckpt_every > 0) until = std::min(last, (run.next_step() / ckpt_every + 1) * ckpt_every);
      for (double loss : run.train(until))
        if (tty) std::fprintf(stderr, "\rstep %lld/%lld loss %.4f", static_cast<long long>(run.next_step()),
                              static_cast<long long>(last), loss);
      if (ckpt_every > 0 && run.next_step() % ckpt_every == 0) {
        if (Problems pr = run.save_checkpoint(ckpt_dir); !pr.empty()) {
          report(pr);
          status = 1;
        }
      }
    }
    if (tty) std::fprintf(stderr, "\n");
    std::vector<RankSummary> ranks;
    BackendResult res = gather_result(MPI_COMM_WORLD, cfg, run.report(), &ranks);
    int64_t dropped = 0;
    res.timeline = gather_timeline(MPI_COMM_WORLD, run.spans(), &dropped);
    if (g_rank == 0 && dropped > 0)
      std::fprintf(stderr, "monarch-run: timeline: %lld spans beyond %lld per rank were not kept\n",
                   static_cast<long long>(dropped), static_cast<long long>(kMaxSpansPerRank));
    if (g_rank == 0) {
      for (size_t i = 0; i < res.losses.size(); ++i)
        std::printf("step %lld loss %.6f\n", static_cast<long long>(first_step + static_cast<int64_t>(i)), res.losses[i]);
      std::printf("iteration %.4f s, %.0f tokens/s\n", res.iteration_time_s, res.tokens_per_s);
      if (!output.empty()) {
        if (!write_output_file(output, run_output_json(res, first_step, ranks))) status = 1;
      }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return status;
  };
  const int status = train();
  wd.reset();
  return finish(status);
}
