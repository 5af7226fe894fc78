// monarch-sim sweep, end to end on the built binary: the same rows for one worker, two workers
// and three MPI ranks; invalid points recorded with their JSON path; a killed worker's point
// handed out again; Ctrl-C then --resume computes exactly the missing points.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/cli_run_support.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using monarch::test::CliResult;

class Sweep : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("monarch_sweep_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult run(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {}) {
    if (prefix.empty()) return monarch::test::run_binary(MONARCH_SIM_BIN, args, dir_);
    std::vector<std::string> all(prefix.begin() + 1, prefix.end());
    all.push_back(MONARCH_SIM_BIN);
    all.insert(all.end(), args.begin(), args.end());
    return monarch::test::run_binary(prefix.front(), all, dir_);
  }
  std::string write_sweep(const std::string& name, const json& sweep) {
    const fs::path p = dir_ / (name + ".json");
    std::ofstream(p) << sweep.dump(2);
    return p.string();
  }
  std::string db(const std::string& name) { return (dir_ / (name + ".db")).string(); }

  // `runs export --sweep` as CSV without the run_id column (ids depend on recording order).
  std::string rows(const std::string& store, const std::string& sweep) {
    CliResult r = run({"--db", store, "runs", "export", "--sweep", sweep});
    EXPECT_EQ(r.status, 0) << r.err;
    std::istringstream in(r.out);
    std::string line, out;
    int run_id_col = -1;
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string cell;
      while (std::getline(ss, cell, ',')) cells.push_back(cell);  // test data has no quoted commas
      if (run_id_col < 0)
        for (size_t i = 0; i < cells.size(); ++i)
          if (cells[i] == "run_id") run_id_col = static_cast<int>(i);
      if (run_id_col >= 0 && static_cast<size_t>(run_id_col) < cells.size()) cells.erase(cells.begin() + run_id_col);
      for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
      out += "\n";
    }
    return out;
  }

  static std::string base(const std::string& name) { return std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + name; }

  // The small GPT with its plan left open: 2 precisions that run, one that is invalid.
  json grid_sweep(const std::string& name) {
    return {{"name", name},
            {"base", base("small-gpt-8.json")},
            {"backends", {"analytical"}},
            {"grid", {{"training.global_batch_size", {16, 32}}, {"training.precision", {"fp32", "bf16", "fp9"}}}}};
  }

  fs::path dir_;
};

// Starts monarch-sim in the background; its output goes to files in the test's folder.
pid_t spawn(const std::vector<std::string>& args, const fs::path& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    FILE* out = std::freopen((dir / "bg.stdout").c_str(), "w", stdout);
    FILE* err = std::freopen((dir / "bg.stderr").c_str(), "w", stderr);
    (void)out;
    (void)err;
    std::vector<std::string> all = {MONARCH_SIM_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(MONARCH_SIM_BIN, argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Pids of the worker processes computing points of `sweep_path` (their command line names it
// and --point).
std::vector<pid_t> point_workers(const std::string& sweep_path) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(sweep_path) != std::string::npos && cmd.find(std::string("--point") + '\0') != std::string::npos)
      pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

TEST_F(Sweep, OneAndTwoWorkersGiveTheSameRowsAndInvalidPointsNameTheirPath) {
  const std::string sweep = write_sweep("grid", grid_sweep("grid"));
  CliResult one = run({"sweep", sweep, "--db", db("one")});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.err.find("6 points, 6 computed, 0 already in the store, 4 ok, 2 invalid"), std::string::npos) << one.err;
  CliResult two = run({"sweep", sweep, "--jobs", "2", "--db", db("two")});
  ASSERT_EQ(two.status, 0) << two.err;
  const std::string a = rows(db("one"), "grid");
  EXPECT_EQ(a, rows(db("two"), "grid"));

  std::istringstream in(a);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("sweep,position,status,training.global_batch_size,training.precision,plan,backend,iteration_time_s", 0), 0u)
      << header;
  int ok = 0, invalid = 0;
  while (std::getline(in, line)) {
    if (line.find(",ok,") != std::string::npos) {
      ++ok;
      EXPECT_NE(line.find(",analytical,"), std::string::npos) << line;
    }
    if (line.find(",invalid,") != std::string::npos) {
      ++invalid;
      EXPECT_NE(line.find("fp9"), std::string::npos) << line;
      EXPECT_NE(line.find("/training/precision"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(invalid, 2);

  // Every (plan, backend) entry of an ok point is a run of the store, tied to its point.
  CliResult runs = run({"--db", db("one"), "runs", "export", "--format", "json"});
  ASSERT_EQ(runs.status, 0) << runs.err;
  EXPECT_GE(json::parse(runs.out)["runs"].size(), 4u);
  CliResult js = run({"--db", db("one"), "runs", "export", "--sweep", "grid", "--format", "json"});
  ASSERT_EQ(js.status, 0) << js.err;
  const json points = json::parse(js.out)["points"];
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0]["overrides"], json({{"training.global_batch_size", 16}, {"training.precision", "fp32"}}));
  EXPECT_GT(points[0]["iteration_time_s"].get<double>(), 0);
}

// simgrid.* paths set the SimGrid backend's options per point, as `--set simgrid.KEY=VALUE`
// does for one run; a value the backend does not know makes its point invalid, naming the option.
TEST_F(Sweep, SimgridOptionsVaryPerPoint) {
#ifndef MONARCH_TEST_SIMGRID
  GTEST_SKIP() << "this build has no SimGrid backend";
#endif
  const json spec = {{"name", "fidelity"},
                     {"base", base("small-gpt-8.json")},
                     {"backends", {"simgrid"}},
                     {"grid", {{"simgrid.intra_node", {"coarse", "flows", "fine"}}}}};
  const std::string sweep = write_sweep("fidelity", spec);
  CliResult r = run({"sweep", sweep, "--db", db("simgrid")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("3 points, 3 computed, 0 already in the store, 2 ok, 1 invalid"), std::string::npos) << r.err;
  std::istringstream in(rows(db("simgrid"), "fidelity"));
  std::string line;
  std::getline(in, line);
  int ok = 0;
  while (std::getline(in, line)) {
    if (line.find(",ok,") != std::string::npos) {
      EXPECT_NE(line.find(",simgrid,"), std::string::npos) << line;
      ++ok;
    }
    if (line.find(",invalid,") != std::string::npos) {
      EXPECT_NE(line.find("fine"), std::string::npos) << line;
      EXPECT_NE(line.find("simgrid.intra_node"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(ok, 2);
}

TEST_F(Sweep, ResumeRedoesNothingAndARerunWithoutItIsRefused) {
  const std::string sweep = write_sweep("grid", grid_sweep("again"));
  ASSERT_EQ(run({"sweep", sweep, "--db", db("s")}).status, 0);
  const std::string before = rows(db("s"), "again");
  CliResult resumed = run({"sweep", sweep, "--resume", "--db", db("s")});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("6 points, 0 computed, 6 already in the store"), std::string::npos) << resumed.err;
  EXPECT_EQ(rows(db("s"), "again"), before);
  CliResult rerun = run({"sweep", sweep, "--db", db("s")});
  EXPECT_EQ(rerun.status, 2);
  EXPECT_NE(rerun.err.find("already has 6 points"), std::string::npos) << rerun.err;
  EXPECT_NE(rerun.err.find("--resume"), std::string::npos) << rerun.err;
}

TEST_F(Sweep, BadSweepFilesNameTheFileAndPath) {
  json bad = grid_sweep("bad");
  bad["gird"] = 1;
  CliResult r = run({"sweep", write_sweep("bad", bad), "--db", db("s")});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.json: /gird: unknown key"), std::string::npos) << r.err;
  json empty = grid_sweep("empty");
  empty["grid"]["training.precision"] = json::array();
  r = run({"sweep", write_sweep("empty", empty), "--db", db("s")});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/grid/training.precision: found an array, expected a non-empty list"), std::string::npos) << r.err;
  json both = grid_sweep("both");
  both["points"] = json::array({{{"training.precision", "bf16"}}});
  r = run({"sweep", write_sweep("both", both), "--db", db("s")});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("has both \"grid\" and \"points\""), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db("s"))) << "nothing written for a bad sweep file";
}

// A sweep whose points each take a while (about 1.5 s of one core): the plan search of
// Mixtral 8x7B on 64 GPUs, its plan left open, at several global batch sizes.
json slow_sweep(const std::string& name, int points) {
  json batches = json::array();
  for (int i = 0; i < points; ++i) batches.push_back(256 * (i + 1));
  return {{"name", name},
          {"base", std::string(MONARCH_SOURCE_DIR) + "/scenarios/mixtral-8x7b-64-h100.json"},
          {"backends", {"analytical"}},
          {"grid", {{"training.global_batch_size", batches}}}};
}

TEST_F(Sweep, AKilledWorkerLosesOnlyItsPointWhichIsHandedOutAgain) {
  const std::string sweep = write_sweep("kill", slow_sweep("kill", 3));
  const pid_t pid = spawn({"sweep", sweep, "--jobs", "2", "--db", db("s")}, dir_);
  bool killed = false;
  for (int i = 0; i < 3000 && !killed; ++i) {
    for (pid_t w : point_workers(sweep)) killed = killed || ::kill(w, SIGKILL) == 0;
    if (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(killed) << "no worker process seen";
  ASSERT_EQ(wait_exit(pid), 0) << monarch::test::slurp(dir_ / "bg.stderr");
  const std::string err = monarch::test::slurp(dir_ / "bg.stderr");
  EXPECT_NE(err.find("killed by signal 9"), std::string::npos) << err;
  EXPECT_NE(err.find("handed out again"), std::string::npos) << err;
  EXPECT_NE(err.find("3 points, 3 computed, 0 already in the store, 3 ok"), std::string::npos) << err;
}

TEST_F(Sweep, InterruptedThenResumedComputesEachPointOnce) {
  const int kPoints = 4;
  const std::string sweep = write_sweep("int", slow_sweep("int", kPoints));
  const pid_t pid = spawn({"sweep", sweep, "--db", db("s")}, dir_);
  // Interrupt once a point is recorded and another is being computed.
  bool sent = false;
  for (int i = 0; i < 6000 && !sent; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!fs::exists(db("s"))) continue;
    CliResult r = run({"--db", db("s"), "runs", "export", "--sweep", "int"});
    if (r.status == 0 && !point_workers(sweep).empty()) sent = ::kill(pid, SIGINT) == 0;
  }
  ASSERT_TRUE(sent);
  const int status = wait_exit(pid);
  const std::string err = monarch::test::slurp(dir_ / "bg.stderr");
  if (status == 0) GTEST_SKIP() << "the sweep finished before the interrupt arrived";
  ASSERT_EQ(status, 130) << err;
  EXPECT_NE(err.find("--resume computes the rest"), std::string::npos) << err;
  EXPECT_TRUE(point_workers(sweep).empty()) << "workers stopped with the coordinator";
  CliResult before = run({"--db", db("s"), "runs", "export", "--sweep", "int", "--format", "json"});
  ASSERT_EQ(before.status, 0) << before.err;
  const size_t recorded = json::parse(before.out)["points"].size();
  ASSERT_GE(recorded, 1u);
  ASSERT_LT(recorded, static_cast<size_t>(kPoints));

  CliResult resumed = run({"sweep", sweep, "--resume", "--db", db("s")});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find(std::to_string(kPoints) + " points, " + std::to_string(kPoints - recorded) + " computed, " +
                             std::to_string(recorded) + " already in the store"),
            std::string::npos)
      << resumed.err;
  CliResult after = run({"--db", db("s"), "runs", "export", "--sweep", "int", "--format", "json"});
  const json points = json::parse(after.out)["points"];
  ASSERT_EQ(points.size(), static_cast<size_t>(kPoints));
  for (int i = 0; i < kPoints; ++i) {
    EXPECT_EQ(points[i]["position"], i);
    EXPECT_EQ(points[i]["status"], "ok");
  }
}

#ifdef MONARCH_MPIEXEC
std::vector<std::string> mpirun(int np) {
  return {MONARCH_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)};
}

TEST_F(Sweep, ThreeMpiRanksGiveTheSameRowsAsOneWorker) {
  const std::string sweep = write_sweep("grid", grid_sweep("mpi"));
  CliResult one = run({"sweep", sweep, "--db", db("one")});
  ASSERT_EQ(one.status, 0) << one.err;
  CliResult mpi = run({"sweep", sweep, "--db", db("mpi")}, mpirun(3));
  ASSERT_EQ(mpi.status, 0) << mpi.out << mpi.err;
  EXPECT_NE(mpi.err.find("6 points, 6 computed"), std::string::npos) << mpi.err;
  EXPECT_EQ(rows(db("one"), "mpi"), rows(db("mpi"), "mpi"));
}

TEST_F(Sweep, UnderMpiAKilledPointIsHandedOutAgain) {
  const std::string sweep = write_sweep("kill", slow_sweep("mpikill", 3));
  std::vector<std::string> args = mpirun(3);
  const std::string launcher = args.front();
  args.erase(args.begin());
  args.push_back(MONARCH_SIM_BIN);
  for (const char* a : {"sweep"}) args.push_back(a);
  args.push_back(sweep);
  args.push_back("--db");
  args.push_back(db("s"));
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen((dir_ / "bg.stderr").c_str(), "w", stderr);
    std::freopen((dir_ / "bg.stdout").c_str(), "w", stdout);
    std::vector<char*> argv = {const_cast<char*>(launcher.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(launcher.c_str(), argv.data());
    ::_exit(127);
  }
  bool killed = false;
  for (int i = 0; i < 6000 && !killed; ++i) {
    for (pid_t w : point_workers(sweep)) killed = killed || ::kill(w, SIGKILL) == 0;
    if (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(killed) << "no worker process seen";
  ASSERT_EQ(wait_exit(pid), 0) << monarch::test::slurp(dir_ / "bg.stderr");
  const std::string err = monarch::test::slurp(dir_ / "bg.stderr");
  EXPECT_NE(err.find("handed out again"), std::string::npos) << err;
  EXPECT_NE(err.find("3 points, 3 computed, 0 already in the store, 3 ok"), std::string::npos) << err;
}
#endif

}  // namespace
