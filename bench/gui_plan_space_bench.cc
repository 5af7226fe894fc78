// Time to build the plan-space view (scatter with its Pareto front and colour classes, and the
// TP x PP grid) for 100,000 estimated plans, and to paint it once; runs offscreen.
//
//   ./build/bench/monarch_bench_gui_plan_space
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QChartView>
#include <cstdint>
#include <random>
#include <vector>

#include "gui/app/plan_space_view.h"

namespace monarch::gui {
namespace {

// A plan cloud shaped like a search's: degrees over powers of two, time and memory spread as
// the trade-off between them, about a third past the capacity.
std::vector<PlanPoint> cloud(size_t n) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<PlanPoint> pts(n);
  for (size_t i = 0; i < n; ++i) {
    PlanPoint& p = pts[i];
    p.plan.tp = int64_t{1} << (rng() % 4);
    p.plan.pp = int64_t{1} << (rng() % 5);
    p.plan.micro_batch_size = int64_t{1} << (rng() % 3);
    p.plan.zero_stage = static_cast<int64_t>(rng() % 4);
    p.plan.recompute = static_cast<Recompute>(rng() % 3);
    p.peak_memory_gib = 10 + 100 * u(rng);
    p.iteration_time_s = 2 + 30 / p.peak_memory_gib * (1 + u(rng));
    p.tokens_per_s = 1e6 / p.iteration_time_s;
    p.fits = p.peak_memory_gib < 76;
    if (!p.fits) p.reason = "needs more memory than the GPU has";
  }
  return pts;
}

void BM_PlanSpaceBuild(benchmark::State& state) {
  const std::vector<PlanPoint> pts = cloud(static_cast<size_t>(state.range(0)));
  PlanSpaceView view;
  view.resize(1400, 800);
  view.show();
  for (auto _ : state) {
    view.set_points(pts, 76, QString());
    benchmark::DoNotOptimize(view.markers_drawn());
  }
  state.counters["markers"] = static_cast<double>(view.markers_drawn());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PlanSpaceBuild)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_PlanSpaceBuildAndPaint(benchmark::State& state) {
  const std::vector<PlanPoint> pts = cloud(static_cast<size_t>(state.range(0)));
  PlanSpaceView view;
  view.resize(1400, 800);
  view.show();
  for (auto _ : state) {
    view.set_points(pts, 76, QString());
    benchmark::DoNotOptimize(view.grab());
  }
  state.counters["markers"] = static_cast<double>(view.markers_drawn());
}
BENCHMARK(BM_PlanSpaceBuildAndPaint)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace monarch::gui

int main(int argc, char** argv) {
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
