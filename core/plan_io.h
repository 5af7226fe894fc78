// The plan file: a PlanGraph (core/plan_ir.h) as versioned JSON, documented in
// docs/plan_format.md. `monarch-sim --emit-plan` writes it; the real runtime and the simulators
// read it.
//   "monarch-plan/2" (current): the graph and the scenario it was planned for (model, cluster,
//                               training), so a runtime needs no other file.
//   "monarch-plan/1":           the graph only (still read; written when no scenario is given).
// Any other format is refused, naming the versions this build reads.
//
// The reader is strict (a runtime must not execute what it does not fully understand):
// unknown keys, values of the wrong type, unknown names, dependencies that do not point to
// an earlier task of the same rank, groups and peers that do not exist are errors naming the
// JSON path. Whole-graph properties (matching sends and receives, complete collectives,
// balanced memory events, no deadlock) are checked by core/graph_check.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

// A plan file as read: the graph and, from version 2 on, the scenario it was planned for.
struct PlanFile {
  std::string format;                // the file's "format"
  PlanGraph graph;
  std::optional<Scenario> scenario;  // absent in version 1 files
};

// scenario == nullptr: a version 1 document (graph only); else version 2 with "scenario".
nlohmann::json plan_graph_to_json(const PlanGraph& graph, const Scenario* scenario = nullptr);
// Reads version 1 and 2 documents; the graph only (a version 2 scenario is checked, not kept).
Expected<PlanGraph> plan_graph_from_json(const nlohmann::json& j);
// Reads version 1 and 2 documents. base_dir: where a scenario's relative paths resolve.
Expected<PlanFile> plan_file_from_json(const nlohmann::json& j, const std::string& base_dir = ".");

// Writes the file atomically (a temporary file beside it, then rename): on failure nothing
// is left at `path`. Returns the problems (where = the path), empty on success.
// With a scenario the file is version 2 (self-contained), else version 1.
Problems write_plan_file(const std::string& path, const PlanGraph& graph, const Scenario* scenario = nullptr);
Expected<PlanGraph> read_plan_file(const std::string& path);
// As read_plan_file, with the scenario of a version 2 file. Problems are "PATH:/json/path".
Expected<PlanFile> read_plan_file_full(const std::string& path);

}  // namespace monarch
