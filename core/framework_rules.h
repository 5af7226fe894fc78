// Which plans each training stack (training.framework) can carry out. A plan its stack cannot
// run is rejected with the reason; what each stack changes in the time of the plans it runs
// is the cost model's (core/cost_model.cc).
#pragma once

#include <string>

#include "core/scenario.h"

namespace monarch {

// Why `framework` cannot run `plan`, or empty:
// - deepspeed, pipeline parallel: DeepSpeed's PipelineEngine runs one model chunk per stage
//   with its TrainSchedule (deepspeed/runtime/pipe/schedule.py, a 1F1B order): no
//   interleaving (virtual stages) and no GPipe; and it asserts "ZeRO-2 and ZeRO-3 are
//   incompatible with pipeline parallelism" (deepspeed/runtime/pipe/engine.py,
//   PipelineEngine.__init__), so ZeRO stage 2 and 3 need pp = 1.
// - torchtitan: data parallelism is FSDP2 (fully_shard: ZeRO-3, or ZeRO-2 with
//   reshard_after_forward=False) or replication (DDP); there is no optimizer-only sharding,
//   so ZeRO stage 1 is not available (torchtitan/distributed/parallel_dims.py,
//   parallelize.py apply_fsdp / apply_ddp).
// - megatron: every plan of the search space (distributed optimizer = ZeRO-1, Megatron-FSDP
//   for 2 and 3, interleaved schedules).
std::string framework_problem(Framework framework, const Plan& plan);

// Why Megatron-Core's per-layer CUDA graphs (training.cuda_graphs) cannot run with `recompute`
// on `model`, or empty (megatron/core/transformer/transformer_config.py, __post_init__):
// full recompute "is only supported with full iteration CUDA graph", and recomputing a graphed
// attention core (selective recompute, recompute_modules core_attn) with attention dropout is
// "not supported with graphed attention recomputation".
std::string cuda_graph_problem(const ModelConfig& model, Recompute recompute);

// Whether Megatron-Core's per-layer CUDA graphs capture a whole layer of `model`: not a dropless
// MoE layer, whose dispatcher sizes the experts' inputs from the routing on the host; only its
// attention is captured (cuda_graph_scope attn; "moe cuda graph is only supported with
// drop-padding MoE", transformer_config.py).
bool cuda_graphs_capture_whole_layer(const ModelConfig& model);

// Why torchtitan cannot run TP communication overlap (its async TP) with `compile` off, or
// empty: torchtitan's parallelize raises "Async TP requires torch.compile" (the micro-pipelined
// TP is an Inductor pass). Other frameworks: empty.
std::string async_tp_problem(Framework framework, bool compile, bool tp_comm_overlap);

// Why `plan` cannot run EP communication overlap (Plan::ep_comm_overlap), or empty: it is
// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm), which its
// TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py, 0.14)
// accepts only with expert parallelism (ep > 1 on an MoE model), virtual pipeline stages when
// pp > 1, no full recompute and a 16-bit model (bf16 or fp16; fp8 runs on a bf16 model).
// torchtitan and DeepSpeed have no such schedule.
std::string ep_overlap_problem(const TrainingConfig& training, const ModelConfig& model, const Plan& plan);

// Why `plan` cannot offload its activations to host memory (Plan::activation_offload_layers), or
// empty. The offloading is Transformer Engine's (get_cpu_offload_context), driven by
// Megatron-Core's TransformerBlock; TransformerConfig.__post_init__
// (megatron/core/transformer/transformer_config.py) accepts it only for fewer layers than the
// model has ("CPU offloading can be done only for layers less than num_layers"), without
// pipeline parallelism ("no support for Pipeline parallelism with CPU offloading"), without
// recompute ("does not work when activation recomputation is enabled") and without per-layer
// CUDA graphs ("CUDA graphs not supported with CPU offloading" unless the whole iteration is
// captured; training.cuda_graphs is the per-layer kind). torchtitan and DeepSpeed have no
// layer-wise activation offloading.
std::string activation_offload_problem(const Scenario& sc, const Plan& plan);

// Whether TP communication overlap hides the backward reduce-scatter of a block's input
// gradient (the gradient of its sequence-parallel all-gather). Transformer Engine's userbuffers
// run it beside the block's weight-gradient GEMM (the bulk qkv_wgrad / fc1_wgrad overlaps,
// tp_overlap_configs/userbuffers.py). torch's async TP fuses a reduce-scatter only with the one
// matmul whose output it scatters (torch/_inductor/fx_passes/micro_pipeline_tp.py,
// _find_producer_matmul: mm, _scaled_mm, or one between two reshapes), and torchtitan's block
// input gradient is a sum of matmul outputs, the input gradients of its separate wq, wk, wv
// (w1, w3) linears (torchtitan/models/llama3/model.py), so under torchtitan that reduce-scatter
// stays a plain NCCL one on the backward's critical path.
bool hides_tp_input_gradient_reduce_scatter(Framework framework);

// Where a block's backward gets the sequence-parallel input that its weight gradients (and,
// under torchtitan's op-level recompute, its recomputed matmuls) multiply, once TP has gathered
// it in the forward.
enum class TpGatheredInput {
  // Megatron-LM / Transformer Engine keep only the rank's shard and gather it again in the
  // backward beside the input-gradient GEMM (LinearWithGradAccumulationAndAsyncCommunication;
  // userbuffers' bulk qkv_dgrad / fc1_dgrad overlaps), with or without recompute.
  kGatheredInBackward,
  // torchtitan (DTensor under autograd) keeps the gathered tensor its matmuls took: the
  // forward's without activation checkpointing, the recomputed forward's under full
  // checkpointing (checkpoint_wrapper runs the block, all-gathers included, again).
  kKept,
  // torchtitan's op-level selective checkpointing saves matmul, attention, reduce-scatter and
  // max outputs only (_save_list in its parallelize / activation_checkpoint code), so the
  // recomputation gathers the input again before the matmuls it recomputes (wk, and w3 with a
  // gate): a plain collective there, or fused with that matmul under async TP.
  kGatheredInRecompute,
};
TpGatheredInput tp_gathered_input(Framework framework, Recompute recompute);

// Whether the data-parallel sharding all-gathers each block's parameters on every micro-batch
// (the ZeRO-3 / FSDP path of both backends). ZeRO-3 everywhere. ZeRO-2 under torchtitan too:
// FSDP2 with reshard_after_forward=False keeps a block gathered from its forward to its backward
// and reshards it after the backward (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
// post_backward), and torchtitan's gradient-accumulation loop never keeps it across
// micro-batches (torchtitan/train.py train_step), so every forward gathers again. Megatron's
// distributed optimizer and DeepSpeed stage 2 gather once per step.
bool gathers_every_micro_batch(Framework framework, int64_t zero_stage);

// How many times a micro-batch's backward all-gathers each parameter on that path. ZeRO-2
// (torchtitan) keeps the forward's: 0. ZeRO-3: FSDP2 (torchtitan) and Megatron FSDP unshard a
// block once before its backward, and a checkpointed block recomputes inside that backward with
// the weights already gathered: 1. DeepSpeed ZeRO-3 hooks every submodule
// (deepspeed/runtime/zero/parameter_offload.py): the pre-forward hook fetches its parameters,
// the post-forward hook releases them, the pre-backward hook fetches them again. A checkpointed
// block's recomputation runs the submodules' forward inside the backward, so the forward hooks
// fetch and release once more before the backward hooks fetch: 2 with full recompute.
int backward_gather_passes(Framework framework, Recompute recompute, int64_t zero_stage);

// Whether `framework` reduces the data-parallel gradients only after the whole backward,
// whatever overlap_grad_reduce says: DeepSpeed without ZeRO (the engine's allreduce_gradients
// at the accumulation boundary, deepspeed/runtime/engine.py; overlap_comm applies to ZeRO
// stages 1-2 only) and under its pipeline engine (the ReduceGrads instruction after the last
// micro-batch, deepspeed/runtime/pipe/schedule.py).
bool reduces_gradients_after_backward(Framework framework, int64_t zero_stage, int64_t pp);

// Whether the optimizer states (fp32 master weights and moments) are sharded over the
// data-parallel group: from ZeRO stage 1 on everywhere, and under DeepSpeed's bf16 training at
// stage 0 too. There the engine picks its BF16_Optimizer (deepspeed/runtime/engine.py,
// _do_optimizer_sanity_check: bf16 weights with fp32 gradient accumulation, the default without
// ZeRO; BLOOM-176B's "bf16 must use z0! it implements its own zero stage 1 equivalent"), which
// keeps fp32 gradients for every parameter but the fp32 master weights and moments of its
// data-parallel partition only (deepspeed/runtime/bf16_optimizer.py, _setup_for_real_optimizer),
// all-reduces the gradients (the pipeline engine's _bf16_reduce_grads, or allreduce_gradients)
// and all-gathers the updated bf16 weights at the end of its step (all_gather_dp_groups).
bool shards_optimizer_states(Framework framework, Precision precision, int64_t zero_stage);

// Whether the plan runs DeepSpeed's BF16_Optimizer (bf16 training at ZeRO stage 0, above), which
// also adds every micro-batch's bf16 gradients into its fp32 gradient buffers after the backward
// (_update_hp_grad: hp_grad.add_(lp.grad.to(fp32)), one cast and one add per parameter tensor;
// the pipeline engine calls update_hp_grads after each backward pass, BF16_Optimizer.backward
// does otherwise).
bool runs_deepspeed_bf16_optimizer(Framework framework, Precision precision, int64_t zero_stage);

// Whether the updated 16-bit weights of a sharded optimizer are all-gathered inside the
// optimizer step, so that overlap_param_gather cannot hide them behind the next forward:
// DeepSpeed, whose ZeRO-1/2 and BF16 optimizers call all_gather_dp_groups before their step()
// returns (deepspeed/runtime/zero/stage_1_and_2.py, bf16_optimizer.py). Megatron's distributed
// optimizer can overlap them with the next forward (--overlap-param-gather); torchtitan has no
// optimizer-only sharding.
bool gathers_parameters_in_step(Framework framework);

}  // namespace monarch
