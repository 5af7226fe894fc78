#include "realrt/gpu/gpu_plan.h"

namespace monarch::realrt {

Problems check_gpu_plan(const Plan& plan) {
  Problems pr;
  auto degree = [&](const char* key, int64_t value, const char* what) {
    if (value != 1)
      pr.push_back({std::string("/plan/") + key, "found " + std::to_string(value) +
                                                     ", the GPU runtime does not run " + what +
                                                     " yet (it runs data parallelism only); use 1 or --device cpu"});
  };
  degree("tp", plan.tp, "tensor parallelism");
  degree("pp", plan.pp, "pipeline parallelism");
  degree("cp", plan.cp, "context parallelism");
  degree("ep", plan.ep, "expert parallelism");
  degree("vpp", plan.vpp, "virtual pipeline stages");
  if (plan.zero_stage != 0)
    pr.push_back({"/plan/zero_stage", "found " + std::to_string(plan.zero_stage) +
                                          ", the GPU runtime runs ZeRO stage 0 only yet; use 0 or --device cpu"});
  if (plan.recompute != Recompute::kNone)
    pr.push_back({"/plan/activation_recompute", std::string("found \"") + to_string(plan.recompute) +
                                                    "\", the GPU runtime keeps every activation (none) only yet"});
  if (plan.activation_offload_layers > 0)
    pr.push_back({"/plan/activation_offload_layers", "found " + std::to_string(plan.activation_offload_layers) +
                                                         ", the GPU runtime keeps every activation on the GPU only yet; use 0"});
  return pr;
}

Problems check_gpu_model(const ModelConfig& m) {
  Problems pr;
  auto dropout = [&](const char* key, double p) {
    if (p > 0)
      pr.push_back({std::string("/model/") + key, "found " + std::to_string(p) +
                                                      " (gpt defaults to 0.1), the GPU runtime has no dropout yet; set 0 "
                                                      "or use --device cpu"});
  };
  dropout("hidden_dropout", m.hidden_dropout_p());
  dropout("attention_dropout", m.attention_dropout_p());
  if (m.is_moe())
    pr.push_back({"/model/num_experts", "found " + std::to_string(m.num_experts) +
                                            ", the GPU runtime trains dense models only yet; use --device cpu"});
  if (m.activation_kind() != Activation::kGelu)
    pr.push_back({"/model/activation", std::string("found \"") + to_string(m.activation_kind()) +
                                           "\", the GPU runtime's MLP is GeLU only yet; use --device cpu"});
  return pr;
}

Expected<std::string> gpu_math_name(Precision precision, const std::string& choice, const std::string& where) {
  using E = Expected<std::string>;
  if (!choice.empty()) {
    if (choice == "fp32" || choice == "tf32" || choice == "bf16") return choice;
    return E::fail(where, "found \"" + choice + "\", expected fp32, tf32 or bf16");
  }
  switch (precision) {
    case Precision::kFp32: return std::string("fp32");
    case Precision::kBf16: return std::string("bf16");
    case Precision::kFp16:
    case Precision::kFp8: break;
  }
  return E::fail("/training/precision", std::string("found \"") + to_string(precision) +
                                            "\", the GPU runtime trains in fp32, tf32 or bf16 (" + where + ")");
}

}  // namespace monarch::realrt
