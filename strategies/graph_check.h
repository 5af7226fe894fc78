// Checks every lowered task graph must pass before a backend runs it:
//   - dependencies point to earlier tasks of the same rank;
//   - every send has exactly one matching receive (src, dst, tag) and the other way round,
//     with the same size;
//   - every collective has all its group members, at the same seq, agreeing on kind, size,
//     count and dtype; every member belongs to the group it names;
//   - memory events never free what was not allocated (or free it twice), nor allocate a
//     live buffer again, and a free names the size that was allocated;
//   - the graph runs to completion (no cycle through streams, dependencies, messages and
//     collectives), checked with core/graph_time.
// A graph lowered for one data-parallel replica (strategies/lowering.h `only`, core/graph_replica.h;
// the others' programs are empty) passes when its collectives have every member that has a
// program; the completion check is then skipped (it needs every rank).
#pragma once

#include "core/plan_ir.h"
#include "core/problem.h"

namespace monarch {

// Empty when the graph passes. Each problem names "/ranks/R/tasks/I" (or "/groups/G").
// At most `max_problems` are reported.
Problems check_graph(const PlanGraph& graph, size_t max_problems = 20);

}  // namespace monarch
