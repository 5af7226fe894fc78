// Runs the built monarch-sim binary: bad scenarios and options must exit 2 with a message that
// names the JSON path or the option; good ones exit 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/scenario_io_bad_cases.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

  Result run(const std::vector<std::string>& args) {
    std::string cmd = quote(MONARCH_SIM_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "stdout").string()) + " 2>" + quote((dir_ / "stderr").string()) + " </dev/null";
    int raw = std::system(cmd.c_str());
    Result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(dir_ / "stdout");
    r.err = slurp(dir_ / "stderr");
    return r;
  }
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
                        "--quiet", "validate", "runs", "A100-40GB", "GB200", "H200-SXM", "gpt3-175b", "llama3-405b",
                        "llama2-70b"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST_F(Cli, AValidScenarioPrintsItsNormalizedForm) {
  Result r = run({scenario("default.json"), "--no-db", "--set", "parallelism.tp=8", "--top-k", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["parallelism"]["tensor_parallel_degree"], 8);
  EXPECT_EQ(j["search"]["top_k"], 3);
  EXPECT_EQ(j["model"]["num_layers"], 96);
  EXPECT_EQ(j["cluster"]["gpu"]["name"], "A100-80GB");
  EXPECT_EQ(r.out.find("iteration_time_s"), std::string::npos) << "no made-up timings";
  r = run({scenario("default.json"), "--quiet"});
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

TEST_F(Cli, SubcommandsNotBuiltYetSaySoInsteadOfFaking) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"validate", "cases.json"}, {"runs", "list"}, {"runs", "show", "1"}, {"runs", "compare", "1", "2"}}) {
    Result r = run(args);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_NE(r.err.find("not built yet"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(Cli, OutputFilesAreNotWrittenWhenNoBackendCanFillThem) {
  const std::string out = (dir_ / "result.json").string();
  Result r = run({scenario("default.json"), "--output", out});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--output"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
