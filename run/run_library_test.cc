// The run library end to end on shipped scenarios: the same ranking and figures as the search
// and the analytical model give, slower backends streamed as they arrive, cancellation that
// leaves nothing, the result file and the store.
#include "run/run_library.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "core/scenario_io.h"
#include "results/test_support.h"
#include "sim/analytical_backend.h"
#include "strategies/plan_costs.h"

namespace monarch::run {
namespace {

Scenario shipped(const std::string& name) {
  auto s = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + name);
  EXPECT_TRUE(s.ok()) << name;
  return std::move(s).value();
}

RunRequest analytical_only() {
  RunRequest r;
  r.backends = {Backend::kAnalytical};
  return r;
}

TEST(RunLibrary, AnalyticalRunIsTheSearchRankingWithTheModelsFigures) {
  const Scenario s = shipped("small-gpt-8.json");
  const SearchResult sr = search_plans_analytical(s);
  int ranked_events = 0;
  RunEvents events;
  events.ranked = [&](const RunReport&) { ++ranked_events; };
  events.entry = [](const RunEntry&) { ADD_FAILURE() << "no slower backend was asked for"; };
  const RunOutcome out = run_scenario(s, analytical_only(), events);
  ASSERT_EQ(out.end, RunEnd::kDone);
  EXPECT_EQ(ranked_events, 1);
  const RunReport& rep = out.report;
  ASSERT_EQ(rep.entries.size(), sr.ranked.size());
  for (size_t i = 0; i < sr.ranked.size(); ++i) {
    EXPECT_EQ(rep.entries[i].rank, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rep.entries[i].result.plan, sr.ranked[i].plan);
    EXPECT_EQ(rep.entries[i].result.iteration_time_s, run_analytical(s, sr.ranked[i].plan).iteration_time_s);
  }
  ASSERT_EQ(rep.baseline.has_value(), sr.baseline.has_value());
  EXPECT_EQ(rep.search.plans_in_space, sr.plans_in_space);
  EXPECT_GT(rep.parameters, 0);

  const nlohmann::json j = nlohmann::json::parse(result_file_text(rep));
  EXPECT_EQ(j["format"], "monarch-sim-result/1");
  EXPECT_EQ(j["results"].size(), rep.entries.size());
  EXPECT_EQ(j["results"][0]["rank"], 1);
  EXPECT_EQ(j["search"]["plans_in_space"], sr.plans_in_space);
  EXPECT_EQ(j["baseline"].is_object(), rep.baseline.has_value());
}

TEST(RunLibrary, CancelStopsWithNothingToWrite) {
  const Scenario s = shipped("default.json");  // enough plans for the search to poll the flag
  RunEvents events;
  events.control.cancelled = [] { return true; };
  events.ranked = [](const RunReport&) { ADD_FAILURE() << "a cancelled search ranks nothing"; };
  const RunOutcome out = run_scenario(s, analytical_only(), events);
  EXPECT_EQ(out.end, RunEnd::kCancelled);
}

TEST(RunLibrary, ProgressIsReportedWhileSearching) {
  const Scenario s = shipped("default.json");  // over 4096 plans: the search reports progress
  int64_t last_total = 0;
  RunEvents events;
  events.control.progress = [&](const std::string& stage, int64_t, int64_t total) {
    EXPECT_EQ(stage, "searching plans");
    last_total = total;
  };
  ASSERT_EQ(run_scenario(s, analytical_only(), events).end, RunEnd::kDone);
  EXPECT_GT(last_total, 0);
}

TEST(RunLibrary, RecommendationPlansAreTellApartByTheirSharding) {
  const Scenario s = shipped("dlrm-dcnv2-8-h100.json");
  const RunOutcome out = run_scenario(s, analytical_only(), {});
  ASSERT_EQ(out.end, RunEnd::kDone);
  ASSERT_TRUE(out.report.recommendation);
  ASSERT_GE(out.report.entries.size(), 2u);
  std::set<std::string> shardings;
  for (const RunEntry& e : out.report.entries) {
    EXPECT_FALSE(e.sharding.empty());
    EXPECT_FALSE(e.result.plan.embedding_sharding.empty());
    EXPECT_NE(e.sharding.find(e.result.plan.embedding_sharding), std::string::npos) << e.sharding;
    EXPECT_NE(describe(e.result.plan).find("tables=["), std::string::npos);
    shardings.insert(e.result.plan.embedding_sharding);
  }
  EXPECT_EQ(shardings.size(), out.report.entries.size()) << "every ranked sharding plan is its own plan";
  const nlohmann::json j = nlohmann::json::parse(result_file_text(out.report));
  EXPECT_FALSE(j.contains("search"));
  EXPECT_EQ(j["results"][0]["sharding"], out.report.entries[0].sharding);
}

TEST(RunLibrary, EmitPlanIsRefusedForRecommendationModels) {
  RunRequest r = analytical_only();
  r.lower_chosen_plan = true;
  const RunOutcome out = run_scenario(shipped("dlrm-dcnv2-8-h100.json"), r, {});
  ASSERT_EQ(out.end, RunEnd::kInvalid);
  EXPECT_EQ(out.problems.front().where, "--emit-plan");
}

TEST(RunLibrary, ChosenPlanIsLoweredWhenAsked) {
  RunRequest r = analytical_only();
  r.lower_chosen_plan = true;
  const RunOutcome out = run_scenario(shipped("small-gpt-8.json"), r, {});
  ASSERT_EQ(out.end, RunEnd::kDone);
  ASSERT_TRUE(out.report.chosen_graph.has_value());
  EXPECT_EQ(out.report.chosen_graph->plan, out.report.entries.front().result.plan);
}

TEST(RunLibrary, BadSimgridSettingIsNamed) {
  RunRequest r = analytical_only();
  r.settings.simgrid = {{"fidelity", "sloppy"}};
  const Problems pr = check_request(r, "--backend");
  ASSERT_FALSE(pr.empty());
  EXPECT_NE(pr.front().where.find("simgrid.fidelity"), std::string::npos) << pr.front().where;
  EXPECT_EQ(run_scenario(shipped("small-gpt-8.json"), r, {}).end, RunEnd::kInvalid);
}

TEST(RunLibrary, BackendsTheBuildLacksAreRefusedByName) {
  RunRequest r;
  const BuildFeatures f = build_features();
  if (f.simgrid && f.real_cpu && f.real_gpu) GTEST_SKIP() << "this build has every backend";
  r.backends = {!f.simgrid ? Backend::kSimgrid : !f.real_cpu ? Backend::kRealCpu : Backend::kRealGpu};
  const Problems pr = check_request(r, "--backend");
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr.front().where, "--backend");
  EXPECT_NE(pr.front().message.find("which this build lacks"), std::string::npos);
}

TEST(RunLibrary, FailedRealRunNamesItsBackendOnce) {
  if (!build_features().real_cpu) GTEST_SKIP() << "no CPU runtime in this build";
  const char* before = std::getenv("MONARCH_RUN");
  const std::string saved = before ? before : "";
  setenv("MONARCH_RUN", "/nonexistent/monarch-run", 1);
  RunRequest r;
  r.backends = {Backend::kAnalytical, Backend::kRealCpu};
  const RunOutcome out = run_scenario(shipped("small-gpt-8.json"), r, {});
  if (before) setenv("MONARCH_RUN", saved.c_str(), 1);
  else unsetenv("MONARCH_RUN");
  ASSERT_EQ(out.end, RunEnd::kFailed);
  ASSERT_EQ(out.problems.size(), 1u);
  EXPECT_EQ(out.problems.front().to_string(),
            "--backend real-cpu: monarch-run not found at /nonexistent/monarch-run (set MONARCH_RUN)");
  ASSERT_TRUE(out.failed_run.has_value());
  EXPECT_EQ(out.failed_run->backend, "real-cpu");
}

TEST(RunLibrary, SimgridEntriesArriveAsTheyAreSimulatedAndReRank) {
  if (!build_features().simgrid) GTEST_SKIP() << "no SimGrid in this build";
  const Scenario s = shipped("small-gpt-8.json");
  RunRequest r;
  r.backends = {Backend::kAnalytical, Backend::kSimgrid};
  bool ranked_first = false;
  std::vector<RunEntry> arrived;
  RunEvents events;
  events.ranked = [&](const RunReport& rep) {
    ranked_first = arrived.empty();
    for (const RunEntry& e : rep.entries) EXPECT_EQ(e.result.backend, "analytical");
  };
  events.entry = [&](const RunEntry& e) { arrived.push_back(e); };
  const RunOutcome out = run_scenario(s, r, events);
  ASSERT_EQ(out.end, RunEnd::kDone);
  EXPECT_TRUE(ranked_first);
  size_t plans = 0;
  for (const RunEntry& e : out.report.entries) plans += e.result.backend == "analytical" ? 1 : 0;
  ASSERT_EQ(arrived.size(), std::min(kRerankTopPlans, plans));
  for (const RunEntry& e : arrived) EXPECT_EQ(e.result.backend, "simgrid");
  // The re-ranked plans come first, each analytical then simgrid, by SimGrid time.
  double last_simgrid_s = 0;
  for (size_t i = 0; i < 2 * arrived.size(); i += 2) {
    const RunEntry& a = out.report.entries[i];
    const RunEntry& b = out.report.entries[i + 1];
    EXPECT_EQ(a.result.backend, "analytical");
    EXPECT_EQ(b.result.backend, "simgrid");
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.result.plan, b.result.plan);
    EXPECT_GE(b.result.iteration_time_s, last_simgrid_s);
    last_simgrid_s = b.result.iteration_time_s;
  }
}

TEST(RunLibrary, RecordsEveryEntryAndFailedRuns) {
  testing::TempDir dir;
  auto store = Store::open(dir.file("runs.db"));
  ASSERT_TRUE(store.ok());
  const Scenario s = shipped("small-gpt-8.json");
  const RunOutcome out = run_scenario(s, analytical_only(), {});
  ASSERT_EQ(out.end, RunEnd::kDone);
  const auto t0 = std::chrono::system_clock::now();
  auto ids = record_runs(*store, out.report, t0);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), out.report.entries.size());

  BackendResult failed;
  failed.backend = "real-cpu";
  failed.plan = out.report.entries.front().result.plan;
  failed.measured = true;
  auto id = record_failed_run(*store, s, failed, "rank 3 crashed", t0);
  ASSERT_TRUE(id.ok());
  auto back = store->load_run(*id);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->record.status, RunStatus::kFailed);
  EXPECT_EQ(back->record.error_message, "rank 3 crashed");
  EXPECT_EQ(back->record.result.plan, failed.plan);
}

}  // namespace
}  // namespace monarch::run
