#include "app/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/commands.h"
#include "core/presets.h"
#include "core/scenario_io.h"
#include "run/backend.h"

namespace monarch::app {

BuildFeatures build_features() {
  const run::BuildFeatures backends = run::build_features();  // the backends: the run library knows them
  BuildFeatures f;
  f.simgrid = backends.simgrid;
  f.real_cpu = backends.real_cpu;
  f.real_gpu = backends.real_gpu;
#ifdef MONARCH_HAVE_GUI
  f.gui = true;
#endif
  return f;
}

namespace {

// Upper bound of --jobs: more search threads than any machine has cores is a typo, not a wish.
constexpr int64_t kMaxSearchJobs = 4096;

std::string presets_help() {
  std::ostringstream o;
  o << "GPU presets (cluster.gpu; dense peak, HBM capacity and bandwidth):\n";
  for (const auto& g : gpu_presets()) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-10s bf16 %6.1f TFLOP/s  fp8 %6.1f  %4.0f GiB  %5.0f GB/s HBM  NVLink %3.0f GB/s/dir\n",
                  g.spec.name.c_str(), g.spec.peak_tflops.bf16, g.spec.peak_tflops.fp8, g.spec.memory_gib,
                  g.spec.memory_bandwidth_GBps, g.default_intra_node.bandwidth_GBps);
    o << line;
  }
  o << "Model presets (model.preset):\n";
  for (const auto& m : model_presets()) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-12s %-5s %3lld layers, hidden %5lld, %3lld heads (%lld KV), ffn %5lld, vocab %6lld, seq %lld\n",
                  m.name.c_str(), to_string(m.config.architecture), static_cast<long long>(m.config.num_layers),
                  static_cast<long long>(m.config.hidden_size), static_cast<long long>(m.config.num_attention_heads),
                  static_cast<long long>(m.config.num_kv_heads), static_cast<long long>(m.config.ffn_hidden_size),
                  static_cast<long long>(m.config.vocab_size), static_cast<long long>(m.config.seq_length));
    o << line;
  }
  o << "Scenario format: docs/spec/scenario.md and docs/scenario_extensions.md; command line and result\n"
       "file: docs/spec/cli.md.\n"
       "Exit status: 0 success, 2 invalid scenario or option, 3 no plan fits.";
  return o.str();
}

// "analytical,simgrid" -> backends; false (and a message) on an unknown name.
bool parse_backend_list(const std::string& option, const std::string& list, std::vector<Backend>* out) {
  std::stringstream ss(list);
  std::string item;
  bool ok = true;
  while (std::getline(ss, item, ',')) {
    Backend b;
    if (!parse_backend(item, &b)) {
      print_error(option, "found \"" + item + "\", expected a comma-separated list of analytical, simgrid, real-cpu, real-gpu");
      ok = false;
    } else if (std::find(out->begin(), out->end(), b) == out->end()) {
      out->push_back(b);
    }
  }
  if (ok && out->empty()) {
    print_error(option, "found an empty list, expected analytical, simgrid, real-cpu or real-gpu");
    ok = false;
  }
  return ok;
}

}  // namespace

int main_cli(int argc, char** argv) {
  CLI::App app{"monarch-sim: plan and simulate distributed training of large models "
               "(data/tensor/pipeline/context/expert parallelism) on an analytical model, SimGrid, "
               "or for real on CPUs/GPUs.",
               "monarch-sim"};
  app.footer(presets_help());
  app.set_version_flag("--version", "monarch-sim 0.1.0");
  app.fallthrough();

  RunOptions run;
  std::string backend_list;
  int64_t top_k = 0;
  app.add_option("scenario", run.scenario_path, "scenario file (JSON); - reads it from standard input")->type_name("SCENARIO.json");
  auto* backend_opt = app.add_option("--backend", backend_list, "analytical,simgrid,real-cpu,real-gpu (overrides the scenario's \"backends\")")
      ->type_name("LIST");
  app.add_option("--output", run.output_path, "write the result file")->type_name("FILE.json");
  auto* db_opt = app.add_option("--db", run.db_path, "the results store (SQLite); a default path is used when absent")->type_name("FILE");
  app.add_flag("--no-db", run.no_db, "do not record this run in the store")->excludes(db_opt);
  app.add_option("--emit-plan", run.emit_plan_path, "write the chosen plan and its per-rank task graph")->type_name("FILE.json");
  app.add_option("--trace", run.trace_path, "Chrome/Perfetto trace of the best plan's simulated iteration (SimGrid), or of its measured step with --backend real-cpu")->type_name("FILE.json");
  app.add_option("--set", run.overrides, "override one scenario key, e.g. --set parallelism.tp=4 (repeatable)")
      ->type_name("PATH=VALUE")
      ->allow_extra_args(false);
  auto* top_k_opt = app.add_option("--top-k", top_k, "how many ranked plans to report")
                        ->type_name("N")
                        ->check(CLI::Range(int64_t{1}, kMaxTopK));
  app.add_flag("--quiet", run.quiet, "no table on stdout (the result file and the store are still written)");
  app.add_option("--jobs", run.jobs, "threads for the plan search; 0, the default, = one per hardware thread (the ranking is the same for any N)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{0}, kMaxSearchJobs));

  // validate
  ValidateOptions val;
  std::string val_backends;
  double max_mape = 0;
  auto* validate = app.add_subcommand("validate", "compare predictions with published measurements (calibration cases)");
  validate->add_option("cases", val.cases_path, "cases file, e.g. tests/data/validation/calibration.json")
      ->type_name("CASES.json")
      ->required();
  auto* max_mape_opt = validate->add_option("--max-mape", max_mape, "fail (exit 1) when the mean absolute percentage error exceeds PCT")
                           ->type_name("PCT")
                           ->check(CLI::PositiveNumber);
  auto* val_backend_opt =
      validate->add_option("--backend", val_backends, "the backend that predicts: analytical (default) or simgrid")->type_name("NAME");
  int64_t max_gpus = 0;
  auto* max_gpus_opt = validate->add_option("--max-gpus", max_gpus, "skip cases whose plan uses more GPUs (simgrid default: 1024)")
                           ->type_name("N")
                           ->check(CLI::PositiveNumber);
  validate->add_flag("--plans", val.show_plans, "list the plan each case was predicted with (what the search chose for what the case leaves open)");
  validate->add_option("--save", val.save_path, "also write the report (every case's prediction, error, time terms and plan) to this JSON file")
      ->type_name("REPORT.json");
  validate->add_option("--against", val.against_path,
                       "compare with a report saved by --save: each group's MAPE then and now, each case whose error moved and the time term that moved it")
      ->type_name("REPORT.json");

  // export / import: framework configs (core/framework_bridge.h).
  ExportOptions exp;
  int64_t export_rank = 1;
  auto* export_cmd = app.add_subcommand("export", "the chosen (or --rank N) plan as a torchtitan, Megatron-LM, DeepSpeed or Megatron-Bridge config");
  export_cmd->add_option("input", exp.input_path, "a result file (--output) or a plan file (--emit-plan)")
      ->type_name("RESULT.json|PLAN.json")
      ->required();
  export_cmd->add_option("--to", exp.to, "torchtitan | megatron | deepspeed | megatron-bridge")->type_name("FORMAT")->required();
  auto* export_rank_opt = export_cmd->add_option("--rank", export_rank, "the N-th ranked plan (default 1)")
                              ->type_name("N")
                              ->check(CLI::Range(int64_t{1}, kMaxTopK));
  export_cmd->add_option("--output", exp.output_path, "write the config here (default: stdout)")->type_name("FILE");

  ImportCliOptions imp;
  auto* import_cmd = app.add_subcommand("import", "a torchtitan TOML, Megatron argument list, DeepSpeed JSON or Megatron-Bridge overrides as a scenario");
  import_cmd->add_option("config", imp.config_path, "the framework config")->type_name("FILE")->required();
  import_cmd->add_option("--format", imp.format, "torchtitan | megatron | deepspeed | megatron-bridge (default: guessed)")->type_name("F");
  import_cmd->add_option("--output", imp.output_path, "write the scenario here (default: stdout)")->type_name("FILE.json");
  import_cmd->add_option("--name", imp.name, "scenario name (default: the file's name)");
  import_cmd->add_option("--model", imp.model, "the model, when the config names it by a flavor or recipe: a preset or a Hugging Face config.json")
      ->type_name("PRESET|FILE");
  auto* cluster_opt = import_cmd->add_option("--cluster", imp.cluster_path, "the cluster: a scenario or a cluster object (JSON)")->type_name("FILE");
  import_cmd->add_option("--gpu", imp.gpu, "GPU preset (default H100-SXM)")->type_name("NAME")->excludes(cluster_opt);
  import_cmd->add_option("--num-gpus", imp.num_gpus, "GPUs the config runs on")->type_name("N")->check(CLI::Range(int64_t{1}, kMaxNumGpus));
  import_cmd->add_option("--gpus-per-node", imp.gpus_per_node, "GPUs per node (default: the GPU preset's)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, kMaxGpusPerNode))
      ->excludes(cluster_opt);

  // sweep: many points of one base scenario (app/cmd_sweep.cc, docs/sweeps.md).
  SweepOptions sweep;
  int64_t sweep_point = -1;
  auto* sweep_cmd = app.add_subcommand("sweep", "run every point of a sweep (a base scenario and a grid or list of overrides) and record them in the store");
  sweep_cmd->add_option("sweep", sweep.sweep_path, "sweep file (docs/sweeps.md)")->type_name("SWEEP.json")->required();
  sweep_cmd->add_option("--jobs", sweep.jobs, "worker processes on this machine, 0 = one per hardware thread (under mpirun: one per rank but rank 0)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{0}, kMaxSearchJobs));
  sweep_cmd->add_flag("--resume", sweep.resume, "compute only the points the store does not have yet");
  auto* sweep_point_opt = sweep_cmd->add_option("--point", sweep_point, "worker process: compute this point only")->group("");
  sweep_cmd->add_option("--point-output", sweep.point_output, "worker process: write the point's outcome here")->group("");

  // runs: everything after "runs" goes to the store's own parser (results/runs_command.h).
  auto* runs_cmd = app.add_subcommand("runs", "the results store: runs list [--scenario NAME] [--backend B] | show ID | compare ID ID | export [--format csv|json] [--sweep NAME] | import PATH... [--scenario S | --plan P]");
  runs_cmd->prefix_command();
  runs_cmd->allow_extras();

  // `[--db FILE] runs ...`: the words after "runs" belong to the store's own parser
  // (results/runs_command.h), which knows its subcommands and their options.
  {
    int i = 1;
    std::string db;
    while (i < argc) {
      const std::string a = argv[i];
      if (a == "--db" && i + 1 < argc) {
        db = argv[i + 1];
        i += 2;
      } else if (a.rfind("--db=", 0) == 0) {
        db = a.substr(5);
        ++i;
      } else {
        break;
      }
    }
    if (i < argc && std::string(argv[i]) == "runs") {
      RunsOptions runs;
      runs.args.assign(argv + i + 1, argv + argc);
      runs.db_path = db;
      return cmd_runs(runs);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error("", e.what());
    std::cerr << "Run 'monarch-sim --help' for the options.\n";
    return kExitInvalid;
  }

  if (*validate) {
    if (*max_mape_opt) val.max_mape_pct = max_mape;
    if (*max_gpus_opt) val.max_gpus = max_gpus;
    if (*val_backend_opt && !parse_backend_list("--backend", val_backends, &val.backends)) return kExitInvalid;
    val.quiet = run.quiet;
    return cmd_validate(val);
  }
  if (*export_cmd) {
    if (*export_rank_opt) exp.rank = export_rank;
    return cmd_export(exp);
  }
  if (*import_cmd) return cmd_import(imp);
  if (*sweep_cmd) {
    sweep.db_path = run.db_path;
    if (*sweep_point_opt) {
      if (sweep.point_output.empty()) {
        print_error("--point", "needs --point-output FILE");
        return kExitInvalid;
      }
      sweep.point = sweep_point;
    }
    return cmd_sweep(sweep);
  }
  if (*runs_cmd) {
    RunsOptions runs;
    runs.args = runs_cmd->remaining();
    runs.db_path = run.db_path;
    return cmd_runs(runs);
  }
  if (run.scenario_path.empty()) {
    print_error("SCENARIO.json", "missing; usage: monarch-sim SCENARIO.json [options] (see --help)");
    return kExitInvalid;
  }
  if (*backend_opt && !parse_backend_list("--backend", backend_list, &run.backends)) return kExitInvalid;
  if (*top_k_opt) run.top_k = top_k;
  return cmd_run(run);
}

}  // namespace monarch::app
