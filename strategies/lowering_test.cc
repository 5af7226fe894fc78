#include "strategies/lowering.h"

#include <gtest/gtest.h>

#include <map>

#include "core/graph_time.h"
#include "core/model_math.h"
#include "core/placement.h"
#include "core/plan_io.h"

#include <cstdio>
#include "core/graph_check.h"

namespace monarch {
namespace {

constexpr double kMs = 1e-3;

Scenario scenario(int64_t gpus, int64_t layers, int64_t global_batch) {
  Scenario s;
  s.model.num_layers = layers;
  s.model.hidden_size = 1024;
  s.model.num_attention_heads = 16;
  s.model.num_kv_heads = 16;
  s.model.vocab_size = 32000;
  s.model.seq_length = 1024;
  s.cluster.num_gpus = gpus;
  s.cluster.gpus_per_node = 8;
  s.training.global_batch_size = global_batch;
  return s;
}

// Hand-set costs: 1 ms forward and 2 ms backward per layer, nothing else unless a test adds it.
LoweringCosts pure_compute() {
  LoweringCosts c;
  c.layer_fwd = {1e9, 1e6, 1 * kMs};
  c.layer_bwd = {2e9, 2e6, 2 * kMs};
  c.pp_activation_bytes = 1 << 20;
  c.layer_memory = {1e6, 1e6, 4e6};
  c.layer_activation_bytes = 3e6;
  return c;
}

Plan pipeline(Schedule s, int64_t pp, int64_t vpp) {
  Plan p;
  p.pp = pp;
  p.vpp = vpp;
  p.schedule = s;
  return p;
}

PlanGraph lower_ok(const Scenario& s, const Plan& p, const LoweringCosts& c) {
  auto g = lower_plan(s, p, c);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.problems()[0].to_string());
  if (!g.ok()) return {};
  Problems problems = check_graph(*g);
  for (const Problem& pr : problems) ADD_FAILURE() << pr.to_string();
  return std::move(g).value();
}

double makespan(const PlanGraph& g) {
  auto t = evaluate_graph_time(g);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.problems()[0].to_string());
  return t.ok() ? t->makespan_s : -1;
}

// Forward passes of each transformer layer over all ranks: tp x cp x dp x micro-batches when
// every layer is lowered once per micro-batch.
std::map<int32_t, int> forward_passes_per_layer(const PlanGraph& g) {
  std::map<int32_t, int> out;
  for (const RankProgram& r : g.ranks)
    for (const Task& t : r.tasks)
      if (t.kind == TaskKind::kCompute && t.op == OpKind::kLayer && t.phase == Phase::kForward)
        for (int32_t l = t.layer; l < t.layer + t.num_layers; ++l) out[l] += 1;
  return out;
}

// Closed forms for uncontended pipelines with free communication: (m + p - 1)(tf + tb) for
// GPipe and 1F1B, m (tf + tb) + (p - 1)(tf + tb) / v for interleaved 1F1B, where tf and tb
// are one stage's forward and backward times (Narayanan et al. 2021, section 2.2).
TEST(Lowering, PipelineTimesMatchClosedForms) {
  const Scenario s = scenario(4, 8, 8);  // 4 stages of 2 layers, 8 micro-batches
  const double tf = 2 * kMs, tb = 4 * kMs;
  EXPECT_NEAR(makespan(lower_ok(s, pipeline(Schedule::kGpipe, 4, 1), pure_compute())), 11 * (tf + tb), 1e-12);
  EXPECT_NEAR(makespan(lower_ok(s, pipeline(Schedule::kOneFOneB, 4, 1), pure_compute())), 11 * (tf + tb), 1e-12);
  EXPECT_NEAR(makespan(lower_ok(s, pipeline(Schedule::kInterleaved, 4, 2), pure_compute())),
              8 * (tf + tb) + 3 * (tf + tb) / 2, 1e-12);
}

TEST(Lowering, OneFOneBStashesAtMostStagesMinusRankActivations) {
  const Scenario s = scenario(4, 8, 8);
  const PlanGraph g = lower_ok(s, pipeline(Schedule::kOneFOneB, 4, 1), pure_compute());
  for (const RankProgram& r : g.ranks) {
    int live = 0, peak = 0;
    for (const Task& t : r.tasks) {
      if (t.category != MemCategory::kActivations) continue;
      if (t.kind == TaskKind::kAlloc) peak = std::max(peak, ++live);
      if (t.kind == TaskKind::kFree) --live;
    }
    EXPECT_EQ(live, 0);
    EXPECT_EQ(peak, 4 - r.stage) << "stage " << r.stage;
  }
  const PlanGraph gp = lower_ok(s, pipeline(Schedule::kGpipe, 4, 1), pure_compute());
  int live = 0, peak = 0;
  for (const Task& t : gp.ranks[0].tasks)
    if (t.category == MemCategory::kActivations && (t.kind == TaskKind::kAlloc || t.kind == TaskKind::kFree))
      peak = std::max(peak, t.kind == TaskKind::kAlloc ? ++live : --live);
  EXPECT_EQ(peak, 8);  // GPipe keeps every micro-batch
}

TEST(Lowering, ComputeTasksFollowTheScheduleAndCoverEveryLayer) {
  const Scenario s = scenario(4, 10, 8);
  Plan p = pipeline(Schedule::kInterleaved, 4, 2);
  p.layers_per_stage = {2, 3, 3, 2};  // uneven split, as Llama-3 405B used
  const PlanGraph g = lower_ok(s, p, pure_compute());
  const std::map<int32_t, int> fwd_per_layer = forward_passes_per_layer(g);
  ASSERT_EQ(fwd_per_layer.size(), 10u);
  for (auto [layer, n] : fwd_per_layer) EXPECT_EQ(n, 8) << "layer " << layer;
  // Stage 0 chunk 1 is virtual stage 4: after 2 + 3 + 3 + 2 = 10? no: chunk 0 of the four stages
  // hold 1 + 2 + 2 + 1 layers, so stage 0 chunk 1 starts at layer 6.
  auto layers = chunk_layers(p, 10);
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ((*layers)[0][1].first_layer, 6);
  EXPECT_EQ((*layers)[1][0].num_layers, 2);
  EXPECT_EQ((*layers)[1][1].num_layers, 1);
}

// Llama 3.1 405B's pipeline: 126 layers on pp 8 x vpp 8, model chunks of 2 layers and the two
// end chunks of 1 (the default split); every schedule lowers it and the graph checks pass.
TEST(Lowering, UnevenVirtualStagesLowerInEverySchedule) {
  const Scenario s = scenario(8, 126, 16);
  Plan p = pipeline(Schedule::kInterleaved, 8, 8);
  const PlanGraph g = lower_ok(s, p, pure_compute());
  const std::map<int32_t, int> fwd_per_layer = forward_passes_per_layer(g);
  ASSERT_EQ(fwd_per_layer.size(), 126u);
  for (auto [layer, n] : fwd_per_layer) EXPECT_EQ(n, 16) << "layer " << layer;
  auto layers = chunk_layers(p, 126);
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ((*layers)[0][0].num_layers, 1);  // the embedding's chunk
  EXPECT_EQ((*layers)[7][7].num_layers, 1);  // the output layer's chunk
  EXPECT_EQ((*layers)[3][4].num_layers, 2);
  EXPECT_EQ((*layers)[7][7].first_layer, 125);
  // An explicit per-chunk split (model order), with chunks of 1, 2 and 3 layers.
  Plan q = pipeline(Schedule::kInterleaved, 4, 2);
  q.layers_per_stage = {1, 2, 3, 2, 2, 3, 2, 1};
  const Scenario s16 = scenario(4, 16, 8);
  lower_ok(s16, q, pure_compute());
  auto ql = chunk_layers(q, 16);
  ASSERT_TRUE(ql.ok());
  EXPECT_EQ((*ql)[2][0].num_layers, 3);
  EXPECT_EQ((*ql)[2][1].first_layer, 1 + 2 + 3 + 2 + 2 + 3);
  // The same stage totals under 1F1B and GPipe.
  for (Schedule sched : {Schedule::kOneFOneB, Schedule::kGpipe}) {
    Plan r = pipeline(sched, 4, 1);
    r.layers_per_stage = {3, 5, 5, 3};
    lower_ok(s16, r, pure_compute());
  }
}

// Model chunks with no transformer layer (Megatron's account-for split of 30 layers on pp 4 x
// vpp 8: the first chunk is the embedding, the last the output layer and loss) lower, pass the
// graph checks and keep every layer once per micro-batch.
TEST(Lowering, EmptyEndChunksLower) {
  const Scenario s = scenario(4, 30, 8);
  Plan p = pipeline(Schedule::kInterleaved, 4, 8);
  p.layers_per_stage = default_layer_split(30, 32, true, true);
  ASSERT_EQ(p.layers_per_stage.front(), 0);
  ASSERT_EQ(p.layers_per_stage.back(), 0);
  const PlanGraph g = lower_ok(s, p, pure_compute());
  const std::map<int32_t, int> fwd_per_layer = forward_passes_per_layer(g);
  ASSERT_EQ(fwd_per_layer.size(), 30u);
  for (auto [layer, n] : fwd_per_layer) EXPECT_EQ(n, 8) << "layer " << layer;
}

TEST(Lowering, TensorAndDataParallelCollectivesMatchAcrossMembers) {
  const Scenario s = scenario(8, 8, 16);
  Plan p = pipeline(Schedule::kOneFOneB, 2, 1);
  p.tp = 2;
  p.dp = 2;
  p.zero_stage = 1;
  p.sequence_parallel = true;
  LoweringCosts c = pure_compute();
  c.layer_fwd_comm = {{GroupKind::kTp, CollectiveKind::kAllGather, 8 << 20, 2, 0.1 * kMs},
                      {GroupKind::kTp, CollectiveKind::kReduceScatter, 8 << 20, 2, 0.1 * kMs}};
  c.layer_bwd_comm = c.layer_fwd_comm;
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kReduceScatter, 64 << 20, 1, 1 * kMs}};
  c.layer_param_gather = {{GroupKind::kDp, CollectiveKind::kAllGather, 64 << 20, 1, 1 * kMs}};
  const PlanGraph g = lower_ok(s, p, c);
  // 4 TP groups of 2, 4 DP groups of 2.
  int tp_groups = 0, dp_groups = 0;
  for (const ProcessGroup& pg : g.groups) {
    EXPECT_EQ(pg.ranks.size(), 2u);
    tp_groups += pg.kind == GroupKind::kTp;
    dp_groups += pg.kind == GroupKind::kDp;
  }
  EXPECT_EQ(tp_groups, 4);
  EXPECT_EQ(dp_groups, 4);
  // Rank 0 (stage 0, 4 layers): 8 micro-batches x 2 phases x (AG + RS), each 2 per layer x
  // 4 layers = 256 calls: one task per chunk step (count 8), layer by layer (count 2) in the
  // first forward and the last backward.
  int64_t tp_calls = 0, dp_rs = 0, dp_ag = 0;
  double tp_s = 0;
  for (const Task& t : g.ranks[0].tasks) {
    if (t.kind != TaskKind::kCollective) continue;
    if (t.stream == Stream::kTpComm) {
      tp_calls += t.count;
      tp_s += t.duration_s;
      EXPECT_TRUE(t.count == 8 || t.count == 2);
    }
    if (t.stream == Stream::kDpComm) (t.collective == CollectiveKind::kReduceScatter ? dp_rs : dp_ag) += 1;
  }
  EXPECT_EQ(tp_calls, 256);
  EXPECT_NEAR(tp_s, 256 * 0.1 * kMs, 1e-9);
  EXPECT_EQ(dp_rs, 4);  // one bucket per layer, during the last backward
  EXPECT_EQ(dp_ag, 4);  // one per layer, ahead of the first forward
  // Blocking TP communication (all-gather then reduce-scatter, 0.8 ms each) lengthens every
  // stage's forward and backward by 1.6 ms. The ZeRO-1 parameter all-gathers (1 ms per
  // layer) run layer by layer ahead of the first forward, which waits only for the first
  // layer's; the gradient reduce-scatters (1 ms per layer) overlap stage 0's last backward
  // (2.4 ms per layer) except the last layer's: 9 (tf + tb) + 1 ms + 1 ms.
  const double tf = 4 * kMs + 1.6 * kMs, tb = 8 * kMs + 1.6 * kMs;
  EXPECT_NEAR(makespan(g), 9 * (tf + tb) + 2 * kMs, 1e-9);
}

// An MoE layer with expert parallelism lowers as attention -> dispatch all-to-all -> experts
// -> combine all-to-all (backward: the same in reverse) on the EP group, and reduces expert
// gradients over the expert-data-parallel group apart from the dense gradients.
TEST(Lowering, MixtureOfExpertsDispatchesAndCombinesOverTheExpertParallelGroup) {
  Scenario s = scenario(8, 4, 16);
  s.model.num_experts = 8;
  Plan p;
  p.dp = 8;
  p.ep = 4;
  p.zero_stage = 1;
  LoweringCosts c = pure_compute();
  c.moe_fwd = {4e8, 4e5, 0.4 * kMs};  // of the 1 ms layer forward
  c.moe_bwd = {8e8, 8e5, 0.8 * kMs};
  const int64_t a2a_bytes = 4 << 20;
  c.layer_fwd_comm = {{GroupKind::kEp, CollectiveKind::kAllToAll, a2a_bytes, 2, 0.05 * kMs}};
  c.layer_bwd_comm = c.layer_fwd_comm;
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kReduceScatter, 16 << 20, 1, 0.01 * kMs},
                         {GroupKind::kExpertDp, CollectiveKind::kReduceScatter, 32 << 20, 1, 0.01 * kMs}};
  const PlanGraph g = lower_ok(s, p, c);
  // Groups of rank 5: EP {4..7} (dp index 5: ep index 1 of the second EP group), expert DP
  // {1, 5} (stride ep), dense DP all eight.
  std::map<GroupKind, std::vector<int32_t>> of5;
  for (const Task& t : g.ranks[5].tasks)
    if (t.kind == TaskKind::kCollective) of5[g.groups[static_cast<size_t>(t.group)].kind] = g.groups[static_cast<size_t>(t.group)].ranks;
  EXPECT_EQ(of5[GroupKind::kEp], (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(of5[GroupKind::kExpertDp], (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(of5[GroupKind::kDp].size(), 8u);
  // Order of one forward step and one backward step on rank 0 (2 micro-batches, 4 layers).
  std::vector<std::string> fwd, bwd;
  int64_t a2a_calls = 0;
  double expert_flops = 0, layer_flops = 0;
  for (const Task& t : g.ranks[0].tasks) {
    if (t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kAllToAll) {
      EXPECT_EQ(t.stream, Stream::kEpComm);
      EXPECT_EQ(t.bytes, a2a_bytes);
      a2a_calls += t.count;
    }
    if (t.kind == TaskKind::kCompute && t.op == OpKind::kMlp) expert_flops += t.flops;
    if (t.kind == TaskKind::kCompute && (t.op == OpKind::kMlp || t.op == OpKind::kAttention)) layer_flops += t.flops;
    const bool block = t.kind == TaskKind::kCompute && (t.op == OpKind::kAttention || t.op == OpKind::kMlp);
    const bool a2a = t.kind == TaskKind::kCollective && t.collective == CollectiveKind::kAllToAll;
    if (t.micro_batch != 0 || !(block || a2a)) continue;
    const std::string what = t.kind == TaskKind::kCompute ? to_string(t.op) : std::string("a2a");
    (t.phase == Phase::kForward ? fwd : bwd).push_back(what);
  }
  const std::string attn = to_string(OpKind::kAttention), mlp = to_string(OpKind::kMlp);
  EXPECT_EQ(fwd, (std::vector<std::string>{attn, "a2a", mlp, "a2a"}));
  EXPECT_EQ(bwd, (std::vector<std::string>{"a2a", mlp, "a2a", attn}));
  // 2 micro-batches x 4 layers x (2 forward + 2 backward) all-to-alls.
  EXPECT_EQ(a2a_calls, 2 * 4 * 4);
  EXPECT_NEAR(expert_flops, 2 * 4 * (4e8 + 8e8), 1);
  EXPECT_NEAR(layer_flops, 2 * 4 * (1e9 + 2e9), 1);  // the split keeps the layer's total
  // Blocking all-to-alls lengthen each layer by 2 x 0.1 ms per phase: 2 micro-batches of
  // 4 x (1 + 2 + 0.2) ms, then the last layer's reduce-scatters (0.01 ms each, one stream).
  EXPECT_NEAR(makespan(g), 2 * 4 * 3.2 * kMs + 0.02 * kMs, 1e-9);
}

TEST(GraphCheck, FindsAnAllToAllThatDoesNotSplitEvenly) {
  Scenario s = scenario(4, 2, 4);
  s.model.num_experts = 4;
  Plan p;
  p.dp = 4;
  p.ep = 4;
  LoweringCosts c = pure_compute();
  c.moe_fwd = {4e8, 4e5, 0.4 * kMs};
  c.moe_bwd = {8e8, 8e5, 0.8 * kMs};
  c.layer_fwd_comm = {{GroupKind::kEp, CollectiveKind::kAllToAll, (4 << 20) + 2, 2, 0.05 * kMs}};
  auto g = lower_plan(s, p, c);
  ASSERT_TRUE(g.ok());
  const Problems problems = check_graph(*g);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].to_string().find("does not split evenly over the 4 members"), std::string::npos)
      << problems[0].to_string();
}

// Four ranks of data parallelism at `zero_stage` over 4 layers of pure compute (2 micro-batches),
// each layer with a 0.5 ms gradient reduce-scatter and parameter all-gather of 16 MiB.
PlanGraph lower_sharded(Framework framework, int64_t zero_stage, Recompute recompute = Recompute::kNone) {
  Scenario s = scenario(4, 4, 8);
  s.training.framework = framework;
  Plan p;
  p.dp = 4;
  p.zero_stage = zero_stage;
  p.recompute = recompute;
  LoweringCosts c = pure_compute();
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kReduceScatter, 16 << 20, 1, 0.5 * kMs}};
  c.layer_param_gather = {{GroupKind::kDp, CollectiveKind::kAllGather, 16 << 20, 1, 0.5 * kMs}};
  c.layer_gathered_param_bytes = 16 << 20;
  return lower_ok(s, p, c);
}

// NCCL calls of `kind` rank 0 issues in `phase`.
int collective_calls(const PlanGraph& g, CollectiveKind kind, Phase phase) {
  int calls = 0;
  for (const Task& t : g.ranks[0].tasks)
    if (t.kind == TaskKind::kCollective && t.collective == kind && t.phase == phase) calls += t.count;
  return calls;
}

TEST(Lowering, ZeroThreeGathersEveryUseAndFreesWhatItGathered) {
  const PlanGraph g = lower_sharded(Framework::kMegatron, 3);
  int ag = 0, rs = 0, live = 0, peak_live = 0;
  for (const Task& t : g.ranks[0].tasks) {
    if (t.kind == TaskKind::kCollective) (t.collective == CollectiveKind::kAllGather ? ag : rs) += 1;
    if (t.category == MemCategory::kWeights && t.micro_batch >= 0) {  // gathered layers, not the shard
      if (t.kind == TaskKind::kAlloc) peak_live = std::max(peak_live, ++live);
      if (t.kind == TaskKind::kFree) --live;
    }
  }
  EXPECT_EQ(ag, 2 * 2 * 4);  // 2 micro-batches x (forward + backward) x 4 layers
  EXPECT_EQ(rs, 2 * 4);      // every layer after each backward
  EXPECT_EQ(live, 0);
  EXPECT_EQ(peak_live, 2);  // the layer in use and the one prefetched
  // Per micro-batch 4 x 1 ms forward, 4 x 2 ms backward; the gathers (0.5 ms) hide behind
  // the compute except the very first; the last layer's reduce-scatter (0.5 ms) is exposed.
  EXPECT_NEAR(makespan(g), 2 * 12 * kMs + 0.5 * kMs + 0.5 * kMs, 1e-9);
}

// DeepSpeed's ZeRO-3 with full recompute gathers every layer twice in the backward (the
// recomputed forward's hooks, then the backward's): the backward gather tasks carry two calls.
TEST(Lowering, DeepspeedZeroThreeGathersAgainForTheRecompute) {
  const PlanGraph ds = lower_sharded(Framework::kDeepspeed, 3, Recompute::kFull);
  EXPECT_EQ(collective_calls(ds, CollectiveKind::kAllGather, Phase::kForward), 2 * 4);       // 2 micro-batches x 4 layers
  EXPECT_EQ(collective_calls(ds, CollectiveKind::kAllGather, Phase::kBackward), 2 * 2 * 4);  // twice each in the backward
  const PlanGraph fsdp2 = lower_sharded(Framework::kTorchtitan, 3, Recompute::kFull);
  EXPECT_EQ(collective_calls(fsdp2, CollectiveKind::kAllGather, Phase::kBackward), 2 * 4);
}

// torchtitan's ZeRO-2 (FSDP2 without resharding after the forward) gathers each layer before
// every micro-batch's forward into the weights it holds in full, and not again for the backward;
// it reduce-scatters each layer after every backward, as ZeRO-3.
TEST(Lowering, TorchtitanZeroTwoGathersEveryForwardIntoTheFullWeights) {
  const PlanGraph g = lower_sharded(Framework::kTorchtitan, 2);
  EXPECT_EQ(collective_calls(g, CollectiveKind::kAllGather, Phase::kForward), 2 * 4);  // 2 micro-batches x 4 layers
  EXPECT_EQ(collective_calls(g, CollectiveKind::kAllGather, Phase::kBackward), 0);
  EXPECT_EQ(collective_calls(g, CollectiveKind::kReduceScatter, Phase::kBackward), 2 * 4);
  int gathered_buffers = 0;  // the weights are held in full
  for (const Task& t : g.ranks[0].tasks)
    if (t.category == MemCategory::kWeights && t.micro_batch >= 0 && t.kind == TaskKind::kAlloc) ++gathered_buffers;
  EXPECT_EQ(gathered_buffers, 0);
  // Per micro-batch 4 x 1 ms forward and 4 x 2 ms backward; the first gather and the last
  // reduce-scatter are exposed (0.5 ms each), the rest hide.
  EXPECT_NEAR(makespan(g), 2 * 12 * kMs + 0.5 * kMs + 0.5 * kMs, 1e-9);
}

// DeepSpeed without ZeRO all-reduces the gradients at the accumulation boundary, after the
// whole backward, even with overlap_grad_reduce set; Megatron's DDP reduces each bucket beside
// the last backward. Two ranks, 4 layers of 1 + 2 ms, one micro-batch, 1 ms per layer bucket.
TEST(Lowering, DeepspeedWithoutZeroReducesTheGradientsAfterTheBackward) {
  Scenario s = scenario(2, 4, 2);
  Plan p;
  p.dp = 2;
  p.overlap_grad_reduce = true;
  LoweringCosts c = pure_compute();
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kAllReduce, 16 << 20, 1, 1 * kMs}};
  const double compute_s = 4 * (1 + 2) * kMs;
  // Megatron: the buckets of layers 4..2 hide behind the backward of the layers below them.
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 1 * kMs, 1e-9);
  s.training.framework = Framework::kDeepspeed;
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 4 * kMs, 1e-9);
}

// A sharded optimizer's updated weights: Megatron's distributed optimizer gathers them layer by
// layer ahead of the next forward (overlap_param_gather), DeepSpeed inside its optimizer step. DeepSpeed's bf16 training shards the optimizer at ZeRO stage 0
// too (its BF16_Optimizer): a gradient all-reduce, then the same gathers. Two ranks, 4 layers of
// 1 + 2 ms, one micro-batch, 1 ms per layer for each reduction and each gather.
TEST(Lowering, DeepspeedGathersTheUpdatedWeightsInsideItsOptimizerStep) {
  Scenario s = scenario(2, 4, 2);
  Plan p;
  p.dp = 2;
  p.zero_stage = 1;
  p.overlap_grad_reduce = true;
  p.overlap_param_gather = true;
  LoweringCosts c = pure_compute();
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kReduceScatter, 16 << 20, 1, 1 * kMs}};
  c.layer_param_gather = {{GroupKind::kDp, CollectiveKind::kAllGather, 8 << 20, 1, 1 * kMs}};
  const double compute_s = 4 * (1 + 2) * kMs;
  // Megatron: the first layer's gather before the forward, the last layer's reduction after
  // the backward; the rest hide.
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 2 * kMs, 1e-9);
  // DeepSpeed ZeRO-1: the reductions beside the backward as well (its overlap_comm), but every
  // layer's gather after the step.
  s.training.framework = Framework::kDeepspeed;
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 5 * kMs, 1e-9);
  // DeepSpeed bf16 at stage 0: all-reduce, then the gathers; fp16 at stage 0 (FP16_Optimizer)
  // keeps every state and gathers nothing.
  p.zero_stage = 0;
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kAllReduce, 16 << 20, 1, 2 * kMs}};
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 12 * kMs, 1e-9);
  s.training.precision = Precision::kFp16;
  EXPECT_NEAR(makespan(lower_ok(s, p, c)), compute_s + 8 * kMs, 1e-9);
}

TEST(Lowering, ExplainsPlansItCannotLower) {
  const Scenario s = scenario(8, 8, 8);
  Plan p = pipeline(Schedule::kOneFOneB, 4, 1);
  auto g = lower_plan(s, p, pure_compute());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.problems()[0].where, "/parallelism");
  EXPECT_NE(g.problems()[0].message.find("8 GPUs"), std::string::npos);
  p.dp = 2;
  p.micro_batch_size = 3;
  g = lower_plan(s, p, pure_compute());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.problems()[0].where, "/training/global_batch_size");
  p.micro_batch_size = 1;
  p.schedule = Schedule::kInterleaved;
  p.vpp = 2;
  p.layers_per_stage = {2, 2, 2, 1};
  g = lower_plan(s, p, pure_compute());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.problems()[0].where, "layers_per_stage");
}

// --- graph checks catch broken graphs ---

// TP 2 x PP 2 x DP 2 on 8 GPUs with a TP all-reduce per layer and a DP gradient all-reduce.
struct SmallCase {
  Scenario s = scenario(8, 8, 8);
  Plan p = pipeline(Schedule::kOneFOneB, 2, 1);
  LoweringCosts c = pure_compute();
  SmallCase() {
    p.tp = 2;
    p.dp = 2;
    c.layer_fwd_comm = {{GroupKind::kTp, CollectiveKind::kAllReduce, 8 << 20, 2, 0.1 * kMs}};
    c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kAllReduce, 64 << 20, 1, 1 * kMs}};
  }
};

PlanGraph small_graph() {
  const SmallCase k;
  return lower_ok(k.s, k.p, k.c);
}

bool mentions(const Problems& ps, const std::string& what) {
  for (const Problem& p : ps)
    if (p.message.find(what) != std::string::npos) return true;
  return false;
}

size_t find_task(const RankProgram& r, TaskKind kind) {
  for (size_t i = 0; i < r.tasks.size(); ++i)
    if (r.tasks[i].kind == kind) return i;
  return r.tasks.size();
}

TEST(GraphCheck, FindsASendWithoutReceive) {
  PlanGraph g = small_graph();
  RankProgram& r = g.ranks[4];  // stage 1
  const size_t i = find_task(r, TaskKind::kRecv);
  r.tasks[i].kind = TaskKind::kCompute;
  EXPECT_TRUE(mentions(check_graph(g), "has no receive"));
}

TEST(GraphCheck, FindsACollectiveMissingAMember) {
  PlanGraph g = small_graph();
  RankProgram& r = g.ranks[1];
  const size_t i = find_task(r, TaskKind::kCollective);
  r.tasks[i].kind = TaskKind::kCompute;
  EXPECT_TRUE(mentions(check_graph(g), "missing ranks 1"));
}

// Lowering some ranks only (one data-parallel replica, as the SimGrid backend does): those
// ranks get the programs the full lowering gives them, the others none, and the check accepts
// collectives whose missing members were not lowered, but not one a lowered member skips.
TEST(LowerPlan, OnlyTheRanksAskedForGetAProgram) {
  const PlanGraph full = small_graph();
  const SmallCase k;
  const Scenario& s = k.s;
  const Plan& p = k.p;
  const LoweringCosts& c = k.c;
  std::vector<char> only(8, 0);
  for (int r = 0; r < 8; ++r) only[static_cast<size_t>(r)] = rank_to_coords(r, p).dp == 1;
  auto g = lower_plan(s, p, c, only);
  ASSERT_TRUE(g.ok()) << g.problems().front().to_string();
  ASSERT_EQ(g->ranks.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    const RankProgram& prog = g->ranks[static_cast<size_t>(r)];
    EXPECT_EQ(prog.rank, r);
    EXPECT_EQ(prog.stage, full.ranks[static_cast<size_t>(r)].stage);
    if (!only[static_cast<size_t>(r)]) {
      EXPECT_TRUE(prog.tasks.empty()) << r;
      continue;
    }
    ASSERT_EQ(prog.tasks.size(), full.ranks[static_cast<size_t>(r)].tasks.size()) << r;
    for (size_t i = 0; i < prog.tasks.size(); ++i) {
      EXPECT_EQ(prog.tasks[i].kind, full.ranks[static_cast<size_t>(r)].tasks[i].kind);
      EXPECT_EQ(prog.tasks[i].deps, full.ranks[static_cast<size_t>(r)].tasks[i].deps);
    }
  }
  EXPECT_TRUE(check_graph(*g).empty());
  PlanGraph broken = *g;
  for (RankProgram& prog : broken.ranks) {
    if (prog.tasks.empty()) continue;
    prog.tasks[find_task(prog, TaskKind::kCollective)].kind = TaskKind::kCompute;  // a lowered member skips a call
    break;
  }
  EXPECT_TRUE(mentions(check_graph(broken), "missing ranks"));
  EXPECT_FALSE(lower_plan(s, p, c, std::vector<char>(3, 1)).ok());  // one entry per rank
}

TEST(GraphCheck, FindsAFreeOfWhatWasNotAllocated) {
  PlanGraph g = small_graph();
  RankProgram& r = g.ranks[0];
  const size_t i = find_task(r, TaskKind::kFree);
  r.tasks[i].buffer = 999;
  EXPECT_TRUE(mentions(check_graph(g), "frees buffer 999 which is not allocated"));
}

TEST(GraphCheck, FindsADeadlock) {
  // Stage 0 sends its first activation only after its last receive (a gradient that needs
  // that activation first): a cycle through the two ranks.
  PlanGraph h = small_graph();
  RankProgram& h0 = h.ranks[0];
  const size_t first_send = find_task(h0, TaskKind::kSend);
  size_t last_recv = 0;
  for (size_t i = 0; i < h0.tasks.size(); ++i)
    if (h0.tasks[i].kind == TaskKind::kRecv) last_recv = i;
  // Swap the two tasks so the send comes after every receive and waits for it.
  std::swap(h0.tasks[first_send], h0.tasks[last_recv]);
  h0.tasks[last_recv].deps = {static_cast<int32_t>(first_send)};
  h0.tasks[first_send].deps.clear();
  Problems hp = check_graph(h);
  EXPECT_TRUE(mentions(hp, "never becomes ready")) << (hp.empty() ? "no problem" : hp[0].to_string());
}

}  // namespace
}  // namespace monarch

namespace monarch {
namespace {

TEST(PlanFile, LoweredGraphRoundTripsAndStillPassesTheChecks) {
  const Scenario s = scenario(16, 8, 32);
  Plan p = pipeline(Schedule::kInterleaved, 2, 2);
  p.tp = 2;
  p.dp = 4;
  p.zero_stage = 1;
  LoweringCosts c = pure_compute();
  c.layer_fwd_comm = {{GroupKind::kTp, CollectiveKind::kAllReduce, 8 << 20, 2, 0.1 * kMs}};
  c.layer_bwd_comm = c.layer_fwd_comm;
  c.layer_grad_reduce = {{GroupKind::kDp, CollectiveKind::kReduceScatter, 64 << 20, 1, 1 * kMs}};
  c.layer_param_gather = {{GroupKind::kDp, CollectiveKind::kAllGather, 64 << 20, 1, 1 * kMs}};
  const PlanGraph g = lower_ok(s, p, c);
  const std::string path = std::string(MONARCH_BINARY_DIR) + "/lowering_test_plan.json";
  ASSERT_TRUE(write_plan_file(path, g).empty());
  auto back = read_plan_file(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_TRUE(check_graph(*back).empty());
  EXPECT_EQ(plan_graph_to_json(*back), plan_graph_to_json(g));
  EXPECT_DOUBLE_EQ(makespan(*back), makespan(g));
}

}  // namespace
}  // namespace monarch
