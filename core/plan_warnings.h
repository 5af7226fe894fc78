// Warnings for plans that are valid but unwise on their cluster. Such plans are predicted and
// ranked like any other (users measure them and want them compared); the warnings travel with
// the result (BackendResult::warnings), into the table and the result file.
#pragma once

#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch {

// One sentence per reason, empty when the plan is not unwise:
// - a TP or expert-TP group leaves the NVLink domain (its per-layer collectives run over the
//   inter-node network);
// - an EP group leaves the NVLink domain (the token all-to-alls cross the network);
// - a micro-batch too small for its GEMMs to be compute-bound: fewer token rows than the GPU's
//   ridge point (peak FLOP/s over HBM bytes/s), so the weights' reads pace every GEMM.
std::vector<std::string> plan_warnings(const Scenario& scenario, const Plan& plan);

}  // namespace monarch
