#include "strategies/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "core/cost_model.h"
#include "core/goodput.h"
#include "core/model_math.h"
#include "core/plan_warnings.h"
#include "core/presets.h"
#include "core/scenario_io.h"
#include "strategies/partition.h"
#include "strategies/plan_costs.h"

namespace monarch {
namespace {

// A deliberately simple test model (not a cost model): memory = 16 bytes per parameter of
// the rank's layers (sharded by TP, PP and, with ZeRO-3, DP) + activations per micro-batch
// in flight; time = the slowest stage's layer-equivalents x micro-batches + the bubble.
// Embedding counts as 1 layer of work on stage 0, output + loss as 2 on the last stage.
constexpr double kLayerParams = 1e9;
constexpr double kActGiB = 2.0;  // per layer per micro-batch, no recompute

PlanEstimate toy(const Scenario& s, const Plan& p) {
  const std::vector<int64_t> split = stage_layers(model_shape(s.model), p);
  double worst_stage = 0, worst_mem = 0;
  const int64_t m = num_micro_batches(s, p);
  for (int64_t st = 0; st < p.pp; ++st) {
    double work = static_cast<double>(split[static_cast<size_t>(st)]);
    if (st == 0) work += 1;
    if (st == p.pp - 1) work += 2;
    worst_stage = std::max(worst_stage, work / static_cast<double>(p.tp * p.cp));
    double params = kLayerParams * static_cast<double>(split[static_cast<size_t>(st)]) / static_cast<double>(p.tp);
    double state_gib = params * 16 / (1 << 30) / (p.zero_stage == 3 ? static_cast<double>(p.dp) : 1.0);
    double act = kActGiB * static_cast<double>(split[static_cast<size_t>(st)]) * static_cast<double>(p.micro_batch_size) /
                 static_cast<double>(p.tp) * (p.recompute == Recompute::kFull ? 0.1 : p.recompute == Recompute::kSelective ? 0.5 : 1.0);
    const double in_flight = p.schedule == Schedule::kGpipe ? static_cast<double>(m) : static_cast<double>(std::min<int64_t>(p.pp - st, m));
    worst_mem = std::max(worst_mem, state_gib + act * in_flight);
  }
  PlanEstimate e;
  const double per_mb = worst_stage * static_cast<double>(p.micro_batch_size) * 1e-3 *
                        (p.recompute == Recompute::kFull ? 1.33 : p.recompute == Recompute::kSelective ? 1.05 : 1.0);
  e.iteration_time_s = per_mb * static_cast<double>(m + p.pp - 1) / static_cast<double>(p.vpp > 1 ? 1 : 1) +
                       (p.zero_stage == 3 ? 0.01 : 0.0) + 0.001 * static_cast<double>(p.tp);
  e.peak_memory_gib = worst_mem;
  e.fits = worst_mem <= s.cluster.gpu.memory_gib;
  return e;
}

Scenario scenario() {
  Scenario s;
  s.model.num_layers = 32;
  s.model.hidden_size = 4096;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 8;
  s.model.ffn_hidden_size = 14336;
  s.model.seq_length = 4096;
  s.model.vocab_size = 128256;
  s.cluster.num_gpus = 64;
  s.cluster.gpus_per_node = 8;
  s.cluster.gpu = find_gpu_preset("H100-SXM")->spec;
  s.training.global_batch_size = 64;
  return s;
}

SearchOptions options() {
  SearchOptions o;
  o.evaluate = toy;
  o.top_k = 5;
  return o;
}

const RejectionGroup* group(const SearchResult& r, const std::string& kind) {
  for (const RejectionGroup& g : r.rejection_groups)
    if (g.kind == kind) return &g;
  return nullptr;
}

TEST(Search, RanksFittingPlansBestFirstAndPrunesWithReasons) {
  const SearchResult r = search_plans(scenario(), options());
  ASSERT_TRUE(r.any_fits());
  ASSERT_LE(r.ranked.size(), 5u);
  for (size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.ranked[i - 1].estimate.iteration_time_s, r.ranked[i].estimate.iteration_time_s);
  for (const RankedPlan& rp : r.ranked) {
    EXPECT_TRUE(rp.estimate.fits);
    EXPECT_EQ(rp.plan.world_size(), 64);
  }
  // TP 64 does not divide the 32 heads; TP 16 and 32 do, but not the 8 KV heads.
  const RejectionGroup* heads = group(r, "tp-heads");
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(heads->count, 1);
  const RejectionGroup* kv = group(r, "tp-kv-heads");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->count, 2);
  EXPECT_NE(kv->example.reason.find("does not divide 8 KV heads"), std::string::npos);
  const RejectionGroup* mem = group(r, "memory");
  ASSERT_NE(mem, nullptr);
  EXPECT_NE(mem->example.reason.find("GiB per GPU, H100-SXM has 80.0"), std::string::npos) << mem->example.reason;
  EXPECT_GT(r.plans_evaluated, 1000);
  EXPECT_EQ(r.plans_in_space, r.plans_fitting + r.plans_rejected);
}

TEST(Search, TpAcrossNodesIsPredictedWithAWarning) {
  Scenario s = scenario();
  s.model.num_kv_heads = 32;
  const SearchResult r = search_plans(s, options());
  EXPECT_EQ(group(r, "tp-node"), nullptr);  // valid but unwise: not refused
  s.parallelism.tp = 16;
  const SearchResult fixed = search_plans(s, options());
  ASSERT_TRUE(fixed.any_fits()) << fixed.no_fit_message;
  const Plan& p = fixed.ranked.front().plan;
  EXPECT_EQ(p.tp, 16);
  const std::vector<std::string> w = plan_warnings(s, p);
  ASSERT_FALSE(w.empty());
  EXPECT_NE(w.front().find("TP 16 spans 2 nodes of 8 GPUs"), std::string::npos) << w.front();
  // The analytical result carries the warning.
  EXPECT_EQ(estimate_plan(s, p).warnings, w);
}

TEST(Search, FixedKeysPinTheirDimension) {
  Scenario s = scenario();
  s.parallelism.tp = 2;
  s.parallelism.pp = 4;
  s.parallelism.recompute = Recompute::kSelective;
  s.training.micro_batch_size = 1;
  const SearchResult r = search_plans(s, options());
  ASSERT_TRUE(r.any_fits());
  for (const RankedPlan& rp : r.ranked) {
    EXPECT_EQ(rp.plan.tp, 2);
    EXPECT_EQ(rp.plan.pp, 4);
    EXPECT_EQ(rp.plan.dp * rp.plan.cp, 8);
    EXPECT_EQ(rp.plan.recompute, Recompute::kSelective);
    EXPECT_EQ(rp.plan.micro_batch_size, 1);
  }
}

TEST(Search, CountsTheWholeSpaceOfASmallScenario) {
  Scenario s = scenario();
  s.parallelism.tp = 8;
  s.parallelism.cp = 1;
  s.parallelism.pp = 1;
  s.parallelism.sequence_parallel = true;
  s.parallelism.recompute = Recompute::kNone;
  s.training.micro_batch_size = 1;
  // dp = 8: ZeRO 0..3 and TP communication overlap on or off are the only choices left.
  SearchOptions o = options();
  int64_t progress_calls = 0;
  o.progress = [&](int64_t, int64_t) { ++progress_calls; };
  const SearchResult r = search_plans(s, o);
  EXPECT_EQ(r.plans_in_space, 8);
  EXPECT_EQ(r.plans_fitting + r.plans_rejected, 8);
}

TEST(Search, NothingFitsGivesTheClosestMiss) {
  Scenario s = scenario();
  s.cluster.gpu.memory_gib = 1;
  const SearchResult r = search_plans(s, options());
  EXPECT_FALSE(r.any_fits());
  ASSERT_TRUE(r.closest_miss.has_value());
  // The smallest need: everything sharded as far as it goes.
  const RejectionGroup* mem = group(r, "memory");
  ASSERT_NE(mem, nullptr);
  EXPECT_DOUBLE_EQ(mem->example_memory_gib, r.closest_miss->estimate.peak_memory_gib);
  EXPECT_NE(r.no_fit_message.find("smallest memory need is"), std::string::npos);
  EXPECT_NE(r.no_fit_message.find("H100-SXM has 1.0 GiB"), std::string::npos) << r.no_fit_message;
  // The report groups the many rejections, one line per kind.
  const auto report = r.rejected_for_report(100);
  EXPECT_EQ(report.size(), r.rejection_groups.size());
  EXPECT_NE(report[0].reason.find("more like it"), std::string::npos);
}

TEST(Search, BaselineIsFsdpOverAllGpusWithTheLeastRecomputeThatFits) {
  Scenario s = scenario();
  const SearchResult r = search_plans(s, options());
  ASSERT_TRUE(r.baseline.has_value());
  const Plan& b = r.baseline->plan;
  EXPECT_EQ(b.dp, 64);
  EXPECT_EQ(b.tp, 1);
  EXPECT_EQ(b.zero_stage, 3);
  EXPECT_EQ(b.micro_batch_size, 1);
  EXPECT_EQ(b.recompute, Recompute::kNone);  // 32 layers x 2 GiB fit in 80 GiB
  s.cluster.gpu.memory_gib = 40;
  const SearchResult r2 = search_plans(s, options());
  ASSERT_TRUE(r2.baseline.has_value());
  EXPECT_EQ(r2.baseline->plan.recompute, Recompute::kSelective);
  // A batch smaller than the GPU count: FSDP with TP inside a node.
  s.training.global_batch_size = 16;
  const SearchResult r3 = search_plans(s, options());
  ASSERT_TRUE(r3.baseline.has_value());
  EXPECT_EQ(r3.baseline->plan.tp, 4);
  EXPECT_EQ(r3.baseline->plan.dp, 16);
  EXPECT_NE(r3.baseline_note.find("TP 4"), std::string::npos);
}

TEST(Search, CancelStopsEarly) {
  SearchOptions o = options();
  o.cancelled = [] { return true; };
  const SearchResult r = search_plans(scenario(), o);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LE(r.plans_evaluated, 4096 + 10);
}

TEST(Partition, MovesLayersOffTheStagesWithEmbeddingAndOutput) {
  Scenario s = scenario();
  Plan p;
  p.pp = 4;
  p.dp = 16;
  p.micro_batch_size = 1;
  p.zero_stage = 3;
  // Even split 8 8 8 8: stage work 9 8 8 10. Moving one layer off the last stage: 9 9 8 9.
  const PartitionResult part = partition_layers(s, p, toy);
  ASSERT_EQ(part.plan.layers_per_stage.size(), 4u);
  int64_t total = 0;
  for (int64_t n : part.plan.layers_per_stage) total += n;
  EXPECT_EQ(total, 32);
  Plan even = p;
  even.layers_per_stage = default_layer_split(32, 4);
  EXPECT_LT(part.estimate.iteration_time_s, toy(s, even).iteration_time_s);
  EXPECT_LT(part.plan.layers_per_stage.back(), 8);
  EXPECT_GT(part.splits_tried, 10);
  EXPECT_EQ(default_layer_split(10, 4), (std::vector<int64_t>{2, 3, 3, 2}));
}

// Everything a search reports, as text, to compare two searches field by field.
std::vector<std::string> report_lines(const SearchResult& r) {
  std::vector<std::string> out;
  auto est = [](const PlanEstimate& e) {
    return std::to_string(e.iteration_time_s) + " " + std::to_string(e.peak_memory_gib) + " " + std::to_string(e.fits) + " " +
           e.reject_reason;
  };
  out.push_back("counts " + std::to_string(r.plans_in_space) + " " + std::to_string(r.plans_evaluated) + " " +
                std::to_string(r.plans_fitting) + " " + std::to_string(r.plans_rejected) + " " + std::to_string(r.cancelled));
  for (const RankedPlan& p : r.ranked) out.push_back("ranked " + describe(p.plan) + " " + est(p.estimate));
  for (const RejectionGroup& g : r.rejection_groups)
    out.push_back("group " + g.kind + " " + std::to_string(g.count) + " " + describe(g.example.plan) + " " + g.example.reason);
  for (const RejectedPlan& p : r.rejected_examples) out.push_back("rejected " + describe(p.plan) + " " + p.reason);
  if (r.baseline) out.push_back("baseline " + describe(r.baseline->plan) + " " + est(r.baseline->estimate));
  if (r.closest_miss) out.push_back("closest " + describe(r.closest_miss->plan) + " " + est(r.closest_miss->estimate));
  out.push_back("note " + r.baseline_note + " | " + r.no_fit_message);
  return out;
}

Scenario preset_scenario(const std::string& json) {
  auto s = scenario_from_json(nlohmann::json::parse(json));
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.problems()[0].to_string());
  return s.ok() ? *s : Scenario{};
}

// A scenario whose plan is fixed but for one overlap switch: left open, the search tries it on
// and off and ranks it on first; pinned off, one plan, slower.
void expect_open_switch_wins(Scenario s, std::optional<bool> ParallelismConstraints::*pinned, bool Plan::*chosen) {
  SearchOptions o;
  o.evaluate = analytical_evaluator();
  const SearchResult open = search_plans(s, o);
  EXPECT_EQ(open.plans_in_space, 2);
  ASSERT_TRUE(open.any_fits());
  EXPECT_TRUE(open.ranked.front().plan.*chosen);
  s.parallelism.*pinned = false;
  const SearchResult off = search_plans(s, o);
  EXPECT_EQ(off.plans_in_space, 1);
  ASSERT_TRUE(off.any_fits());
  EXPECT_FALSE(off.ranked.front().plan.*chosen);
  EXPECT_GT(off.ranked.front().estimate.iteration_time_s, open.ranked.front().estimate.iteration_time_s);
}

// EP communication overlap left open is tried on and off where Megatron-Core can run it (an MoE
// model with ep > 1, virtual stages with a pipeline, no full recompute); pinned, one plan.
TEST(Search, TriesEpCommOverlapWhereMegatronRunsItAndTheScenarioLeavesItOpen) {
  Scenario s = preset_scenario(
      R"({"model": {"preset": "llama3-8b", "num_layers": 16, "seq_length": 4096, "num_experts": 8, "moe_top_k": 2,
                    "moe_dropless": true},
          "cluster": {"gpu": "H100-SXM", "num_gpus": 64},
          "training": {"global_batch_size": 256, "micro_batch_size": 1},
          "parallelism": {"tensor_parallel_degree": 1, "pipeline_parallel_degree": 2, "context_parallel_degree": 1,
                          "expert_parallel_degree": 8, "expert_tensor_parallel_degree": 1, "virtual_pipeline_degree": 2,
                          "activation_recompute": "none", "zero_stage": 1}})");
  SearchOptions o;
  o.evaluate = analytical_evaluator();
  // The all-to-alls hide behind the other pass.
  expect_open_switch_wins(s, &ParallelismConstraints::ep_comm_overlap, &Plan::ep_comm_overlap);
  // Where Megatron-Core refuses it, the search does not try it.
  s.parallelism.recompute = Recompute::kFull;
  EXPECT_EQ(search_plans(s, o).plans_in_space, 1);
  s.parallelism.recompute = Recompute::kNone;
  s.parallelism.vpp = 1;
  s.parallelism.schedule = Schedule::kOneFOneB;
  EXPECT_EQ(search_plans(s, o).plans_in_space, 1);
}

// Activation offloading left open: where a plan without recompute does not fit and Megatron-Core
// can offload (pp 1), the search tries the fewest layers that make it fit beside recompute; on
// Megatron-Bridge's GB200 70B recipe (FSDP 64, micro-batches of 2, fp8) the copies hide behind
// the layers over NVLink-C2C, so offloading beats recomputing, as the recipe chose. Pinned to 0,
// or under torchtitan, recompute it is.
TEST(Search, OffloadsTheFewestLayersThatFitWhereTheScenarioLeavesItOpen) {
  Scenario s = preset_scenario(
      R"({"model": {"preset": "llama3-70b"},
          "cluster": {"gpu": "GB200", "num_gpus": 64, "gpus_per_node": 72},
          "training": {"global_batch_size": 256, "micro_batch_size": 2, "precision": "fp8"},
          "parallelism": {"tensor_parallel_degree": 1, "pipeline_parallel_degree": 1, "context_parallel_degree": 1,
                          "data_parallel_degree": 64, "zero_stage": 3}})");
  SearchOptions o;
  o.evaluate = analytical_evaluator();
  const SearchResult open = search_plans(s, o);
  ASSERT_TRUE(open.any_fits());
  const Plan& best = open.ranked.front().plan;
  EXPECT_EQ(best.recompute, Recompute::kNone);
  Plan none = best;
  none.activation_offload_layers = 0;
  EXPECT_EQ(best.activation_offload_layers, fewest_offload_layers_to_fit(s, none));
  EXPECT_GT(best.activation_offload_layers, 0);
  // Recompute instead: slower.
  s.parallelism.activation_offload_layers = 0;
  const SearchResult off = search_plans(s, o);
  ASSERT_TRUE(off.any_fits());
  EXPECT_NE(off.ranked.front().plan.recompute, Recompute::kNone);
  EXPECT_GT(off.ranked.front().estimate.iteration_time_s, open.ranked.front().estimate.iteration_time_s);
  s.parallelism.activation_offload_layers.reset();
  s.training.framework = Framework::kTorchtitan;
  const SearchResult titan = search_plans(s, o);
  for (const RankedPlan& r : titan.ranked) EXPECT_EQ(r.plan.activation_offload_layers, 0);
}

// TP communication overlap left open is tried on and off where it changes the cost; a pinned
// value and a framework without it (DeepSpeed) leave one plan.
TEST(Search, TriesTpCommOverlapOnlyWhereTheFrameworkHasItAndTheScenarioLeavesItOpen) {
  Scenario s = preset_scenario(
      R"({"model": {"preset": "llama3-70b"}, "cluster": {"gpu": "H100-SXM", "num_gpus": 64},
          "training": {"global_batch_size": 128, "micro_batch_size": 1},
          "parallelism": {"tensor_parallel_degree": 8, "pipeline_parallel_degree": 4, "context_parallel_degree": 1,
                          "virtual_pipeline_degree": 1, "pipeline_schedule": "1f1b", "sequence_parallel": true,
                          "activation_recompute": "none", "zero_stage": 1}})");
  SearchOptions o;
  o.evaluate = analytical_evaluator();
  // TP 8 on NVLink with sequence parallelism: hiding the gathers and scatters pays for the SMs
  // the communication kernels hold.
  expect_open_switch_wins(s, &ParallelismConstraints::tp_comm_overlap, &Plan::tp_comm_overlap);
  s.training.framework = Framework::kDeepspeed;
  EXPECT_EQ(search_plans(s, o).plans_in_space, 1);
  // Where the overlap cannot run, the search leaves it off; pinned there, the plan is predicted
  // as asked, with one more warning, which says why.
  auto left_off_and_warned_when_pinned = [&](Scenario sc, const std::string& warning, size_t other_warnings) {
    sc.parallelism.tp_comm_overlap.reset();
    const SearchResult left_open = search_plans(sc, o);
    EXPECT_EQ(left_open.plans_in_space, 1);
    ASSERT_TRUE(left_open.any_fits());
    EXPECT_FALSE(left_open.ranked.front().plan.tp_comm_overlap);
    EXPECT_EQ(plan_warnings(sc, left_open.ranked.front().plan).size(), other_warnings);
    sc.parallelism.tp_comm_overlap = true;
    const SearchResult pinned_there = search_plans(sc, o);
    ASSERT_TRUE(pinned_there.any_fits());
    const std::vector<std::string> w = plan_warnings(sc, pinned_there.ranked.front().plan);
    ASSERT_EQ(w.size(), other_warnings + 1);
    EXPECT_NE(w.back().find(warning), std::string::npos) << w.back();
  };
  // A100: no CUDA multicast for Transformer Engine's userbuffers.
  s.training.framework = Framework::kMegatron;
  Scenario a100 = s;
  a100.cluster.gpu = find_gpu_preset("A100-80GB")->spec;
  left_off_and_warned_when_pinned(a100, "TP communication overlap on A100-80GB", 0);
  // TP 8 over two 4-GPU nodes (warned as such either way): the overlap's kernels write into the
  // peers' memory, which only one NVLink domain shares.
  Scenario across = s;
  across.cluster.gpus_per_node = 4;
  left_off_and_warned_when_pinned(across, "TP communication overlap with TP 8 over 2 nodes of 4 GPUs", 1);
}

// Several search threads give exactly the one-thread result: the same ranking, estimates,
// rejections (kinds, counts, examples in order), baseline and closest miss.
TEST(Search, ThreadsGiveTheOneThreadResult) {
  const Scenario fits = preset_scenario(
      R"({"model": {"preset": "llama3-70b"}, "cluster": {"gpu": "H100-SXM", "num_gpus": 64}, "training": {"global_batch_size": 128}})");
  Scenario none = fits;
  none.cluster.gpu.memory_gib = 4;  // nothing fits: the closest miss decides the message
  for (const Scenario& s : {fits, none}) {
    SearchOptions one;
    one.evaluate = analytical_evaluator();
    one.top_k = 10;
    one.max_rejected_listed = 1000000;
    SearchOptions four = one;
    four.jobs = 4;
    int64_t progress_calls = 0;
    four.progress = [&](int64_t, int64_t) { ++progress_calls; };
    const SearchResult a = search_plans(s, one);
    const SearchResult b = search_plans(s, four);
    ASSERT_GT(a.plans_evaluated, int64_t{4096}) << "the space must span several batches";
    EXPECT_GT(progress_calls, 1);
    EXPECT_EQ(report_lines(a), report_lines(b));
  }
  // The toy model's ranking with many threads as well (more threads than slices of a batch).
  SearchOptions many = options();
  many.jobs = 64;
  EXPECT_EQ(report_lines(search_plans(scenario(), options())), report_lines(search_plans(scenario(), many)));
}

// The bounded evaluator changes what a search costs, not what it finds: with it, on one thread
// and on several, the ranking, estimates, counts, rejections and baseline are the plain
// evaluator's, on a dense pipeline space and a mixture-of-experts one; and it did stop plans at
// a lower bound.
TEST(Search, BoundedEvaluatorFindsWhatThePlainOneFinds) {
  const Scenario dense = preset_scenario(
      R"({"model": {"preset": "llama3-70b"}, "cluster": {"gpu": "H100-SXM", "num_gpus": 64}, "training": {"global_batch_size": 128}})");
  const Scenario moe = preset_scenario(R"({"model": {"architecture": "llama", "num_layers": 16, "hidden_size": 2048,
      "num_attention_heads": 16, "ffn_hidden_size": 8192, "num_experts": 64, "moe_top_k": 6, "moe_ffn_hidden_size": 1408,
      "vocab_size": 102400, "seq_length": 4096}, "cluster": {"gpu": "H100-SXM", "num_gpus": 64},
      "training": {"global_batch_size": 256}})");
  for (const Scenario& s : {dense, moe}) {
    SearchOptions plain;
    plain.evaluate = analytical_evaluator(MisfitTime::kSkip);
    plain.top_k = 5;
    plain.max_rejected_listed = 1000000;
    std::atomic<int64_t> stopped{0};
    const BoundedPlanEvaluator within = analytical_bounded_evaluator(MisfitTime::kSkip);
    SearchOptions bounded = plain;
    bounded.evaluate_within = [&](const Scenario& sc, const Plan& p, double bound_s) {
      PlanEstimate e = within(sc, p, bound_s);
      if (e.time_is_lower_bound) ++stopped;
      return e;
    };
    SearchOptions bounded_threads = bounded;
    bounded_threads.jobs = 3;
    const std::vector<std::string> expected = report_lines(search_plans(s, plain));
    EXPECT_EQ(report_lines(search_plans(s, bounded)), expected);
    EXPECT_GT(stopped.load(), 0) << s.model.num_layers << " layers: no plan was stopped at its bound";
    EXPECT_EQ(report_lines(search_plans(s, bounded_threads)), expected);
  }
}

// search.objective time_to_train ranks by the expected wall time with failures and
// checkpoints: the list is in that order, and its best trains no slower than the plan with
// the shortest iteration.
TEST(Search, TimeToTrainRanksByExpectedWallTimeWithFailures) {
  auto j = nlohmann::json::parse(R"({
    "name": "llama3-8b-on-64-h100",
    "model": { "preset": "llama3-8b" },
    "cluster": { "gpu": "H100-SXM", "num_gpus": 64 },
    "training": { "global_batch_size": 256, "precision": "bf16", "total_tokens": 1e12 },
    "search": { "objective": "time_to_train", "top_k": 8 },
    "reliability": { "preset": "llama3-405b", "storage": { "write_GBps": 20, "read_GBps": 20 },
                     "reschedule_s": 600, "startup_s": 300 }
  })");
  auto sc = scenario_from_json(j);
  ASSERT_TRUE(sc.ok()) << sc.problems()[0].to_string();
  const SearchResult by_time = search_plans_analytical(*sc, SearchOptions{});
  ASSERT_TRUE(by_time.any_fits());
  for (size_t i = 0; i < by_time.ranked.size(); ++i) {
    EXPECT_GT(by_time.ranked[i].estimate.time_to_train_s, 0);
    if (i > 0) EXPECT_LE(by_time.ranked[i - 1].estimate.time_to_train_s, by_time.ranked[i].estimate.time_to_train_s);
  }
  Scenario fastest = *sc;
  fastest.search.objective = Objective::kIterationTime;
  const SearchResult by_iteration = search_plans_analytical(fastest, SearchOptions{});
  ASSERT_TRUE(by_iteration.any_fits());
  const RankedPlan& quick = by_iteration.ranked.front();
  EXPECT_EQ(quick.estimate.time_to_train_s, 0);  // not computed for other objectives
  EXPECT_LE(by_time.ranked.front().estimate.time_to_train_s,
            expected_time_to_train_s(*sc, quick.plan, quick.estimate.iteration_time_s) * (1 + 1e-9));
}

}  // namespace
}  // namespace monarch
