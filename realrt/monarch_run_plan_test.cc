// monarch-run and plan files, end to end under mpirun: a self-contained plan file
// (monarch-plan/2) trains with no other file; every way a plan file can be wrong exits 2 before
// any training, with the reason; the result's timeline of the real run (realrt/span_recorder.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/plan_io.h"
#include "realrt/run_io.h"
#include "realrt/run_test_support.h"

namespace {

using namespace monarch::realrt::run_test;

// ---------------------------------------------------------------------------------------------
// Plan files: self-contained (monarch-plan/2), older ones (monarch-plan/1 + --scenario), and
// every way a plan file can be wrong exits 2 before any training, with the reason.

using monarch::PlanGraph;
using monarch::Scenario;

// The plan graph a scenario with a fixed plan lowers to, and that scenario.
monarch::realrt::RunInput input_of(const std::string& scenario_file) {
  auto in = monarch::realrt::read_run_input(kData + scenario_file, 0);
  EXPECT_TRUE(in.ok()) << in.problems()[0].to_string();
  return *in;
}

// Writes `j` (a plan document) to the test folder; returns its path.
std::string write_json(const std::string& name, const nlohmann::json& j) {
  std::filesystem::create_directories(kTmp);
  const std::string path = kTmp + name;
  std::ofstream(path) << j.dump();
  return path;
}

nlohmann::json plan_json(const monarch::realrt::RunInput& in, bool with_scenario) {
  return monarch::plan_graph_to_json(in.graph, with_scenario ? &in.scenario : nullptr);
}

void expect_refused(const Launch& r, const std::string& reason) {
  EXPECT_EQ(r.status, 2) << r.log;
  EXPECT_NE(r.log.find(reason), std::string::npos) << "expected \"" << reason << "\" in:\n" << r.log;
  EXPECT_EQ(r.log.find("step 0 loss"), std::string::npos) << "trained despite a bad plan file:\n" << r.log;
}

TEST(MonarchRunPlanFile, SelfContainedPlanTrainsAlone) {
  const auto in = input_of("tiny_gpt_pp2.json");
  const std::string plan = write_json("self_contained.json", plan_json(in, true));
  const Launch a = mpirun(2, plan + " --steps 3 --output " + kTmp + "from_plan.json", "from_plan");
  ASSERT_EQ(a.status, 0) << a.log;
  const Launch b = mpirun(2, kData + "tiny_gpt_pp2.json --steps 3 --output " + kTmp + "from_scenario.json", "from_scenario");
  ASSERT_EQ(b.status, 0) << b.log;
  // The same plan, the same model: the same losses as training the scenario directly.
  EXPECT_EQ(losses_of(kTmp + "from_plan.json"), losses_of(kTmp + "from_scenario.json"));
  EXPECT_EQ(losses_of(kTmp + "from_plan.json").size(), 3u);
  // The scenario it names agrees (steps may differ): runs too.
  const Launch c = mpirun(2, plan + " --scenario " + kData + "tiny_gpt_pp2.json --steps 1", "agreeing_scenario");
  EXPECT_EQ(c.status, 0) << c.log;
}

TEST(MonarchRunPlanFile, DisagreeingScenarioNamesTheKey) {
  const auto in = input_of("tiny_gpt_pp2.json");
  const std::string plan = write_json("disagree.json", plan_json(in, true));
  std::ifstream f(kData + "tiny_gpt_pp2.json");
  nlohmann::json other = nlohmann::json::parse(f);
  other["model"]["hidden_size"] = 256;
  const std::string scen = write_json("other_scenario.json", other);
  expect_refused(mpirun(2, plan + " --scenario " + scen, "disagree"), "/model/hidden_size: the plan file has 128, --scenario has 256");
}

TEST(MonarchRunPlanFile, WrongRankCountVersionOrJsonExits2) {
  const auto in = input_of("tiny_gpt_pp2.json");
  const std::string plan = write_json("ranks.json", plan_json(in, true));
  expect_refused(mpirun(1, plan, "plan_ranks"), "the plan needs 2 ranks");
  nlohmann::json j = plan_json(in, true);
  j["format"] = "monarch-plan/4";
  expect_refused(mpirun(2, write_json("v3.json", j), "v3"), "found \"monarch-plan/4\" (string), this build reads");
  std::filesystem::create_directories(kTmp);
  std::ofstream(kTmp + "truncated.json") << plan_json(in, true).dump().substr(0, 200);
  expect_refused(mpirun(2, kTmp + "truncated.json", "truncated"), "truncated.json:1:");
  j = plan_json(in, true);
  j["scenario"]["model"]["num_layers"] = "four";
  expect_refused(mpirun(2, write_json("bad_scenario.json", j), "bad_scenario"), "/scenario/model/num_layers");
}

// Index of rank r's first task of `kind` (and phase), or -1.
int find_task(const nlohmann::json& plan, int r, const std::string& kind, const std::string& phase = "") {
  const auto& tasks = plan["ranks"][r]["tasks"];
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i]["kind"] == kind && (phase.empty() || tasks[i].value("phase", "") == phase)) return static_cast<int>(i);
  return -1;
}

TEST(MonarchRunPlanFile, TaskGraphThatDoesNotMatchThePlanExits2) {
  const auto in = input_of("tiny_gpt_pp2.json");
  // A receive whose send does not exist: the graph does not hold together.
  nlohmann::json j = plan_json(in, true);
  const int recv = find_task(j, 1, "recv");
  ASSERT_GE(recv, 0);
  j["ranks"][1]["tasks"][recv]["tag"] = 999;
  expect_refused(mpirun(2, write_json("unmatched.json", j), "unmatched"), "the task graph does not hold together");
  // A send and its receive both renamed: consistent, but not the messages the runtime exchanges.
  j = plan_json(in, true);
  const int send = find_task(j, 0, "send", "forward");
  ASSERT_GE(send, 0);
  const auto tag = j["ranks"][0]["tasks"][send]["tag"];
  int paired = -1;
  for (size_t i = 0; i < j["ranks"][1]["tasks"].size(); ++i)
    if (j["ranks"][1]["tasks"][i]["kind"] == "recv" && j["ranks"][1]["tasks"][i]["tag"] == tag) paired = static_cast<int>(i);
  ASSERT_GE(paired, 0);
  j["ranks"][0]["tasks"][send]["tag"] = 999;
  j["ranks"][1]["tasks"][paired]["tag"] = 999;
  expect_refused(mpirun(2, write_json("retagged.json", j), "retagged"), "retagged.json:/ranks/0: send of forward chunk 0 micro-batch 0 names peer 1 tag 999, the runtime exchanges it with rank 1 tag");
  // A rank in a stage the plan does not place it in.
  j = plan_json(in, true);
  j["ranks"][1]["stage"] = 0;
  expect_refused(mpirun(2, write_json("stage.json", j), "stage"), "/ranks/1/stage: found 0, but the plan places rank 1 in pipeline stage 1");
}

// ---------------------------------------------------------------------------------------------
// Timeline of the real run (realrt/span_recorder.h): spans of every rank, start >= 0, no overlap
// on a rank's compute stream, one forward and one backward per (chunk, micro-batch), and the
// collectives the plan graph names (plus the tied-embedding all-reduce it does not model).
void check_timeline(const std::string& scenario_file, int np, const std::string& name) {
  const auto in = input_of(scenario_file);
  const std::string out = kTmp + name + ".json";
  const Launch r = mpirun(np, kData + scenario_file + " --steps 2 --output " + out, name);
  ASSERT_EQ(r.status, 0) << r.log;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  const auto& tl = j.at("result").at("timeline");
  ASSERT_FALSE(tl.empty());
  const int64_t per_rank_passes = in.graph.num_micro_batches * in.graph.plan.vpp;
  for (int rank = 0; rank < np; ++rank) {
    std::vector<std::pair<double, double>> compute;
    std::set<std::string> collectives;
    int fwd = 0, bwd = 0, opt = 0;
    for (const auto& s : tl) {
      if (s["rank"] != rank) continue;
      const double t0 = s["start_s"], t1 = s["end_s"];
      EXPECT_GE(t0, 0.0);
      EXPECT_GE(t1, t0);
      const std::string cat = s["category"], nm = s["name"];
      if (s["stream"] == "compute") compute.push_back({t0, t1});
      if (cat == "compute") (nm.rfind("fwd", 0) == 0 ? fwd : bwd) += 1;
      if (cat == "optimizer") ++opt;
      if (cat == "collective") collectives.insert(nm);
    }
    EXPECT_EQ(fwd, per_rank_passes) << "rank " << rank;
    EXPECT_EQ(bwd, per_rank_passes) << "rank " << rank;
    EXPECT_EQ(opt, 1) << "rank " << rank;
    std::sort(compute.begin(), compute.end());
    for (size_t i = 1; i < compute.size(); ++i)
      EXPECT_LE(compute[i - 1].second, compute[i].first) << "rank " << rank << ": compute spans overlap";
    std::set<std::string> planned;
    for (const auto& t : in.graph.ranks[static_cast<size_t>(rank)].tasks)
      if (t.kind == monarch::TaskKind::kCollective)
        planned.insert(std::string(monarch::nccl_name(t.collective)) + " " +
                       monarch::to_string(in.graph.groups[static_cast<size_t>(t.group)].kind));
    EXPECT_EQ(collectives, planned) << "rank " << rank;
  }
}

TEST(MonarchRunTimeline, TensorAndPipelineParallel) { check_timeline("tiny_gpt_tp2_pp2.json", 4, "timeline_tp2_pp2"); }
TEST(MonarchRunTimeline, Zero1DataParallel) { check_timeline("tiny_gpt_dp2_zero1.json", 2, "timeline_zero1"); }


}  // namespace
