// monarch-sim validate: predictions of the analytical model against published measurements.
#include <iostream>

#include "app/commands.h"
#include "sim/validate.h"

namespace monarch::app {

int cmd_validate(const ValidateOptions& opts) {
  for (Backend b : opts.backends) {
    if (b != Backend::kAnalytical) {
      print_error("--backend", std::string("validate runs the analytical backend only; found \"") + to_string(b) + "\"");
      return kExitInvalid;
    }
  }
  return run_validate(opts.cases_path, opts.max_mape_pct, std::cout, std::cerr);
}

}  // namespace monarch::app
