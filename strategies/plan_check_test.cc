// check_plan: the first rule a plan breaks, at the JSON path of the key at fault, with the
// reason the search shows for the same rule.
#include "strategies/plan_check.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

Scenario scenario() {
  Scenario s;
  s.model.num_layers = 8;
  s.model.hidden_size = 1024;
  s.model.num_attention_heads = 16;
  s.model.num_kv_heads = 8;
  s.model.ffn_hidden_size = 4096;
  s.model.vocab_size = 32000;
  s.model.seq_length = 2048;
  s.cluster.num_gpus = 16;
  s.cluster.gpus_per_node = 8;
  s.training.global_batch_size = 32;
  return s;
}

Plan plan(int64_t tp, int64_t pp, int64_t dp) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  return p;
}

TEST(CheckPlan, AValidPlanHasNoProblem) { EXPECT_TRUE(check_plan(scenario(), plan(2, 2, 4)).empty()); }

TEST(CheckPlan, NamesTheKeyAtFaultWithTheSearchsReason) {
  const Scenario s = scenario();
  struct Case {
    Plan plan;
    const char* where;
    const char* reason;
  };
  Plan zero_tp = plan(0, 1, 16);
  Plan etp_dense = plan(2, 1, 8);
  etp_dense.etp = 1;
  Plan odd_mbs = plan(1, 1, 16);
  odd_mbs.micro_batch_size = 3;
  Plan zero5 = plan(1, 1, 16);
  zero5.zero_stage = 5;
  const Case cases[] = {
      {zero_tp, "/parallelism/tp", "found 0, expected a positive integer"},
      {plan(16, 1, 1), "/parallelism/tp", "TP 16 does not divide 8 KV heads"},
      {plan(1, 16, 1), "/parallelism/pp", "PP 16 exceeds the 8 layers"},
      {plan(2, 2, 2), "/parallelism", "tp x pp x dp x cp = 8 but the cluster has 16 GPUs"},
      {etp_dense, "/parallelism/expert_tensor_parallel_degree", "expert TP 1 needs a mixture-of-experts model"},
      {odd_mbs, "/training/global_batch_size", "micro-batch 3 does not split the 2 samples per DP replica"},
      {zero5, "/parallelism/zero_stage", "found 5, expected 0..3"},
  };
  for (const Case& c : cases) {
    const Problems pr = check_plan(s, c.plan);
    ASSERT_EQ(pr.size(), 1u) << describe(c.plan);
    EXPECT_EQ(pr[0].where, c.where) << describe(c.plan);
    EXPECT_EQ(pr[0].message, c.reason) << describe(c.plan);
  }
}

// torchtitan runs torch.distributed.pipelining's schedules: Schedule1F1B refuses fewer
// micro-batches than stages, ScheduleInterleaved1F1B takes any count that its rounds
// (max(1, m / pp)) divide, where Megatron needs a multiple of pp.
TEST(CheckPlan, TorchtitansPipelineSchedulesHaveTheirOwnMicroBatchRules) {
  Scenario s = scenario();
  s.cluster.num_gpus = 8;
  s.training.global_batch_size = 4;
  Plan one = plan(1, 8, 1);  // 4 micro-batches on 8 stages
  EXPECT_TRUE(check_plan(s, one).empty());
  s.training.framework = Framework::kTorchtitan;
  Problems pr = check_plan(s, one);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].where, "/parallelism/pipeline_schedule");
  EXPECT_EQ(pr[0].message, "torchtitan's Schedule1F1B (torch.distributed.pipelining) needs at least as many "
                           "micro-batches (4) as pipeline stages (8)");
  one.schedule = Schedule::kGpipe;
  EXPECT_TRUE(check_plan(s, one).empty());

  Plan inter = plan(1, 4, 2);
  inter.schedule = Schedule::kInterleaved;
  inter.vpp = 2;
  s.training.global_batch_size = 20;  // 10 micro-batches per replica on pp 4
  EXPECT_TRUE(check_plan(s, inter).empty());
  s.training.framework = Framework::kMegatron;
  pr = check_plan(s, inter);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_NE(pr[0].message.find("multiple of the pipeline degree"), std::string::npos) << pr[0].message;
  s.training.framework = Framework::kTorchtitan;
  s.training.global_batch_size = 18;  // 9 micro-batches: 2 rounds do not divide them
  pr = check_plan(s, inter);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].where, "/parallelism/pipeline_schedule");
  EXPECT_NE(pr[0].message.find("multiple of its rounds (max(1, m / pp) = 2)"), std::string::npos) << pr[0].message;
}

TEST(CheckPlan, EveryRuleHasAKindAPathAndALevel) {
  for (const PlanRule& r : plan_rules()) {
    EXPECT_NE(std::string(r.kind), "");
    EXPECT_EQ(r.where[0], '/') << r.kind;
    EXPECT_LT(static_cast<size_t>(r.level), kNumPlanLevels) << r.kind;
  }
}

}  // namespace
}  // namespace monarch
