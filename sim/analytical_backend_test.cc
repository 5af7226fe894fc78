#include "sim/analytical_backend.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/cost_model.h"
#include "core/presets.h"

namespace monarch {
namespace {

Scenario gpt175b_on(int64_t gpus) {
  Scenario s;
  s.model.architecture = Architecture::kGpt;
  s.model.num_layers = 96;
  s.model.hidden_size = 12288;
  s.model.num_attention_heads = 96;
  s.model.vocab_size = 51200;
  s.model.seq_length = 2048;
  s.cluster.gpu = find_gpu_preset("A100-80GB")->spec;
  s.cluster.num_gpus = gpus;
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node = {300, 2};
  s.cluster.inter_node = {25, 5};
  s.cluster.nics_per_node = 8;
  s.training.global_batch_size = 512;
  s.training.micro_batch_size = 1;
  return s;
}

TEST(AnalyticalBackend, ResultFieldsAreConsistent) {
  Scenario s = gpt175b_on(128);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 2;
  p.vpp = 3;
  p.schedule = Schedule::kInterleaved;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  p.zero_stage = 1;
  const BackendResult r = run_analytical(s, p);
  EXPECT_EQ(r.backend, "analytical");
  EXPECT_EQ(r.plan, p);
  ASSERT_GT(r.iteration_time_s, 0);
  EXPECT_NEAR(r.tokens_per_s, 512.0 * 2048 / r.iteration_time_s, 1e-6 * r.tokens_per_s);
  EXPECT_NEAR(r.mfu, r.model_tflops_per_gpu / 312.0, 1e-9);
  EXPECT_NEAR(r.hfu, r.hardware_tflops_per_gpu / 312.0, 1e-9);
  EXPECT_GT(r.hardware_flops_per_iteration, r.model_flops_per_iteration);
  EXPECT_NEAR(r.model_tflops_per_gpu * 1e12 * 128 * r.iteration_time_s, r.model_flops_per_iteration,
              1e-6 * r.model_flops_per_iteration);
  // The breakdown adds up to the iteration time.
  const TimeBreakdown& b = r.time_breakdown_s;
  EXPECT_NEAR(b.compute + b.bubble + b.optimizer + b.exposed_comm, r.iteration_time_s, 1e-9 * r.iteration_time_s);
  EXPECT_GT(b.tp_comm, 0);
  EXPECT_GT(b.pp_comm, 0);
  EXPECT_GT(b.dp_comm, 0);
  EXPECT_GT(b.bubble, 0);
  EXPECT_EQ(b.cp_comm, 0);
  EXPECT_EQ(b.ep_comm, 0);
  // One memory entry per stage; the peak is the largest total.
  ASSERT_EQ(r.memory.stages.size(), 8u);
  double peak = 0;
  for (const StageMemory& m : r.memory.stages) {
    EXPECT_NEAR(m.total_gib, m.weights_gib + m.gradients_gib + m.optimizer_gib + m.activations_gib + m.buffers_gib, 1e-9);
    peak = std::max(peak, m.total_gib);
  }
  EXPECT_DOUBLE_EQ(r.memory.peak_gib, peak);
  EXPECT_TRUE(r.memory.fits);
  EXPECT_GT(r.memory.capacity_gib, 70);
  EXPECT_LT(r.memory.capacity_gib, 80);
  // Communication: one entry per (kind, group), with bytes.
  bool tp_ag = false, tp_rs = false, dp_rs = false, dp_ag = false, pp = false;
  for (const CommEntry& c : r.communication) {
    EXPECT_GT(c.bytes, 0) << to_string(c.kind) << " " << group_name(c);
    EXPECT_GT(c.count, 0);
    tp_ag |= c.kind == CollectiveKind::kAllGather && c.group == GroupKind::kTp;
    tp_rs |= c.kind == CollectiveKind::kReduceScatter && c.group == GroupKind::kTp;
    dp_rs |= c.kind == CollectiveKind::kReduceScatter && c.group == GroupKind::kDp;
    dp_ag |= c.kind == CollectiveKind::kAllGather && c.group == GroupKind::kDp;
    pp |= c.kind == CollectiveKind::kSendRecv && c.group == GroupKind::kPp;
    for (const CommEntry& d : r.communication) {
      if (&c != &d) EXPECT_FALSE(c.kind == d.kind && c.group == d.group);
    }
  }
  EXPECT_TRUE(tp_ag && tp_rs && dp_rs && dp_ag && pp);
}

TEST(AnalyticalBackend, TpAllReduceBytesFollowTheRing) {
  // Without sequence parallelism each layer all-reduces b s h 16-bit elements twice forward
  // and twice backward, and per micro-batch the vocabulary-parallel embedding its output and
  // the output layer its input gradient (b s h each), and the vocabulary-parallel
  // cross-entropy 3 x b s fp32 values (max, target logit, sum of exp); a ring sends
  // 2 (t-1)/t of the buffer per rank.
  Scenario s = gpt175b_on(8);
  s.model.num_layers = 8;
  s.training.global_batch_size = 4;
  Plan p;
  p.tp = 8;
  const BackendResult r = run_analytical(s, p);
  const double buffer = 2.0 * 2048 * 12288;
  for (const CommEntry& c : r.communication) {
    if (c.group != GroupKind::kTp) continue;
    EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
    EXPECT_EQ(c.count, 8 * 4 * 4 + 4 * (2 + 3));  // layers x micro-batches x 4 + per micro-batch 2 + 3
    const double loss_buffer = 4.0 * 2048;
    EXPECT_NEAR(static_cast<double>(c.bytes), (8 * 4 * 4 + 4 * 2) * buffer * 2.0 * 7 / 8 + 4 * 3 * loss_buffer * 2.0 * 7 / 8,
                64.0 * c.count);
  }
}

TEST(AnalyticalBackend, ResolvePlanFillsWhatTheScenarioLeavesOpen) {
  Scenario s = gpt175b_on(64);
  s.model.attention_kernel = AttentionKernel::kMaterialized;  // stored scores, as Megatron-LM in 2021-22
  s.parallelism.tp = 8;
  s.parallelism.pp = 8;
  const Expected<Plan> p = resolve_plan(s);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dp, 1);
  EXPECT_EQ(p->micro_batch_size, 1);
  // 175B on 64 A100s with materialized attention does not fit without saving activation memory.
  EXPECT_NE(p->recompute, Recompute::kNone);
  s.parallelism.tp = 3;
  EXPECT_FALSE(resolve_plan(s).ok());
}

// Where no plan fits, the plan resolved is still one the framework can run: torchtitan's
// Schedule1F1B refuses one micro-batch on two stages (so does the SimGrid backend's lowering),
// Megatron's 1F1B runs it.
TEST(AnalyticalBackend, ResolvePlanKeepsThePlanRules) {
  Scenario s = gpt175b_on(16);
  s.parallelism.tp = 1;
  s.parallelism.pp = 2;  // dp 8
  s.training.global_batch_size = 16;
  s.training.micro_batch_size = 2;  // one micro-batch per step
  const Expected<Plan> megatron = resolve_plan(s);
  ASSERT_TRUE(megatron.ok());
  EXPECT_FALSE(quick_estimate(s, *megatron).fits);
  s.training.framework = Framework::kTorchtitan;
  const Expected<Plan> torchtitan = resolve_plan(s);
  ASSERT_FALSE(torchtitan.ok());
  EXPECT_EQ(torchtitan.problems().front().where, "/parallelism/pipeline_schedule");
  EXPECT_NE(torchtitan.problems().front().message.find("Schedule1F1B"), std::string::npos);
}

}  // namespace
}  // namespace monarch
