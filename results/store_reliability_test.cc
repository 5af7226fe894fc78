// The store under stress: concurrent writers, a writer killed mid-run, a full disk, unwritable
// places and foreign files (at the API and at the command level).
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "results/runs_command.h"
#include "results/store.h"
#include "results/test_support.h"

namespace monarch {
namespace {

using testing::read_file;
using testing::sample_record;
using testing::sql_int;
using testing::TempDir;
using testing::write_file;


std::string problems_text(const Problems& ps) {
  std::string s;
  for (const Problem& p : ps) s += p.to_string() + "\n";
  return s;
}

// Runs `body` in a child process; returns its exit status (or 128 + signal).
int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(StoreReliability, TwoProcessesWritingAtOnceLoseNothing) {
  TempDir dir;
  const std::string path = dir.file("shared.db");  // created by whichever child comes first
  constexpr int kRunsPerProcess = 30;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = fork();
    ASSERT_GE(children[c], 0);
    if (children[c] == 0) {
      char byte;
      close(go[1]);
      if (read(go[0], &byte, 1) != 0) _exit(10);  // start together when the parent closes the pipe
      Expected<Store> store = Store::open(path);
      if (!store) {
        std::fprintf(stderr, "writer %d: %s", c, problems_text(store.problems()).c_str());
        _exit(11);
      }
      for (int i = 0; i < kRunsPerProcess; ++i) {
        RunRecord rec = sample_record("writer-" + std::to_string(c), c ? "simgrid" : "analytical");
        rec.result.timeline = testing::sample_result("x", false, 200).timeline;
        if (!store->record_run(rec)) _exit(12);
      }
      _exit(0);
    }
  }
  close(go[0]);
  close(go[1]);
  EXPECT_EQ(wait_child(children[0]), 0);
  EXPECT_EQ(wait_child(children[1]), 0);

  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok()) << problems_text(store.problems());
  EXPECT_EQ(store->list_runs()->size(), 2u * kRunsPerProcess);
  for (int c = 0; c < 2; ++c) {
    RunFilter f;
    f.scenario_name = "writer-" + std::to_string(c);
    EXPECT_EQ(store->list_runs(f)->size(), static_cast<size_t>(kRunsPerProcess));
  }
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM timeline"), 2 * kRunsPerProcess * 200);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM plans"), 1);
}

TEST(StoreReliability, AProcessKilledMidRunLeavesNoHalfWrittenRun) {
  TempDir dir;
  const std::string path = dir.file("killed.db");
  {
    Expected<Store> store = Store::open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(store->record_run(sample_record("before", "analytical")).ok());
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    StoreOptions options;
    options.before_commit_for_testing = [&] {
      // Everything of the run is written but not committed: tell the parent, then wait to die.
      if (write(ready[1], "k", 1) != 1) _exit(20);
      for (;;) pause();
    };
    Expected<Store> store = Store::open(path, options);
    if (!store) _exit(21);
    RunRecord rec = sample_record("victim", "simgrid");
    rec.result.timeline = testing::sample_result("x", false, 5000).timeline;
    store->record_run(rec);
    _exit(22);  // not reached: the hook never returns
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  kill(child, SIGKILL);
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);

  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok()) << problems_text(store.problems());
  Expected<std::vector<StoredRun>> runs = store->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].record.scenario_name, "before");
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM timeline"), 4);  // only the first run's spans
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM metrics WHERE run_id <> 1"), 0);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM memory WHERE run_id <> 1"), 0);
  // And the store goes on working.
  Expected<int64_t> next = store->record_run(sample_record("after", "analytical"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(store->list_runs()->size(), 2u);
}

TEST(StoreReliability, AFullDiskGivesAClearErrorAndKeepsEarlierRuns) {
  TempDir dir;
  const std::string path = dir.file("full.db");
  ASSERT_TRUE(Store::open(path)->record_run(sample_record("first", "analytical")).ok());
  const int64_t pages = sql_int(path, "PRAGMA page_count");
  StoreOptions tiny;
  tiny.max_page_count = pages + 2;  // room for a small run, not for a 20 000-span timeline
  Expected<Store> store = Store::open(path, tiny);
  ASSERT_TRUE(store.ok());
  RunRecord big = sample_record("too-big", "simgrid");
  big.result.timeline = testing::sample_result("x", false, 20000).timeline;
  Expected<int64_t> id = store->record_run(big);
  ASSERT_FALSE(id.ok());
  const std::string text = problems_text(id.problems());
  EXPECT_NE(text.find("the store is full"), std::string::npos) << text;
  EXPECT_NE(text.find("nothing was recorded"), std::string::npos) << text;
  EXPECT_NE(text.find(path), std::string::npos) << text;
  ASSERT_EQ(store->list_runs()->size(), 1u);
  EXPECT_EQ(sql_int(path, "SELECT count(*) FROM timeline"), 4);
  // Without the limit the same run fits.
  Expected<Store> roomy = Store::open(path);
  ASSERT_TRUE(roomy.ok());
  EXPECT_TRUE(roomy->record_run(big).ok());
}

TEST(StoreReliability, AnUnwritableDirectoryGivesAClearError) {
  TempDir dir;
  std::string path;
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(dir.path().c_str(), 0555), 0);
    path = dir.file("s.db");
  } else {
    // Root ignores permission bits; /proc refuses new files even to root.
    path = "/proc/monarch-store-test.db";
  }
  Expected<Store> store = Store::open(path);
  ASSERT_FALSE(store.ok());
  const std::string text = problems_text(store.problems());
  EXPECT_TRUE(text.find("not writable") != std::string::npos || text.find("cannot be opened") != std::string::npos)
      << text;
  EXPECT_NE(text.find(path), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreReliability, AReadOnlyStoreFileCannotRecord) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores file permission bits";
  TempDir dir;
  const std::string path = dir.file("ro.db");
  ASSERT_TRUE(Store::open(path)->record_run(sample_record("first", "analytical")).ok());
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  Expected<Store> store = Store::open(path);
  ASSERT_TRUE(store.ok()) << problems_text(store.problems());  // reading still works
  EXPECT_EQ(store->list_runs()->size(), 1u);
  Expected<int64_t> id = store->record_run(sample_record("second", "analytical"));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(problems_text(id.problems()).find("cannot be written"), std::string::npos);
}

// At the command level every one of these is exit status 2 with the store named on stderr.
int runs(const std::vector<std::string>& args, const std::string& db, std::string* err_text = nullptr) {
  std::ostringstream out, err;
  int rc = run_runs_command(args, db, out, err);
  if (err_text) *err_text = err.str();
  return rc;
}

TEST(StoreReliability, CommandExitsWith2ForUnusableStores) {
  TempDir dir;
  std::string err;
  EXPECT_EQ(runs({"list"}, dir.file("missing/dir/s.db"), &err), 2);
  EXPECT_NE(err.find("missing/dir/s.db"), std::string::npos) << err;

  write_file(dir.file("foreign.db"), std::string("PK\x03\x04 a zip file, not a store") + std::string(4000, 'z'));
  std::string before = read_file(dir.file("foreign.db"));
  EXPECT_EQ(runs({"list"}, dir.file("foreign.db"), &err), 2);
  EXPECT_NE(err.find("not a SQLite database"), std::string::npos) << err;
  EXPECT_EQ(read_file(dir.file("foreign.db")), before);

  const std::string newer = dir.file("newer.db");
  ASSERT_TRUE(Store::open(newer)->record_run(sample_record("a", "analytical")).ok());
  {
    sqlite3* db = nullptr;
    sqlite3_open(newer.c_str(), &db);
    sqlite3_exec(db, "PRAGMA user_version = 7", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  EXPECT_EQ(runs({"show", "1"}, newer, &err), 2);
  EXPECT_NE(err.find("newer monarch-sim"), std::string::npos) << err;

  EXPECT_EQ(runs({"export"}, dir.path(), &err), 2);
  EXPECT_NE(err.find("is a directory"), std::string::npos) << err;
}

}  // namespace
}  // namespace monarch
