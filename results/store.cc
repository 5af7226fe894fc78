#include "results/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/collectives.h"
#include "core/result_io.h"
#include "results/sqlite.h"

#ifndef MONARCH_VERSION
#define MONARCH_VERSION "unknown"
#endif

namespace monarch {
namespace {

using nlohmann::json;
using sqlite::Database;
using sqlite::Statement;
using sqlite::Transaction;

// Migration i takes a store from schema version i to i + 1. Never edit a released step; add
// a new one and bump kStoreSchemaVersion.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> steps = {
      // 0 -> 1: the first layout.
      "PRAGMA application_id = " + std::to_string(kStoreApplicationId) + ";\n" + R"sql(
CREATE TABLE scenarios (
  id    INTEGER PRIMARY KEY,
  hash  TEXT NOT NULL UNIQUE,   -- SHA-256 of json
  json  TEXT NOT NULL           -- normalized scenario: compact, keys sorted
);
CREATE TABLE plans (
  id    INTEGER PRIMARY KEY,
  hash  TEXT NOT NULL UNIQUE,   -- SHA-256 of json
  json  TEXT NOT NULL           -- normalized plan_to_json
);
CREATE TABLE runs (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,  -- ids are never reused
  scenario_id       INTEGER NOT NULL REFERENCES scenarios(id),
  plan_id           INTEGER NOT NULL REFERENCES plans(id),
  scenario_name     TEXT NOT NULL,
  backend           TEXT NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
  started_at        TEXT NOT NULL,  -- ISO 8601 UTC, milliseconds: sorts as text
  ended_at          TEXT NOT NULL,
  software_version  TEXT NOT NULL,
  host              TEXT NOT NULL,
  measured          INTEGER NOT NULL CHECK (measured IN (0, 1)),
  parameters        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_start ON runs(started_at);
CREATE TABLE metrics (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name    TEXT NOT NULL,  -- "iteration_time_s", "memory.peak_gib", "time_breakdown_s.bubble", ...
  value   REAL,           -- NULL: not a finite number
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE TABLE memory (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,  -- order of memory.stages in the result
  stage     INTEGER NOT NULL,
  rank      INTEGER,           -- NULL: the busiest rank of the stage (result file semantics)
  category  TEXT NOT NULL,     -- weights, gradients, optimizer, activations, buffers, total
  gib       REAL,
  PRIMARY KEY (run_id, position, category)
) WITHOUT ROWID;
CREATE TABLE communication (
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position    INTEGER NOT NULL,
  kind        TEXT NOT NULL,     -- all-reduce, all-gather, reduce-scatter, all-to-all, send-recv
  comm_group  TEXT NOT NULL,     -- tp, cp, ep, dp, pp, ...
  bytes       INTEGER NOT NULL,  -- sent per rank per iteration
  count       INTEGER NOT NULL,  -- operations per iteration
  time_s      REAL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE TABLE timeline (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,
  rank      INTEGER NOT NULL,
  stream    TEXT NOT NULL,
  name      TEXT NOT NULL,
  category  TEXT NOT NULL,
  start_s   REAL,
  end_s     REAL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE INDEX timeline_by_rank_stream ON timeline(run_id, rank, stream);
)sql",
      // 1 -> 2: error messages of failed runs, training losses of measured runs, and an index
      // for `runs list --scenario/--backend`.
      R"sql(
ALTER TABLE runs ADD COLUMN error_message TEXT NOT NULL DEFAULT '';
CREATE TABLE losses (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step    INTEGER NOT NULL,  -- 0-based optimizer step
  loss    REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE INDEX runs_by_scenario_backend ON runs(scenario_name, backend);
)sql",
      // 2 -> 3: the files a measured run was imported from (`runs import`), and the key that
      // recognises a second import of the same files.
      R"sql(
ALTER TABLE runs ADD COLUMN source_key TEXT;  -- SHA-256 over the sources' hashes; NULL unless imported
CREATE UNIQUE INDEX runs_by_source_key ON runs(source_key) WHERE source_key IS NOT NULL;
CREATE TABLE run_sources (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,
  path      TEXT NOT NULL,     -- as given on the command line
  sha256    TEXT NOT NULL,     -- of the file's bytes (compressed files as stored)
  bytes     INTEGER NOT NULL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
)sql",
      // 3 -> 4: sweeps (`monarch-sim sweep`): one row per computed point of a sweep, with its
      // overrides and outcome; the runs of a point name it.
      R"sql(
CREATE TABLE sweep_points (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id       TEXT NOT NULL,     -- the sweep file's "name"
  point_key      TEXT NOT NULL,     -- SHA-256 over the base scenario's content, the overrides and the backends
  position       INTEGER NOT NULL,  -- the point's index in the sweep's expansion
  overrides      TEXT NOT NULL,     -- JSON object: scenario path -> value
  status         TEXT NOT NULL CHECK (status IN ('ok', 'invalid', 'no_fit', 'failed')),
  error_message  TEXT NOT NULL DEFAULT '',
  best_run_id    INTEGER REFERENCES runs(id),  -- the chosen plan's run on the most detailed backend
  recorded_at    TEXT NOT NULL,
  UNIQUE (sweep_id, point_key)
);
ALTER TABLE runs ADD COLUMN sweep_point_id INTEGER REFERENCES sweep_points(id);
CREATE INDEX runs_by_sweep_point ON runs(sweep_point_id) WHERE sweep_point_id IS NOT NULL;
)sql",
      // 4 -> 5: the warnings of a run (a valid but unwise plan: TP across nodes, a tiny
      // micro-batch; the reliability estimate's caveats), in the order the result file lists them.
      R"sql(
CREATE TABLE warnings (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,
  scope     TEXT NOT NULL CHECK (scope IN ('plan', 'reliability')),  -- results[].warnings or results[].reliability.warnings
  text      TEXT NOT NULL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
)sql",
  };
  static_assert(kStoreSchemaVersion == 5, "add a migration step for the new schema version");
  return steps;
}

// Headline figures stored in `metrics`, by name.
struct ResultMetric {
  const char* name;
  double BackendResult::*field;
};
constexpr ResultMetric kResultMetrics[] = {
    {"iteration_time_s", &BackendResult::iteration_time_s},
    {"tokens_per_s", &BackendResult::tokens_per_s},
    {"model_tflops_per_gpu", &BackendResult::model_tflops_per_gpu},
    {"hardware_tflops_per_gpu", &BackendResult::hardware_tflops_per_gpu},
    {"mfu", &BackendResult::mfu},
    {"hfu", &BackendResult::hfu},
    {"model_flops_per_iteration", &BackendResult::model_flops_per_iteration},
    {"hardware_flops_per_iteration", &BackendResult::hardware_flops_per_iteration},
};
struct TimeMetric {
  const char* name;
  double TimeBreakdown::*field;
};
constexpr TimeMetric kTimeMetrics[] = {
    {"time_breakdown_s.compute", &TimeBreakdown::compute},
    {"time_breakdown_s.tp_comm", &TimeBreakdown::tp_comm},
    {"time_breakdown_s.cp_comm", &TimeBreakdown::cp_comm},
    {"time_breakdown_s.pp_comm", &TimeBreakdown::pp_comm},
    {"time_breakdown_s.dp_comm", &TimeBreakdown::dp_comm},
    {"time_breakdown_s.ep_comm", &TimeBreakdown::ep_comm},
    {"time_breakdown_s.bubble", &TimeBreakdown::bubble},
    {"time_breakdown_s.optimizer", &TimeBreakdown::optimizer},
    {"time_breakdown_s.exposed_comm", &TimeBreakdown::exposed_comm},
    {"time_breakdown_s.host", &TimeBreakdown::host},
};
// Reliability figures (the scenario's reliability block), in `metrics` under "reliability.*":
// a run without them has none of these rows, so stores written before them read the same.
struct ReliabilityMetric {
  const char* name;
  double ReliabilityReport::*field;
};
constexpr ReliabilityMetric kReliabilityMetrics[] = {
    {"reliability.goodput", &ReliabilityReport::goodput},
    {"reliability.time_to_train_s", &ReliabilityReport::time_to_train_s},
    {"reliability.horizon_s", &ReliabilityReport::horizon_s},
    {"reliability.useful_s", &ReliabilityReport::useful_s},
    {"reliability.expected_interruptions", &ReliabilityReport::expected_interruptions},
    {"reliability.interval_s", &ReliabilityReport::interval_s},
    {"reliability.spare_wait_s", &ReliabilityReport::spare_wait_s},
};
struct BadputMetric {
  const char* name;
  double Badput::*field;
};
constexpr BadputMetric kBadputMetrics[] = {
    {"reliability.badput_s.checkpoint_save", &Badput::checkpoint_save_s},
    {"reliability.badput_s.checkpoint_restore", &Badput::checkpoint_restore_s},
    {"reliability.badput_s.wasted_progress", &Badput::wasted_progress_s},
    {"reliability.badput_s.infrastructure_recovery", &Badput::infrastructure_recovery_s},
    {"reliability.badput_s.startup", &Badput::startup_s},
};
struct MemoryCategory {
  const char* name;
  double StageMemory::*field;
};
constexpr MemoryCategory kMemoryCategories[] = {
    {"weights", &StageMemory::weights_gib},         {"gradients", &StageMemory::gradients_gib},
    {"optimizer", &StageMemory::optimizer_gib},     {"activations", &StageMemory::activations_gib},
    {"buffers", &StageMemory::buffers_gib},         {"total", &StageMemory::total_gib},
};

// What a SQLite failure means for the user, in words.
std::string explain(const sqlite::Error& e, int busy_timeout_ms) {
  std::string what;
  switch (e.primary_code()) {
    case SQLITE_FULL: what = "the store is full (disk full or its size limit reached)"; break;
    case SQLITE_READONLY: what = "the store cannot be written (read-only file or directory)"; break;
    case SQLITE_CANTOPEN: what = "the store file cannot be opened (missing or unwritable directory?)"; break;
    case SQLITE_NOTADB: what = "not a SQLite database: a foreign file; choose another --db"; break;
    case SQLITE_CORRUPT: what = "the store is corrupted"; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      what = "the store stayed locked by another process for more than " +
             std::to_string(busy_timeout_ms / 1000.0).substr(0, 4) + " s";
      break;
    case SQLITE_IOERR: what = "input/output error"; break;
    case SQLITE_PERM:
    case SQLITE_AUTH: what = "permission denied"; break;
    default: what = "SQLite error";
  }
  return what + " (" + e.what() + ")";
}

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// Checks the place of the store before SQLite touches it, for clearer messages than SQLite's
// "unable to open database file".
Problems check_location(const std::string& path, bool create) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {{path, "is a directory; expected a results store file (--db FILE)"}};
    return {};
  }
  if (errno != ENOENT) return {{path, std::string("cannot be read: ") + std::strerror(errno)}};
  if (!create)
    return {{path, "no results store here (nothing recorded yet, or a wrong --db path)"}};
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0)
    return {{path, "directory " + dir + " does not exist; create it or choose another --db"}};
  if (!S_ISDIR(st.st_mode)) return {{path, dir + " is not a directory; choose another --db"}};
  if (::access(dir.c_str(), W_OK) != 0)
    return {{path, "directory " + dir + " is not writable (read-only); choose another --db"}};
  return {};
}

// Tables checked on open (all but timeline), constant names only.
constexpr const char* kCheckedTables[] = {"scenarios", "plans",  "runs",    "metrics",
                                          "memory",    "communication", "losses", "warnings"};

// Refuses what must not be touched; reads only. Returns the schema version found.
int64_t inspect(const Database& db, const std::string& path, Problems& problems) {
  int64_t version = db.query_int("PRAGMA user_version");  // the first read: NOTADB shows here
  int64_t app_id = db.query_int("PRAGMA application_id");
  if (app_id != kStoreApplicationId) {
    int64_t objects = db.query_int("SELECT count(*) FROM sqlite_schema");
    if (app_id != 0 || version != 0 || objects != 0) {
      problems.push_back({path, "is a SQLite database of another program (application_id " +
                                    std::to_string(app_id) + ", " + std::to_string(objects) +
                                    " schema objects), not a monarch-sim results store; it was left "
                                    "unchanged; choose another --db"});
      return version;
    }
  }
  if (version > kStoreSchemaVersion) {
    problems.push_back({path, "was written by a newer monarch-sim (store schema version " +
                                  std::to_string(version) + "; this build reads up to " +
                                  std::to_string(kStoreSchemaVersion) +
                                  "); it was left unchanged; use a newer monarch-sim or another --db"});
    return version;
  }
  // Integrity of every table but the timeline (the bulk of a store: checking it would make each
  // open read the whole file); a damaged timeline page still shows as SQLITE_CORRUPT when read.
  for (const char* table : kCheckedTables) {
    Statement exists = db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1");
    exists.bind(1, std::string(table));
    if (!exists.step() || exists.int64(0) == 0) continue;
    std::string check = db.query_text(std::string("PRAGMA quick_check(") + table + ")");
    if (check != "ok") {
      problems.push_back({path, "is corrupted (SQLite quick_check of table " + std::string(table) + ": " + check +
                                    "); it was left unchanged"});
      break;
    }
  }
  return version;
}

void migrate(const Database& db) {
  Transaction tx(db);
  int64_t version = db.query_int("PRAGMA user_version");  // again, under the write lock
  for (int64_t v = version; v < kStoreSchemaVersion; ++v) db.exec(migrations()[static_cast<size_t>(v)]);
  if (version < kStoreSchemaVersion) db.exec("PRAGMA user_version = " + std::to_string(kStoreSchemaVersion));
  tx.commit();
}

// PRAGMA journal_mode=WAL needs a moment of exclusive access; another process opening the
// store at the same time makes it return SQLITE_BUSY without calling the busy handler.
void enable_wal(const Database& db, int busy_timeout_ms) {
  if (db.query_text("PRAGMA journal_mode") == "wal") return;
  constexpr int kRetrySleepMs = 10;
  for (int waited_ms = 0;; waited_ms += kRetrySleepMs) {
    try {
      db.query_text("PRAGMA journal_mode = WAL");
      return;
    } catch (const sqlite::Error& e) {
      if ((e.primary_code() != SQLITE_BUSY && e.primary_code() != SQLITE_LOCKED) || waited_ms >= busy_timeout_ms)
        throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRetrySleepMs));
  }
}

int64_t intern(const Database& db, const char* table, const std::string& hash, const std::string& text) {
  Statement insert = db.prepare(std::string("INSERT INTO ") + table + "(hash, json) VALUES (?1, ?2) ON CONFLICT(hash) DO NOTHING");
  insert.bind(1, hash).bind(2, text).run();
  Statement select = db.prepare(std::string("SELECT id FROM ") + table + " WHERE hash = ?1");
  select.bind(1, hash);
  select.step();
  return select.int64(0);
}

const char* kRunColumns =
    "SELECT r.id, r.scenario_name, r.backend, r.status, r.started_at, r.ended_at, r.software_version, "
    "r.host, r.measured, r.parameters, r.error_message, p.hash, p.json, s.hash ";

// Fills a StoredRun from a row of kRunColumns (+ s.json as column 14 when present).
Problems read_run_row(const Statement& row, const std::string& path, StoredRun& out, bool with_scenario) {
  out.id = row.int64(0);
  RunRecord& r = out.record;
  r.scenario_name = row.text(1);
  r.result.backend = row.text(2);
  r.status = row.text(3) == "failed" ? RunStatus::kFailed : RunStatus::kOk;
  Problems problems;
  std::string where = path + " (run " + std::to_string(out.id) + ")";
  auto started = parse_utc(row.text(4));
  auto ended = parse_utc(row.text(5));
  if (!started || !ended) problems.push_back({where, "unreadable start or end time"});
  r.started_at = started.value_or(TimePoint{});
  r.ended_at = ended.value_or(TimePoint{});
  r.software_version = row.text(6);
  r.host = row.text(7);
  r.result.measured = row.int64(8) != 0;
  r.parameters = row.int64(9);
  r.error_message = row.text(10);
  out.plan_hash = row.text(11);
  json plan = json::parse(row.text(12), nullptr, false);
  Expected<Plan> p = plan_from_json(plan, "/plan");
  if (p) r.result.plan = *p;
  else problems.push_back({where, "unreadable plan: " + p.problems()[0].to_string()});
  out.scenario_hash = row.text(13);
  if (with_scenario) r.scenario_json = row.text(14);
  return problems;
}

void read_metrics(const Database& db, int64_t id, BackendResult& b) {
  Statement s = db.prepare("SELECT name, value FROM metrics WHERE run_id = ?1");
  s.bind(1, id);
  while (s.step()) {
    std::string name = s.text(0);
    double v = s.real(1);
    for (const auto& m : kResultMetrics)
      if (name == m.name) b.*m.field = v;
    for (const auto& m : kTimeMetrics)
      if (name == m.name) b.time_breakdown_s.*m.field = v;
    if (name == "memory.fits") b.memory.fits = v != 0;
    if (name == "memory.peak_gib") b.memory.peak_gib = v;
    if (name == "memory.capacity_gib") b.memory.capacity_gib = v;
    if (name.rfind("reliability.", 0) == 0) {
      if (!b.reliability) b.reliability.emplace();
      for (const auto& m : kReliabilityMetrics)
        if (name == m.name) (*b.reliability).*m.field = v;
      for (const auto& m : kBadputMetrics)
        if (name == m.name) b.reliability->badput.*m.field = v;
    }
  }
}

// The run's warnings: the plan's into b.warnings, the reliability estimate's into
// b.reliability->warnings (read_metrics has created the block when the run has one).
void read_warnings(const Database& db, int64_t id, BackendResult& b) {
  Statement s = db.prepare("SELECT scope, text FROM warnings WHERE run_id = ?1 ORDER BY position");
  s.bind(1, id);
  while (s.step()) {
    if (s.text(0) == "plan") b.warnings.push_back(s.text(1));
    else if (b.reliability) b.reliability->warnings.push_back(s.text(1));
  }
}

}  // namespace

std::string store_migration_sql(int from_version) {
  if (from_version < 0 || from_version >= static_cast<int>(migrations().size())) return {};
  return migrations()[static_cast<size_t>(from_version)];
}

std::string default_store_path() { return "results/monarch.db"; }

std::string source_key(const std::vector<RunSource>& sources) {
  std::vector<std::string> hashes;
  for (const RunSource& s : sources) hashes.push_back(s.sha256);
  std::sort(hashes.begin(), hashes.end());
  std::string all;
  for (const std::string& h : hashes) all += h + "\n";
  return sha256_hex(all);
}

Expected<std::optional<int64_t>> Store::find_imported(const std::vector<RunSource>& sources) const {
  try {
    Statement s = db_->prepare("SELECT id FROM runs WHERE source_key = ?1");
    s.bind(1, source_key(sources));
    if (s.step()) return std::optional<int64_t>(s.int64(0));
    return std::optional<int64_t>();
  } catch (const sqlite::Error& e) {
    return Expected<std::optional<int64_t>>::fail(path_, "cannot read runs: " + explain(e, options_.busy_timeout_ms));
  }
}

std::string software_version() { return MONARCH_VERSION; }

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

const char* to_string(RunStatus s) { return s == RunStatus::kOk ? "ok" : "failed"; }

std::string format_utc(TimePoint t) {
  using namespace std::chrono;
  int64_t ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int millis = static_cast<int>(ms - secs * 1000);
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::optional<TimePoint> parse_utc(const std::string& text) {
  std::tm tm{};
  int millis = 0;
  char z = 0;
  if (text.size() != 24 ||
      std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &millis, &z) != 8 ||
      z != 'Z')
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  return TimePoint(std::chrono::seconds(secs)) + std::chrono::milliseconds(millis);
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Expected<Store> Store::open(const std::string& path, bool create) {
  StoreOptions options;
  options.create = create;
  return open(path, options);
}

Expected<Store> Store::open_default(StoreOptions options) {
  std::string path = default_store_path();
  std::string dir = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::filesystem::create_directory(dir, ec);
    if (ec) return Expected<Store>::fail(path, "cannot create directory " + dir + ": " + ec.message());
  }
  return open(path, options);
}

Expected<Store> Store::open(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return Expected<Store>::fail("--db", "empty path; expected a results store file");
  Problems problems = check_location(path, options.create);
  if (!problems.empty()) return problems;
  const bool existed = file_exists(path);
  try {
    Database db(path, SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0));
    sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms);
    // One read transaction: the header fields and the schema from the same snapshot, or another
    // process creating the store between two of the reads looks like a foreign database.
    db.exec("BEGIN DEFERRED");
    int64_t version = inspect(db, path, problems);
    db.exec("COMMIT");
    if (!problems.empty()) return problems;
    db.exec("PRAGMA foreign_keys = ON");
    if (options.max_page_count > 0) db.exec("PRAGMA max_page_count = " + std::to_string(options.max_page_count));
    if (db.read_only()) {
      if (version < kStoreSchemaVersion)
        return Expected<Store>::fail(path, "is read-only and needs an upgrade to store schema version " +
                                               std::to_string(kStoreSchemaVersion));
    } else {
      enable_wal(db, options.busy_timeout_ms);
      if (version < kStoreSchemaVersion) migrate(db);
    }
    Store store;
    store.path_ = path;
    store.db_ = std::make_unique<Database>(std::move(db));
    store.options_ = options;
    return store;
  } catch (const sqlite::Error& e) {
    if (!existed) {  // leave no empty file behind
      std::remove(path.c_str());
      std::remove((path + "-wal").c_str());
      std::remove((path + "-shm").c_str());
    }
    return Expected<Store>::fail(path, "cannot open the results store: " + explain(e, options.busy_timeout_ms) +
                                           (existed ? "; it was left unchanged" : ""));
  }
}

int Store::schema_version() const { return static_cast<int>(db_->query_int("PRAGMA user_version")); }

namespace {

// Inserts one run and its details inside the caller's transaction; returns its id. Throws
// sqlite::Error. sweep_point_id 0: the run belongs to no sweep.
int64_t insert_run(const Database& db, const RunRecord& run, const std::string& scenario_text, int64_t sweep_point_id) {
  const std::string plan_text = normalized_dump(plan_to_json(run.result.plan));
  const BackendResult& b = run.result;
  const int64_t scenario_id = intern(db, "scenarios", sha256_hex(scenario_text), scenario_text);
  const int64_t plan_id = intern(db, "plans", sha256_hex(plan_text), plan_text);

  Statement ins = db.prepare(
      "INSERT INTO runs (scenario_id, plan_id, scenario_name, backend, status, started_at, ended_at, "
      "software_version, host, measured, parameters, error_message, source_key, sweep_point_id) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  ins.bind(1, scenario_id).bind(2, plan_id).bind(3, run.scenario_name).bind(4, b.backend);
  ins.bind(5, std::string(to_string(run.status)));
  ins.bind(6, format_utc(run.started_at)).bind(7, format_utc(run.ended_at));
  ins.bind(8, run.software_version.empty() ? software_version() : run.software_version);
  ins.bind(9, run.host.empty() ? host_name() : run.host);
  ins.bind(10, int64_t{b.measured ? 1 : 0}).bind(11, run.parameters).bind(12, run.error_message);
  if (!run.sources.empty()) ins.bind(13, source_key(run.sources));
  if (sweep_point_id > 0) ins.bind(14, sweep_point_id);
  ins.run();
  const int64_t id = db.last_insert_rowid();

  Statement src = db.prepare(
      "INSERT INTO run_sources (run_id, position, path, sha256, bytes) VALUES (?1, ?2, ?3, ?4, ?5)");
  for (size_t i = 0; i < run.sources.size(); ++i)
    src.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, run.sources[i].path).bind(4, run.sources[i].sha256)
        .bind(5, run.sources[i].bytes).run();

  Statement metric = db.prepare("INSERT INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)");
  auto put = [&](const char* name, double v) { metric.bind(1, id).bind(2, std::string(name)).bind(3, v).run(); };
  for (const auto& m : kResultMetrics) put(m.name, b.*m.field);
  for (const auto& m : kTimeMetrics) put(m.name, b.time_breakdown_s.*m.field);
  put("memory.fits", b.memory.fits ? 1.0 : 0.0);
  put("memory.peak_gib", b.memory.peak_gib);
  put("memory.capacity_gib", b.memory.capacity_gib);
  if (b.reliability) {
    for (const auto& m : kReliabilityMetrics) put(m.name, (*b.reliability).*m.field);
    for (const auto& m : kBadputMetrics) put(m.name, b.reliability->badput.*m.field);
  }

  Statement warning = db.prepare("INSERT INTO warnings (run_id, position, scope, text) VALUES (?1, ?2, ?3, ?4)");
  int64_t warning_position = 0;
  auto put_warnings = [&](const char* scope, const std::vector<std::string>& texts) {
    for (const std::string& text : texts)
      warning.bind(1, id).bind(2, warning_position++).bind(3, std::string(scope)).bind(4, text).run();
  };
  put_warnings("plan", b.warnings);
  if (b.reliability) put_warnings("reliability", b.reliability->warnings);

  Statement mem = db.prepare(
      "INSERT INTO memory (run_id, position, stage, rank, category, gib) VALUES (?1, ?2, ?3, NULL, ?4, ?5)");
  for (size_t i = 0; i < b.memory.stages.size(); ++i)
    for (const auto& c : kMemoryCategories)
      mem.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, b.memory.stages[i].stage)
          .bind(4, std::string(c.name)).bind(5, b.memory.stages[i].*c.field).run();

  Statement comm = db.prepare(
      "INSERT INTO communication (run_id, position, kind, comm_group, bytes, count, time_s) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  for (size_t i = 0; i < b.communication.size(); ++i) {
    const CommEntry& c = b.communication[i];
    comm.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, std::string(to_string(c.kind))).bind(4, group_name(c)).bind(5, c.bytes)
        .bind(6, c.count).bind(7, c.time_s).run();
  }

  Statement loss = db.prepare("INSERT INTO losses (run_id, step, loss) VALUES (?1, ?2, ?3)");
  for (size_t i = 0; i < b.losses.size(); ++i)
    loss.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, b.losses[i]).run();

  Statement span = db.prepare(
      "INSERT INTO timeline (run_id, position, rank, stream, name, category, start_s, end_s) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (size_t i = 0; i < b.timeline.size(); ++i) {
    const TimelineSpan& s = b.timeline[i];
    span.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, int64_t{s.rank}).bind(4, s.stream)
        .bind(5, s.name).bind(6, s.category).bind(7, s.start_s).bind(8, s.end_s).run();
  }
  return id;
}

// The normalized text of a run's scenario; a problem when it is not JSON.
Expected<std::string> scenario_text_of(const RunRecord& run) {
  json scenario = json::parse(run.scenario_json, nullptr, false);
  if (scenario.is_discarded())
    return Expected<std::string>::fail("scenario_json", "is not valid JSON; the run was not recorded");
  return normalized_dump(scenario);
}

}  // namespace

Expected<int64_t> Store::record_run(const RunRecord& run) {
  Expected<std::string> scenario_text = scenario_text_of(run);
  if (!scenario_text) return scenario_text.problems();
  try {
    Transaction tx(*db_);
    const int64_t id = insert_run(*db_, run, *scenario_text, 0);
    if (options_.before_commit_for_testing) options_.before_commit_for_testing();
    tx.commit();
    return id;
  } catch (const sqlite::Error& e) {
    return Expected<int64_t>::fail(path_, "could not record the run: " + explain(e, options_.busy_timeout_ms) +
                                              "; nothing was recorded");
  }
}

const char* to_string(PointStatus s) {
  switch (s) {
    case PointStatus::kOk: return "ok";
    case PointStatus::kInvalid: return "invalid";
    case PointStatus::kNoFit: return "no_fit";
    case PointStatus::kFailed: return "failed";
  }
  return "failed";
}

std::optional<PointStatus> parse_point_status(const std::string& text) {
  for (PointStatus s : {PointStatus::kOk, PointStatus::kInvalid, PointStatus::kNoFit, PointStatus::kFailed})
    if (text == to_string(s)) return s;
  return std::nullopt;
}

Expected<int64_t> Store::record_sweep_point(const SweepPoint& point, const std::vector<RunRecord>& runs) {
  std::vector<std::string> scenario_texts;
  for (const RunRecord& r : runs) {
    Expected<std::string> t = scenario_text_of(r);
    if (!t) return t.problems();
    scenario_texts.push_back(std::move(t).value());
  }
  if (json::parse(point.overrides_json, nullptr, false).is_discarded())
    return Expected<int64_t>::fail("overrides", "is not valid JSON; the point was not recorded");
  try {
    Transaction tx(*db_);
    Statement ins = db_->prepare(
        "INSERT INTO sweep_points (sweep_id, point_key, position, overrides, status, error_message, recorded_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    ins.bind(1, point.sweep_id).bind(2, point.point_key).bind(3, point.position).bind(4, point.overrides_json);
    ins.bind(5, std::string(to_string(point.status))).bind(6, point.error_message).bind(7, format_utc(point.recorded_at));
    ins.run();
    const int64_t point_id = db_->last_insert_rowid();
    std::vector<int64_t> ids;
    for (size_t i = 0; i < runs.size(); ++i) ids.push_back(insert_run(*db_, runs[i], scenario_texts[i], point_id));
    if (point.best_run >= 0 && static_cast<size_t>(point.best_run) < ids.size()) {
      Statement best = db_->prepare("UPDATE sweep_points SET best_run_id = ?1 WHERE id = ?2");
      best.bind(1, ids[static_cast<size_t>(point.best_run)]).bind(2, point_id).run();
    }
    if (options_.before_commit_for_testing) options_.before_commit_for_testing();
    tx.commit();
    return point_id;
  } catch (const sqlite::Error& e) {
    return Expected<int64_t>::fail(path_, "could not record sweep point " + std::to_string(point.position) + ": " +
                                              explain(e, options_.busy_timeout_ms) + "; nothing was recorded");
  }
}

Expected<std::vector<StoredSweepPoint>> Store::list_sweep_points(const std::string& sweep_id) const {
  try {
    Statement s = db_->prepare(
        "SELECT id, point_key, position, overrides, status, error_message, recorded_at, best_run_id "
        "FROM sweep_points WHERE sweep_id = ?1 ORDER BY position, id");
    s.bind(1, sweep_id);
    std::vector<StoredSweepPoint> points;
    while (s.step()) {
      StoredSweepPoint p;
      p.id = s.int64(0);
      p.point.sweep_id = sweep_id;
      p.point.point_key = s.text(1);
      p.point.position = s.int64(2);
      p.point.overrides_json = s.text(3);
      p.point.status = parse_point_status(s.text(4)).value_or(PointStatus::kFailed);
      p.point.error_message = s.text(5);
      p.point.recorded_at = parse_utc(s.text(6)).value_or(TimePoint{});
      if (!s.is_null(7)) p.best_run_id = s.int64(7);
      points.push_back(std::move(p));
    }
    return points;
  } catch (const sqlite::Error& e) {
    return Expected<std::vector<StoredSweepPoint>>::fail(path_, "cannot read sweep points: " +
                                                                    explain(e, options_.busy_timeout_ms));
  }
}

Expected<std::vector<StoredRun>> Store::list_runs(const RunFilter& filter) const {
  try {
    Statement s = db_->prepare(std::string(kRunColumns) +
                               "FROM runs r JOIN plans p ON p.id = r.plan_id JOIN scenarios s ON s.id = r.scenario_id "
                               "WHERE (?1 IS NULL OR r.scenario_name = ?1) AND (?2 IS NULL OR r.backend = ?2) "
                               "ORDER BY r.started_at DESC, r.id DESC");
    if (filter.scenario_name) s.bind(1, *filter.scenario_name);
    if (filter.backend) s.bind(2, *filter.backend);
    std::vector<StoredRun> runs;
    while (s.step()) {
      StoredRun run;
      Problems problems = read_run_row(s, path_, run, false);
      if (!problems.empty()) return problems;
      read_metrics(*db_, run.id, run.record.result);
      read_warnings(*db_, run.id, run.record.result);
      runs.push_back(std::move(run));
    }
    return runs;
  } catch (const sqlite::Error& e) {
    return Expected<std::vector<StoredRun>>::fail(path_, "cannot read runs: " + explain(e, options_.busy_timeout_ms));
  }
}

Expected<StoredRun> Store::load_run(int64_t id, bool with_timeline) const {
  try {
    Statement s = db_->prepare(std::string(kRunColumns) +
                               ", s.json FROM runs r JOIN plans p ON p.id = r.plan_id "
                               "JOIN scenarios s ON s.id = r.scenario_id WHERE r.id = ?1");
    s.bind(1, id);
    if (!s.step())
      return Expected<StoredRun>::fail(path_, "has no run with id " + std::to_string(id) +
                                                  " (see `monarch-sim runs list`)");
    StoredRun run;
    Problems problems = read_run_row(s, path_, run, true);
    if (!problems.empty()) return problems;
    BackendResult& b = run.record.result;
    read_metrics(*db_, id, b);
    read_warnings(*db_, id, b);

    Statement mem = db_->prepare(
        "SELECT position, stage, category, gib FROM memory WHERE run_id = ?1 ORDER BY position");
    mem.bind(1, id);
    while (mem.step()) {
      size_t pos = static_cast<size_t>(mem.int64(0));
      if (pos >= b.memory.stages.size()) b.memory.stages.resize(pos + 1);
      StageMemory& st = b.memory.stages[pos];
      st.stage = mem.int64(1);
      std::string category = mem.text(2);
      for (const auto& c : kMemoryCategories)
        if (category == c.name) st.*c.field = mem.real(3);
    }

    Statement comm = db_->prepare(
        "SELECT kind, comm_group, bytes, count, time_s FROM communication WHERE run_id = ?1 ORDER BY position");
    comm.bind(1, id);
    while (comm.step()) {
      const std::string kind = comm.text(0), group = comm.text(1);
      const std::optional<CollectiveKind> k = collective_kind_from_string(kind);
      if (!k)
        return Expected<StoredRun>::fail(path_, "run " + std::to_string(id) + " has a communication entry of unknown kind \"" +
                                                    kind + "\" (the store is damaged or from a newer monarch-sim)");
      CommEntry e{*k, group_kind_from_string(group), comm.int64(2), comm.int64(3), comm.real(4)};
      if (!e.group) e.group_label = group;
      b.communication.push_back(std::move(e));
    }

    Statement loss = db_->prepare("SELECT loss FROM losses WHERE run_id = ?1 ORDER BY step");
    loss.bind(1, id);
    while (loss.step()) b.losses.push_back(loss.real(0));

    Statement src = db_->prepare("SELECT path, sha256, bytes FROM run_sources WHERE run_id = ?1 ORDER BY position");
    src.bind(1, id);
    while (src.step()) run.record.sources.push_back({src.text(0), src.text(1), src.int64(2)});

    if (with_timeline) {
      Statement span = db_->prepare(
          "SELECT rank, stream, name, category, start_s, end_s FROM timeline WHERE run_id = ?1 ORDER BY position");
      span.bind(1, id);
      while (span.step())
        b.timeline.push_back({static_cast<int32_t>(span.int64(0)), span.text(1), span.text(2), span.text(3),
                              span.real(4), span.real(5)});
    }
    return run;
  } catch (const sqlite::Error& e) {
    return Expected<StoredRun>::fail(path_, "cannot read run " + std::to_string(id) + ": " +
                                                explain(e, options_.busy_timeout_ms));
  }
}

}  // namespace monarch
