#include "app/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/commands.h"
#include "core/presets.h"
#include "core/scenario_io.h"

namespace monarch::app {

BuildFeatures build_features() {
  BuildFeatures f;
#ifdef MONARCH_HAVE_SIMGRID
  f.simgrid = true;
#endif
#ifdef MONARCH_HAVE_REAL_CPU
  f.real_cpu = true;
#endif
#ifdef MONARCH_HAVE_REAL_GPU
  f.real_gpu = true;
#endif
#ifdef MONARCH_HAVE_GUI
  f.gui = true;
#endif
  return f;
}

void print_error(const std::string& where, const std::string& message) {
  std::cerr << "monarch-sim: error: " << (where.empty() ? "" : where + ": ") << message << "\n";
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
  o << "Scenario format: docs/spec/scenario.md and docs/scenario_extensions.md.\n"
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
  app.add_option("scenario", run.scenario_path, "scenario file (JSON)")->type_name("SCENARIO.json");
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
  app.add_option("--jobs", run.jobs, "threads for the plan search, 0 = one per hardware thread (the ranking is the same for any N)")
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
  auto* val_backend_opt = validate->add_option("--backend", val_backends, "backends to validate")->type_name("LIST");

  // runs: everything after "runs" goes to the store's own parser (results/runs_command.h).
  auto* runs_cmd = app.add_subcommand("runs", "the results store: runs list [--scenario NAME] [--backend B] | show ID | compare ID ID | export [--format csv|json]");
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
    if (*val_backend_opt && !parse_backend_list("--backend", val_backends, &val.backends)) return kExitInvalid;
    val.quiet = run.quiet;
    return cmd_validate(val);
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
