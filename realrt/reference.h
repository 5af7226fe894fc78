// Single-process training of the reference GPT (no MPI): the baseline every parallel plan must
// reproduce, and the building blocks (Adam, batch layout) the distributed runtime shares.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "realrt/gpt.h"

namespace monarch::realrt {

// Adam with bias correction (step counts from 1), elementwise over n values.
template <typename T>
void adam_update(T* params, const T* grads, T* m, T* v, int64_t n, int64_t step) {
  const double b1c = 1.0 - std::pow(kAdamBeta1, static_cast<double>(step));
  const double b2c = 1.0 - std::pow(kAdamBeta2, static_cast<double>(step));
  const T b1 = static_cast<T>(kAdamBeta1), b2 = static_cast<T>(kAdamBeta2);
  const T lr = static_cast<T>(kAdamLearningRate), eps = static_cast<T>(kAdamEps);
  const T inv_b1c = static_cast<T>(1.0 / b1c), inv_b2c = static_cast<T>(1.0 / b2c);
  for (int64_t i = 0; i < n; ++i) {
    const T gi = grads[i];
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    const T mhat = m[i] * inv_b1c, vhat = v[i] * inv_b2c;
    params[i] -= lr * mhat / (std::sqrt(vhat) + eps);
  }
}

// Training settings the runtime needs beyond the model.
struct TrainSettings {
  int64_t global_batch_size = 1;  // samples per optimizer step
  int64_t micro_batch_size = 1;
  uint64_t seed = 1;
  int64_t steps = 10;
};

// First sample (index into the synthetic stream) of micro-batch mb of data-parallel rank d at
// step `step`: rank d takes the contiguous block of global_batch / dp samples
// [d * per_rank, (d + 1) * per_rank) of the step, micro-batch by micro-batch.
inline int64_t first_sample(const TrainSettings& t, int64_t dp, int64_t step, int64_t d, int64_t mb) {
  const int64_t per_rank = t.global_batch_size / dp;
  return step * t.global_batch_size + d * per_rank + mb * t.micro_batch_size;
}

// Trains the whole model in one process (fp32, gradient accumulation over global_batch /
// micro_batch micro-batches) and returns the mean loss of every step (computed in that step's
// forward passes, before its update). moe_route_groups: MoE routing groups per micro-batch
// (ChunkSpec::moe_route_groups; tp for the reference of a plan with tp ranks and SP).
std::vector<double> train_single_process(const GptConfig& cfg, const TrainSettings& t, Recompute recompute,
                                         int64_t moe_route_groups = 1);

}  // namespace monarch::realrt
