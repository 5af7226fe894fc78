// monarch-sim validate: predictions against published measurements. Owned by the validation
// work (issue: calibration); until it lands the subcommand refuses to run rather than fake.
#include "app/commands.h"

namespace monarch::app {

int cmd_validate(const ValidateOptions& opts) {
  print_error("validate", "not built yet: the validation against " + opts.cases_path +
                              " needs the analytical model, which this build does not have");
  return kExitInvalid;
}

}  // namespace monarch::app
