// Plans evaluated per second by the analytical model's fast path (quick_estimate), the
// figure search depends on. Target: >= 100,000 plans/s on one core for Llama-3
// 405B on 16384 H100s.
//
//   cmake --build build --target monarch_bench_analytical
//   ./build/bench/monarch_bench_analytical --benchmark_min_time=2
// items_per_second is plans per second.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/cost_model.h"
#include "core/presets.h"

namespace monarch {
namespace {

Scenario llama3_405b_on_16384_h100() {
  Scenario s;
  s.name = "llama3-405b-16k-h100";
  // Llama 3 405B (Dubey et al. 2024, Table 3): 126 layers, 16384 hidden, 128 heads, 8 KV
  // heads, FFN 53248, vocabulary 128256; pre-training at 8192 tokens, 16M-token batches.
  s.model.architecture = Architecture::kLlama;
  s.model.num_layers = 126;
  s.model.hidden_size = 16384;
  s.model.num_attention_heads = 128;
  s.model.num_kv_heads = 8;
  s.model.ffn_hidden_size = 53248;
  s.model.vocab_size = 128256;
  s.model.seq_length = 8192;
  s.model.tie_embeddings = false;
  const GpuPreset* h100 = find_gpu_preset("H100-SXM");
  s.cluster.gpu = h100->spec;
  s.cluster.num_gpus = 16384;
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node = h100->default_intra_node;
  s.cluster.inter_node = h100->default_inter_node;
  s.cluster.nics_per_node = 8;
  s.training.global_batch_size = 2048;
  s.training.precision = Precision::kBf16;
  return s;
}

// A spread of valid plans, as a search would visit them (degrees divide 16384 and the
// batch; 126 layers split unevenly over 8 or 16 stages; 4 to 64 micro-batches).
std::vector<Plan> candidate_plans(const Scenario& s) {
  std::vector<Plan> plans;
  for (int64_t tp : {4, 8})
    for (int64_t pp : {8, 16})
      for (int64_t cp : {1, 2})
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
          for (int64_t zero : {0, 1}) {
            Plan p;
            p.tp = tp;
            p.pp = pp;
            p.cp = cp;
            p.dp = s.cluster.num_gpus / (tp * pp * cp);
            p.sequence_parallel = true;
            p.recompute = r;
            p.zero_stage = zero;
            // Interleaving where Megatron allows it: micro-batches a multiple of the stages.
            const int64_t micro_batches = s.training.global_batch_size / p.dp;
            p.vpp = pp == 16 && micro_batches % pp == 0 ? 2 : 1;
            p.schedule = p.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
            plans.push_back(p);
          }
  return plans;
}

void BM_QuickEstimateLlama405B(benchmark::State& state) {
  const Scenario s = llama3_405b_on_16384_h100();
  const std::vector<Plan> plans = candidate_plans(s);
  for (const Plan& p : plans) {
    if (quick_estimate(s, p).iteration_time_s <= 0) state.SkipWithError("a candidate plan is invalid");
  }
  size_t i = 0;
  for (auto _ : state) {
    QuickEstimate q = quick_estimate(s, plans[i]);
    benchmark::DoNotOptimize(q);
    if (++i == plans.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["plans"] = static_cast<double>(plans.size());
}
BENCHMARK(BM_QuickEstimateLlama405B);

void BM_EstimatePlanLlama405B(benchmark::State& state) {
  const Scenario s = llama3_405b_on_16384_h100();
  const std::vector<Plan> plans = candidate_plans(s);
  size_t i = 0;
  for (auto _ : state) {
    BackendResult r = estimate_plan(s, plans[i]);
    benchmark::DoNotOptimize(r);
    if (++i == plans.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EstimatePlanLlama405B);

}  // namespace
}  // namespace monarch

BENCHMARK_MAIN();
