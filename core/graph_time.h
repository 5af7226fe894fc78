// Time of a task graph (core/plan_ir.h) on an uncontended machine: a list schedule that
// honours each rank's streams (tasks of one stream run one after another, in list order),
// the explicit cross-stream dependencies, point-to-point pairs (a receive completes when its
// matching send has, sends are eager), and collectives (all members start together, when
// the last one is ready, and take the longest member's duration).
//
// Durations are the tasks' `duration_s` as lowered; nothing is shared between streams or
// ranks, so this is the critical path of the graph. The SimGrid backend adds contention.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/problem.h"

namespace monarch {

struct GraphTiming {
  double makespan_s = 0;             // last task's end
  std::vector<double> rank_end_s;    // by rank
  std::vector<int64_t> rank_offset;  // first task of rank r in start_s / end_s
  std::vector<double> start_s, end_s;

  double task_start_s(int32_t rank, int32_t task) const { return start_s[static_cast<size_t>(rank_offset[static_cast<size_t>(rank)] + task)]; }
  double task_end_s(int32_t rank, int32_t task) const { return end_s[static_cast<size_t>(rank_offset[static_cast<size_t>(rank)] + task)]; }
};

// Problems (where = "/ranks/R/tasks/I") when the graph cannot run to completion: a receive
// with no send, a collective some members never reach, a dependency cycle across ranks.
Expected<GraphTiming> evaluate_graph_time(const PlanGraph& graph);

}  // namespace monarch
