// run_sweep_point (run/sweep.h): one point of a sweep through the run library.
#include <chrono>

#include <nlohmann/json.hpp>

#include "core/scenario_io.h"
#include "run/run_library.h"
#include "run/sweep.h"

namespace monarch::run {
namespace {

std::string joined(const Problems& problems) {
  std::string out;
  for (const Problem& p : problems) out += (out.empty() ? "" : "; ") + p.to_string();
  return out;
}

// The entry whose figures stand for the point: the chosen plan (rank 1) on SimGrid when it was
// simulated, else on the analytical model.
int64_t headline_entry(const std::vector<RunEntry>& entries) {
  int64_t best = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].rank != 1) continue;
    if (entries[i].result.backend == "simgrid") return static_cast<int64_t>(i);
    if (best < 0 && entries[i].result.backend == "analytical") best = static_cast<int64_t>(i);
  }
  return best;
}

}  // namespace

PointOutcome run_sweep_point(const SweepSpec& spec, size_t index, const RunControl& control) {
  PointOutcome out;
  const auto started_at = std::chrono::system_clock::now();
  const SweepPointSpec& point = spec.points.at(index);
  out.key = point.key;
  // simgrid.* paths are the backend's options (as `--set simgrid.KEY=VALUE`), the rest the
  // scenario's; a backend option written as a JSON string is given without its quotes.
  std::vector<std::string> all_sets;
  for (const SweepOverride& ov : point.overrides) all_sets.push_back(ov.path + "=" + ov.value_json);
  std::vector<std::string> sets;
  RunRequest request;
  split_simgrid_overrides(all_sets, sets, request.settings.simgrid);
  for (auto& [key, value] : request.settings.simgrid) {
    const nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
    if (v.is_string()) value = v.get<std::string>();
  }
  auto scenario = read_scenario_file(spec.base_path, sets);
  if (!scenario) {
    out.status = PointStatus::kInvalid;
    out.error = joined(scenario.problems());
    return out;
  }
  request.backends = !spec.backends.empty() ? spec.backends : scenario->backends;
  if (request.backends.empty()) request.backends = default_backends(build_features().simgrid);
  request.settings.record_timeline = false;
  if (Problems bad = check_request(request, spec.path + ": /backends"); !bad.empty()) {
    out.status = PointStatus::kInvalid;
    out.error = joined(bad);
    return out;
  }
  RunEvents events;
  events.control = control;
  RunOutcome run = run_scenario(*scenario, request, events);
  switch (run.end) {
    case RunEnd::kDone: break;
    case RunEnd::kCancelled: out.cancelled = true; return out;
    case RunEnd::kInvalid: out.status = PointStatus::kInvalid; out.error = joined(run.problems); return out;
    case RunEnd::kNoPlanFits: out.status = PointStatus::kNoFit; out.error = joined(run.problems); return out;
    case RunEnd::kFailed: out.status = PointStatus::kFailed; out.error = joined(run.problems); return out;
  }
  out.runs = run_records(run.report, started_at);
  out.best_run = headline_entry(run.report.entries);
  return out;
}

}  // namespace monarch::run
