// The monarch-sim subcommands. app/cli.cc parses the command line (CLI11) into these option
// structs and calls one function per subcommand; each lives in its own file (cmd_*.cc) so a
// backend, the store or the validator can plug in by editing only its file.
// Every function returns the process exit status: 0 success, 2 invalid scenario or option
// (message on stderr naming the JSON path or option), 3 valid scenario but no plan fits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitNoPlanFits = 3;

// What this build contains (from the configure-time feature options).
struct BuildFeatures {
  bool simgrid = false;
  bool real_cpu = false;
  bool real_gpu = false;
  bool gui = false;
};
BuildFeatures build_features();

// monarch-sim SCENARIO.json [options]
struct RunOptions {
  std::string scenario_path;
  std::vector<Backend> backends;  // from --backend; empty = the scenario's, else the default
  std::string output_path;        // --output
  std::string db_path;            // --db; empty = the default store path
  bool no_db = false;             // --no-db
  std::string emit_plan_path;     // --emit-plan
  std::string trace_path;         // --trace
  std::vector<std::string> overrides;  // --set PATH=VALUE, in order
  std::optional<int64_t> top_k;   // --top-k
  bool quiet = false;             // --quiet
  int64_t jobs = 0;               // --jobs: threads of the plan search (0, the default: every hardware thread)
};
int cmd_run(const RunOptions&);

// monarch-sim sweep SWEEP.json [--jobs N] [--resume] [--db FILE] (app/cmd_sweep.cc); under
// mpirun, rank 0 coordinates and the other ranks compute. --point K --point-output FILE: the
// worker process of one point (started by the coordinator, not by users).
struct SweepOptions {
  std::string sweep_path;
  std::string db_path;  // --db; empty = the default store path
  int64_t jobs = 1;     // --jobs: worker processes on this machine (0 = one per hardware thread)
  bool resume = false;  // --resume: compute only the points the store lacks
  std::optional<int64_t> point;  // --point: compute this point and write its outcome
  std::string point_output;      // --point-output
};
int cmd_sweep(const SweepOptions&);

// monarch-sim validate CASES.json [--max-mape PCT] [--backend analytical|simgrid] [--max-gpus N]
//   [--plans] [--save REPORT.json] [--against REPORT.json]
struct ValidateOptions {
  std::string cases_path;
  std::optional<double> max_mape_pct;
  std::optional<int64_t> max_gpus;  // --max-gpus: skip cases whose plan uses more GPUs
  std::vector<Backend> backends;  // --backend
  bool show_plans = false;        // --plans
  std::string save_path;          // --save: write the report (sim/validate_report.h)
  std::string against_path;       // --against: the change against a saved report
  bool quiet = false;
};
int cmd_validate(const ValidateOptions&);

// monarch-sim runs list|show|compare|export: parsed by the store's own command
// (results/runs_command.h) from the words after "runs".
struct RunsOptions {
  std::vector<std::string> args;  // the words after "runs"
  std::string db_path;            // --db given before "runs"; empty = the default store path
};
int cmd_runs(const RunsOptions&);
// monarch-sim runs import PATH... [--scenario S | --plan P] [--db FILE] ...: `args` are the words
// after "import"; db_path the store given before it (app/cmd_runs_import.cc).
int cmd_runs_import(const std::vector<std::string>& args, const std::string& db_path);

// monarch-sim export RESULT.json|PLAN.json --to FORMAT [--rank N] [--output FILE]
struct ExportOptions {
  std::string input_path;
  std::string to;              // torchtitan | megatron | deepspeed | megatron-bridge
  std::optional<int64_t> rank;  // --rank; absent = 1 (the best plan)
  std::string output_path;     // --output; empty = stdout
};
int cmd_export(const ExportOptions&);

// monarch-sim import FILE [--format F] [--output FILE] [--gpu G --num-gpus N | --cluster FILE]
struct ImportCliOptions {
  std::string config_path;
  std::string format;        // --format; empty = guessed from the file
  std::string output_path;   // --output; empty = stdout
  std::string name;          // --name
  std::string model;         // --model PRESET|config.json
  std::string cluster_path;  // --cluster
  std::string gpu;           // --gpu
  int64_t num_gpus = 0;      // --num-gpus
  int64_t gpus_per_node = 0;  // --gpus-per-node
};
int cmd_import(const ImportCliOptions&);

// Prints one problem line per item to stderr: "monarch-sim: error: WHERE: MESSAGE".
void print_error(const std::string& where, const std::string& message);

}  // namespace monarch::app
