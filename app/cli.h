// The monarch-sim command line (docs/spec/cli.md), parsed with CLI11.
#pragma once

namespace monarch::app {

// Parses argv, dispatches to the subcommand, returns the exit status (2 on any bad option).
int main_cli(int argc, char** argv);

}  // namespace monarch::app
