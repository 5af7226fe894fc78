// What the GPU runtime (monarch-run --device gpu) runs of a plan, decided on the host (no CUDA):
// testable anywhere, and the reason a plan is refused is known before any GPU is touched.
#pragma once

#include <string>

#include "core/problem.h"
#include "core/scenario.h"

namespace monarch::realrt {

// Problems naming each part of the plan the GPU runtime does not run yet: it runs data
// parallelism (any dp) with ZeRO 0 and no recompute; tp, pp, cp, ep and vpp must be 1.
Problems check_gpu_plan(const Plan& plan);

// Problems naming each part of the model the GPU runtime does not train yet: dropout
// (/model/hidden_dropout, /model/attention_dropout must be 0; gpt defaults to 0.1) and mixture
// of experts (/model/num_experts).
Problems check_gpu_model(const ModelConfig& model);

// The matrix-product math for a run: `choice` ("fp32", "tf32", "bf16"; empty: from the
// scenario's training.precision, fp32 -> "fp32", bf16 -> "bf16"). fp16 and fp8 are refused,
// naming /training/precision. Returns the name; problems name `where` or the JSON path.
Expected<std::string> gpu_math_name(Precision precision, const std::string& choice, const std::string& where);

}  // namespace monarch::realrt
