// monarch-runs: the `runs` subcommands on their own, for trying the store without the full CLI.
//   monarch-runs [--db FILE] list|show|compare|export ...
#include <iostream>
#include <string>
#include <vector>

#include "results/runs_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return monarch::run_runs_command(args, "", std::cout, std::cerr);
}
