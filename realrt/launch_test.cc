// run_real_cpu (what monarch-sim --backend real-cpu calls) and monarch-run on plan files.
#include "realrt/launch.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cost_model.h"
#include "core/plan_io.h"
#include "core/scenario_io.h"
#include "realrt/cpu_runtime.h"
#include "realrt/gpt.h"
#include "realrt/reference.h"
#include "realrt/run_io.h"

namespace monarch::realrt {
namespace {

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/realrt/testdata/";
const std::string kTmp = std::string(MONARCH_BINARY_DIR) + "/realrt/launch_tmp/";

RunInput input(const std::string& file) {
  auto in = read_run_input(kData + file, 3);
  EXPECT_TRUE(in.ok()) << (in.ok() ? "" : in.problems()[0].to_string());
  return *in;
}

// Trains 3 steps of the TP 2 x PP 2 plan through mpirun and compares with the single-process
// run of the same model, data and seed.
TEST(RunRealCpu, TrainsThePlanAndReturnsAMeasuredResult) {
  const RunInput in = input("tiny_gpt_tp2_pp2.json");
  RealCpuOptions opt;
  opt.work_dir = kTmp + "tp2_pp2";
  opt.steps = 3;
  auto r = run_real_cpu(in.scenario, in.graph, opt);
  ASSERT_TRUE(r.ok()) << r.problems()[0].to_string();
  EXPECT_EQ(r->backend, "real-cpu");
  EXPECT_TRUE(r->measured);
  EXPECT_EQ(r->plan, in.graph.plan);
  TrainSettings t = in.train;
  t.steps = 3;
  const auto ref = train_single_process(in.model, t, Recompute::kNone);
  ASSERT_EQ(r->losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(r->losses[i], ref[i], 1e-5 * ref[i]);
  EXPECT_GT(r->iteration_time_s, 0);
  EXPECT_FALSE(r->communication.empty());
  ASSERT_EQ(r->memory.stages.size(), 2u);
  EXPECT_GT(r->memory.stages[0].weights_gib, 0);
}

// An MoE scenario with EP 2 through the same path (what monarch-sim --backend real-cpu stores):
// the losses are the single-process run's, and the result carries the all-to-all entry of the
// expert-parallel group with the bytes estimate_plan predicts.
TEST(RunRealCpu, TrainsAnExpertParallelMoEScenario) {
  const RunInput in = input("tiny_moe_ep2.json");
  ASSERT_TRUE(in.model.moe());
  RealCpuOptions opt;
  opt.work_dir = kTmp + "moe_ep2";
  opt.steps = 3;
  auto r = run_real_cpu(in.scenario, in.graph, opt);
  ASSERT_TRUE(r.ok()) << r.problems()[0].to_string();
  TrainSettings t = in.train;
  t.steps = 3;
  const auto ref = train_single_process(in.model, t, Recompute::kNone);
  ASSERT_EQ(r->losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(r->losses[i], ref[i], 1e-5 * ref[i]);
  const BackendResult est = estimate_plan(in.scenario, in.graph.plan);
  auto find = [](const BackendResult& b) { return find_comm(b.communication, CollectiveKind::kAllToAll, GroupKind::kEp); };
  ASSERT_TRUE(find(*r) && find(est));
  EXPECT_EQ(find(*r)->bytes, find(est)->bytes);
  EXPECT_EQ(find(*r)->count, find(est)->count);
}

// Model keys the simulators honour but the runtime's GPT does not are refused by their path.
TEST(GptConfig, ModelKeysTheRuntimeCannotHonourAreRefusedByPath) {
  ModelConfig m;
  m.architecture = Architecture::kGpt;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.vocab_size = 256;
  m.seq_length = 16;
  m.tie_embeddings = true;
  ASSERT_TRUE(gpt_config_from(m).ok());
  ModelConfig wide = m;
  wide.head_dim = 32;  // 4 heads x 32 = 128 != hidden 64 (Qwen3-style)
  ASSERT_FALSE(gpt_config_from(wide).ok());
  EXPECT_EQ(gpt_config_from(wide).problems().front().where, "/model/head_dim");
  wide.head_dim = 16;  // 4 x 16 = 64: the runtime's own width, accepted
  EXPECT_TRUE(gpt_config_from(wide).ok());
  ModelConfig moe = m;
  moe.num_experts = 4;
  moe.moe_top_k = 2;
  ASSERT_TRUE(gpt_config_from(moe).ok());
  moe.moe_dropless = true;  // the runtime pads to a fixed capacity
  ASSERT_FALSE(gpt_config_from(moe).ok());
  EXPECT_EQ(gpt_config_from(moe).problems().front().where, "/model/moe_dropless");
}

// Plans the MoE runtime cannot run are refused naming the plan key, before any rank trains.
TEST(RuntimeConfig, MixtureOfExpertsPlansTheRuntimeCannotRunAreRefusedByKey) {
  RuntimeConfig cfg;
  cfg.model = {2, 64, 4, 256, 64, 16, 4, 2, 64, 1.0};
  cfg.train.global_batch_size = 4;
  cfg.plan.dp = 2;
  cfg.plan.ep = 2;
  EXPECT_TRUE(check_runtime_config(cfg).empty());
  auto first_where = [](RuntimeConfig c) {
    const Problems pr = check_runtime_config(c);
    return pr.empty() ? std::string() : pr[0].where;
  };
  RuntimeConfig c = cfg;
  c.plan.ep = 4;  // etp x ep = 4 does not divide the stage's tp x dp = 2 ranks
  EXPECT_EQ(first_where(c), "/plan/ep");
  c = cfg;
  c.plan.dp = 6;
  c.plan.ep = 3;  // divides dp, not the 4 experts
  c.train.global_batch_size = 6;
  EXPECT_EQ(first_where(c), "/plan/ep");
  c = cfg;
  c.plan.tp = 2;  // MoE with TP needs sequence parallelism (Megatron-Core)
  EXPECT_EQ(first_where(c), "/plan/sequence_parallel");
  c.plan.sequence_parallel = true;  // tp 2 x dp 2, etp = tp = 2, ep 2: runnable
  EXPECT_TRUE(check_runtime_config(c).empty());
  c.plan.dp = 1;  // etp x ep = 4 > tp x dp = 2
  EXPECT_EQ(first_where(c), "/plan/ep");
  c.plan.etp = 1;  // expert TP 1 with TP 2: the TP pair is the EP group
  EXPECT_TRUE(check_runtime_config(c).empty());
  c = cfg;
  c.plan.etp = 3;  // does not divide moe_ffn 64 (nor the 2 ranks)
  EXPECT_EQ(check_runtime_config(c).back().where, "/plan/etp");
  c = cfg;
  c.plan.zero_stage = 3;  // ZeRO shards experts over expert-DP
  EXPECT_TRUE(check_runtime_config(c).empty());
  c = cfg;
  c.plan.cp = 2;  // no context parallelism in the CPU runtime
  EXPECT_EQ(first_where(c), "/plan/cp");
  c = cfg;
  c.plan.ep_comm_overlap = true;  // nor the combined 1F1B that overlaps the all-to-alls
  EXPECT_EQ(first_where(c), "/plan/ep_comm_overlap");
  c = cfg;
  c.plan.activation_offload_layers = 1;  // nor host copies of the activations
  EXPECT_EQ(first_where(c), "/plan/activation_offload_layers");
  c = cfg;
  c.model.experts = 0;  // dense model with ep 2
  EXPECT_EQ(first_where(c), "/plan/ep");
  c.plan.ep = 1;
  c.plan.etp = 2;  // dense model with expert TP 2 != tp 1
  EXPECT_EQ(first_where(c), "/plan/etp");
}

TEST(RunRealCpu, RefusesPlansLargerThanTheMachineAllows) {
  const RunInput in = input("tiny_gpt_tp2_pp2.json");
  RealCpuOptions opt;
  opt.max_ranks = 2;
  auto r = run_real_cpu(in.scenario, in.graph, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems()[0].message.find("needs 4 processes"), std::string::npos);
}

int mpirun(int np, const std::string& args, const std::string& log) {
  const std::string cmd = std::string("timeout 300 ") + MONARCH_MPIEXEC + " --allow-run-as-root --oversubscribe -np " +
                          std::to_string(np) + " " + MONARCH_RUN + " " + args + " > " + log + " 2>&1";
  const int raw = std::system(cmd.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A plan file from another format version, or a version 1 file without --scenario: exit 2
// before training; version 1 with its scenario trains.
TEST(MonarchRunPlanFile, OtherVersionOrMissingScenarioExits2) {
  std::filesystem::create_directories(kTmp);
  const RunInput in = input("tiny_gpt_pp2.json");
  const std::string plan = kTmp + "pp2.plan.json", v2 = kTmp + "pp2.v2.plan.json";
  ASSERT_TRUE(write_plan_file(plan, in.graph).empty());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(plan));
  j["format"] = "monarch-plan/4";
  std::ofstream(v2) << j.dump();
  const std::string scen = " --scenario " + kData + "tiny_gpt_pp2.json";
  EXPECT_EQ(mpirun(2, v2 + scen, kTmp + "v2.log"), 2);
  EXPECT_NE(slurp(kTmp + "v2.log").find("monarch-plan/4"), std::string::npos) << slurp(kTmp + "v2.log");
  // write_plan_file without a scenario writes version 1, which needs --scenario.
  EXPECT_EQ(mpirun(2, plan, kTmp + "noscen.log"), 2);
  EXPECT_NE(slurp(kTmp + "noscen.log").find("--scenario"), std::string::npos);
  EXPECT_NE(slurp(kTmp + "noscen.log").find("is a \"monarch-plan/1\" file, which carries no model"), std::string::npos)
      << slurp(kTmp + "noscen.log");
  EXPECT_EQ(slurp(kTmp + "noscen.log").find("step 0 loss"), std::string::npos);
  // The valid file trains, with the same losses as the scenario's own plan.
  EXPECT_EQ(mpirun(2, plan + scen + " --steps 2 --output " + kTmp + "pp2_plan.json", kTmp + "ok.log"), 0)
      << slurp(kTmp + "ok.log");
  EXPECT_EQ(mpirun(2, kData + "tiny_gpt_pp2.json --steps 2 --output " + kTmp + "pp2_scen.json", kTmp + "ok2.log"), 0);
  const auto a = nlohmann::json::parse(std::ifstream(kTmp + "pp2_plan.json"))["result"]["losses"];
  const auto b = nlohmann::json::parse(std::ifstream(kTmp + "pp2_scen.json"))["result"]["losses"];
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 2u);
}

}  // namespace
}  // namespace monarch::realrt
