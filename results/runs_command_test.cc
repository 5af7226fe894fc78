#include "results/runs_command.h"

#include <sstream>

#include <gtest/gtest.h>

#include <cmath>

#include "core/result_io.h"
#include "results/test_support.h"

namespace monarch {
namespace {

using nlohmann::json;
using testing::sample_record;
using testing::TempDir;

struct Output {
  int rc = -1;
  std::string out, err;
};

Output runs(const std::vector<std::string>& args, const std::string& db) {
  std::ostringstream out, err;
  Output o;
  o.rc = run_runs_command(args, db, out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) v.push_back(line);
  return v;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A store with: 1 analytical (plan P), 2 real-gpu measured (plan P), 3 simgrid (plan Q, a warning),
// 4 hostile scenario name (analytical, plan P).
class RunsCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("runs.db");
    Expected<Store> store = Store::open(path_);
    ASSERT_TRUE(store.ok());
    RunRecord sim = sample_record("gpt-small", "analytical");
    RunRecord real = sample_record("gpt-small", "real-gpu", /*measured=*/true);
    real.started_at += std::chrono::seconds(10);
    RunRecord other = sample_record("gpt-small", "simgrid");
    other.result.plan.tp = 4;
    other.result.plan.dp = 8;
    other.result.memory.stages.pop_back();
    other.result.communication.pop_back();
    other.started_at += std::chrono::seconds(20);
    other.result.warnings = {"TP 4 x micro-batch 1: tiny GEMMs run below peak"};
    RunRecord hostile = sample_record(kHostile, "analytical");
    hostile.started_at += std::chrono::seconds(30);
    for (const RunRecord* r : {&sim, &real, &other, &hostile}) ASSERT_TRUE(store->record_run(*r).ok());
  }

  static constexpr const char* kHostile = "x'); DROP TABLE runs; --, \"quoted\"";
  TempDir dir_;
  std::string path_;
};

TEST_F(RunsCommand, ListsOneLinePerRunNewestFirst) {
  Output o = runs({"list"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  std::vector<std::string> l = lines(o.out);
  ASSERT_EQ(l.size(), 5u) << o.out;  // header + 4 runs
  EXPECT_TRUE(contains(l[0], "ID"));
  EXPECT_EQ(l[1].substr(0, 2), "4 ");
  EXPECT_EQ(l[4].substr(0, 2), "1 ");
  EXPECT_TRUE(contains(l[1], kHostile));
  EXPECT_TRUE(contains(l[3], "real-gpu"));
  EXPECT_TRUE(contains(l[3], "tp8 pp2 dp4 cp1 ep1 vpp2 mbs1"));
  EXPECT_TRUE(contains(l[3], "2.5"));

  Output sim = runs({"list", "--backend", "simgrid"}, path_);
  ASSERT_EQ(sim.rc, 0);
  ASSERT_EQ(lines(sim.out).size(), 2u);
  EXPECT_EQ(lines(sim.out)[1].substr(0, 2), "3 ");

  Output hostile = runs({"list", "--scenario", kHostile}, path_);
  ASSERT_EQ(lines(hostile.out).size(), 2u);
  Output none = runs({"list", "--scenario", "nope"}, path_);
  EXPECT_EQ(none.rc, 0);
  EXPECT_EQ(lines(none.out).size(), 1u);
  EXPECT_TRUE(contains(none.err, "no runs match"));
}

TEST_F(RunsCommand, ShowGivesTheResultFileFields) {
  Output o = runs({"show", "2"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_EQ(j["format"], "monarch-sim-result/1");
  EXPECT_EQ(j["run"]["id"], 2);
  EXPECT_EQ(j["run"]["scenario_name"], "gpt-small");
  EXPECT_EQ(j["run"]["status"], "ok");
  EXPECT_EQ(j["run"]["host"], "node-7");
  EXPECT_EQ(j["scenario"]["model"]["preset"], "gpt3-1.3b");
  EXPECT_EQ(j["parameters"], 1315758080);
  ASSERT_EQ(j["results"].size(), 1u);
  Expected<BackendResult> r = result_from_json(j["results"][0], "/results/0");
  ASSERT_TRUE(r.ok());
  RunRecord expected = sample_record("gpt-small", "real-gpu", true);
  EXPECT_EQ(normalized_dump(result_to_json(*r)), normalized_dump(result_to_json(expected.result)));
  EXPECT_EQ(j["results"][0]["measured"], true);
  EXPECT_EQ(j["results"][0]["losses"].size(), 4u);
}

TEST_F(RunsCommand, ShowKeepsAHostileNameUnchanged) {
  Output o = runs({"show", "4"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(json::parse(o.out)["run"]["scenario_name"], kHostile);
}

TEST_F(RunsCommand, CompareSimulatedAndMeasuredRunOfOnePlan) {
  Output o = runs({"compare", "1", "2"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "Both runs use the same plan")) << o.out;
  // predicted 2.25 s, measured 2.5 s: (2.25 - 2.5) / 2.5 = -10%.
  EXPECT_TRUE(contains(o.out, "Prediction error of analytical (run 1) against the measured real-gpu run 2")) << o.out;
  EXPECT_TRUE(contains(o.out, "iteration time  -10.0%")) << o.out;
  EXPECT_TRUE(contains(o.out, "peak memory     0.0%")) << o.out;
  // Side-by-side rows: B vs A = (2.5 - 2.25) / 2.25 = +11.1%.
  bool found = false;
  for (const std::string& l : lines(o.out))
    if (contains(l, "iteration_time_s") && contains(l, "2.25") && contains(l, "2.5") && contains(l, "+11.1%"))
      found = true;
  EXPECT_TRUE(found) << o.out;
  EXPECT_TRUE(contains(o.out, "stage 1 activations"));
  EXPECT_TRUE(contains(o.out, "all-reduce tp bytes"));
  EXPECT_TRUE(contains(o.out, "send-recv pp time_s"));
}

TEST_F(RunsCommand, CompareListsTheLargestDifferencesFirst) {
  Output o = runs({"compare", "2", "1"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  const size_t at = o.out.find("Largest differences first");
  ASSERT_NE(at, std::string::npos) << o.out;
  std::vector<std::string> rows = lines(o.out.substr(at));
  ASSERT_GE(rows.size(), 3u);
  EXPECT_TRUE(contains(rows[1], "measured") && contains(rows[1], "predicted")) << o.out;
  // Every row's |error| is at most the one above it.
  double previous = 1e300;
  for (size_t i = 2; i < rows.size() && contains(rows[i], "%"); ++i) {
    const std::string pct = rows[i].substr(rows[i].rfind(' ') + 1);
    const double e = std::fabs(std::stod(pct));
    EXPECT_LE(e, previous + 1e-9) << rows[i];
    previous = e;
  }
}

TEST_F(RunsCommand, CompareValidateSetsMeasuredRunsAgainstPredictionsOfTheirPlan) {
  Output o = runs({"compare", "--validate"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "run 2 gpt-small")) << o.out;
  EXPECT_TRUE(contains(o.out, "-10.0%")) << o.out;
  EXPECT_TRUE(contains(o.out, "analytical: MAPE 10.00% over 1 measured runs")) << o.out;
  Output bad = runs({"compare", "--validate", "1"}, path_);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_TRUE(contains(bad.err, "is a prediction")) << bad.err;
}

TEST_F(RunsCommand, CompareDifferentPlans) {
  Output o = runs({"compare", "1", "3"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "Different plans")) << o.out;
  EXPECT_FALSE(contains(o.out, "Prediction error"));
  EXPECT_TRUE(contains(o.out, "tp4 pp2 dp8"));
  // Run 3 has no stage 1 and no pp traffic: shown as absent, not as a 100% drop.
  bool absent_stage = false, absent_comm = false;
  for (const std::string& l : lines(o.out)) {
    if (contains(l, "stage 1 total") && contains(l, " - ")) absent_stage = true;
    if (contains(l, "send-recv pp bytes") && contains(l, " - ")) absent_comm = true;
  }
  EXPECT_TRUE(absent_stage) << o.out;
  EXPECT_TRUE(absent_comm) << o.out;
}

// A stored run shows its plan's warnings as the live run's result file and table do.
TEST_F(RunsCommand, ShowAndCompareGiveThePlansWarnings) {
  Output show = runs({"show", "3"}, path_);
  ASSERT_EQ(show.rc, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["results"][0]["warnings"],
            json::array({"TP 4 x micro-batch 1: tiny GEMMs run below peak"}));
  Output plain = runs({"show", "1"}, path_);
  EXPECT_FALSE(json::parse(plain.out)["results"][0].contains("warnings"));
  Output o = runs({"compare", "1", "3"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "Warning (B, run 3): TP 4 x micro-batch 1: tiny GEMMs run below peak")) << o.out;
  EXPECT_FALSE(contains(o.out, "Warning (A"));
}

TEST_F(RunsCommand, CompareTwoPredictionsOfOnePlanHasNoPredictionError) {
  Output o = runs({"compare", "1", "4"}, path_);
  ASSERT_EQ(o.rc, 0);
  EXPECT_TRUE(contains(o.out, "Neither run is measured"));
}

TEST_F(RunsCommand, ExportCsvOneRowPerRun) {
  Output o = runs({"export"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  std::vector<std::string> l = lines(o.out);
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0].substr(0, 40), "id,started_at,ended_at,scenario_name,bac");
  EXPECT_TRUE(contains(o.out, "\"x'); DROP TABLE runs; --, \"\"quoted\"\"\""));  // RFC 4180 quoting
  EXPECT_TRUE(contains(l[3], ",2.5,"));   // run 2: the exact measured iteration time
  EXPECT_TRUE(contains(l[3], ",real-gpu,ok,true,"));
  Output only = runs({"export", "--format", "csv", "--backend", "real-gpu"}, path_);
  EXPECT_EQ(lines(only.out).size(), 2u);
}

TEST_F(RunsCommand, ExportJsonHasEverything) {
  Output o = runs({"export", "--format", "json"}, path_);
  ASSERT_EQ(o.rc, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_EQ(j["format"], "monarch-sim-runs/1");
  ASSERT_EQ(j["runs"].size(), 4u);
  EXPECT_EQ(j["runs"][0]["run"]["scenario_name"], kHostile);
  EXPECT_EQ(j["runs"][3]["results"][0]["timeline"].size(), 4u);
}

TEST_F(RunsCommand, BadIdsAndOptionsExitWith2) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"show", "abc"}, "expected a run id"},
      {{"show", "0"}, "expected a run id"},
      {{"show", "99"}, "no run with id 99"},
      {{"show"}, "ID"},
      {{"compare", "1"}, "IDS"},
      {{"compare", "1", "77"}, "no run with id 77"},
      {{"export", "--format", "xml"}, "xml"},
      {{"list", "--bogus"}, "--bogus"},
      {{"frobnicate"}, "frobnicate"},
      {{}, "subcommand"},
  };
  for (const Case& c : cases) {
    Output o = runs(c.args, path_);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(o.rc, 2) << joined;
    EXPECT_TRUE(contains(o.err, c.message)) << joined << ": " << o.err;
  }
}

TEST_F(RunsCommand, DbOptionAmongTheArgumentsWins) {
  Output o = runs({"list", "--db", path_}, dir_.file("elsewhere.db"));
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(lines(o.out).size(), 5u);
}

TEST_F(RunsCommand, MissingStoreIsExit2AndIsNotCreated) {
  Output o = runs({"list"}, dir_.file("never.db"));
  EXPECT_EQ(o.rc, 2);
  EXPECT_TRUE(contains(o.err, "no results store here")) << o.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("never.db")));
}

TEST_F(RunsCommand, HelpExitsZero) {
  Output o = runs({"--help"}, path_);
  EXPECT_EQ(o.rc, 0);
  EXPECT_TRUE(contains(o.out, "compare"));
}

}  // namespace
}  // namespace monarch
