// Internal to the SimGrid backend: results (or problems) as JSON, to carry them from the forked
// simulation process back to the caller through a pipe.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "sim/simgrid_backend.h"

namespace monarch::simgrid_backend {

std::string encode_results(const Expected<std::vector<BackendResult>>& results, const SimgridStats& stats = {});
// Problems under "simgrid" when the text is not a valid encoding. `stats`, when given, receives
// the encoded counts.
Expected<std::vector<BackendResult>> decode_results(const std::string& text, SimgridStats* stats = nullptr);

}  // namespace monarch::simgrid_backend
