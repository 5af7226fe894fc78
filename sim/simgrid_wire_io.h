// Internal to the SimGrid backend: results (or problems) as JSON, to carry them from the forked
// simulation process back to the caller through a pipe.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"

namespace monarch::simgrid_backend {

std::string encode_results(const Expected<std::vector<BackendResult>>& results);
// Problems under "simgrid" when the text is not a valid encoding.
Expected<std::vector<BackendResult>> decode_results(const std::string& text);

}  // namespace monarch::simgrid_backend
