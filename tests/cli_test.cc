// Runs the built monarch-sim binary: bad scenarios and options must exit 2 with a message that
// names the JSON path or the option; good ones exit 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/cli_run_support.h"

#include "core/scenario_io_bad_cases.h"
#include "sim/chrome_trace_check.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using Result = monarch::test::CliResult;
using monarch::test::shell_quote;
using monarch::test::slurp;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    dir_ = fs::temp_directory_path() / ("monarch_cli_test_" + std::to_string(::getpid()) + "_" + name);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::vector<std::string>& args) { return monarch::test::run_binary(MONARCH_SIM_BIN, args, dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string scenario(const std::string& name) { return std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + name; }

  fs::path dir_;
};

class CliBadScenario : public Cli, public ::testing::WithParamInterface<monarch::testing_cases::BadCase> {};

TEST_P(CliBadScenario, ExitsTwoNamingThePath) {
  const auto& c = GetParam();
  std::string path = write("bad.json", monarch::testing_cases::apply_edits(c).dump(2));
  Result r = run({path, "--no-db"});
  EXPECT_EQ(r.status, 2) << c.name << "\n" << r.err;
  EXPECT_NE(r.err.find(std::string(c.where) + ": "), std::string::npos) << c.name << ": stderr was\n" << r.err;
  EXPECT_NE(r.err.find(c.message), std::string::npos) << c.name << ": stderr was\n" << r.err;
  EXPECT_EQ(r.out, "") << "nothing on stdout for an invalid scenario";
}

std::string case_name(const ::testing::TestParamInfo<monarch::testing_cases::BadCase>& info) {
  std::string n;
  for (const char* c = info.param.name; *c; ++c) n += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, CliBadScenario, ::testing::ValuesIn(monarch::testing_cases::kBadCases), case_name);

TEST_F(Cli, HelpListsTheOptionsAndPresets) {
  Result r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"--backend", "--output", "--db", "--no-db", "--emit-plan", "--trace", "--set", "--top-k",
                        "--jobs", "--quiet", "validate", "runs", "A100-40GB", "GB200", "H200-SXM", "gpt3-175b", "llama3-405b",
                        "llama2-70b"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

// A clone is all a user has: every document --help names is in the repository.
TEST_F(Cli, HelpPointsAtDocumentsInTheRepository) {
  Result r = run({"--help"});
  ASSERT_EQ(r.status, 0);
  std::set<std::string> docs;
  for (size_t at = r.out.find("docs/"); at != std::string::npos; at = r.out.find("docs/", at + 1)) {
    const size_t end = r.out.find(".md", at);
    ASSERT_NE(end, std::string::npos) << r.out.substr(at, 40);
    docs.insert(r.out.substr(at, end + 3 - at));
  }
  for (const char* d : {"docs/spec/scenario.md", "docs/spec/cli.md"}) EXPECT_EQ(docs.count(d), 1u) << d;
  for (const auto& d : docs) EXPECT_TRUE(fs::is_regular_file(fs::path(MONARCH_SOURCE_DIR) / d)) << d;
}

TEST_F(Cli, SetOverridesConstrainTheSearch) {
  const std::string out = (dir_ / "result.json").string();
  Result r = run({scenario("default.json"), "--no-db", "--backend", "analytical", "--set", "parallelism.tp=8",
                  "--top-k", "3", "--output", out});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  EXPECT_EQ(j["scenario"]["parallelism"]["tensor_parallel_degree"], 8);
  EXPECT_EQ(j["scenario"]["search"]["top_k"], 3);
  EXPECT_EQ(j["scenario"]["model"]["num_layers"], 96);
  ASSERT_FALSE(j["results"].empty());
  for (const auto& e : j["results"]) EXPECT_EQ(e["plan"]["tensor_parallel_degree"], 8);
  r = run({scenario("default.json"), "--no-db", "--backend", "analytical", "--quiet"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "");
}

TEST_F(Cli, BadOptionsExitTwoNamingTheOption) {
  const std::string good = scenario("default.json");
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{good, "--top-k", "0"}, "--top-k"},
      {{good, "--top-k", "many"}, "--top-k"},
      {{good, "--jobs", "-1"}, "--jobs"},
      {{good, "--jobs", "4097"}, "--jobs"},
      {{good, "--backend", "ns3"}, "--backend: found \"ns3\""},
      {{good, "--backend", ""}, "--backend"},
      {{good, "--frobnicate"}, "--frobnicate"},
      {{good, "--db", "x.db", "--no-db"}, "excludes"},
      {{good, "--set", "parallelism.tp"}, "--set parallelism.tp"},
      {{good, "--set", "parallelism.tp=3"}, "--set parallelism.tp=3"},
      {{good, "--set", "model.hidden_sise=5"}, "did you mean \"hidden_size\""},
      {{}, "SCENARIO.json"},
      {{"/no/such/file.json"}, "/no/such/file.json"},
      {{"validate"}, "required"},
      {{"validate", "cases.json", "--max-mape", "-5"}, "--max-mape"},
      {{"runs"}, "subcommand"},
      {{"runs", "show"}, "required"},
      {{"runs", "export", "--format", "xml"}, "--format"},
  };
  for (const auto& c : cases) {
    Result r = run(c.args);
    std::string shown;
    for (const auto& a : c.args) shown += a + " ";
    EXPECT_EQ(r.status, 2) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << shown << ": stderr was\n" << r.err;
  }
}

TEST_F(Cli, SyntaxErrorsGiveFileLineAndColumn) {
  std::string path = write("syntax.json", "{\n  \"name\": \"x\"\n  \"model\": {}\n}\n");
  Result r = run({path});
  EXPECT_EQ(r.status, 2);
  // nlohmann/json reports where the unexpected token ends: line 3, column 9 ("model").
  EXPECT_NE(r.err.find(path + ":3:9: JSON syntax error"), std::string::npos) << r.err;
}

// A small GPT on 8 GPUs with the plan fixed: fast to search, lower and simulate.
std::string small_fixed_scenario() {
  return R"({
    "name": "cli-small",
    "model": { "architecture": "gpt", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
               "vocab_size": 32000, "seq_length": 1024 },
    "cluster": { "gpu": "A100-80GB", "num_gpus": 8, "gpus_per_node": 8 },
    "training": { "global_batch_size": 16, "micro_batch_size": 1, "precision": "bf16" },
    "parallelism": { "tp": 2, "pp": 2, "dp": 2, "zero_stage": 1, "activation_recompute": "none",
                     "sequence_parallel": true }
  })";
}

TEST_F(Cli, RunWritesTheResultFileInTheSpecShape) {
  const std::string out = (dir_ / "result.json").string();
  Result r = run({scenario("default.json"), "--no-db", "--backend", "analytical", "--output", out, "--top-k", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  EXPECT_EQ(j["format"], "monarch-sim-result/1");
  EXPECT_GT(j["parameters"].get<double>(), 0);
  ASSERT_GE(j["results"].size(), 1u);
  ASSERT_LE(j["results"].size(), 3u);
  double previous = 0;
  for (const auto& e : j["results"]) {
    for (const char* k : {"rank", "backend", "plan", "iteration_time_s", "tokens_per_s", "model_tflops_per_gpu",
                          "hardware_tflops_per_gpu", "mfu", "hfu", "memory", "time_breakdown_s", "communication"})
      EXPECT_TRUE(e.contains(k)) << k;
    EXPECT_TRUE(e["memory"]["fits"].get<bool>());
    EXPECT_GE(e["iteration_time_s"].get<double>(), previous) << "ranked best first";
    previous = e["iteration_time_s"].get<double>();
  }
  EXPECT_TRUE(j.contains("rejected"));
  EXPECT_NE(r.out.find("searched"), std::string::npos) << r.out;
  // Two search threads: the same ranked plans and predictions.
  const std::string out2 = (dir_ / "result2.json").string();
  r = run({scenario("default.json"), "--no-db", "--backend", "analytical", "--output", out2, "--top-k", "3", "--jobs", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j2 = json::parse(slurp(out2));
  EXPECT_EQ(j2["results"], j["results"]);
  EXPECT_EQ(j2["rejected"], j["rejected"]);
}

TEST_F(Cli, NothingFitsExitsThreeWithTheClosestMiss) {
  // Llama-3 405B on 8 GPUs cannot hold its optimizer states whatever the plan.
  std::string path = write("huge.json", R"({
    "name": "too-big", "model": { "preset": "llama3-405b" },
    "cluster": { "gpu": "A100-40GB", "num_gpus": 8, "gpus_per_node": 8 },
    "training": { "global_batch_size": 8, "precision": "bf16" } })");
  const std::string out = (dir_ / "result.json").string();
  Result r = run({path, "--no-db", "--backend", "analytical", "--output", out});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("GiB"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << "nothing written when no plan fits";
}

TEST_F(Cli, RunsAreRecordedAndListedFromTheStore) {
  const std::string db = (dir_ / "runs.db").string();
  std::string path = write("small.json", small_fixed_scenario());
  Result r = run({path, "--db", db, "--backend", "analytical", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "") << "--quiet prints no table";
  Result list = run({"runs", "list", "--db", db});
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("cli-small"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("analytical"), std::string::npos) << list.out;
  Result show = run({"--db", db, "runs", "show", "1"});
  ASSERT_EQ(show.status, 0) << show.err;
  json j = json::parse(show.out);
  EXPECT_EQ(j["results"][0]["plan"]["tensor_parallel_degree"], 2);
  Result missing = run({"runs", "show", "999", "--db", db});
  EXPECT_EQ(missing.status, 2);
}

TEST_F(Cli, EmitPlanWritesAGraphForEveryRank) {
  std::string path = write("small.json", small_fixed_scenario());
  const std::string plan = (dir_ / "plan.json").string();
  Result r = run({path, "--no-db", "--backend", "analytical", "--emit-plan", plan, "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(plan));
  EXPECT_EQ(j["format"], "monarch-plan/2");
  EXPECT_EQ(j["world_size"], 8);
  // Self-contained: the scenario it was planned for rides along (what monarch-run trains).
  ASSERT_TRUE(j.contains("scenario"));
  EXPECT_EQ(j["scenario"]["cluster"]["num_gpus"], 8);
  EXPECT_EQ(j["scenario"]["name"], "cli-small");
  EXPECT_EQ(j["scenario"]["model"]["hidden_size"], 1024);
  EXPECT_EQ(j["scenario"]["training"]["global_batch_size"], 16);
}

TEST_F(Cli, ValidateReportsTheErrorOfEveryCase) {
  Result r = run({"validate", std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("korthikanti-175B-seqpar+selective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MAPE"), std::string::npos) << r.out;
  Result strict = run({"validate", std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json",
                       "--max-mape", "0.001"});
  EXPECT_EQ(strict.status, 1) << "a bound no model meets fails";
}

// validate --save writes the report; --against reads one back and shows what moved. A report
// that cannot be read is refused with exit 2 before any prediction.
TEST_F(Cli, ValidateSavesAReportAndComparesAgainstIt) {
  const std::string cases = std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json";
  const std::string saved = (dir_ / "report.json").string();
  Result first = run({"validate", cases, "--save", saved});
  ASSERT_EQ(first.status, 0) << first.err;
  json j = json::parse(slurp(saved));
  EXPECT_EQ(j["format"], "monarch-validation-report/1");
  EXPECT_EQ(j["backend"], "analytical");
  EXPECT_EQ(j["cases"].size(), 18u);
  Result again = run({"validate", cases, "--against", saved});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("the 18 case(s) predicted in both"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("or whose plan changed: 0"), std::string::npos) << again.out;
  const std::string bad = write("bad_report.json", "{\"format\": \"monarch-validation-report/1\", \"cases_file\": 3}");
  Result refused = run({"validate", cases, "--against", bad});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("/cases_file"), std::string::npos) << refused.err;
  EXPECT_TRUE(refused.out.empty()) << refused.out;
}

#ifdef MONARCH_TEST_SIMGRID
// validate --backend simgrid predicts every case through the run library's SimGrid backend; the
// figures differ from the analytical model's (contention, the real schedule).
TEST_F(Cli, ValidateThroughSimgridSkipsLargeCasesAndPredictsTheRest) {
  const std::string cases = std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json";
  Result sim = run({"validate", cases, "--backend", "simgrid", "--max-gpus", "16"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  Result ana = run({"validate", cases, "--max-gpus", "16"});
  ASSERT_EQ(ana.status, 0) << ana.err;
  EXPECT_NE(sim.out.find("dgxc-llama31-8b-fp8-16"), std::string::npos) << sim.out;
  EXPECT_NE((sim.out + sim.err).find("above --max-gpus 16"), std::string::npos) << sim.out << sim.err;
  EXPECT_NE(sim.out, ana.out) << "the SimGrid figures are SimGrid's, not the analytical model's";
}

TEST_F(Cli, SimgridReranksAndWritesATrace) {
  std::string path = write("small.json", small_fixed_scenario());
  const std::string out = (dir_ / "result.json").string();
  const std::string trace = (dir_ / "trace.json").string();
  Result r = run({path, "--no-db", "--backend", "analytical,simgrid", "--top-k", "1", "--output", out, "--trace", trace});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_EQ(j["results"].size(), 2u) << "one plan (--top-k 1): one entry per backend";
  EXPECT_EQ(j["results"][0]["backend"], "analytical");
  EXPECT_EQ(j["results"][1]["backend"], "simgrid");
  EXPECT_EQ(j["results"][0]["plan"], j["results"][1]["plan"]);
  const double a = j["results"][0]["iteration_time_s"], s = j["results"][1]["iteration_time_s"];
  EXPECT_NEAR(s / a, 1.0, 0.15) << "the simulator and the model agree on an uncontended single node";
  json t = json::parse(slurp(trace));
  EXPECT_FALSE(t["traceEvents"].empty());
}

// A host failure injected in the middle of the SimGrid iteration (reliability.inject_failure):
// the CLI prints which ranks failed and stalled and when the timeout fired; the result file
// keeps the report and the stalls as timeline spans; the trace shows them.
TEST_F(Cli, InjectedHostFailureIsReportedAndOnTheTimeline) {
  json sc = json::parse(small_fixed_scenario());
  sc["cluster"]["gpus_per_node"] = 4;  // pp 2 over two nodes: stage 1 on node 1
  sc["reliability"] = json::parse(R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100},
      "detection_s": 30, "reschedule_s": 300, "startup_s": 120,
      "inject_failure": {"component": "host", "node": 1, "at_s": 0.01}})");
  std::string path = write("failure.json", sc.dump());
  const std::string out = (dir_ / "result.json").string();
  const std::string trace = (dir_ / "trace.json").string();
  Result r = run({path, "--no-db", "--backend", "analytical,simgrid", "--top-k", "1", "--output", out, "--trace", trace});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("injected failure (SimGrid, plan 1): host of node 1 down at 10 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job declared failed at 30.01 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed (4): ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stalled (4):"), std::string::npos) << r.out;
  json j = json::parse(slurp(out));
  ASSERT_EQ(j["results"].size(), 2u);
  const json& f = j["results"][1]["failure"];
  EXPECT_EQ(f["affected"], true);
  EXPECT_DOUBLE_EQ(f["timeout_at_s"].get<double>(), 30.01);
  int failed = 0, stalled = 0;
  for (const auto& k : f["ranks"]) {
    failed += k["state"] == "failed";
    stalled += k["state"] == "stalled";
  }
  EXPECT_EQ(failed, 4);
  EXPECT_EQ(stalled, 4);
  int stall_spans = 0;
  for (const auto& s : j["results"][1]["timeline"]) stall_spans += s["category"] == "stall";
  EXPECT_GT(stall_spans, 0);
  EXPECT_NE(slurp(trace).find("\"cat\":\"stall\""), std::string::npos);
  // After the iteration: nothing changes, and the CLI says so.
  sc["reliability"]["inject_failure"]["at_s"] = 1000;
  path = write("late.json", sc.dump());
  r = run({path, "--no-db", "--backend", "simgrid", "--top-k", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ends first: nothing changes"), std::string::npos) << r.out;
}

// The shipped Mixtral 8x7B scenario through both simulators, the plan fixed (tp 1, pp 1, cp 1,
// dp 64, ep 8, ZeRO-2, blocking all-to-alls) so the test stays fast: every MoE layer's dispatch
// and combine all-to-alls run in SimGrid, and the two backends agree on them.
TEST_F(Cli, MixtralRunsExpertParallelInBothSimulators) {
  const std::string out = (dir_ / "result.json").string();
  Result r = run({scenario("mixtral-8x7b-64-h100.json"), "--no-db", "--backend", "analytical,simgrid", "--top-k", "1",
                  "--set", "parallelism.tp=1", "--set", "parallelism.pp=1", "--set", "parallelism.cp=1", "--set",
                  "parallelism.ep=8", "--set", "parallelism.zero_stage=2", "--set", "parallelism.ep_comm_overlap=false",
                  "--set", "training.micro_batch_size=1", "--output", out});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["backend"], "simgrid");
  for (const auto& e : j["results"]) EXPECT_EQ(e["plan"]["expert_parallel_degree"], 8);
  auto a2a = [&](const json& e) {
    for (const auto& c : e["communication"])
      if (c["kind"] == "all-to-all" && c["group"] == "ep") return c;
    return json();
  };
  const json a = a2a(j["results"][0]), s = a2a(j["results"][1]);
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(s.is_null()) << "SimGrid ran the EP all-to-alls";
  // 16 micro-batches x 32 layers x (dispatch, combine, and their gradients).
  EXPECT_EQ(a["count"], 16 * 32 * 4);
  EXPECT_EQ(s["count"], a["count"]);
  EXPECT_EQ(s["bytes"], a["bytes"]);
  const double ta = j["results"][0]["iteration_time_s"], ts = j["results"][1]["iteration_time_s"];
  EXPECT_NEAR(ts / ta, 1.0, 0.03);
}
#endif

#ifdef MONARCH_TEST_REAL_CPU
TEST_F(Cli, RealCpuTrainsTheChosenPlanAndRecordsIt) {
  const std::string db = (dir_ / "runs.db").string();
  const std::string out = (dir_ / "result.json").string();
  const std::string trace = (dir_ / "trace.json").string();
  Result r = run({scenario("small-gpt-8.json"), "--db", db, "--backend", "analytical,real-cpu", "--top-k", "1",
                  "--set", "training.steps=3", "--set", "parallelism.tp=2", "--set", "parallelism.pp=2",
                  "--set", "parallelism.dp=2", "--output", out, "--trace", trace, "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_EQ(j["results"].size(), 2u);
  const auto& real = j["results"][1];
  EXPECT_EQ(real["backend"], "real-cpu");
  EXPECT_TRUE(real["measured"].get<bool>());
  EXPECT_EQ(real["losses"].size(), 3u);
  EXPECT_EQ(real["plan"], j["results"][0]["plan"]) << "the real run trains the chosen plan";
  // The timeline of the measured step: every rank, compute and collectives, in the result file
  // and as a Chrome trace (--trace) that follows Perfetto's rules.
  ASSERT_TRUE(real.contains("timeline"));
  std::set<int> ranks_seen;
  std::set<std::string> categories;
  for (const auto& span : real["timeline"]) {
    ranks_seen.insert(span["rank"].get<int>());
    categories.insert(span["category"].get<std::string>());
  }
  EXPECT_EQ(ranks_seen.size(), 8u);
  for (const char* c : {"compute", "collective", "p2p", "optimizer"}) EXPECT_TRUE(categories.count(c)) << c;
  ASSERT_TRUE(std::filesystem::exists(trace));
  const std::string trace_text = slurp(trace);
  EXPECT_EQ(monarch::testing::check_chrome_trace_rules(trace_text), "");
  EXPECT_NE(trace_text.find("\"real-cpu\""), std::string::npos);
  EXPECT_NE(trace_text.find("ncclAllReduce tp"), std::string::npos);
  Result list = run({"runs", "list", "--db", db, "--backend", "real-cpu"});
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("real-cpu"), std::string::npos) << list.out;
  Result cmp = run({"runs", "compare", "1", "2", "--db", db});
  ASSERT_EQ(cmp.status, 0) << cmp.err;
  EXPECT_NE(cmp.out.find("same plan"), std::string::npos) << cmp.out;
}
#endif

TEST_F(Cli, DlrmScenariosAreShardedAndRanked) {
  const std::string out = (dir_ / "result.json").string();
  Result r = run({scenario("dlrm-dcnv2-8-h100.json"), "--no-db", "--backend", "analytical", "--output", out, "--top-k", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_FALSE(j["results"].empty());
  EXPECT_LE(j["results"].size(), 3u);
  EXPECT_TRUE(j["results"][0]["memory"]["fits"].get<bool>());
  EXPECT_GT(j["results"][0]["iteration_time_s"].get<double>(), 0);
  EXPECT_NE(r.out.find("sharding"), std::string::npos) << r.out;
}

#ifdef MONARCH_TEST_SIMGRID
TEST_F(Cli, DlrmSimgridReranksTheShardingPlansAndRecordsThem) {
  const std::string out = (dir_ / "result.json").string();
  const std::string db = (dir_ / "runs.db").string();
  Result r = run({scenario("dlrm-dcnv2-8-h100.json"), "--db", db, "--backend", "analytical,simgrid", "--output", out,
                  "--top-k", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_GE(j["results"].size(), 4u);
  int simgrid = 0;
  for (size_t i = 0; i < j["results"].size(); ++i) {
    const auto& e = j["results"][i];
    if (e["backend"] != "simgrid") continue;
    ++simgrid;
    // Next to the analytical entry of the same sharding plan, within the agreement of
    // sim/simgrid_dlrm_test.cc.
    const auto& a = j["results"][i - 1];
    EXPECT_EQ(a["backend"], "analytical");
    EXPECT_EQ(a["sharding"], e["sharding"]);
    EXPECT_EQ(a["rank"], e["rank"]);
    EXPECT_NEAR(e["iteration_time_s"].get<double>() / a["iteration_time_s"].get<double>(), 1.0, 0.05);
    EXPECT_GT(e["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_EQ(simgrid, 3) << "the 3 best plans are re-ranked";
  // SimGrid's order: by simulated time.
  double last = 0;
  for (const auto& e : j["results"])
    if (e["backend"] == "simgrid") {
      EXPECT_GE(e["iteration_time_s"].get<double>(), last);
      last = e["iteration_time_s"];
    }
  Result list = run({"runs", "list", "--db", db, "--backend", "simgrid"});
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("dlrm-dcnv2-8-h100"), std::string::npos) << list.out;
}
#endif

#ifdef MONARCH_TEST_REAL_CPU
TEST_F(Cli, DlrmRealCpuTrainsTheChosenShardingNextToItsPrediction) {
  const std::string out = (dir_ / "result.json").string(), one = (dir_ / "one.json").string();
  const std::string db = (dir_ / "runs.db").string();
  Result r = run({scenario("dlrm-small-cpu-4.json"), "--db", db, "--backend", "analytical,real-cpu", "--output", out,
                  "--top-k", "1", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(slurp(out));
  ASSERT_GE(j["results"].size(), 2u);
  size_t k = 0;
  while (k < j["results"].size() && j["results"][k]["backend"] != "real-cpu") ++k;
  ASSERT_LT(k, j["results"].size());
  ASSERT_GE(k, 1u);
  const auto& real = j["results"][k];
  const auto& predicted = j["results"][k - 1];
  EXPECT_EQ(predicted["backend"], "analytical");
  EXPECT_EQ(real["sharding"], predicted["sharding"]) << "recorded next to the prediction of the same plan";
  EXPECT_TRUE(real["measured"].get<bool>());
  ASSERT_EQ(real["losses"].size(), 10u);
  EXPECT_GT(real["iteration_time_s"].get<double>(), 0);
  // Bytes of every collective the CPU runtime runs equal the prediction (the ids all-to-all,
  // one call, is TorchRec's input dist: every CPU rank makes the whole batch, so none runs).
  int compared = 0;
  for (const auto& m : real["communication"]) {
    bool found = false;
    for (const auto& p : predicted["communication"])
      if (p["kind"] == m["kind"] && p["group"] == m["group"] && p["count"] == m["count"]) {
        EXPECT_EQ(m["bytes"], p["bytes"]) << m.dump();
        found = true;
      }
    EXPECT_TRUE(found) << m.dump();
    ++compared;
  }
  EXPECT_GE(compared, 1);
  // The same scenario in one process: the same losses within 1e-5 relative.
  Result single = run({scenario("dlrm-small-cpu-4.json"), "--no-db", "--backend", "real-cpu", "--set",
                       "cluster.num_gpus=1", "--output", one, "--top-k", "1", "--quiet"});
  ASSERT_EQ(single.status, 0) << single.err;
  json s = json::parse(slurp(one));
  std::vector<double> ref;
  for (const auto& e : s["results"])
    if (e["backend"] == "real-cpu") ref = e["losses"].get<std::vector<double>>();
  ASSERT_EQ(ref.size(), 10u);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LE(std::fabs(real["losses"][i].get<double>() - ref[i]), 1e-5 * std::fabs(ref[i])) << "step " << i;
  Result list = run({"runs", "list", "--db", db, "--backend", "real-cpu"});
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("dlrm-small-cpu-4"), std::string::npos) << list.out;
}
#endif

}  // namespace

namespace {

// `monarch-sim import cfg.toml ... | monarch-sim -`: an existing torchtitan config predicted in
// one line; then the chosen plan exported, and a plan the target cannot express refused with
// nothing written.
TEST_F(Cli, ImportPipesIntoARunAndExportWritesOrRefuses) {
  const std::string toml = std::string(MONARCH_SOURCE_DIR) + "/tests/data/frameworks/torchtitan_llama3_8b.toml";
  const std::string result = (dir_ / "result.json").string();
  const std::string cmd = shell_quote(MONARCH_SIM_BIN) + " import " + shell_quote(toml) + " --gpu A100-80GB --num-gpus 64 2>/dev/null | " +
                          shell_quote(MONARCH_SIM_BIN) + " - --backend analytical --no-db --quiet --output " + shell_quote(result);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const json r = json::parse(slurp(result));
  EXPECT_EQ(r["results"][0]["plan"]["data_parallel_degree"], 64);
  EXPECT_EQ(r["results"][0]["plan"]["zero_stage"], 3);

  const std::string script = (dir_ / "train.sh").string();
  Result ok = run({"export", result, "--to", "megatron", "--output", script});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(slurp(script).find("--use-megatron-fsdp"), std::string::npos);

  const std::string toml_out = (dir_ / "out.toml").string();
  Result tt = run({"export", result, "--to", "torchtitan", "--output", toml_out});
  ASSERT_EQ(tt.status, 0) << tt.err;
  EXPECT_NE(slurp(toml_out).find("data_parallel_shard_degree = 64"), std::string::npos);

  Result bad = run({"export", result, "--to", "mxnet"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--to"), std::string::npos);
  Result rank = run({"export", result, "--to", "megatron", "--rank", "9"});
  EXPECT_EQ(rank.status, 2);
  EXPECT_NE(rank.err.find("--rank"), std::string::npos);

  // An interleaved plan: DeepSpeed's pipeline engine cannot run it; exit 2, nothing written.
  const std::string scen = write("interleaved.json", R"({"name": "i", "model": {"preset": "llama3-70b"},
    "cluster": {"gpu": "H100-SXM", "num_gpus": 64, "gpus_per_node": 8},
    "training": {"global_batch_size": 64, "micro_batch_size": 1, "precision": "bf16"},
    "parallelism": {"tp": 8, "pp": 4, "vpp": 2, "sequence_parallel": true, "zero_stage": 1}})");
  const std::string result2 = (dir_ / "result2.json").string();
  ASSERT_EQ(run({scen, "--backend", "analytical", "--no-db", "--quiet", "--output", result2}).status, 0);
  const std::string ds = (dir_ / "ds.sh").string();
  Result refused = run({"export", result2, "--to", "deepspeed", "--output", ds});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("interleaved"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(ds));
  Result missing = run({"import", toml});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--num-gpus"), std::string::npos);
}

}  // namespace
