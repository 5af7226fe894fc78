#include "strategies/partition.h"

#include <algorithm>
#include <cassert>

namespace monarch {

std::vector<int64_t> even_split(int64_t num_layers, int64_t pp) {
  const int64_t p = std::max<int64_t>(pp, 1);
  std::vector<int64_t> out(static_cast<size_t>(p), num_layers / p);
  const int64_t extra = num_layers % p;
  const int64_t first = std::max<int64_t>(0, (p - extra) / 2);
  for (int64_t i = 0; i < extra; ++i) ++out[static_cast<size_t>(first + i)];
  return out;
}

std::string split_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t n : v) s += (s.empty() ? "" : " ") + std::to_string(n);
  return s;
}

namespace {

// Better: fits beats not; then faster (fits) or less memory (does not fit).
bool better(const PlanEstimate& a, const PlanEstimate& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.fits) return a.iteration_time_s < b.iteration_time_s;
  return a.peak_memory_gib < b.peak_memory_gib;
}

}  // namespace

PartitionResult partition_layers(const Scenario& sc, const Plan& plan, const PlanEvaluator& evaluate) {
  assert(evaluate);
  const int64_t L = sc.model.num_layers, P = std::max<int64_t>(plan.pp, 1);
  const int64_t min_layers = std::max<int64_t>(plan.vpp, 1);  // every model chunk holds a layer
  PartitionResult best;
  best.plan = plan;
  best.plan.layers_per_stage = even_split(L, P);
  best.estimate = evaluate(sc, best.plan);
  best.splits_tried = 1;
  if (P == 1) return best;

  const std::vector<int64_t> even = best.plan.layers_per_stage;
  auto try_split = [&](std::vector<int64_t> split) {
    for (int64_t n : split)
      if (n < min_layers) return;
    if (split == even) return;
    Plan p = plan;
    p.layers_per_stage = std::move(split);
    PlanEstimate e = evaluate(sc, p);
    ++best.splits_tried;
    if (better(e, best.estimate)) {
      best.plan = std::move(p);
      best.estimate = std::move(e);
    }
  };

  if (P == 2) {
    for (int64_t shift = -kMaxShiftLayers; shift <= kMaxShiftLayers; ++shift)
      try_split({even[0] - shift, even[1] + shift});
    return best;
  }
  // Move a layers off the first stage and b off the last, spread over the middle stages
  // (centred, like the even split's remainder).
  const int64_t middle = P - 2;
  int64_t middle_total = 0;
  for (int64_t s = 1; s < P - 1; ++s) middle_total += even[static_cast<size_t>(s)];
  for (int64_t a = 0; a <= kMaxShiftLayers; ++a)
    for (int64_t b = 0; b <= kMaxShiftLayers; ++b) {
      if (a == 0 && b == 0) continue;
      std::vector<int64_t> split(static_cast<size_t>(P));
      split.front() = even.front() - a;
      split.back() = even.back() - b;
      const std::vector<int64_t> mid = even_split(middle_total + a + b, middle);
      std::copy(mid.begin(), mid.end(), split.begin() + 1);
      try_split(std::move(split));
    }
  return best;
}

}  // namespace monarch
