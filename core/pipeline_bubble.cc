#include "core/pipeline_bubble.h"

#include <algorithm>
#include <cassert>

namespace monarch {
namespace {

// Forwards stage s runs before its first backward (warm-up plus the steady state's first
// forward), by the schedule's own rule (core/pipeline_schedule.h has the full orders):
// - 1F1B: p - s (Megatron's p - s - 1 warm-up then F, B; torch's Schedule1F1B warms up with
//   p - s and runs B before F).
// - interleaved, Megatron (forward_backward_pipelining_with_interleaving): (p - s - 1) x 2 +
//   (v - 1) x p warm-up, every forward when m = p.
// - interleaved, torch ScheduleInterleaved1F1B (_get_warmup_ops): (v - 1) x r + 2 (p - 1 - s),
//   r = m / max(1, m / p) micro-batches per round.
int64_t forwards_before_first_backward(const PipelineShape& sh, int64_t v, int64_t s, int64_t round) {
  const int64_t p = sh.pp, m = sh.micro_batches, total = m * v;
  if (sh.schedule != Schedule::kInterleaved) return std::min(p - s, m);
  int64_t warmup = 0;
  if (sh.framework == Framework::kTorchtitan) warmup = (v - 1) * round + 2 * (p - 1 - s);
  else warmup = m == p ? total : (p - s - 1) * 2 + (v - 1) * p;
  return std::min(warmup + 1, total);
}

// How many of stage s's first n forwards run chunk j: Megatron cycles chunks every p forwards
// (virtual micro-batch k runs chunk (k mod p v) / p), torch every r ((k / r) mod v).
int64_t forwards_of_chunk(int64_t n, int64_t j, int64_t block, int64_t v) {
  const int64_t lap = block * v;
  return (n / lap) * block + std::clamp(n % lap - j * block, int64_t{0}, block);
}

double gpipe_makespan_s(const PipelineShape& sh) {
  const auto p = static_cast<size_t>(sh.pp);
  const double m = static_cast<double>(sh.micro_batches);
  double fwd = 0, bwd = 0;
  for (size_t s = 0; s < p; ++s) {
    double before_f = 0, after_f = 0, before_b = 0, after_b = 0;
    for (size_t o = 0; o < p; ++o) {
      if (o == s) continue;
      (o < s ? before_f : after_f) += sh.forward_s[o] + sh.hop_s;
      (o < s ? before_b : after_b) += sh.backward_s[o] + sh.hop_s;
    }
    fwd = std::max(fwd, before_f + m * (sh.forward_s[s] + sh.hop_s) + after_f);
    bwd = std::max(bwd, after_b + m * (sh.backward_s[s] + sh.hop_s) + before_b);
  }
  return fwd + bwd;
}

}  // namespace

double pipeline_bubble_s(const PipelineShape& sh) {
  const int64_t p = sh.pp, v = sh.schedule == Schedule::kInterleaved ? std::max<int64_t>(sh.vpp, 1) : 1;
  if (p < 2) return 0.0;
  assert(static_cast<int64_t>(sh.forward_s.size()) == p * v && static_cast<int64_t>(sh.backward_s.size()) == p * v);
  assert(static_cast<int64_t>(sh.stage_s.size()) == p);
  const double m = static_cast<double>(sh.micro_batches);
  const double slowest_s = *std::max_element(sh.stage_s.begin(), sh.stage_s.end());
  if (sh.schedule == Schedule::kGpipe)
    return gpipe_makespan_s(sh) - m * (slowest_s + 2.0 * sh.hop_s);

  const int64_t round = sh.micro_batches / std::max<int64_t>(1, sh.micro_batches / p);
  const int64_t block = sh.framework == Framework::kTorchtitan ? round : p;
  const auto at = [&](int64_t i) { return static_cast<size_t>(i); };
  const int64_t chunks = p * v;
  // Micro-batch 0's forward from model chunk i to the last one, hops included.
  std::vector<double> forward_from(at(chunks + 1), 0.0);
  for (int64_t i = chunks - 1; i >= 0; --i)
    forward_from[at(i)] = forward_from[at(i + 1)] + sh.forward_s[at(i)] + (i < chunks - 1 ? sh.hop_s : 0.0);
  // In the warm-up a stage's forwards of lap j arrive no faster than the slowest chunk of that
  // lap on the stages before it passes them on; in the cool-down its backwards no faster than
  // the slowest chunk of the lap on the stages after it.
  std::vector<double> slowest_forward_to(at(chunks)), slowest_backward_from(at(chunks));
  for (int64_t i = 0; i < chunks; ++i)
    slowest_forward_to[at(i)] = std::max(sh.forward_s[at(i)], i % p > 0 ? slowest_forward_to[at(i - 1)] : 0.0);
  for (int64_t i = chunks - 1; i >= 0; --i)
    slowest_backward_from[at(i)] = std::max(sh.backward_s[at(i)], i % p < p - 1 ? slowest_backward_from[at(i + 1)] : 0.0);

  const int64_t total = sh.micro_batches * v;
  double bubble_s = 0;
  double fill_s = 0, drain_s = 0;  // stages before s, chunk 0
  for (int64_t s = 0; s < p; ++s) {
    double back_s = 0;  // the last lap's backward from the last stage down to s + 1, hops included
    for (int64_t o = s + 1; o < p; ++o) back_s += sh.backward_s[at((v - 1) * p + o)] + sh.hop_s;
    const double path_s = forward_from[at(s)] + back_s;
    // Warm-up: n forwards; cool-down: the last n - 1 backwards (backward op k runs chunk
    // v - 1 - (k / block) mod v).
    const int64_t n = forwards_before_first_backward(sh, v, s, round);
    double own_warm_s = 0, paced_warm_s = 0, own_cool_s = 0, paced_cool_s = 0;
    for (int64_t j = 0; j < v; ++j) {
      const int64_t i = j * p + s;
      const auto fwd = static_cast<double>(forwards_of_chunk(n, j, block, v));
      own_warm_s += fwd * (sh.forward_s[at(i)] + sh.hop_s);
      paced_warm_s += fwd * (slowest_forward_to[at(i)] + sh.hop_s);
      const int64_t u = v - 1 - j;
      const auto bwd = static_cast<double>(forwards_of_chunk(total, u, block, v) -
                                           forwards_of_chunk(total - (n - 1), u, block, v));
      own_cool_s += bwd * (sh.backward_s[at(i)] + sh.hop_s);
      paced_cool_s += bwd * (slowest_backward_from[at(i)] + sh.hop_s);
    }
    const double warm_wait_s = std::max(path_s, paced_warm_s) - own_warm_s;
    const double cool_wait_s = paced_cool_s - own_cool_s;
    // Beyond m x the slowest stage: this stage's fill, warm-up and cool-down waits and drain,
    // less what its steady state is shorter than the slowest stage's.
    bubble_s = std::max(bubble_s, fill_s + warm_wait_s + cool_wait_s + drain_s - m * (slowest_s - sh.stage_s[at(s)]));
    fill_s += sh.forward_s[at(s)] + sh.hop_s;
    drain_s += sh.backward_s[at(s)] + sh.hop_s;
  }
  return bubble_s;
}

}  // namespace monarch
