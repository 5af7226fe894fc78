// Model arithmetic: exact parameter counts, FLOPs per iteration and memory per rank for a
// transformer (gpt, llama, mixture of experts) under a parallel plan. Pure functions of the
// scenario and the plan; the cost model (core/cost_model.h) turns them into time.
//
// Notation as in Megatron's papers: L layers, h hidden, a attention heads, g key/value heads,
// d = h / a head size, f MLP hidden, V vocabulary, s sequence length, b micro-batch size,
// t tensor parallel, p pipeline parallel, v virtual stages (model chunks) per pipeline rank.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario.h"

namespace monarch {

// The attention kernel (core/scenario.h) decides what attention keeps for the backward pass.
// When model.attention_kernel is absent: flash for every architecture (docs/spec/scenario.md),
// the fused attention today's stacks run (Transformer Engine / cuDNN in NeMo and
// Megatron-Core, FlashAttention in torchtitan and DeepSpeed). Runs of Megatron-LM before 2023
// (Narayanan 2021, Korthikanti 2022: materialized scores with fused softmax) say
// "materialized".
AttentionKernel default_attention_kernel(const ModelConfig& m);

// Everything about the transformer's shape that the formulas need, derived once.
struct ModelShape {
  int64_t layers = 0;          // L
  int64_t hidden = 0;          // h
  int64_t heads = 0;           // a
  int64_t kv_heads = 0;        // g
  int64_t head_dim = 0;        // d = h / a, or model.head_dim
  int64_t ffn = 0;             // f (dense MLP)
  int64_t vocab = 0;           // V
  int64_t seq = 0;             // s
  bool gated_mlp = false;      // SwiGLU: two input projections (gate, up)
  bool biases = false;         // gpt: biases on every linear layer
  bool layernorm = false;      // LayerNorm (weight + bias) vs RMSNorm (weight)
  // Dropout masks kept for the backward pass (1 byte per element, Korthikanti 2022 Table 2),
  // only where the probability is > 0 (model.hidden_dropout, model.attention_dropout).
  bool dropout = false;            // hidden dropout: embedding output, after attention and MLP
  bool attention_dropout = false;  // dropout of the attention probabilities
  bool learned_positions = false;
  bool tied_embeddings = false;
  int64_t experts = 0;         // 0 or 1 = dense
  int64_t top_k = 1;
  int64_t expert_ffn = 0;
  double capacity_factor = 1.0;
  bool dropless = false;       // model.moe_dropless: no capacity, load imbalance paces the EP group
  bool force_balanced = false; // model.moe_router_force_load_balancing: no load imbalance
  bool qk_norm = false;        // model.qk_layernorm: a norm on each head's query and key
  AttentionKernel attention = AttentionKernel::kFlash;

  bool moe() const { return experts > 1; }
};

ModelShape model_shape(const ModelConfig& m);

// Columns of the fused QKV projection: query heads plus key and value heads, each head_dim wide.
int64_t qkv_width(const ModelShape& m);
// Width of a layer's MLP: one expert's in an MoE layer, else the dense FFN.
int64_t layer_ffn(const ModelShape& m);
// Weights of a layer's first MLP linear (gate and up fused for a gated MLP; one expert's).
int64_t layer_fc1_params(const ModelShape& m);

// Slots per expert for one routing group of `tokens` tokens (one micro-batch on one rank):
// ceil(capacity_factor * tokens * top_k / experts), at least 1 — Megatron-Core's get_capacity
// (moe_utils.py) with num_tokens = tokens x top_k, the GShard / Switch Transformer "expert
// capacity". Assignments past it are dropped; with padding every expert gets exactly this many
// slots, so an all-to-all moves experts x capacity x hidden elements per rank.
int64_t moe_expert_capacity(int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor);

// Token copies an MoE layer routes to its experts from `tokens` local tokens: experts x
// moe_expert_capacity (fewer tokens are padded, more are dropped). So the dispatch / combine
// all-to-all, the expert GEMMs and the expert input activations all see experts x capacity
// rows, which the EP group splits evenly (ep divides experts). With capacity factor 1 and a
// balanced router this is tokens x top_k. The cost model, memory model and lowering use it,
// and the CPU runtime pads its dispatch to the same capacity.
inline double routed_tokens(const ModelShape& m, double tokens) {
  if (!m.moe()) return tokens;
  return static_cast<double>(m.experts) *
         static_cast<double>(moe_expert_capacity(static_cast<int64_t>(std::llround(tokens)), m.experts, m.top_k, m.capacity_factor));
}

// Token flow of one MoE layer on one rank for one micro-batch, Megatron-Core's drop-and-pad
// all-to-all dispatcher with expert tensor parallelism (docs/analytical_model.md, "Mixture of
// experts"; docs/analytical_model.md). With sequence parallelism every TP rank routes its own slice of
// the sequence; the EP all-to-all sends capacity slots of every expert; the ETP all-gather then
// gives every expert-TP rank the rows of its etp peers, and each rank computes 1/etp of every
// local expert's FFN columns on them.
struct MoeTokenFlow {
  double tokens = 0;             // T = micro_batch x seq / cp
  double routed_tokens = 0;      // T_loc = T / tp: tokens this rank routes (T when tp = 1)
  int64_t capacity = 0;          // cap = moe_expert_capacity(T_loc, E, k, capacity factor)
  double dispatch_rows = 0;      // E x cap: rows of the dispatch / combine all-to-all send buffer
  double local_experts = 0;      // E / ep
  double rows_per_expert = 0;    // ep x etp x cap: rows each local expert computes on
  double expert_rows = 0;        // etp x E x cap = local_experts x rows_per_expert
  double expert_ffn_local = 0;   // ffn_e / etp: this rank's columns of each expert
};
// Zero-filled for a dense model.
MoeTokenFlow moe_token_flow(const ModelShape& m, const Plan& plan);

// ---------------------------------------------------------------- parameters
struct ParameterCounts {
  int64_t embedding = 0;       // word (+ position) embeddings
  int64_t output = 0;          // output projection; 0 when tied
  int64_t final_norm = 0;
  int64_t attention_per_layer = 0;  // QKV, projection, their biases, the norm before them
  int64_t mlp_per_layer = 0;        // dense MLP, or router + all experts, + the norm before
  int64_t expert_per_layer = 0;     // of mlp_per_layer: the expert weights (0 when dense)
  int64_t per_layer = 0;
  int64_t total = 0;
};

ParameterCounts parameter_counts(const ModelShape& m);

// Megatron's closed form (Narayanan et al. 2021, eq. 2 / Table 1):
// P = 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)). No final LayerNorm; f = 4h, tied.
double megatron_gpt_parameters(int64_t layers, int64_t hidden, int64_t vocab, int64_t seq);

// The one default layer-split rule: `num_layers` over `virtual_stages` (pp x vpp, in model
// order), even where they divide, else the remainder on the middle virtual stages (the first
// also runs the embedding, the last the output layer and the loss). With Megatron's
// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split the
// embedding / the loss count as one layer of the first / last virtual stage (126 layers on
// pp 8 x vpp 8 with both: 1, 2, ..., 2, 1), which may leave those with no transformer layer.
std::vector<int64_t> default_layer_split(int64_t num_layers, int64_t virtual_stages, bool account_for_embedding = false,
                                         bool account_for_loss = false);

// Layers of every virtual stage, size pp x vpp in model order (chunk c of stage s at c x pp + s):
// plan.layers_per_stage when it has pp x vpp entries; with pp entries each stage's count split
// over its chunks (earlier chunks take the remainder); else default_layer_split.
std::vector<int64_t> virtual_stage_layers(int64_t num_layers, const Plan& plan);

// Layers on each pipeline stage (the sums of its chunks of virtual_stage_layers).
std::vector<int64_t> stage_layers(const ModelShape& m, const Plan& plan);

// The most layers any model chunk holds (virtual_stage_layers).
int64_t max_chunk_layers(const ModelShape& m, const Plan& plan);

// The split the scenario fixes for the plan's pp x vpp: parallelism.layers_per_stage (when it
// has pp x vpp entries), or default_layer_split with the scenario's account-for flags; empty
// when it fixes neither (the partitioner chooses, strategies/partition.h).
std::vector<int64_t> fixed_layer_split(const Scenario& sc, const Plan& plan);

// What the default split shares out over the virtual stages: the transformer layers, plus the
// embedding and the loss where the account-for flags count them as a layer each. Every pipeline
// stage and model chunk needs one of these (DeepSpeed's 'type:transformer|embedding' split ran
// BLOOM-176B's 70 layers on 72 stages, the first holding only the embedding, the last only the
// output layer and the loss).
int64_t pipeline_split_units(const Scenario& sc);

// Parameters held by one rank of a pipeline stage.
struct StageParameters {
  double dense = 0;   // replicated across data parallel ranks (dp x cp)
  double expert = 0;  // expert weights ((E / ep) experts, 1/etp of each), replicated across the
                      // expert-data-parallel ranks (tp x cp x dp / (etp x ep) of them)
  // Of dense and expert: the layers' linear-layer weight matrices (QKV, projection, MLP or
  // expert fc1/fc2), the ones Transformer Engine runs as fp8 GEMMs and can keep in fp8.
  double gemm_dense = 0, gemm_expert = 0;
  double total() const { return dense + expert; }
};
StageParameters stage_parameters(const ModelShape& m, const Plan& plan, int64_t stage,
                                 int64_t layers_on_stage);
// One transformer layer's parameters on one rank (no embedding or output layer).
StageParameters layer_parameters(const ModelShape& m, const Plan& plan);

// ---------------------------------------------------------------- FLOPs
// Attention FLOPs are counted for the FULL s x s score matrix (QK^T and attention over V,
// 4 s h per token per layer forward), not the causal half. This is the convention of
// Megatron-LM (Narayanan et al. 2021 eq. 3, Korthikanti et al. 2022 MFU/HFU) and of the
// published MFU figures we compare with, so our MFU is comparable to theirs. The time model
// uses the work the kernel really does (flash kernels skip masked tiles; see cost_model).
struct FlopsPerIteration {
  double model = 0;     // forward + backward once (3x forward)
  double hardware = 0;  // + the forward work recomputation repeats
};
FlopsPerIteration flops_per_iteration(const ModelShape& m, const TrainingConfig& t, Recompute r);

// Forward FLOPs per token of one transformer layer: dense GEMMs and full attention.
double layer_forward_flops_per_token(const ModelShape& m);
// Forward FLOPs per token of the attention core (QK^T and attention x V), full matrix.
double attention_core_forward_flops_per_token(const ModelShape& m);
// Forward FLOPs per token of the output projection (logits).
double output_forward_flops_per_token(const ModelShape& m);

// ---------------------------------------------------------------- activations
// Korthikanti et al. 2022, Table 2, exactly as printed: activation bytes of one layer of the
// GPT block (f = 4h, 16-bit activations, 1-byte dropout masks, materialized attention).
// `selective` drops the 5as/h term; `full` keeps only the layer input (2sbh).
double korthikanti_table2_bytes(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                bool sequence_parallel, Recompute r);

// Activation bytes one rank keeps for one layer and one micro-batch, derived term by term
// (the derivation of Korthikanti's Table 2, generalised to grouped-query attention, gated
// MLPs, no dropout, flash attention, MoE and context parallelism). Reproduces Table 2
// exactly for the GPT block. `element_bytes` is the activation element size (2 for
// bf16/fp16/fp8, 4 for fp32).
// For MoE, `etp` is the expert tensor parallel degree (0 = tp): the expert block keeps the
// etp x E x cap rows of its gathered input and their 1/etp share of the expert FFN (cap for the
// T / tp tokens each rank routes).
// `gemm_input_bytes` (0 = element_bytes) is the element size of the tensors kept only as the
// input of a linear layer's weight-gradient GEMM: the QKV and fc1 inputs (norm outputs), the
// attention projection input and the fc2 input (saved_gemm_input_bytes).
// `framework`: torchtitan's DTensor block keeps other tensors than Megatron's layer. Its
// selective recompute is the op-level policy (what it keeps is below), not Megatron's recompute
// of the attention core; and without recompute, autograd keeps the QKV and fc1 inputs as the
// matmuls took them, gathered over the TP group under sequence parallelism (tp_gathered_input,
// core/framework_rules.h). Megatron-Core's expert block keeps its GEMM inputs as the dense
// layers do (`gemm_input_bytes`) and no combine input; the other frameworks' keep the 16-bit rows
// and the combine input (the .cc says why).
double layer_activation_bytes(const ModelShape& m, int64_t micro_batch, int64_t tp, int64_t cp,
                              bool sequence_parallel, Recompute r, double element_bytes, int64_t etp = 0,
                              double gemm_input_bytes = 0, Framework framework = Framework::kMegatron);

// layer_activation_bytes for `plan` (its micro-batch, degrees and recompute) in the scenario's
// precision and framework: what one layer keeps per micro-batch, and what an offloaded layer
// copies to host memory and back (Plan::activation_offload_layers).
double plan_layer_activation_bytes(const ModelShape& m, const Scenario& sc, const Plan& plan);

// Bytes per element of a saved linear-layer input. Fp8 training (Transformer Engine Linear,
// LayerNormLinear, LayerNormMLP) casts each GEMM input to fp8 in the forward and saves that fp8
// copy for the weight-gradient GEMM instead of the 16-bit tensor: 1 byte (kFp8WeightBytes'
// element size). The attention inputs (Q, K, V) and the activation-function input stay 16-bit.
// Megatron-Core's MoE experts (Transformer Engine GroupedLinear) save theirs the same way.
double saved_gemm_input_bytes(Precision precision);

// Micro-batches whose activations a stage keeps at its peak, in units of "one micro-batch
// through all of this rank's layers": the schedule's peak chunk passes in flight
// (core/pipeline_schedule.h peak_in_flight) / v. GPipe m; 1F1B min(p - stage, m); Megatron's
// interleaved p (1 + (p - 1) / (p v)) on the first stage (Korthikanti et al. 2022, section
// 4.2.3), and m on every stage when m = p (every forward runs first). EP communication overlap
// (Plan::ep_comm_overlap) keeps one chunk pass more: its schedule runs one more forward first.
double micro_batches_in_flight(const Plan& plan, int64_t stage, int64_t num_micro_batches,
                               Framework framework = Framework::kMegatron);

// ---------------------------------------------------------------- memory per rank
// Bytes per parameter held by a rank for model states, before ZeRO sharding.
struct StateBytesPerParameter {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
};
// Mixed precision (bf16/fp16/fp8) with Adam: 2 (16-bit weights) + 4 (fp32 gradient
// accumulation buffer, Megatron main_grad) + 12 (fp32 master weights, Adam m and v) = 18.
// fp32 with Adam: 4 + 4 + 8. SGD with momentum: optimizer 4 (momentum) + 4 master if mixed.
StateBytesPerParameter state_bytes_per_parameter(Precision p, Optimizer o);
// The same for a dense model's training settings at a ZeRO stage, with the gradients each
// framework keeps through the backward:
// - Megatron-LM's main_grad buffer has the reduction's type (param_and_grad_buffer: fp32 if
//   grad_reduce_in_fp32, else the parameter dtype), 4 or 2 bytes.
// - DeepSpeed's FP16_Optimizer and ZeRO-1/2 optimizer (fp16 or bf16) accumulate in the 16-bit
//   .grad, 2 bytes; their fp32 copy of the rank's partition exists only inside step(), once the
//   activations are gone (deepspeed/runtime/zero/stage_1_and_2.py, step:
//   flatten(averaged_gradients).to(fp32)). ZeRO-2 keeps only the partition
//   (grads_in_partition, contiguous_gradients).
// - DeepSpeed's BF16_Optimizer (bf16 at stage 0) keeps fp32 gradients for every parameter (4)
//   and the bf16 .grad of the last backward beside them until the next backward clears it
//   (bf16_optimizer.py: clear_lp_grads before each backward, update_hp_grads with
//   clear_lp_grads=False after it; the pipeline engine does the same): 6.
// - torchtitan keeps FSDP2's fp32 sharded gradients (4).
StateBytesPerParameter state_bytes_per_parameter(const TrainingConfig& training, int64_t zero_stage);

// Whether the gradients are reduced in fp32: training.grad_reduce_in_fp32 where the scenario
// states it, else each framework's default:
// - Megatron-LM: fp32 for bf16 and fp8 (whose parameters are bf16): arguments.py sets
//   accumulate_allreduce_grads_in_fp32 for bf16 unless --grad-reduce-in-bf16; for fp16 the flag
//   stays off, so main_grad and its reduction are fp16 (megatron/core/distributed: grad dtype =
//   param dtype).
// - DeepSpeed: the engine's communication_data_type, by default the training dtype
//   (deepspeed/runtime/engine.py: fp16 -> float16, bf16 -> bfloat16).
// - torchtitan (FSDP2): MixedPrecisionPolicy reduce_dtype, mixed_precision_reduce = "float32".
// fp32 training reduces in fp32 everywhere.
bool grad_reduce_in_fp32(const TrainingConfig& training);

// The fp8 recipe an fp8 run scales with: training.fp8_recipe where the scenario states it,
// else the framework's default: Megatron-Core's TransformerConfig.fp8_recipe "delayed"
// (megatron/core/transformer/transformer_config.py), torchao's Float8LinearConfig "tensorwise"
// for torchtitan (its float8 recipe_name left unset). Meaningless unless precision is fp8.
Fp8Recipe fp8_recipe(const TrainingConfig& training);

struct MemoryBreakdown {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double buffers_bytes = 0;
  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + buffers_bytes;
  }
};

// Memory of the busiest rank of `stage`.
MemoryBreakdown stage_memory(const ModelShape& m, const Scenario& s, const Plan& plan,
                             int64_t stage, int64_t layers_on_stage);

// DeepSpeed ZeRO-2 reduces gradients through a contiguous bucket of reduce_bucket_size
// elements (DeepSpeed config default 5e8, "zero_optimization.reduce_bucket_size"), in the
// gradients' element type; a stage with fewer parameters fills at most that many.
inline constexpr double kZeroReduceBucketElements = 5e8;
// DeepSpeed ZeRO-3 keeps gathered parameters live until this many are (config
// "zero_optimization.stage3_max_live_parameters", default 1e9): a stage with fewer parameters
// ends up with all of them gathered, as FSDP without per-layer wrapping.
inline constexpr double kZero3MaxLiveParameters = 1e9;
// Fp8 primary weights: 1 byte per element, and 1 byte per element for the cached transpose
// (E4M3, Transformer Engine Float8Tensor on Hopper).
inline constexpr double kFp8WeightBytes = 1.0;
inline constexpr double kFp8TransposeBytes = 1.0;

// Memory a framework leaves unusable: CUDA context and library handles, NCCL channel buffers,
// and fragmentation of the caching allocator.
inline constexpr double kCudaContextReserve_gib = 1.0;  // CUDA context + cuBLAS/cuDNN workspaces; ~0.6-1 GiB measured by nvidia-smi on A100/H100 for a PyTorch process
inline constexpr double kNcclReserve_gib = 1.0;         // NCCL channel buffers for TP/DP/PP communicators (NCCL_BUFFSIZE 4 MiB x channels x peers)
inline constexpr double kFragmentationFraction = 0.05;  // PyTorch caching allocator: reserved - allocated typically 3-8% in Megatron runs

// GPU memory usable for the model after the reserve, GiB.
double usable_memory_gib(const GpuSpec& gpu);

// Host links, one direction: PCIe 4.0 x16 (A100, A800) 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s,
// PCIe 5.0 x16 (H100, H200, B200) 63 GB/s, NVLink-C2C (Grace superchips: GH200, GB200, GB300)
// 450 GB/s (NVIDIA Grace Hopper / GB200 datasheets: 900 GB/s bidirectional). PCIe carries
// 256-byte TLP payloads with about 24 bytes of header, sequence number and LCRC each (PCIe Base
// Specification), so a bulk copy moves at most 256 / 280 of the link rate.
inline constexpr double kPcie4x16_GBps = 31.5;
inline constexpr double kPcie5x16_GBps = 63.0;
inline constexpr double kNvlinkC2c_GBps = 450.0;
inline constexpr double kPcieTlpPayloadFraction = 256.0 / 280.0;
// A Grace CPU's LPDDR5X: 18.4 TB/s over the 36 Grace CPUs of a GB200 NVL72 rack (NVIDIA GB200
// NVL72 datasheet, "CPU memory bandwidth") = 511 GB/s per Grace; GH200's Grace the same
// (NVIDIA Grace Hopper Superchip datasheet, up to 512 GB/s). A GB200 / GB300 superchip's two
// GPUs share one Grace, so when both copy at once each gets half of its memory's bandwidth.
inline constexpr double kGraceMemory_GBps = 511.0;

// Bytes per second one GPU moves to or from host memory in one direction while every GPU of the
// node does the same (data-parallel ranks offload, fetch UVM rows or copy checkpoints together):
// the host link's rate, and on Grace superchips no more than its share of the Grace's memory.
double host_link_bytes_per_s(const GpuSpec& gpu);

}  // namespace monarch
