// monarch-sim runs list|show|compare|export: the SQLite results store (results/).
#include <iostream>

#include "app/commands.h"
#include "results/runs_command.h"

namespace monarch::app {

int cmd_runs(const RunsOptions& opts) { return run_runs_command(opts.args, opts.db_path, std::cout, std::cerr); }

}  // namespace monarch::app
