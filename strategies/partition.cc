#include "strategies/partition.h"

#include <algorithm>
#include <cassert>

#include "core/model_math.h"

namespace monarch {

std::string split_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t n : v) {
    if (!s.empty()) s += ' ';
    s += std::to_string(n);
  }
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
  const int64_t L = sc.model.num_layers;
  const int64_t V = std::max<int64_t>(plan.pp, 1) * std::max<int64_t>(plan.vpp, 1);  // virtual stages
  PartitionResult best;
  best.plan = plan;
  const std::vector<int64_t> fixed = fixed_layer_split(sc, plan);
  best.plan.layers_per_stage = fixed.empty() ? default_layer_split(L, V) : fixed;
  best.estimate = evaluate(sc, best.plan);
  best.splits_tried = 1;
  if (V == 1 || !fixed.empty()) return best;  // one stage, or the scenario fixes the split

  const std::vector<int64_t> even = best.plan.layers_per_stage;
  auto try_split = [&](std::vector<int64_t> split) {
    for (int64_t n : split)
      if (n < 1) return;  // every model chunk keeps a layer
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

  if (V == 2) {
    for (int64_t shift = -kMaxShiftLayers; shift <= kMaxShiftLayers; ++shift)
      try_split({even[0] - shift, even[1] + shift});
    return best;
  }
  // Move a layers off the first virtual stage (the embedding's) and b off the last (the
  // output layer's), spread over the middle ones by the default rule.
  const int64_t middle = V - 2;
  int64_t middle_total = 0;
  for (int64_t s = 1; s < V - 1; ++s) middle_total += even[static_cast<size_t>(s)];
  for (int64_t a = 0; a <= kMaxShiftLayers; ++a)
    for (int64_t b = 0; b <= kMaxShiftLayers; ++b) {
      if (a == 0 && b == 0) continue;
      std::vector<int64_t> split(static_cast<size_t>(V));
      split.front() = even.front() - a;
      split.back() = even.back() - b;
      const std::vector<int64_t> mid = default_layer_split(middle_total + a + b, middle);
      std::copy(mid.begin(), mid.end(), split.begin() + 1);
      try_split(std::move(split));
    }
  return best;
}

}  // namespace monarch
