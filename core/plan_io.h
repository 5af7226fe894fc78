// The plan file: a PlanGraph (core/plan_ir.h) as versioned JSON, format "monarch-plan/1",
// documented in docs/plan_format.md. `monarch-sim --emit-plan` writes it; the real runtime
// and the simulators read it.
//
// The reader is strict (a runtime must not execute what it does not fully understand):
// unknown keys, values of the wrong type, unknown names, dependencies that do not point to
// an earlier task of the same rank, groups and peers that do not exist are errors naming the
// JSON path. Whole-graph properties (matching sends and receives, complete collectives,
// balanced memory events, no deadlock) are checked by strategies/graph_check.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/plan_ir.h"
#include "core/problem.h"

namespace monarch {

nlohmann::json plan_graph_to_json(const PlanGraph& graph);
Expected<PlanGraph> plan_graph_from_json(const nlohmann::json& j);

// Writes the file atomically (a temporary file beside it, then rename): on failure nothing
// is left at `path`. Returns the problems (where = the path), empty on success.
Problems write_plan_file(const std::string& path, const PlanGraph& graph);
Expected<PlanGraph> read_plan_file(const std::string& path);

}  // namespace monarch
