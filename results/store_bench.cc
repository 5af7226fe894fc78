// Speed of the results store: `build/results/store_bench` (Google Benchmark).
// record_run is one transaction with an fsync of the WAL at commit (synchronous=FULL), so the
// disk's flush latency dominates small runs; timelines add rows at SQLite's insert rate.
#include <benchmark/benchmark.h>

#include "results/store.h"
#include "results/test_support.h"

namespace monarch {
namespace {

void BM_RecordRun(benchmark::State& state) {
  testing::TempDir dir;
  Expected<Store> store = Store::open(dir.file("bench.db"));
  RunRecord rec = testing::sample_record("bench", "analytical");
  rec.result.timeline = testing::sample_result("x", false, static_cast<int>(state.range(0))).timeline;
  for (auto _ : state) benchmark::DoNotOptimize(store->record_run(rec));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_RecordRun)->Arg(0)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Opening includes PRAGMA quick_check, which reads the whole file.
void BM_OpenStore(benchmark::State& state) {
  testing::TempDir dir;
  {
    Expected<Store> store = Store::open(dir.file("bench.db"));
    RunRecord rec = testing::sample_record("bench", "analytical");
    rec.result.timeline = testing::sample_result("x", false, 10000).timeline;
    for (int64_t i = 0; i < state.range(0); ++i) store->record_run(rec);
  }
  for (auto _ : state) benchmark::DoNotOptimize(Store::open(dir.file("bench.db")));
}
BENCHMARK(BM_OpenStore)->Arg(1)->Arg(100)->Unit(benchmark::kMillisecond);

void BM_ListRuns(benchmark::State& state) {
  testing::TempDir dir;
  Expected<Store> store = Store::open(dir.file("bench.db"));
  RunRecord rec = testing::sample_record("bench", "analytical");
  for (int64_t i = 0; i < state.range(0); ++i) store->record_run(rec);
  for (auto _ : state) benchmark::DoNotOptimize(store->list_runs());
}
BENCHMARK(BM_ListRuns)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace monarch

BENCHMARK_MAIN();
