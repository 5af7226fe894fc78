// The results store: every run of every backend, kept in one SQLite file.
//
// Layout (schema version kStoreSchemaVersion, see store.cc for the DDL and the migrations):
//   scenarios(hash, json)        one row per distinct normalized scenario (SHA-256 of its JSON)
//   plans(hash, json)            one row per distinct plan (SHA-256 of plan_to_json)
//   runs                         backend, scenario, plan, start/end time (UTC), software
//                                version, host, status ok|failed, error message
//   metrics(run, name, value)    headline figures, memory summary, time breakdown; with a
//                                reliability block also reliability.goodput,
//                                reliability.time_to_train_s and the badput (reliability.*)
//   memory(run, stage, rank, category, gib)    per stage and category (rank NULL = busiest
//                                rank of the stage, as in the result file)
//   communication(run, kind, group, bytes, count, time_s)
//   timeline(run, rank, stream, name, category, start_s, end_s)
//   losses(run, step, loss)      measured runs
//   run_sources(run, path, sha256, bytes)   files a measured run was imported from; runs.source_key
//                                (unique) recognises a second import of the same files
//   warnings(run, position, scope, text)   a valid but unwise plan's warnings (scope plan) and
//                                the reliability estimate's (scope reliability), in result order
//   sweep_points                 one row per computed point of a sweep (sweep id, point key,
//                                overrides, status, error, best run); runs.sweep_point_id
// Foreign keys are on, every statement is prepared with bound parameters, each run is written
// in one transaction (BEGIN IMMEDIATE), the journal is WAL and writers wait on a busy timeout.
//
// Opening an older store migrates it in one transaction. A newer store, a file that is not a
// SQLite database, another program's SQLite database, or a corrupted one is refused with a
// clear problem and left byte-for-byte unchanged.
//
// Typical use by the CLI:
//   Expected<Store> store = db_option.empty() ? Store::open_default() : Store::open(db_option);
//   if (!store) { print problems; return 2; }
//   Expected<int64_t> id = store->record_run(record);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/result.h"

namespace monarch {

namespace sqlite {
class Database;
}

// Schema version written to PRAGMA user_version; bump it and add a migration for any change.
constexpr int kStoreSchemaVersion = 5;
// PRAGMA application_id of a monarch-sim store: "MNRC" in ASCII.
constexpr int32_t kStoreApplicationId = 0x4d4e5243;

// "results/monarch.db": relative, so it lives under the working directory.
std::string default_store_path();

// The version this build writes into runs ("0.1.0"), from the CMake project version.
std::string software_version();
// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

enum class RunStatus { kOk, kFailed };
const char* to_string(RunStatus);

using TimePoint = std::chrono::system_clock::time_point;

// A file a measured run was imported from.
struct RunSource {
  std::string path;
  std::string sha256;  // hex, of the file's bytes
  int64_t bytes = 0;
};

// Everything recorded about one run of one backend on one plan.
struct RunRecord {
  std::string scenario_name;
  std::string scenario_json;  // the scenario as read, defaults filled in (re-normalized on write)
  int64_t parameters = 0;     // the model's total parameter count; 0 = unknown
  BackendResult result;
  TimePoint started_at{};  // stored at millisecond precision, UTC
  TimePoint ended_at{};
  RunStatus status = RunStatus::kOk;
  std::string host;              // empty: host_name()
  std::string software_version;  // empty: software_version()
  std::string error_message;     // why a failed run failed; empty for ok runs
  std::vector<RunSource> sources;  // imported runs: the files read; empty otherwise
};

// A run read back from the store.
struct StoredRun {
  int64_t id = 0;
  std::string plan_hash;      // content_hash(plan_to_json(record.result.plan))
  std::string scenario_hash;  // content_hash of the normalized scenario JSON
  RunRecord record;
};

// How a point of a sweep ended: its runs are recorded (ok), its overrides make the scenario
// invalid, no plan fits, or its computation failed (the error says why).
enum class PointStatus { kOk, kInvalid, kNoFit, kFailed };
const char* to_string(PointStatus);
std::optional<PointStatus> parse_point_status(const std::string& text);

// One computed point of a sweep (monarch-sim sweep).
struct SweepPoint {
  std::string sweep_id;        // the sweep's name
  std::string point_key;       // hex SHA-256 identifying the point's inputs (unique per sweep)
  int64_t position = 0;        // index in the sweep's expansion
  std::string overrides_json;  // JSON object: scenario path -> value
  PointStatus status = PointStatus::kOk;
  std::string error_message;   // why a point is not ok
  int64_t best_run = -1;       // record_sweep_point: index into its runs of the headline run; -1 none
  TimePoint recorded_at{};
};

// A sweep point read back from the store.
struct StoredSweepPoint {
  int64_t id = 0;
  SweepPoint point;
  std::optional<int64_t> best_run_id;  // the headline run (see SweepPoint::best_run)
};

struct RunFilter {
  std::optional<std::string> scenario_name;  // exact match
  std::optional<std::string> backend;        // exact match
};

struct StoreOptions {
  bool create = true;              // create the file when missing (never its directory)
  int busy_timeout_ms = 10000;     // how long a writer waits for another writer
  int64_t max_page_count = 0;      // > 0: size limit in pages (PRAGMA max_page_count), e.g. to
                                   // simulate a full disk in tests; 0: no limit
  // Testing only: called inside record_run's transaction after the run row and its details are
  // written and before COMMIT (to kill a process mid-run).
  std::function<void()> before_commit_for_testing;
};

class Store {
 public:
  static Expected<Store> open(const std::string& path, bool create = true);
  static Expected<Store> open(const std::string& path, const StoreOptions& options);
  // Opens default_store_path(), creating its "results" directory under the working
  // directory on first use.
  static Expected<Store> open_default(StoreOptions options = {});

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  // Writes one run in one transaction; returns its id. Nothing is written on failure, also
  // when a run imported from the same sources exists (the unique source key refuses it).
  Expected<int64_t> record_run(const RunRecord& run);

  // Writes one sweep point and its runs in one transaction; returns the point's id. A point with
  // the same sweep id and key already recorded is refused and nothing is written.
  Expected<int64_t> record_sweep_point(const SweepPoint& point, const std::vector<RunRecord>& runs);

  // The recorded points of a sweep, by position; empty when there are none.
  Expected<std::vector<StoredSweepPoint>> list_sweep_points(const std::string& sweep_id) const;

  // The run imported from exactly these sources (same hashes, in any order), if any.
  Expected<std::optional<int64_t>> find_imported(const std::vector<RunSource>& sources) const;

  // Runs matching the filter, newest first (start time, then id). Memory stages,
  // communication, losses and timeline are left empty; load_run gives everything.
  Expected<std::vector<StoredRun>> list_runs(const RunFilter& filter = {}) const;

  // One run with everything recorded about it. A missing id is a problem naming it.
  Expected<StoredRun> load_run(int64_t id, bool with_timeline = true) const;

  const std::string& path() const { return path_; }
  int schema_version() const;

 private:
  Store() = default;
  std::string path_;
  std::unique_ptr<sqlite::Database> db_;
  StoreOptions options_;
};

// The SQL that takes a store from schema version `from_version` to from_version + 1 (for
// migration tests and for readers of the schema); empty when there is no such step.
std::string store_migration_sql(int from_version);

// SHA-256 (hex) over the sorted hashes of the sources: equal for the same set of files.
std::string source_key(const std::vector<RunSource>& sources);

// ISO 8601 UTC with milliseconds: "2026-11-29T17:46:27.123Z".
std::string format_utc(TimePoint t);
// Inverse of format_utc; nullopt for text it did not write.
std::optional<TimePoint> parse_utc(const std::string& text);

}  // namespace monarch
