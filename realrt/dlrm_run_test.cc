// monarch-run on a dlrm scenario (realrt/dlrm_run.h), through the binary under mpirun: mixed
// table-wise / row-wise / data-parallel sharding plans train to the single-process losses within
// 1e-5 relative, and every rank's all-to-all, reduce-scatter/all-gather and all-reduce buffers
// are the bytes core/dlrm_model predicts for that plan. Bad input exits 2 naming the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/dlrm_model.h"
#include "core/scenario_io.h"

namespace monarch {
namespace {

const std::string kScenario = std::string(MONARCH_SOURCE_DIR) + "/scenarios/dlrm-small-cpu-4.json";

std::string dir() {
  static const std::string d = [] {
    auto p = std::filesystem::temp_directory_path() / ("dlrm-run-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

struct RunOutput {
  int status = -1;
  std::string log;
  nlohmann::json out;
};

RunOutput monarch_run(int np, const std::string& scenario, const std::string& extra) {
  const std::string out = dir() + "/out.json", log = dir() + "/log.txt";
  std::filesystem::remove(out);
  std::ostringstream cmd;
  cmd << MONARCH_MPIEXEC << " --allow-run-as-root --oversubscribe -np " << np << " " << MONARCH_RUN << " " << scenario
      << " --output " << out << " " << extra << " > " << log << " 2>&1";
  RunOutput r;
  const int raw = std::system(cmd.str().c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream lf(log);
  r.log.assign(std::istreambuf_iterator<char>(lf), {});
  std::ifstream of(out);
  if (of) r.out = nlohmann::json::parse(of, nullptr, false);
  return r;
}

// The scenario with some keys changed, written to a file.
std::string variant(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream f(kScenario);
  nlohmann::json j = nlohmann::json::parse(f);
  edit(j);
  const std::string path = dir() + "/" + name + ".json";
  std::ofstream(path) << j.dump(1);
  return path;
}

std::vector<double> losses(const RunOutput& r) { return r.out["result"]["losses"].get<std::vector<double>>(); }

TEST(DlrmRun, MixedShardingMatchesOneProcessAndThePredictedBytes) {
  const RunOutput single = monarch_run(1, variant("one", [](nlohmann::json& j) { j["cluster"]["num_gpus"] = 1; }), "");
  ASSERT_EQ(single.status, 0) << single.log;
  const std::vector<double> ref = losses(single);
  ASSERT_EQ(ref.size(), 10u);
  EXPECT_LT(ref.back(), ref.front());  // it learns

  auto sc = read_scenario_file(kScenario, {});
  ASSERT_TRUE(sc.ok());
  for (const char* sharding : {"t0:tw@1 t1:dp t2:rw t3:tw@3", "t0:tw@0 t1:tw@0 t2:tw@0 t3:tw@2", "t0:rw t1:rw t2:rw t3:rw",
                               "t0:dp t1:dp t2:dp t3:dp"}) {
    SCOPED_TRACE(sharding);
    const RunOutput r = monarch_run(4, kScenario, std::string("--sharding '") + sharding + "'");
    ASSERT_EQ(r.status, 0) << r.log;
    EXPECT_EQ(r.out["sharding"], sharding);
    EXPECT_EQ(r.out["result"]["backend"], "real-cpu");
    const std::vector<double> got = losses(r);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LE(std::fabs(got[i] - ref[i]), 1e-5 * std::fabs(ref[i])) << "step " << i;

    const Expected<DlrmShardingPlan> parsed = parse_dlrm_plan(sharding);
    ASSERT_TRUE(parsed.ok()) << parsed.problems().front().message;
    const DlrmShardingPlan& plan = *parsed;
    const auto loads = dlrm_rank_loads(*sc, plan);
    const DlrmCommSizes sizes = dlrm_comm_sizes(*sc, loads);
    const auto& ranks = r.out["dlrm_send_bytes"];
    ASSERT_EQ(ranks.size(), 4u);
    for (int q = 0; q < 4; ++q) {
      const DlrmRankLoad& l = loads[static_cast<size_t>(q)];
      EXPECT_EQ(ranks[q]["pooled_forward_send_bytes"], l.a2a_send_bytes) << "rank " << q;
      EXPECT_EQ(ranks[q]["pooled_backward_send_bytes"], l.a2a_backward_send_bytes) << "rank " << q;
      EXPECT_EQ(ranks[q]["rw_forward_send_bytes"], l.rw_reduce_scatter_bytes) << "rank " << q;
      EXPECT_EQ(ranks[q]["rw_backward_send_bytes"], l.rw_reduce_scatter_bytes) << "rank " << q;
      EXPECT_EQ(ranks[q]["dp_allreduce_bytes"], sizes.dp_grad_bytes) << "rank " << q;
    }
  }
}

TEST(DlrmRun, WhatTheCpuRuntimeCannotRunIsRefusedNamingIt) {
  RunOutput r = monarch_run(4, kScenario, "--sharding 't0:cw2@0,1 t1:dp t2:rw t3:dp'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.log.find("column-wise"), std::string::npos) << r.log;
  r = monarch_run(4, kScenario, "--sharding 't0:tw@9 t1:dp t2:rw t3:dp'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.log.find("--sharding"), std::string::npos) << r.log;
  r = monarch_run(4, kScenario, "--sharding 't0:rw t1:xx'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.log.find("t1:xx"), std::string::npos) << r.log;
  r = monarch_run(2, kScenario, "");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.log.find("num_gpus"), std::string::npos) << r.log;
  r = monarch_run(4, variant("bf16", [](nlohmann::json& j) { j["training"]["precision"] = "bf16"; }), "");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.log.find("/training/precision"), std::string::npos) << r.log;
  EXPECT_FALSE(std::filesystem::exists(dir() + "/out.json"));
}

}  // namespace
}  // namespace monarch
