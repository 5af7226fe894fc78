#include "core/framework_rules.h"

#include <algorithm>

namespace monarch {

std::string framework_problem(Framework f, const Plan& p) {
  switch (f) {
    case Framework::kDeepspeed:
      if (p.pp > 1 && (p.vpp > 1 || p.schedule == Schedule::kInterleaved))
        return "DeepSpeed's pipeline engine has no interleaved schedule (one model chunk per stage); expected "
               "virtual_pipeline_degree 1 with framework deepspeed";
      if (p.pp > 1 && p.schedule == Schedule::kGpipe)
        return "DeepSpeed's pipeline engine runs its 1F1B TrainSchedule only; expected pipeline_schedule 1f1b with framework deepspeed";
      if (p.pp > 1 && p.zero_stage >= 2)
        return "DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3 (\"incompatible with pipeline parallelism\"); expected "
               "zero_stage 0 or 1 with pipeline_parallel_degree > 1";
      return {};
    case Framework::kTorchtitan:
      if (p.zero_stage == 1 && p.dp * p.cp > 1)
        return "torchtitan shards with FSDP2 (ZeRO-2/3) or replicates (DDP); it has no optimizer-only sharding "
               "(ZeRO-1): expected zero_stage 0, 2 or 3 with framework torchtitan";
      return {};
    case Framework::kMegatron: return {};
  }
  return {};
}

bool cuda_graphs_capture_whole_layer(const ModelConfig& m) { return !(m.is_moe() && m.moe_dropless); }

std::string async_tp_problem(Framework framework, bool compile, bool tp_comm_overlap) {
  if (framework != Framework::kTorchtitan || compile || !tp_comm_overlap) return {};
  return "torchtitan's async TP (its TP communication overlap) needs torch.compile (\"Async TP requires torch.compile\", "
         "parallelize.py); expected tp_comm_overlap false, or training.compile true";
}

std::string ep_overlap_problem(const TrainingConfig& t, const ModelConfig& m, const Plan& p) {
  if (!p.ep_comm_overlap) return {};
  if (t.framework != Framework::kMegatron)
    return std::string("EP communication overlap is Megatron-Core's combined 1F1B schedule "
                       "(--overlap-moe-expert-parallel-comm); ") +
           to_string(t.framework) + " has none: expected ep_comm_overlap false";
  if (!m.is_moe() || p.ep <= 1)
    return "EP communication overlap needs expert parallelism (\"overlap_moe_expert_parallel_comm is only supported with "
           "expert model parallelism\"): expected ep_comm_overlap false, or expert_parallel_degree > 1 on an MoE model";
  if (p.pp > 1 && p.chunks_per_stage() <= 1)
    return "EP communication overlap with pipeline parallelism needs virtual pipeline stages (\"virtual_pipeline_model_"
           "parallel_size must be specified when pipeline_model_parallel_size > 1\"): expected virtual_pipeline_degree > 1 "
           "with the interleaved schedule, or ep_comm_overlap false";
  if (p.recompute == Recompute::kFull)
    return "EP communication overlap does not run with full recompute (\"disable full recomputation when enabling "
           "overlap_moe_expert_parallel_comm\"): expected activation_recompute none or selective";
  if (t.precision == Precision::kFp32)
    return "EP communication overlap needs a 16-bit model (\"only supported with bf16 or fp16 model\"): expected "
           "precision bf16, fp16 or fp8";
  return {};
}

std::string activation_offload_problem(const Scenario& sc, const Plan& p) {
  const int64_t n = p.activation_offload_layers;
  if (n == 0) return {};
  if (sc.training.framework != Framework::kMegatron)
    return std::string("activation offloading is Megatron-Core's (--cpu-offloading-num-layers, Transformer Engine's CPU "
                       "offloading); ") +
           to_string(sc.training.framework) + " has none: expected activation_offload_layers 0";
  if (n < 0 || n >= sc.model.num_layers)
    return "activation offloading covers fewer layers than the model's " + std::to_string(sc.model.num_layers) +
           " (\"CPU offloading can be done only for layers less than num_layers\"): expected activation_offload_layers "
           "0.." + std::to_string(std::max<int64_t>(sc.model.num_layers - 1, 0));
  if (p.pp > 1)
    return "activation offloading does not run with pipeline parallelism (\"Currently there is no support for Pipeline "
           "parallelism with CPU offloading\"): expected pipeline_parallel_degree 1, or activation_offload_layers 0";
  if (p.recompute != Recompute::kNone)
    return "activation offloading does not run with recompute (\"CPU offloading does not work when activation "
           "recomputation is enabled\"): expected activation_recompute none, or activation_offload_layers 0";
  if (sc.training.cuda_graphs)
    return "activation offloading does not run with per-layer CUDA graphs (\"CUDA graphs not supported with CPU "
           "offloading\"): expected training.cuda_graphs false, or activation_offload_layers 0";
  return {};
}

std::string cuda_graph_problem(const ModelConfig& m, Recompute r) {
  if (r == Recompute::kFull)
    return "Megatron-Core's per-layer CUDA graphs do not run with full recompute (\"full recompute is only supported "
           "with full iteration CUDA graph\"); expected activation_recompute none or selective with training.cuda_graphs";
  if (r == Recompute::kSelective && m.attention_dropout_p() > 0)
    return "Megatron-Core's CUDA graphs do not recompute a graphed attention core with attention dropout (\"attention "
           "dropout is not supported with graphed attention recomputation\"); expected activation_recompute none, or "
           "model.attention_dropout 0, with training.cuda_graphs";
  return {};
}

bool hides_tp_input_gradient_reduce_scatter(Framework framework) { return framework != Framework::kTorchtitan; }

TpGatheredInput tp_gathered_input(Framework framework, Recompute recompute) {
  if (framework != Framework::kTorchtitan) return TpGatheredInput::kGatheredInBackward;
  return recompute == Recompute::kSelective ? TpGatheredInput::kGatheredInRecompute : TpGatheredInput::kKept;
}

bool gathers_every_micro_batch(Framework framework, int64_t zero_stage) {
  return zero_stage >= 3 || (zero_stage == 2 && framework == Framework::kTorchtitan);
}

int backward_gather_passes(Framework framework, Recompute recompute, int64_t zero_stage) {
  if (zero_stage < 3) return 0;
  return framework == Framework::kDeepspeed && recompute == Recompute::kFull ? 2 : 1;
}

bool reduces_gradients_after_backward(Framework framework, int64_t zero_stage, int64_t pp) {
  return framework == Framework::kDeepspeed && (zero_stage == 0 || pp > 1);
}

bool runs_deepspeed_bf16_optimizer(Framework framework, Precision precision, int64_t zero_stage) {
  return framework == Framework::kDeepspeed && precision == Precision::kBf16 && zero_stage == 0;
}

bool shards_optimizer_states(Framework framework, Precision precision, int64_t zero_stage) {
  return zero_stage >= 1 || runs_deepspeed_bf16_optimizer(framework, precision, zero_stage);
}

bool gathers_parameters_in_step(Framework framework) { return framework == Framework::kDeepspeed; }

}  // namespace monarch
