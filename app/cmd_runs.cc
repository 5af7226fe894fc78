// monarch-sim runs list|show|compare|export: the SQLite results store (results/); runs import:
// measured runs from traces and logs (cmd_runs_import.cc, measured/).
#include <iostream>

#include "app/commands.h"
#include "results/runs_command.h"

namespace monarch::app {

int cmd_runs(const RunsOptions& opts) {
  // The first word that is neither an option nor the value of --db names the subcommand.
  for (size_t i = 0; i < opts.args.size(); ++i) {
    const std::string& a = opts.args[i];
    if (a == "--db") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    if (a != "import") break;
    std::vector<std::string> rest;
    std::string db = opts.db_path;
    for (size_t j = 0; j < opts.args.size(); ++j) {
      if (j == i) continue;
      if (j < i && opts.args[j] == "--db" && j + 1 < i) {
        db = opts.args[++j];
        continue;
      }
      rest.push_back(opts.args[j]);
    }
    return cmd_runs_import(rest, db);
  }
  return run_runs_command(opts.args, opts.db_path, std::cout, std::cerr);
}

}  // namespace monarch::app
