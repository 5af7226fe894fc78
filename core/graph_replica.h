// Graphs lowered for one data-parallel replica (strategies/lowering.h `only`): the SimGrid
// backend simulates one replica under replica symmetry, so only its ranks get programs and
// the others keep empty ones. These helpers tell such a graph from one with idle ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan_ir.h"

namespace monarch {

// Ranks at data-parallel index `dp_index` of `plan` (core/placement.h coordinates), by rank:
// tp x cp x pp of them. Empty when dp_index is not one of the plan's.
std::vector<char> replica_ranks(const Plan& plan, int64_t dp_index);

// The ranks with a program when `graph` was lowered for one data-parallel replica of
// graph.plan (dp > 1, every other program empty); empty when it was not: every rank has a
// program, or those that have one are not one replica (a hand-built graph with idle ranks).
std::vector<char> lowered_replica(const PlanGraph& graph);

}  // namespace monarch
