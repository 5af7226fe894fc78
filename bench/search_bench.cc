// Speed of the strategy engine: the full plan search for Llama-3 405B on 16,384 H100s (target:
// at least 100,000 plans per second per core, on one and on two threads), for GPT-3 175B on
// 1,024 B200s with many micro-batches per pipeline and for a fine-grained MoE on 256 H800s
// (one thread each), and lowering +
// checking + timing of the task graph for GPT-3 175B on 1,024 GPUs and Llama-3 405B on 16,384.
//
//   ./build/bench/monarch_bench_search
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "core/graph_time.h"
#include "core/scenario_io.h"
#include "core/graph_check.h"
#include "strategies/plan_costs.h"

namespace monarch {
namespace {

Scenario load(const std::string& preset, const std::string& gpu, int64_t gpus, int64_t global_batch) {
  auto s = scenario_from_json(nlohmann::json::parse(R"({"model": {"preset": ")" + preset + R"("}, "cluster": {"gpu": ")" + gpu +
                                                    R"(", "num_gpus": )" + std::to_string(gpus) +
                                                    R"(}, "training": {"global_batch_size": )" +
                                                    std::to_string(global_batch) + "}}"));
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.problems()[0].to_string().c_str());
    std::abort();
  }
  return *s;
}

// The search's counts and its plans evaluated per wall second, for every search benchmark.
void count_search(benchmark::State& state, const SearchResult& r) {
  state.counters["plans_evaluated"] = static_cast<double>(r.plans_evaluated);
  state.counters["plans_in_space"] = static_cast<double>(r.plans_in_space);
  state.counters["plans_fitting"] = static_cast<double>(r.plans_fitting);
  state.counters["plans_per_s"] = benchmark::Counter(static_cast<double>(r.plans_evaluated) * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate);
}

// Llama-3 405B pre-training: 16,384 H100s, 16M tokens per step = 2,048 sequences of 8,192
// (Llama 3 Herd of Models, section 3.3.2).
// Argument: search threads (SearchOptions::jobs); plans_per_s is per wall second.
void BM_SearchLlama3_405B_16384_H100(benchmark::State& state) {
  const Scenario s = load("llama3-405b", "H100-SXM", 16384, 2048);
  SearchOptions options;
  options.jobs = state.range(0);
  SearchResult r;
  for (auto _ : state) {
    r = search_plans_analytical(s, options);
    benchmark::DoNotOptimize(r);
  }
  count_search(state, r);
  if (!r.ranked.empty())
    std::fprintf(stderr, "llama3-405b on 16384 H100: %lld plans evaluated (%lld in the space, %lld fit); best %s at %.2f s\n",
                 static_cast<long long>(r.plans_evaluated), static_cast<long long>(r.plans_in_space),
                 static_cast<long long>(r.plans_fitting), describe(r.ranked[0].plan).c_str(), r.ranked[0].estimate.iteration_time_s);
}
BENCHMARK(BM_SearchLlama3_405B_16384_H100)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// GPT-3 175B on 1,024 B200s at 8,192 sequences a step: a million plans with 16-512
// micro-batches per pipeline, where timing each plan's pipeline schedule is most of the work.
void BM_SearchGpt3_175B_1024_B200_ManyMicroBatches(benchmark::State& state) {
  const Scenario s = load("gpt3-175b", "B200", 1024, 8192);
  SearchOptions options;
  options.jobs = 1;
  SearchResult r;
  for (auto _ : state) {
    r = search_plans_analytical(s, options);
    benchmark::DoNotOptimize(r);
  }
  count_search(state, r);
}
BENCHMARK(BM_SearchGpt3_175B_1024_B200_ManyMicroBatches)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// A fine-grained mixture of experts left open on 256 H800s: DeepSeek-V3's layer shape (hidden
// 7168, 128 heads, 256 experts of 2048 with 8 routed per token; arXiv:2412.19437) with 31 of its
// 61 layers, fp8, 1,920 sequences of 4,096 a step. Seven million plans over TP, CP, PP, EP,
// expert TP, interleaving and micro-batch, two thirds of which do not fit in memory.
void BM_SearchFineGrainedMoe_256_H800(benchmark::State& state) {
  auto parsed = scenario_from_json(nlohmann::json::parse(R"({
    "model": {"architecture": "llama", "num_layers": 31, "hidden_size": 7168, "num_attention_heads": 128,
              "num_kv_heads": 128, "head_dim": 128, "ffn_hidden_size": 18432, "num_experts": 256, "moe_top_k": 8,
              "moe_ffn_hidden_size": 2048, "vocab_size": 129280, "seq_length": 4096, "tie_embeddings": false},
    "cluster": {"gpu": "H800-SXM", "num_gpus": 256, "gpus_per_node": 8},
    "training": {"global_batch_size": 1920, "precision": "fp8"}})"));
  if (!parsed.ok()) {
    state.SkipWithError(parsed.problems()[0].to_string().c_str());
    return;
  }
  SearchOptions options;
  options.jobs = 1;
  SearchResult r;
  for (auto _ : state) {
    r = search_plans_analytical(*parsed, options);
    benchmark::DoNotOptimize(r);
  }
  count_search(state, r);
}
BENCHMARK(BM_SearchFineGrainedMoe_256_H800)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void lower_check_time(benchmark::State& state, const Scenario& s, const Plan& p) {
  size_t tasks = 0;
  double makespan = 0;
  for (auto _ : state) {
    auto g = lower_plan(s, p);
    if (!g.ok()) {
      state.SkipWithError(g.problems()[0].to_string().c_str());
      return;
    }
    tasks = 0;
    for (const RankProgram& r : g->ranks) tasks += r.tasks.size();
    if (!check_graph(*g).empty()) {
      state.SkipWithError("graph check failed");
      return;
    }
    auto t = evaluate_graph_time(*g);
    makespan = t.ok() ? t->makespan_s : -1;
    benchmark::DoNotOptimize(makespan);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["tasks_per_rank"] = static_cast<double>(tasks) / static_cast<double>(p.world_size());
  state.counters["graph_time_s"] = makespan;
}

// GPT-3 175B on 1,024 A100s with Megatron's layout (t 8, p 16, d 8; Narayanan et al. 2021,
// Table 1) and 64 micro-batches per replica (a batch of 512), interleaved with 2 chunks.
void BM_LowerGpt3_175B_1024(benchmark::State& state) {
  const Scenario s = load("gpt3-175b", "A100-80GB", 1024, 512);
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 8;
  p.schedule = Schedule::kInterleaved;
  p.vpp = 2;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  p.zero_stage = 1;
  lower_check_time(state, s, p);
}
BENCHMARK(BM_LowerGpt3_175B_1024)->Unit(benchmark::kSecond)->Iterations(1);

// Llama-3 405B's published layout: TP 8, PP 16, DP 128, 16 micro-batches per replica.
void BM_LowerLlama3_405B_16384(benchmark::State& state) {
  const Scenario s = load("llama3-405b", "H100-SXM", 16384, 2048);
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 128;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  lower_check_time(state, s, p);
}
BENCHMARK(BM_LowerLlama3_405B_16384)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace monarch

BENCHMARK_MAIN();
