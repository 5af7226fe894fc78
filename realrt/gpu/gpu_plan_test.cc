// Which plans monarch-run --device gpu runs, decided without a GPU.
#include "realrt/gpu/gpu_plan.h"

#include <gtest/gtest.h>

namespace monarch::realrt {
namespace {

TEST(GpuPlan, RunsDataParallelPlans) {
  Plan p;
  EXPECT_TRUE(check_gpu_plan(p).empty());
  p.dp = 8;
  EXPECT_TRUE(check_gpu_plan(p).empty());
}

TEST(GpuPlan, RefusesDropoutAndExpertsNamingTheKey) {
  ModelConfig m;
  m.architecture = Architecture::kGpt;  // dropout 0.1 / 0.1 by default
  Problems pr = check_gpu_model(m);
  ASSERT_EQ(pr.size(), 2u);
  EXPECT_EQ(pr[0].where, "/model/hidden_dropout");
  EXPECT_EQ(pr[1].where, "/model/attention_dropout");
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  EXPECT_TRUE(check_gpu_model(m).empty());
  m.num_experts = 8;
  pr = check_gpu_model(m);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].where, "/model/num_experts");
  m.num_experts = 0;
  m.activation = Activation::kSwiglu;  // the GPU kernels are GeLU only
  pr = check_gpu_model(m);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].where, "/model/activation");
  m.activation = Activation::kGelu;
  EXPECT_TRUE(check_gpu_model(m).empty());
}

TEST(GpuPlan, RefusesEachUnsupportedDegreeNamingIt) {
  Plan p;
  p.tp = 2;
  p.pp = 4;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  const Problems pr = check_gpu_plan(p);
  ASSERT_EQ(pr.size(), 4u);
  EXPECT_EQ(pr[0].where, "/plan/tp");
  EXPECT_NE(pr[0].message.find("found 2"), std::string::npos);
  EXPECT_NE(pr[0].message.find("tensor parallelism"), std::string::npos);
  EXPECT_EQ(pr[1].where, "/plan/pp");
  EXPECT_EQ(pr[2].where, "/plan/zero_stage");
  EXPECT_EQ(pr[3].where, "/plan/activation_recompute");
  Plan c;
  c.cp = 2;
  c.ep = 2;
  c.vpp = 2;
  const Problems pc = check_gpu_plan(c);
  ASSERT_EQ(pc.size(), 3u);
  EXPECT_EQ(pc[0].where, "/plan/cp");
  EXPECT_EQ(pc[1].where, "/plan/ep");
  EXPECT_EQ(pc[2].where, "/plan/vpp");
}

TEST(GpuPlan, MathFollowsThePrecisionUnlessChosen) {
  EXPECT_EQ(*gpu_math_name(Precision::kFp32, "", "--precision"), "fp32");
  EXPECT_EQ(*gpu_math_name(Precision::kBf16, "", "--precision"), "bf16");
  EXPECT_EQ(*gpu_math_name(Precision::kBf16, "tf32", "--precision"), "tf32");
  auto fp8 = gpu_math_name(Precision::kFp8, "", "--precision");
  ASSERT_FALSE(fp8.ok());
  EXPECT_EQ(fp8.problems()[0].where, "/training/precision");
  auto bad = gpu_math_name(Precision::kFp32, "fp64", "--precision");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.problems()[0].where, "--precision");
}

}  // namespace
}  // namespace monarch::realrt
