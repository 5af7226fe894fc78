// Pipeline partitioning: how many transformer layers each pipeline stage (each model chunk
// with virtual stages) holds.
//
// The first virtual stage also runs the embedding and the last the output layer and the loss,
// so an even split leaves them the slowest (and, on the first stage, the most activation
// memory). When the scenario fixes the split (parallelism.layers_per_stage or Megatron's
// account-for flags) that split is kept. Otherwise the partitioner starts from the default
// rule (core/model_math.h default_layer_split: even where the layers divide, the remainder on
// the middle virtual stages), tries every split that moves up to kMaxShiftLayers layers off
// the first and/or the last virtual stage onto the middle ones (with 2: from one to the
// other), evaluates each with the cost model, and keeps the fastest split that fits in memory
// (when none fits: the one needing least memory). Splits are uneven when that wins, as
// Llama-3 405B ran with one layer fewer on its first and last stages.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario.h"
#include "strategies/search.h"

namespace monarch {

// Layers moved off the first or the last stage at most (beyond that the embedding and the
// output layer are worth less than a layer on every realistic model: h >= 1024 and V <= 256k
// make the output GEMM at most ~ 2-3 layers' worth of FLOPs).
inline constexpr int64_t kMaxShiftLayers = 4;

struct PartitionResult {
  Plan plan;               // plan.layers_per_stage filled (size pp x vpp)
  PlanEstimate estimate;   // of that plan
  int64_t splits_tried = 0;
};

// Balance `plan` (its layers_per_stage is ignored). With one virtual stage it returns the
// plan with layers_per_stage = {num_layers} and its estimate.
PartitionResult partition_layers(const Scenario& scenario, const Plan& plan, const PlanEvaluator& evaluate);

// "31 32 32 31" style text of a split, for tables and logs.
std::string split_text(const std::vector<int64_t>& layers_per_stage);

}  // namespace monarch
