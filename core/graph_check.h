// The verifier every lowered task graph passes before a backend runs it (the lowering, the
// SimGrid backend, the real runtime's plan reader and `monarch-sim validate` call it):
//   - one program per rank, in rank order;
//   - dependencies point to earlier tasks of the same rank; compute durations and FLOPs are
//     finite and >= 0, sizes >= 0;
//   - every send has exactly one matching receive (src, dst, tag) and the other way round,
//     with the same size; a peer is another rank;
//   - every collective has all its group members, at the same seq, agreeing on kind, size,
//     count and dtype; every member belongs to the group it names; an all-to-all's buffer
//     (or its per-peer sizes) splits over the group;
//   - memory events never free what was not allocated (or free it twice), nor allocate a
//     live buffer again, and a free names the size that was allocated;
//   - the graph runs to completion (no cycle through streams, dependencies, messages and
//     collectives), checked with core/graph_time (GraphCheckOptions::completion).
// A graph lowered for one data-parallel replica (strategies/lowering.h `only`,
// core/graph_replica.h; the others' programs are empty) passes when its collectives have every
// member that has a program; the completion check is then skipped (it needs every rank).
#pragma once

#include <cstddef>

#include "core/plan_ir.h"
#include "core/problem.h"

namespace monarch {

struct GraphCheckOptions {
  size_t max_problems = 20;  // at most this many are reported
  // Replay the graph to prove it completes (core/graph_time.h). This is the costly part at
  // scale (every rank's tasks in dependency order: ~17 s CPU for a full 16k-GPU graph, against
  // a few ms for the structural checks of one replica); the SimGrid backend skips it, since its
  // simulation reports a deadlock itself.
  bool completion = true;
};

// Empty when the graph passes. Each problem names "/ranks/R/tasks/I", "/ranks", "/world_size"
// or "/groups/G" (an incomplete collective, a bad member).
Problems check_graph(const PlanGraph& graph, const GraphCheckOptions& options = {});

}  // namespace monarch
