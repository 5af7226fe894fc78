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
  int64_t jobs = 1;               // --jobs: threads of the plan search (0 = every hardware thread)
};
int cmd_run(const RunOptions&);

// monarch-sim validate CASES.json [--max-mape PCT]
struct ValidateOptions {
  std::string cases_path;
  std::optional<double> max_mape_pct;
  std::vector<Backend> backends;  // --backend
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

// Prints one problem line per item to stderr: "monarch-sim: error: WHERE: MESSAGE".
void print_error(const std::string& where, const std::string& message);

}  // namespace monarch::app
