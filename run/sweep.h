// Sweeps: one base scenario and many points, each a set of scenario overrides, each run end to
// end through the run library (search, SimGrid re-rank when selected, the FSDP / ZeRO-3
// baseline). The sweep file format is in docs/sweeps.md.
//
//   Expected<SweepSpec> spec = read_sweep_file("study.sweep.json");
//   PointOutcome out = run_sweep_point(*spec, 3, control);      // in a worker process
//   std::string wire = point_outcome_to_json(out);              // back to the coordinator
//   store.record_sweep_point(sweep_point(*spec, 3, out), out.runs);
//
// The front end (app/cmd_sweep.cc) decides where points run (worker processes, MPI ranks); this
// file knows what a point is and how its outcome is recorded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"
#include "results/store.h"
#include "run/backend.h"

namespace monarch::run {

// Upper bound of a sweep's points: a grid past it is a typo (one more axis than meant), and the
// coordinator keeps every point's overrides in memory.
inline constexpr int64_t kMaxSweepPoints = 100000;

// One override of a point: a scenario path as `--set` takes it and its value as JSON text.
struct SweepOverride {
  std::string path;
  std::string value_json;
};

struct SweepPointSpec {
  std::vector<SweepOverride> overrides;
  std::string key;  // hex SHA-256 over the base scenario's content, the overrides and the backends
};

struct SweepSpec {
  std::string path;       // the sweep file
  std::string name;       // the sweep id in the store: "name", else the file's stem
  std::string base_path;  // the base scenario, resolved against the sweep file's directory
  std::vector<Backend> backends;  // empty: the base scenario's, else the default backends
  std::vector<SweepPointSpec> points;
};

// Reads and checks a sweep file and expands its points. Problems name the file and the JSON
// path (or the line and column of a syntax error); a base scenario that cannot be read or
// parsed is a problem of the sweep, while overrides that make it invalid are a point's outcome.
Expected<SweepSpec> read_sweep_file(const std::string& path);

// The point's overrides as a canonical JSON object (keys sorted): path -> value.
std::string overrides_json(const SweepPointSpec& point);

// What one point came to.
struct PointOutcome {
  std::string key;              // the point's key, as the process that computed it read the inputs
  PointStatus status = PointStatus::kOk;
  std::string error;            // not ok: what is wrong, with the JSON path
  std::vector<RunRecord> runs;  // ok: every (plan, backend) entry of the run
  int64_t best_run = -1;        // index into runs of the chosen plan on its most detailed backend
  bool cancelled = false;       // the control stopped it: nothing to record
};

// Runs point `index` of the sweep: the base scenario with the point's overrides through
// run_scenario. SimGrid timelines are not kept (a sweep wants the headline figures). Defined
// in the run library (run/sweep_run.cc, monarch_run_lib); the rest of this header in
// monarch_sweep, which has no backends (monarch-sweep-mpi links it without SimGrid).
PointOutcome run_sweep_point(const SweepSpec& spec, size_t index, const RunControl& control);

// A point's outcome as JSON text (worker -> coordinator), and back. Problems: text that is not
// an outcome (named at `where`).
std::string point_outcome_to_json(const PointOutcome& outcome);
Expected<PointOutcome> point_outcome_from_json(const std::string& text, const std::string& where);

// The store's row for point `index` with this outcome.
SweepPoint sweep_point(const SweepSpec& spec, size_t index, const PointOutcome& outcome);

}  // namespace monarch::run
