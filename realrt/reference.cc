#include "realrt/reference.h"

namespace monarch::realrt {

std::vector<double> train_single_process(const GptConfig& cfg, const TrainSettings& t, Recompute recompute,
                                         int64_t moe_route_groups) {
  ChunkSpec spec;
  spec.first_layer = 0;
  spec.num_layers = cfg.num_layers;
  spec.has_embedding = spec.has_head = true;
  spec.recompute = recompute;
  spec.micro_batch_size = t.micro_batch_size;
  spec.moe_route_groups = moe_route_groups;
  GptChunk<float> model(cfg, spec, nullptr);
  const int64_t n = model.layout().total;
  Buf<float> params(n, MemCategory::kWeights), grads(n, MemCategory::kGradients);
  Buf<float> m(n, MemCategory::kOptimizer), v(n, MemCategory::kOptimizer);
  init_params(params.data(), model.layout(), cfg, spec, t.seed);
  model.bind(params.data(), grads.data());
  const int64_t tokens_per_mb = cfg.seq * t.micro_batch_size;
  const int64_t num_mb = t.global_batch_size / t.micro_batch_size;
  const float loss_scale = 1.0f / static_cast<float>(cfg.seq * t.global_batch_size);
  std::vector<int32_t> tokens(static_cast<size_t>(tokens_per_mb)), targets(tokens.size());
  std::vector<double> losses;
  for (int64_t step = 0; step < t.steps; ++step) {
    grads.zero();
    double loss = 0;
    for (int64_t mb = 0; mb < num_mb; ++mb) {
      const int64_t sample0 = first_sample(t, 1, step, 0, mb);
      synthetic_batch(tokens.data(), targets.data(), t.seed, sample0, t.micro_batch_size, cfg.seq, cfg.vocab);
      loss += model.forward(mb, tokens.data(), targets.data(), nullptr, loss_scale, {t.seed, sample0});
      model.backward(mb, nullptr);
    }
    adam_update(params.data(), grads.data(), m.data(), v.data(), n, step + 1);
    losses.push_back(loss);
  }
  return losses;
}

}  // namespace monarch::realrt
