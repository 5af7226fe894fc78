#include "realrt/schedule.h"

#include <algorithm>
#include <cassert>

namespace monarch::realrt {

std::vector<PipeOp> pipeline_schedule(Schedule schedule, int64_t pp, int64_t vpp, int64_t stage, int64_t num_mb) {
  std::vector<PipeOp> ops;
  if (schedule == Schedule::kGpipe) {
    assert(vpp == 1);
    for (int64_t m = 0; m < num_mb; ++m) ops.push_back({true, 0, m});
    for (int64_t m = 0; m < num_mb; ++m) ops.push_back({false, 0, m});
    return ops;
  }
  if (schedule == Schedule::kOneFOneB || vpp == 1) {
    const int64_t warmup = std::min(pp - stage - 1, num_mb);
    for (int64_t m = 0; m < warmup; ++m) ops.push_back({true, 0, m});
    for (int64_t i = 0; i < num_mb - warmup; ++i) {
      ops.push_back({true, 0, warmup + i});
      ops.push_back({false, 0, i});
    }
    for (int64_t m = num_mb - warmup; m < num_mb; ++m) ops.push_back({false, 0, m});
    return ops;
  }
  assert(num_mb % pp == 0);
  const int64_t total = num_mb * vpp;
  auto mb_of = [&](int64_t k) { return (k / (pp * vpp)) * pp + k % pp; };
  auto fwd = [&](int64_t k) { return PipeOp{true, (k / pp) % vpp, mb_of(k)}; };
  auto bwd = [&](int64_t k) { return PipeOp{false, vpp - 1 - (k / pp) % vpp, mb_of(k)}; };
  const int64_t warmup = std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(fwd(k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    ops.push_back(fwd(warmup + i));
    ops.push_back(bwd(i));
  }
  for (int64_t k = total - warmup; k < total; ++k) ops.push_back(bwd(k));
  return ops;
}

std::string to_string(const PipeOp& op) {
  return std::string(op.forward ? "F" : "B") + "(c" + std::to_string(op.chunk) + ",mb" + std::to_string(op.mb) + ")";
}

}  // namespace monarch::realrt
