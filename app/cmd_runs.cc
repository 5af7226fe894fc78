// monarch-sim runs list|show|compare|export: the SQLite results store. Owned by the store work;
// until it lands the subcommand refuses to run rather than fake.
#include "app/commands.h"

namespace monarch::app {

int cmd_runs(const RunsOptions&) {
  print_error("runs", "not built yet: the results store (results/) is not part of this build");
  return kExitInvalid;
}

}  // namespace monarch::app
