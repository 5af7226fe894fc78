// realrt_parity_worker: trains the reference GPT under a plan given on the command line (no plan
// file), for the parity and fault tests. Launched by mpirun; rank 0 writes the losses and the
// measured result as JSON to --out.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/result_io.h"
#include "realrt/cpu_runtime.h"

extern "C" void openblas_set_num_threads(int);

using namespace monarch;
using namespace monarch::realrt;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  openblas_set_num_threads(1);
  CLI::App app{"realrt parity worker"};
  RuntimeConfig cfg;
  cfg.model = {4, 128, 4, 512, 256, 64};
  cfg.model.hidden_dropout = 0.1;  // Megatron's GPT defaults: the parity covers the dropout masks
  cfg.model.attention_dropout = 0.1;
  cfg.train.global_batch_size = 4;
  cfg.train.micro_batch_size = 1;
  cfg.train.steps = 10;
  std::string schedule = "1f1b", recompute = "none", activation = "gelu", out, fault;
  int64_t fault_rank = -1, fault_step = -1;
  double watchdog_s = 60;
  app.add_option("--watchdog-timeout", watchdog_s, "seconds without progress before the run is ended");
  app.add_option("--tp", cfg.plan.tp);
  app.add_option("--pp", cfg.plan.pp);
  app.add_option("--dp", cfg.plan.dp);
  app.add_option("--vpp", cfg.plan.vpp);
  app.add_option("--layers-per-stage", cfg.plan.layers_per_stage, "layers per stage (or per model chunk), comma-separated")
      ->delimiter(',');
  app.add_option("--zero", cfg.plan.zero_stage);
  app.add_flag("--sp", cfg.plan.sequence_parallel);
  app.add_option("--schedule", schedule);
  app.add_option("--recompute", recompute);
  app.add_option("--mbs", cfg.train.micro_batch_size);
  app.add_option("--gbs", cfg.train.global_batch_size);
  app.add_option("--steps", cfg.train.steps);
  app.add_option("--layers", cfg.model.num_layers);
  app.add_option("--hidden", cfg.model.hidden);
  app.add_option("--heads", cfg.model.heads);
  app.add_option("--vocab", cfg.model.vocab);
  app.add_option("--seq", cfg.model.seq);
  app.add_option("--experts", cfg.model.experts, "mixture of experts: experts per layer (0 = dense)");
  app.add_option("--top-k", cfg.model.top_k);
  app.add_option("--moe-ffn", cfg.model.moe_ffn);
  app.add_option("--capacity-factor", cfg.model.capacity_factor);
  app.add_option("--ep", cfg.plan.ep);
  app.add_option("--etp", cfg.plan.etp, "expert tensor parallel degree (0: tp)");
  app.add_option("--activation", activation, "gelu | swiglu | squared-relu")
      ->check(CLI::IsMember({"gelu", "swiglu", "squared-relu"}));
  app.add_option("--hidden-dropout", cfg.model.hidden_dropout);
  app.add_option("--attention-dropout", cfg.model.attention_dropout);
  app.add_option("--out", out);
  app.add_option("--fault", fault, "crash | hang");
  app.add_option("--fault-rank", fault_rank);
  app.add_option("--fault-step", fault_step);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    MPI_Finalize();
    return app.exit(e);
  }
  cfg.model.ffn = 4 * cfg.model.hidden;
  cfg.model.activation = activation == "swiglu"         ? Activation::kSwiglu
                         : activation == "squared-relu" ? Activation::kSquaredRelu
                                                        : Activation::kGelu;
  if (cfg.model.moe() && cfg.model.top_k == 0) cfg.model.top_k = 1;
  if (cfg.model.moe() && cfg.model.moe_ffn == 0) cfg.model.moe_ffn = cfg.model.ffn;
  cfg.plan.micro_batch_size = cfg.train.micro_batch_size;
  cfg.plan.schedule = schedule == "gpipe" ? Schedule::kGpipe
                      : schedule == "interleaved-1f1b" ? Schedule::kInterleaved : Schedule::kOneFOneB;
  cfg.plan.recompute = recompute == "full" ? Recompute::kFull
                       : recompute == "selective" ? Recompute::kSelective : Recompute::kNone;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Watchdog::install_crash_handlers(rank);
  auto wd = std::make_unique<Watchdog>(MPI_COMM_WORLD, watchdog_s);
  auto rt = CpuRuntime::create(MPI_COMM_WORLD, cfg, wd.get());
  if (!rt) {
    if (rank == 0)
      for (const auto& p : rt.problems()) std::fprintf(stderr, "error: %s\n", p.to_string().c_str());
    rt = Problems{};
    wd.reset();
    MPI_Finalize();
    return 2;
  }
  if (rank == fault_rank) (*rt)->inject_fault(fault, fault_step);
  (*rt)->train(cfg.train.steps);
  const RankReport mine = (*rt)->report();
  const BackendResult res = gather_result(MPI_COMM_WORLD, cfg, mine);
  if (rank == 0 && !out.empty()) {
    nlohmann::json j;
    j["losses"] = res.losses;
    j["iteration_time_s"] = res.iteration_time_s;
    nlohmann::json comm = nlohmann::json::array();
    for (const auto& c : res.communication) comm.push_back(comm_entry_to_json(c));
    j["communication"] = comm;
    std::ofstream(out) << j.dump(1) << "\n";
  }
  rt = Problems{};
  wd.reset();
  MPI_Finalize();
  return 0;
}
