#include "results/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/result_io.h"
#include "results/test_support.h"

namespace monarch {
namespace {

using testing::read_file;
using testing::sample_record;
using testing::sql_int;
using testing::TempDir;
using testing::write_file;


void sql_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* msg = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg), SQLITE_OK) << (msg ? msg : "");
  sqlite3_close(db);
}

bool mentions(const Problems& ps, const std::string& part) {
  for (const Problem& p : ps)
    if (p.to_string().find(part) != std::string::npos) return true;
  return false;
}

std::string all_problems(const Problems& ps) {
  std::string s;
  for (const Problem& p : ps) s += p.to_string() + "\n";
  return s;
}

void expect_same_result(const BackendResult& a, const BackendResult& b) {
  EXPECT_EQ(normalized_dump(result_to_json(a)), normalized_dump(result_to_json(b)));
}

TEST(Store, RecordsAndLoadsEverythingAboutARun) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok()) << all_problems(store.problems());
  RunRecord rec = sample_record("gpt3-1.3b", "real-gpu", /*measured=*/true);
  rec.status = RunStatus::kFailed;
  rec.error_message = "NCCL error: unhandled system error";
  Expected<int64_t> id = store->record_run(rec);
  ASSERT_TRUE(id.ok()) << all_problems(id.problems());

  Expected<StoredRun> back = store->load_run(*id);
  ASSERT_TRUE(back.ok()) << all_problems(back.problems());
  const RunRecord& r = back->record;
  EXPECT_EQ(back->id, *id);
  EXPECT_EQ(r.scenario_name, rec.scenario_name);
  EXPECT_EQ(r.scenario_json, normalized_dump(nlohmann::json::parse(rec.scenario_json)));
  EXPECT_EQ(r.parameters, rec.parameters);
  EXPECT_EQ(r.started_at, rec.started_at);
  EXPECT_EQ(r.ended_at, rec.ended_at);
  EXPECT_EQ(r.status, RunStatus::kFailed);
  EXPECT_EQ(r.host, "node-7");
  EXPECT_EQ(r.software_version, "0.1.0-test");
  EXPECT_EQ(r.error_message, rec.error_message);
  EXPECT_EQ(back->plan_hash, content_hash(plan_to_json(rec.result.plan)));
  EXPECT_EQ(back->scenario_hash, content_hash(nlohmann::json::parse(rec.scenario_json)));
  expect_same_result(r.result, rec.result);
  EXPECT_EQ(r.result.losses, rec.result.losses);
  EXPECT_EQ(r.result.timeline.size(), rec.result.timeline.size());

  Expected<StoredRun> no_timeline = store->load_run(*id, /*with_timeline=*/false);
  ASSERT_TRUE(no_timeline.ok());
  EXPECT_TRUE(no_timeline->record.result.timeline.empty());
}

// A valid but unwise plan's warnings and the reliability estimate's come back in their order
// and scope, as the result file lists them; list_runs carries them too (the GUI's table).
TEST(Store, KeepsThePlanAndReliabilityWarnings) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok()) << all_problems(store.problems());
  RunRecord rec = sample_record("unwise", "analytical");
  rec.result.warnings = {"TP 16 crosses nodes of 8 GPUs: its collectives run over the network",
                         "micro-batch 1 x sequence 128: kernels this small run below peak"};
  rec.result.reliability.emplace();
  rec.result.reliability->goodput = 0.9;
  rec.result.reliability->warnings = {"no checkpoint bandwidth given: the default is assumed"};
  RunRecord plain = sample_record("plain", "analytical");
  ASSERT_TRUE(store->record_run(plain).ok());
  Expected<int64_t> id = store->record_run(rec);
  ASSERT_TRUE(id.ok()) << all_problems(id.problems());

  Expected<StoredRun> back = store->load_run(*id);
  ASSERT_TRUE(back.ok()) << all_problems(back.problems());
  EXPECT_EQ(back->record.result.warnings, rec.result.warnings);
  ASSERT_TRUE(back->record.result.reliability.has_value());
  EXPECT_EQ(back->record.result.reliability->warnings, rec.result.reliability->warnings);
  expect_same_result(back->record.result, rec.result);
  EXPECT_EQ(result_to_json(back->record.result)["warnings"], nlohmann::json(rec.result.warnings));

  Expected<std::vector<StoredRun>> listed = store->list_runs();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  for (const StoredRun& r : *listed)
    EXPECT_EQ(r.record.result.warnings, r.id == *id ? rec.result.warnings : std::vector<std::string>{});
  EXPECT_EQ(sql_int(dir.file("s.db"), "SELECT count(*) FROM warnings"), 3);
}

TEST(Store, FillsHostAndVersionWhenEmpty) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  RunRecord rec = sample_record("a", "analytical");
  rec.host.clear();
  rec.software_version.clear();
  Expected<int64_t> id = store->record_run(rec);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(store->load_run(*id)->record.host, host_name());
  EXPECT_EQ(store->load_run(*id)->record.software_version, software_version());
  EXPECT_FALSE(software_version().empty());
}

TEST(Store, NonFiniteFiguresComeBackAsNaN) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  RunRecord rec = sample_record("a", "simgrid");
  rec.result.mfu = std::nan("");
  rec.result.communication[0].time_s = std::numeric_limits<double>::infinity();
  Expected<StoredRun> back = store->load_run(*store->record_run(rec));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->record.result.mfu));
  EXPECT_TRUE(std::isnan(back->record.result.communication[0].time_s));
  EXPECT_EQ(back->record.result.hfu, rec.result.hfu);
}

TEST(Store, KeepsGoodputAndTimeToTrainOnlyForRunsThatHaveThem) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  RunRecord plain = sample_record("a", "analytical");
  RunRecord with = sample_record("a", "analytical");
  ReliabilityReport rel;
  rel.goodput = 0.921;
  rel.time_to_train_s = 7.41e6;
  rel.expected_interruptions = 666;
  rel.badput.wasted_progress_s = 1.2e5;
  rel.badput.infrastructure_recovery_s = 2.5e5;
  with.result.reliability = rel;
  Expected<StoredRun> a = store->load_run(*store->record_run(plain));
  Expected<StoredRun> b = store->load_run(*store->record_run(with));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->record.result.reliability.has_value());
  ASSERT_TRUE(b->record.result.reliability.has_value());
  EXPECT_DOUBLE_EQ(b->record.result.reliability->goodput, 0.921);
  EXPECT_DOUBLE_EQ(b->record.result.reliability->time_to_train_s, 7.41e6);
  EXPECT_DOUBLE_EQ(b->record.result.reliability->expected_interruptions, 666);
  EXPECT_DOUBLE_EQ(b->record.result.reliability->badput.wasted_progress_s, 1.2e5);
  EXPECT_DOUBLE_EQ(b->record.result.reliability->badput.infrastructure_recovery_s, 2.5e5);
}

TEST(Store, DeduplicatesScenariosAndPlansByContent) {
  TempDir dir;
  std::string path = dir.file("s.db");
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok());
    RunRecord a = sample_record("s", "analytical");
    RunRecord b = sample_record("s", "simgrid");
    // Same scenario, other key order and whitespace: one scenario row.
    b.scenario_json = R"({"cluster":{"num_gpus":64},  "model":{"preset":"gpt3-1.3b"}, "name":"sample"})";
    RunRecord c = sample_record("s", "analytical");
    c.result.plan.micro_batch_size = 2;  // another plan
    ASSERT_TRUE(store->record_run(a).ok());
    ASSERT_TRUE(store->record_run(b).ok());
    ASSERT_TRUE(store->record_run(c).ok());
    Expected<std::vector<StoredRun>> runs = store->list_runs();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 3u);
    EXPECT_EQ((*runs)[1].plan_hash, (*runs)[2].plan_hash);  // a and b share the plan
    EXPECT_NE((*runs)[0].plan_hash, (*runs)[1].plan_hash);
  }
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM scenarios"), 1);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM plans"), 2);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM memory"), 3 * 2 * 6);  // runs x stages x categories
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM communication"), 3 * 3);
}

TEST(Store, InvalidScenarioJsonIsRefused) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  RunRecord rec = sample_record("a", "analytical");
  rec.scenario_json = "{not json";
  Expected<int64_t> id = store->record_run(rec);
  ASSERT_FALSE(id.ok());
  EXPECT_TRUE(mentions(id.problems(), "not valid JSON"));
  EXPECT_TRUE(store->list_runs()->empty());
}

TEST(Store, ListsNewestFirstAndFilters) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  const char* backends[] = {"analytical", "simgrid", "analytical", "real-cpu"};
  for (int i = 0; i < 4; ++i) {
    RunRecord rec = sample_record(i % 2 ? "odd" : "even", backends[i]);
    rec.started_at += std::chrono::seconds(i == 3 ? -100 : i);  // the last one started earliest
    ASSERT_TRUE(store->record_run(rec).ok());
  }
  Expected<std::vector<StoredRun>> all = store->list_runs();
  ASSERT_TRUE(all.ok());
  std::vector<int64_t> ids;
  for (const StoredRun& r : *all) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 2, 1, 4}));
  EXPECT_EQ((*all)[0].record.result.iteration_time_s, 2.25);  // summaries carry the headline figures
  EXPECT_EQ((*all)[0].record.result.memory.peak_gib, 50.375);

  RunFilter f;
  f.backend = "analytical";
  EXPECT_EQ(store->list_runs(f)->size(), 2u);
  f.scenario_name = "odd";
  EXPECT_EQ(store->list_runs(f)->size(), 0u);
  f.backend.reset();
  EXPECT_EQ(store->list_runs(f)->size(), 2u);
}

TEST(Store, HostileTextRoundTripsUnchanged) {
  TempDir dir;
  std::string path = dir.file("s.db");
  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok());
  const std::string names[] = {"x'); DROP TABLE runs; --", "Robert\"; DELETE FROM plans; --", "ünï\ncode\t%s %n ?1"};
  for (const std::string& name : names) {
    RunRecord rec = sample_record(name, name);  // in the backend field too
    rec.error_message = name;
    rec.result.communication[0].group = std::nullopt;  // a measured group named by its trace
    rec.result.communication[0].group_label = name;
    Expected<int64_t> id = store->record_run(rec);
    ASSERT_TRUE(id.ok());
    Expected<StoredRun> back = store->load_run(*id);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->record.scenario_name, name);
    EXPECT_EQ(back->record.result.backend, name);
    EXPECT_EQ(back->record.error_message, name);
    EXPECT_FALSE(back->record.result.communication[0].group.has_value());
    EXPECT_EQ(back->record.result.communication[0].group_label, name);
    RunFilter f;
    f.scenario_name = name;
    EXPECT_EQ(store->list_runs(f)->size(), 1u);
  }
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM plans"), 1);
}

TEST(Store, MissingIdIsAProblem) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok());
  Expected<StoredRun> r = store->load_run(42);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.problems(), "no run with id 42"));
}

TEST(Store, NewStoreIsWalAtTheCurrentVersion) {
  TempDir dir;
  std::string path = dir.file("s.db");
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  }
  EXPECT_EQ(sql_int(path, "PRAGMA user_version"), kStoreSchemaVersion);
  EXPECT_EQ(sql_int(path, "PRAGMA application_id"), kStoreApplicationId);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(Store, OpenWithoutCreateNeedsAnExistingStore) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("none.db"), /*create=*/false);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(mentions(store.problems(), "no results store here"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.db")));
}

TEST(Store, OpenDefaultCreatesResultsDirectoryUnderTheWorkingDirectory) {
  TempDir dir;
  std::filesystem::path old = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  {
    Expected<Store> store = Store::open_default();
    EXPECT_TRUE(store.ok());
    if (store.ok()) EXPECT_EQ(store->path(), "results/monarch.db");
  }
  std::filesystem::current_path(old);
  EXPECT_TRUE(std::filesystem::exists(dir.file("results/monarch.db")));
  EXPECT_EQ(default_store_path(), "results/monarch.db");
}

// A v1 store as the first release wrote it: no error messages, no losses table.
void make_v1_store(const std::string& path) {
  sql_exec(path, store_migration_sql(0) + "PRAGMA user_version = 1;");
  sql_exec(path, R"sql(
    INSERT INTO scenarios (hash, json) VALUES ('h-s', '{"name":"old"}');
    INSERT INTO plans (hash, json) VALUES ('h-p', '{"activation_recompute":"full","context_parallel_degree":1,"data_parallel_degree":2,"expert_parallel_degree":1,"micro_batch_size":1,"pipeline_parallel_degree":1,"pipeline_schedule":"1f1b","sequence_parallel":false,"tensor_parallel_degree":4,"virtual_pipeline_degree":1,"zero_stage":1}');
    INSERT INTO runs (scenario_id, plan_id, scenario_name, backend, status, started_at, ended_at,
                      software_version, host, measured, parameters)
      VALUES (1, 1, 'old', 'analytical', 'ok', '2026-01-02T03:04:05.006Z', '2026-01-02T03:04:06.000Z',
              '0.0.9', 'old-host', 0, 125000000);
    INSERT INTO metrics (run_id, name, value) VALUES (1, 'iteration_time_s', 0.75), (1, 'memory.peak_gib', 12.5);
    INSERT INTO communication (run_id, position, kind, comm_group, bytes, count, time_s)
      VALUES (1, 0, 'all-reduce', 'dp', 1000, 1, 0.01);
  )sql");
}

TEST(StoreMigration, UpgradesAVersion1StoreKeepingItsRuns) {
  TempDir dir;
  std::string path = dir.file("old.db");
  make_v1_store(path);
  ASSERT_EQ(sql_int(path, "PRAGMA user_version"), 1);
  ASSERT_EQ(sql_int(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'losses'"), 0);
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok()) << all_problems(store.problems());
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
    Expected<StoredRun> old = store->load_run(1);
    ASSERT_TRUE(old.ok()) << all_problems(old.problems());
    EXPECT_EQ(old->record.scenario_name, "old");
    EXPECT_EQ(old->record.error_message, "");
    EXPECT_EQ(old->record.result.plan.tp, 4);
    EXPECT_EQ(old->record.result.plan.zero_stage, 1);
    EXPECT_EQ(old->record.result.iteration_time_s, 0.75);
    EXPECT_EQ(old->record.result.communication.size(), 1u);
    EXPECT_EQ(format_utc(old->record.started_at), "2026-01-02T03:04:05.006Z");
    RunRecord rec = sample_record("new", "real-cpu", /*measured=*/true);
    rec.status = RunStatus::kFailed;
    rec.error_message = "rank 3 exited";
    Expected<int64_t> id = store->record_run(rec);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, 2);
    EXPECT_EQ(store->load_run(*id)->record.result.losses, rec.result.losses);
    EXPECT_EQ(store->list_runs()->size(), 2u);
  }
  EXPECT_EQ(sql_int(path, "PRAGMA user_version"), kStoreSchemaVersion);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM losses"), 4);
  // Opening again does nothing more.
  std::string bytes = read_file(path);
  ASSERT_TRUE(Store::open(path).ok());
  EXPECT_EQ(read_file(path), bytes);
}

TEST(StoreSources, ImportedRunKeepsItsSourcesAndASecondImportIsRefused) {
  TempDir dir;
  std::string path = dir.file("s.db");
  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok());
  RunRecord rec = sample_record("job", "measured", /*measured=*/true);
  rec.sources = {{"traces/rank0.json.gz", std::string(64, 'a'), 100}, {"traces/rank1.json.gz", std::string(64, 'b'), 120}};
  EXPECT_FALSE(store->find_imported(rec.sources)->has_value());
  Expected<int64_t> id = store->record_run(rec);
  ASSERT_TRUE(id.ok()) << all_problems(id.problems());
  Expected<StoredRun> back = store->load_run(*id);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->record.sources.size(), 2u);
  EXPECT_EQ(back->record.sources[1].path, "traces/rank1.json.gz");
  EXPECT_EQ(back->record.sources[1].bytes, 120);
  // The same files in another order are the same import.
  std::vector<RunSource> swapped = {rec.sources[1], rec.sources[0]};
  EXPECT_EQ(**store->find_imported(swapped), *id);
  RunRecord again = rec;
  again.sources = swapped;
  Expected<int64_t> dup = store->record_run(again);
  EXPECT_FALSE(dup.ok());
  EXPECT_EQ(store->list_runs()->size(), 1u);
  // Runs that were not imported have no sources and never collide.
  ASSERT_TRUE(store->record_run(sample_record("a", "analytical")).ok());
  ASSERT_TRUE(store->record_run(sample_record("a", "analytical")).ok());
  EXPECT_EQ(store->list_runs()->size(), 3u);
}

TEST(StoreMigration, AnEmptyFileBecomesAStore) {
  TempDir dir;
  std::string path = dir.file("empty.db");
  write_file(path, "");
  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok()) << all_problems(store.problems());
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
}

// Each refused file must come out byte for byte as it went in.
void expect_refused_unchanged(const std::string& path, const std::string& part) {
  std::string before = read_file(path);
  Expected<Store> store = Store::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(mentions(store.problems(), part)) << all_problems(store.problems());
  EXPECT_TRUE(mentions(store.problems(), path));
  EXPECT_EQ(read_file(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(StoreRefusal, NewerSchemaVersion) {
  TempDir dir;
  std::string path = dir.file("new.db");
  ASSERT_TRUE(Store::open(path)->record_run(sample_record("a", "analytical")).ok());
  sql_exec(path, "PRAGMA user_version = 99");
  expect_refused_unchanged(path, "newer monarch-sim (store schema version 99");
  EXPECT_EQ(sql_int(path, "PRAGMA user_version"), 99);
}

TEST(StoreRefusal, ForeignFile) {
  TempDir dir;
  std::string path = dir.file("notes.db");
  write_file(path, std::string("These are my notes, not a database.\n") + std::string(5000, 'x'));
  expect_refused_unchanged(path, "not a SQLite database");
}

TEST(StoreRefusal, AnotherProgramsSqliteDatabase) {
  TempDir dir;
  std::string path = dir.file("other.db");
  sql_exec(path, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'a');");
  expect_refused_unchanged(path, "another program");
}

TEST(StoreRefusal, CorruptedStore) {
  TempDir dir;
  std::string path = dir.file("broken.db");
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->record_run(sample_record("c", "simgrid")).ok());
  }
  std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), 8u * 4096u);
  // Keep the 100-byte header and page 1 (the schema); scribble over the b-tree pages after it.
  for (size_t i = 4096 + 16; i < bytes.size(); i += 97) bytes[i] = static_cast<char>(0xA5 ^ (i & 0xff));
  write_file(path, bytes);
  expect_refused_unchanged(path, "corrupted");
}

TEST(StoreRefusal, ADamagedTimelineShowsWhenRead) {
  TempDir dir;
  std::string path = dir.file("timeline.db");
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok());
    RunRecord rec = sample_record("t", "simgrid");
    rec.result.timeline = testing::sample_result("x", false, 20000).timeline;
    ASSERT_TRUE(store->record_run(rec).ok());
  }
  std::string bytes = read_file(path);
  const size_t page = static_cast<size_t>(sql_int(path, "PRAGMA page_size"));
  // The timeline was written last, so it owns the last pages: break their b-tree headers.
  for (size_t p = bytes.size() / page * 3 / 4; p < bytes.size() / page; ++p)
    for (size_t i = 0; i < 8; ++i) bytes[p * page + i] = static_cast<char>(0xEE);
  write_file(path, bytes);
  Expected<Store> store = Store::open(path);  // the small tables are intact
  ASSERT_TRUE(store.ok()) << all_problems(store.problems());
  EXPECT_EQ(store->list_runs()->size(), 1u);
  Expected<StoredRun> run = store->load_run(1);
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(mentions(run.problems(), "the store is corrupted")) << all_problems(run.problems());
  EXPECT_TRUE(store->load_run(1, /*with_timeline=*/false).ok());
}

TEST(StoreRefusal, MissingDirectoryAndDirectoryPath) {
  TempDir dir;
  Expected<Store> missing = Store::open(dir.file("no/such/dir/s.db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(mentions(missing.problems(), "does not exist")) << all_problems(missing.problems());
  EXPECT_FALSE(std::filesystem::exists(dir.file("no")));

  Expected<Store> is_dir = Store::open(dir.path());
  ASSERT_FALSE(is_dir.ok());
  EXPECT_TRUE(mentions(is_dir.problems(), "is a directory"));

  Expected<Store> empty = Store::open("");
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(mentions(empty.problems(), "--db"));
}


// A sweep point and its runs are written in one transaction; a second point with the same key
// is refused and writes nothing.
TEST(StoreSweeps, RecordsAPointWithItsRunsAndRefusesTheSameKeyTwice) {
  TempDir dir;
  Expected<Store> store = Store::open(dir.file("s.db"));
  ASSERT_TRUE(store.ok()) << all_problems(store.problems());
  SweepPoint p;
  p.sweep_id = "study";
  p.point_key = "k0";
  p.position = 0;
  p.overrides_json = R"({"cluster.num_gpus":8})";
  p.best_run = 1;
  std::vector<RunRecord> runs = {sample_record("s", "analytical"), sample_record("s", "simgrid")};
  Expected<int64_t> id = store->record_sweep_point(p, runs);
  ASSERT_TRUE(id.ok()) << all_problems(id.problems());
  SweepPoint bad = p;
  bad.position = 1;
  bad.status = PointStatus::kInvalid;
  bad.error_message = "/training/precision: found \"fp9\"";
  EXPECT_FALSE(store->record_sweep_point(bad, {}).ok());
  bad.point_key = "k1";
  ASSERT_TRUE(store->record_sweep_point(bad, {}).ok());

  auto points = store->list_sweep_points("study");
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].point.overrides_json, p.overrides_json);
  ASSERT_TRUE((*points)[0].best_run_id.has_value());
  EXPECT_EQ(store->load_run(*(*points)[0].best_run_id)->record.result.backend, "simgrid");
  EXPECT_EQ((*points)[1].point.status, PointStatus::kInvalid);
  EXPECT_EQ((*points)[1].point.error_message, bad.error_message);
  EXPECT_FALSE((*points)[1].best_run_id.has_value());
  EXPECT_EQ(store->list_runs()->size(), 2u) << "the refused point wrote no runs";
  EXPECT_EQ(sql_int(dir.file("s.db"), "SELECT count(*) FROM runs WHERE sweep_point_id = " + std::to_string(*id)), 2);
  EXPECT_TRUE(store->list_sweep_points("other")->empty());
}

// A version-3 store (before sweeps) keeps its runs and gains the sweep tables.
TEST(StoreMigration, UpgradesAVersion3StoreKeepingItsRuns) {
  TempDir dir;
  std::string path = dir.file("v3.db");
  make_v1_store(path);
  sql_exec(path, store_migration_sql(1) + store_migration_sql(2) + "PRAGMA user_version = 3;");
  ASSERT_EQ(sql_int(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'sweep_points'"), 0);
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok()) << all_problems(store.problems());
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
    EXPECT_EQ(store->load_run(1)->record.scenario_name, "old");
    EXPECT_EQ(store->load_run(1)->record.result.iteration_time_s, 0.75);
    SweepPoint p;
    p.sweep_id = "after";
    p.point_key = "k";
    p.overrides_json = "{}";
    ASSERT_TRUE(store->record_sweep_point(p, {sample_record("s", "analytical")}).ok());
  }
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM runs WHERE sweep_point_id IS NULL"), 1);
}

// A version-4 store, as the current code lays it out before warnings were kept: its runs read
// back without warnings, and runs recorded after the upgrade keep theirs.
TEST(StoreMigration, UpgradesAVersion4StoreKeepingItsRuns) {
  TempDir dir;
  std::string path = dir.file("v4.db");
  make_v1_store(path);
  sql_exec(path, store_migration_sql(1) + store_migration_sql(2) + store_migration_sql(3) + "PRAGMA user_version = 4;");
  ASSERT_EQ(sql_int(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'warnings'"), 0);
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok()) << all_problems(store.problems());
    EXPECT_EQ(store->schema_version(), 5);
    Expected<StoredRun> old = store->load_run(1);
    ASSERT_TRUE(old.ok()) << all_problems(old.problems());
    EXPECT_EQ(old->record.result.iteration_time_s, 0.75);
    EXPECT_TRUE(old->record.result.warnings.empty());
    EXPECT_FALSE(result_to_json(old->record.result).contains("warnings"));
    RunRecord rec = sample_record("after", "simgrid");
    rec.result.warnings = {"EP 16 crosses nodes of 8 GPUs"};
    Expected<int64_t> id = store->record_run(rec);
    ASSERT_TRUE(id.ok()) << all_problems(id.problems());
    EXPECT_EQ(store->load_run(*id)->record.result.warnings, rec.result.warnings);
  }
  EXPECT_EQ(sql_int(path, "PRAGMA user_version"), 5);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM runs"), 2);
  // Deleting a run removes its warnings (ON DELETE CASCADE with foreign keys on).
  sql_exec(path, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE id = 2;");
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM warnings"), 0);
}

}  // namespace
}  // namespace monarch
