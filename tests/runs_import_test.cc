// `monarch-sim runs import` and `runs compare` of measured runs, end to end with the built
// binary: real GPU traces (HTA's test data), logs and nccl-tests tables into a store, bad input
// refused with exit 2 and nothing written, a second import recognised.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/cli_run_support.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/tests/data/kineto/";

using Result = monarch::test::CliResult;
using monarch::test::shell_quote;
using monarch::test::slurp;

// A 2-GPU data-parallel GPT with every plan choice fixed, so the scenario has one plan.
constexpr const char* kScenario = R"({
  "name": "dp2-gpt",
  "model": {"architecture": "gpt", "num_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
            "vocab_size": 50304, "seq_length": 1024},
  "cluster": {"gpu": "A100-80GB", "num_gpus": 2, "gpus_per_node": 2},
  "training": {"global_batch_size": 16, "micro_batch_size": 8, "precision": "bf16"},
  "parallelism": {"tp": 1, "pp": 1, "cp": 1, "dp": 2, "zero_stage": 0, "activation_recompute": "none",
                  "sequence_parallel": false}
})";

class RunsImport : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("monarch_runs_import_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
    db_ = (dir_ / "runs.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::vector<std::string>& args) { return monarch::test::run_binary(MONARCH_SIM_BIN, args, dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  int runs_in_store() {
    Result r = run({"runs", "export", "--format", "json", "--db", db_});
    if (r.status != 0) return -1;
    return static_cast<int>(json::parse(r.out)["runs"].size());
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(RunsImport, RealGpuTraceImportsOnceAndComparesWithTheAnalyticalPrediction) {
  const std::string scenario = write("dp2.json", kScenario);
  Result sim = run({scenario, "--backend", "analytical", "--db", db_, "--quiet"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  const std::string trace = kData + "hta_nccl_data_rank0.json.gz";
  Result imp = run({"runs", "import", trace, "--scenario", scenario, "--db", db_});
  ASSERT_EQ(imp.status, 0) << imp.err;
  EXPECT_NE(imp.out.find("recorded as run 2"), std::string::npos) << imp.out;
  EXPECT_NE(imp.out.find("comm-compute overlap"), std::string::npos) << imp.out;

  Result show = run({"runs", "show", "2", "--db", db_});
  ASSERT_EQ(show.status, 0) << show.err;
  const json r = json::parse(show.out)["results"][0];
  EXPECT_EQ(r["backend"], "measured");
  EXPECT_TRUE(r["measured"].get<bool>());
  // ProfilerStep#4 and #5 (222.442191 ms, 219.726905 ms); #6 is dropped.
  EXPECT_NEAR(r["iteration_time_s"].get<double>(), (0.222442191 + 0.219726905) / 2, 1e-9);
  bool dp_all_reduce = false;
  for (const json& c : r["communication"]) dp_all_reduce |= c["kind"] == "all-reduce" && c["group"] == "dp";
  EXPECT_TRUE(dp_all_reduce) << r["communication"].dump();

  Result again = run({"runs", "import", trace, "--scenario", scenario, "--db", db_});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("already imported"), std::string::npos) << again.out;
  EXPECT_EQ(runs_in_store(), 2);

  Result cmp = run({"runs", "compare", "2", "1", "--db", db_});
  ASSERT_EQ(cmp.status, 0) << cmp.err;
  EXPECT_NE(cmp.out.find("Both runs use the same plan"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("Largest differences first"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("all-reduce dp bytes"), std::string::npos) << cmp.out;

  Result val = run({"runs", "compare", "--validate", "--db", db_});
  ASSERT_EQ(val.status, 0) << val.err;
  EXPECT_NE(val.out.find("analytical: MAPE"), std::string::npos) << val.out;
}

TEST_F(RunsImport, BadInputExitsTwoNamingTheFileAndWritesNothing) {
  // A truncated trace.
  const std::string whole = slurp(kData + "hta_nccl_data_rank0.json.gz");
  const std::string cut = write("cut/rank0_trace.json.gz", whole.substr(0, whole.size() / 3));
  Result a = run({"runs", "import", cut, "--db", db_});
  EXPECT_EQ(a.status, 2);
  EXPECT_NE(a.err.find(cut), std::string::npos) << a.err;
  EXPECT_FALSE(fs::exists(db_));

  // A trace of another world size than the plan.
  const std::string scenario = write("dp2.json", kScenario);
  Result b = run({"runs", "import", kData + "hta_sampled_rank-0.json.gz", "--scenario", scenario, "--db", db_});
  EXPECT_EQ(b.status, 2);
  EXPECT_NE(b.err.find("world of 128 ranks"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("hta_sampled_rank-0.json.gz"), std::string::npos) << b.err;

  // A log without an iteration line, next to a good trace: nothing of either is recorded.
  const std::string log = write("job/train.log", "loading...\nready\n");
  fs::copy_file(kData + "hta_nccl_data_rank0.json.gz", dir_ / "job/rank0_trace.json.gz");
  Result c = run({"runs", "import", (dir_ / "job").string(), "--db", db_});
  EXPECT_EQ(c.status, 2);
  EXPECT_NE(c.err.find(log), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("no iteration line"), std::string::npos) << c.err;
  EXPECT_FALSE(fs::exists(db_));

  Result d = run({"runs", "import", (dir_ / "missing").string(), "--db", db_});
  EXPECT_EQ(d.status, 2);
  EXPECT_NE(d.err.find("no such file"), std::string::npos) << d.err;
}

TEST_F(RunsImport, MegatronLogAlone) {
  const std::string log = write("train.log",
                                " iteration        1/      10 | consumed samples:           16 | elapsed time per iteration "
                                "(ms): 900.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | lm loss: 1.100000E+01 |\n"
                                " iteration        2/      10 | consumed samples:           32 | elapsed time per iteration "
                                "(ms): 500.0 | throughput per GPU (TFLOP/s/GPU): 180.0 | lm loss: 1.000000E+01 |\n"
                                " iteration        3/      10 | consumed samples:           48 | elapsed time per iteration "
                                "(ms): 520.0 | throughput per GPU (TFLOP/s/GPU): 173.1 | lm loss: 9.500000E+00 |\n");
  const std::string scenario = write("dp2.json", kScenario);
  Result r = run({"runs", "import", log, "--scenario", scenario, "--db", db_});
  ASSERT_EQ(r.status, 0) << r.err;
  const json res = json::parse(run({"runs", "show", "1", "--db", db_}).out)["results"][0];
  EXPECT_NEAR(res["iteration_time_s"].get<double>(), 0.51, 1e-12);  // the first iteration left out
  EXPECT_EQ(res["losses"].size(), 3u);
  EXPECT_GT(res["mfu"].get<double>(), 0);
}

TEST_F(RunsImport, NcclTestsTableIntoACalibrationProfile) {
  const std::string table = write("all_reduce_perf.txt",
                                  "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor)\n"
                                  "#  Rank  0 Group  0 Pid  1 on node1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
                                  "#  Rank  1 Group  0 Pid  2 on node1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n"
                                  "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
                                  "     1048576        262144     float     sum      -1    20.00   52.43   52.43      0\n"
                                  "     2097152        524288     float     sum      -1    32.00   65.54   65.54      0\n");
  Result no_profile = run({"runs", "import", table, "--db", db_});
  EXPECT_EQ(no_profile.status, 2);
  EXPECT_NE(no_profile.err.find("--profile"), std::string::npos) << no_profile.err;
  const std::string profile = (dir_ / "profile.json").string();
  Result r = run({"runs", "import", table, "--profile", profile, "--db", db_});
  ASSERT_EQ(r.status, 0) << r.err;
  const json p = json::parse(slurp(profile));
  EXPECT_EQ(p["format"], "monarch-profile/1");
  ASSERT_EQ(p["collectives"].size(), 2u);
  EXPECT_EQ(p["collectives"][0]["kind"], "all-reduce");
  EXPECT_EQ(p["collectives"][0]["ranks"], 2);
  EXPECT_FALSE(fs::exists(db_));  // not a run
}

}  // namespace
