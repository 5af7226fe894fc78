// A measured run from the evidence of a real training job: per-rank trace statistics
// (measured/trace_analysis.h) and/or a training log (measured/training_log.h), optionally tied
// to the plan it ran, as a BackendResult of backend "measured" that the store keeps and
// `runs compare` sets beside a simulation of the same plan.
//
// Figures (each averaged over the imported iterations):
//   iteration_time_s   per iteration the slowest rank's time, then the mean; from the log when
//                      there is no trace
//   time breakdown     compute and exposed communication: the mean over ranks; tp/cp/pp/dp/ep
//                      comm: the summed kernel time of the collectives mapped to that group
//   communication      per (kind, group), per rank per iteration: wire bytes
//                      (collective_wire_bytes of the recorded buffer size and group size, as the
//                      models count them), operations, kernel time; mean over ranks
//   memory.peak_gib    the largest allocated memory of any rank ([memory] events), else the
//                      log's memory figure
//   losses             from the log
// Groups are mapped to plan groups (tp, cp, dp, pp, ep, ...) by comparing the recorded process
// group ranks with the plan's placement; without a plan, or when no plan group matches, the
// trace's own group label is kept.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"
#include "measured/trace_analysis.h"
#include "measured/training_log.h"

namespace monarch::measured {

inline constexpr const char* kMeasuredBackend = "measured";

struct MeasuredEvidence {
  std::vector<RankStats> ranks;       // one per rank's trace
  std::optional<TrainingLog> log;
};

// Checks the evidence against the plan (world size, ranks present once) and builds the result.
// `scenario` (may be null) gives tokens per iteration and the model FLOPs for throughput and MFU.
Expected<BackendResult> measured_result(const MeasuredEvidence& evidence, const std::optional<Plan>& plan,
                                        const Scenario* scenario);

// The plan group ("tp", "dp", ...) whose members are exactly `ranks`, for a process group that
// contains `rank`; "" when none matches.
std::string plan_group_of(const std::vector<int32_t>& ranks, const Plan& plan);

// "[0,1,2,3]" -> {0, 1, 2, 3}; empty when the text is not such a list.
std::vector<int32_t> parse_rank_list(const std::string& text);

}  // namespace monarch::measured
