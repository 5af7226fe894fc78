// Typed, validated scenario: model, cluster, training settings and the parallel plan
// constraints. Produced by scenario_io (the only place that knows JSON); consumed by every
// layer above core. Field names follow docs/spec/scenario.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/reliability.h"

namespace monarch {

enum class Architecture { kGpt, kLlama, kDlrm };
enum class Precision { kFp32, kBf16, kFp16, kFp8 };
enum class Optimizer { kAdam, kSgd };
enum class Topology { kFatTree, kRailOptimized, kStar };
enum class Schedule { kGpipe, kOneFOneB, kInterleaved };
enum class Recompute { kNone, kSelective, kFull };
// time_to_train: expected wall time to train training.total_tokens with failures, checkpoints
// and recoveries (needs a reliability block).
enum class Objective { kIterationTime, kMemory, kTimeToTrain };
enum class Backend { kAnalytical, kSimgrid, kRealCpu, kRealGpu };
// MLP activation: swiglu has three FFN matrices (gate, up, down), gelu and squared-relu two.
enum class Activation { kGelu, kSwiglu, kSquaredRelu };
enum class AttentionKernel {
  // Scores (b, a, s, s) written to memory, softmax and dropout as separate kernels, as in
  // Megatron-LM 2021-22 (Korthikanti et al. 2022, Table 2 keeps 5as/h bytes per token for it).
  kMaterialized,
  // FlashAttention / cuDNN fused attention: tiles of the scores stay on chip, the backward
  // recomputes them; only the output and the row log-sum-exp are kept. Causal masking skips
  // the tiles above the diagonal (half the work).
  kFlash,
  // The first generation of fused attention, FlashAttention-1's CUDA kernels. Same memory as
  // kFlash, half FlashAttention-2's rate in both passes (core/layer_cost.cc).
  kFlash1,
  // FlashAttention's Triton port of the same generation, which llm-foundry's attn_impl "triton"
  // and Megatron-DeepSpeed's --use-flash-attn-triton run (flash_attn_triton.py, Nov 2022). Same
  // memory as kFlash; FlashAttention-2's rate over 1.4 forward and over 2 backward.
  kFlash1Triton,
  // Tri Dao's FlashAttention-2 (the flash-attn package) where the GPU's default fused kernel is
  // another: Transformer Engine runs it on Hopper when cuDNN's fused attention is switched off
  // (NVTE_FUSED_ATTN=0, as NeMo's launcher did through its 24.07 release). Same memory as
  // kFlash, FlashAttention-2's rate on that GPU (core/layer_cost.cc).
  kFlash2,
};
// The training stack that carries out the plan (training.framework).
enum class Framework { kMegatron, kDeepspeed, kTorchtitan };
// How fp8 tensors are scaled (Megatron-Core's Fp8Recipe names): delayed scaling from an amax
// history, per-tensor current scaling ("tensorwise", an amax pass before each cast), MXFP8
// (32-element blocks with an e8m0 scale; Blackwell) and 1 x 128 / 128 x 128 block scaling.
enum class Fp8Recipe { kDelayed, kTensorwise, kMxfp8, kBlockwise };

// Dense peak throughput of one GPU per precision, in TFLOP/s (1e12 FLOP/s), without sparsity.
struct PeakTflops {
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;  // 0 = the GPU has no fp8 tensor cores
};

struct GpuSpec {
  std::string name;
  PeakTflops peak_tflops;
  double memory_gib = 0;             // HBM capacity, 2^30 bytes
  double memory_bandwidth_GBps = 0;  // HBM bandwidth, 1e9 bytes/s
  std::string profile;               // optional calibration profile path (monarch-calibrate)
  double tdp_W = 0;                  // the board's default power limit (its TDP), W; 0: unknown
  double power_limit_W = 0;          // a lower power cap the cluster runs at, W; 0: the TDP
};

// One embedding table of a recommendation model (architecture "dlrm").
struct EmbeddingTable {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  double pooling_factor = 1;  // average lookups per sample (multi-hot size)
};

struct DlrmConfig {
  std::vector<EmbeddingTable> tables;
  std::vector<int64_t> bottom_mlp;  // layer widths
  std::vector<int64_t> top_mlp;
  int64_t dense_features = 0;
  std::string interaction = "dot";  // "dot" | "dcn"
  int64_t dcn_rank = 0;
  int64_t dcn_layers = 0;
  std::string embedding_optimizer = "rowwise-adagrad";  // | "adagrad" | "sgd" | "adam"
  // Element type of the tables as stored (rows, lookups, updates, memory); absent: the
  // training precision. DeepLearningExamples' PyTorch DLRM keeps fp32 tables under AMP (only
  // the gathered vectors are cast); TorchRec's EmbeddingBagConfig.data_type is fp32 by default.
  std::optional<Precision> embedding_dtype;
  // Hit rate of the HBM cache of tables kept in host memory (UVM caching); < 0: ids uniform
  // over the rows, so the cache's share of the rows (a skewed real stream hits more often).
  double uvm_cache_hit_rate = -1;
};

struct ModelConfig {
  std::string preset;  // empty when none
  Architecture architecture = Architecture::kGpt;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_kv_heads = 0;     // = num_attention_heads when absent
  int64_t head_dim = 0;         // per-head width; 0 = hidden_size / num_attention_heads (Qwen3 sets it)
  int64_t ffn_hidden_size = 0;  // 4 x hidden for gpt when absent
  int64_t vocab_size = 0;
  int64_t seq_length = 0;
  bool tie_embeddings = true;
  int64_t num_experts = 0;  // 0 = dense
  int64_t moe_top_k = 0;
  int64_t moe_ffn_hidden_size = 0;
  double moe_capacity_factor = 1.0;
  // Dropless routing (Megatron-Core's default when --moe-expert-capacity-factor is unset):
  // no token is dropped or padded, so experts see as many tokens as the router sends them and
  // the busiest rank of the expert-parallel group paces each MoE layer. Excludes
  // moe_capacity_factor.
  bool moe_dropless = false;
  // The router's forced load balancing (Megatron-Core --moe-router-force-load-balancing,
  // torchtitan [debug] moe_force_load_balance): random logits route the tokens evenly, so no
  // expert-parallel rank waits for a busier one. A benchmark setting; Megatron-Bridge's
  // published MoE runs use it ("we force-balance the token distribution among experts").
  bool moe_router_force_load_balancing = false;
  // A norm on every head's query and key before the rotary embedding and the attention
  // (Megatron-Core --qk-layernorm, Megatron-Bridge model.qk_layernorm; Qwen3's q_norm and
  // k_norm, RMSNorm over head_dim), of the model's norm kind.
  bool qk_layernorm = false;
  // Dropout probabilities as Megatron names them (--hidden-dropout, --attention-dropout); absent
  // = the architecture's default: 0.1 / 0.1 for gpt (Megatron-LM's GPT defaults, as in the
  // published GPT-3 runs), 0 / 0 for llama (Megatron / torchtitan Llama recipes).
  std::optional<double> hidden_dropout;     // embedding output, after attention and after the MLP
  std::optional<double> attention_dropout;  // attention probabilities
  // MLP activation; absent = gelu for gpt, swiglu for llama.
  std::optional<Activation> activation;
  // Attention kernel; absent = flash (every 2023+ recipe runs a fused kernel).
  std::optional<AttentionKernel> attention_kernel;
  DlrmConfig dlrm;  // only for Architecture::kDlrm

  bool is_moe() const { return num_experts > 1; }
  Activation activation_kind() const {
    return activation.value_or(architecture == Architecture::kLlama ? Activation::kSwiglu : Activation::kGelu);
  }
  double hidden_dropout_p() const { return hidden_dropout.value_or(architecture == Architecture::kGpt ? 0.1 : 0.0); }
  double attention_dropout_p() const {
    return attention_dropout.value_or(architecture == Architecture::kGpt ? 0.1 : 0.0);
  }
};

struct LinkSpec {
  double bandwidth_GBps = 0;  // per GPU (intra) or per NIC (inter), per direction
  double latency_us = 0;
};

struct ClusterConfig {
  GpuSpec gpu;
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 0;
  LinkSpec intra_node;
  LinkSpec inter_node;
  int64_t nics_per_node = 0;
  Topology topology = Topology::kFatTree;
  double oversubscription = 1.0;

  int64_t num_nodes() const { return gpus_per_node > 0 ? (num_gpus + gpus_per_node - 1) / gpus_per_node : 0; }
};

struct TrainingConfig {
  int64_t global_batch_size = 0;
  std::optional<int64_t> micro_batch_size;  // absent = searched
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  int64_t steps = 10;
  int64_t seed = 1;
  Framework framework = Framework::kMegatron;
  // training.cuda_graphs: each transformer layer's forward and backward replayed as captured CUDA
  // graphs (Megatron-Core --cuda-graph-impl transformer_engine, NeMo / Megatron-Bridge
  // cuda_graph_impl) instead of dispatched op by op from Python. Megatron only.
  bool cuda_graphs = false;
  // training.compile: torchtitan's torch.compile of each transformer block and of the loss
  // ([compile] enable), which fuses the elementwise ops between the GEMMs and the attention
  // kernel into generated kernels. Off (torchtitan's default), every op of the block runs as its
  // own eager kernel. torchtitan only.
  bool compile = false;
  // training.cuda_launch_blocking: the run sets CUDA_LAUNCH_BLOCKING=1, so every kernel launch
  // returns only when the kernel has finished: the host's dispatch time of each op adds to the
  // GPU time instead of running ahead of it (BLOOM-176B's training did, to avoid a hang).
  bool cuda_launch_blocking = false;
  // training.grad_reduce_in_fp32: whether the gradients are accumulated and reduced over the
  // data-parallel group in fp32 (true) or in the 16-bit training type (false). Megatron-Core's
  // DDP grad_reduce_in_fp32 (Megatron-LM --grad-reduce-in-bf16 / --accumulate-allreduce-grads-
  // in-fp32, NeMo 1.0 grad_sync_dtype), DeepSpeed's communication_data_type, torchtitan's
  // mixed_precision_reduce. Absent = the framework's default (grad_reduce_in_fp32() in
  // core/model_math.h). Meaningless for fp32 training, which reduces in fp32.
  std::optional<bool> grad_reduce_in_fp32;
  // training.cross_entropy_loss_fusion: Megatron-Core's fused vocab-parallel cross entropy
  // (--cross-entropy-loss-fusion; NeMo 2 and Megatron-Bridge model configs) against the unfused
  // one, op by op on an fp32 copy of the logits (Megatron-LM's default). Absent = fused, as
  // NVIDIA's recipes run it. Megatron only: Megatron-DeepSpeed's loss is always the unfused one,
  // torchtitan's is fused by training.compile.
  std::optional<bool> cross_entropy_loss_fusion;
  // training.fp8_recipe: how the fp8 run scales its tensors (Megatron-Core --fp8-recipe,
  // Megatron-Bridge's mixed_precision recipe, torchtitan's float8 recipe_name). Absent = the
  // framework's default (fp8_recipe() in core/model_math.h). Only with precision fp8.
  std::optional<Fp8Recipe> fp8_recipe;
  // Tokens the whole training run processes (training.total_tokens); 0 = not given. With a
  // reliability block it turns goodput into an expected time to train.
  double total_tokens = 0;
};

// What the scenario fixes about the plan; every absent value is searched.
struct ParallelismConstraints {
  std::optional<int64_t> tp, pp, dp, cp, ep, vpp;
  // Expert tensor parallel degree (torchtitan's expert_tensor_parallel_degree, Megatron's
  // expert_tensor_parallel_size); absent = searched (MoE) or tp (dense).
  std::optional<int64_t> etp;
  std::optional<Schedule> schedule;
  std::optional<bool> sequence_parallel;
  std::optional<Recompute> recompute;
  std::optional<int64_t> zero_stage;
  std::optional<bool> overlap_grad_reduce, overlap_param_gather, tp_comm_overlap;
  // EP communication overlap (Megatron-Core --overlap-moe-expert-parallel-comm with
  // --delay-wgrad-compute; Megatron-Bridge's comm_overlap.overlap_moe_expert_parallel_comm):
  // absent = searched where it applies (ep_overlap_problem in core/framework_rules.h).
  std::optional<bool> ep_comm_overlap;
  // Activation CPU offloading (Megatron-Core --cpu-offloading-num-layers, Megatron-Bridge
  // model.cpu_offloading_num_layers): how many of the first transformer layers keep their saved
  // activations in host memory between the forward and the backward. Absent = searched (the
  // fewest layers that make a plan fit, where activation_offload_problem allows it); 0 = off.
  std::optional<int64_t> activation_offload_layers;
  // Explicit split: transformer layers of each pipeline stage, first to last; with vpp > 1 of
  // each virtual stage (model chunk) in model order (chunk c of stage s is entry c x pp + s).
  // Sums to num_layers. Absent: split automatically (strategies/partition.h).
  std::optional<std::vector<int64_t>> layers_per_stage;
  // Megatron's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split:
  // the embedding (first stage) / the output layer and loss (last stage) count as one layer.
  bool account_for_embedding = false;
  bool account_for_loss = false;
  // Recommendation models: the embedding-table sharding the run used, one "tI:KIND" word per
  // table in table order (core/dlrm_model.h parse_dlrm_plan, the form results describe it in);
  // absent = searched.
  std::optional<std::string> embedding_sharding;
};

struct SearchConfig {
  int64_t top_k = 10;
  Objective objective = Objective::kIterationTime;
};

// What-if knobs for the simulators (see scenario spec, "whatif" section).
struct WhatIf {
  struct Straggler {
    int64_t gpu = -1;   // a GPU index, or -1
    int64_t node = -1;  // a node index, or -1
    double slowdown = 1.0;
  };
  struct DegradedLink {
    int64_t node = -1;
    double bandwidth_factor = 1.0;
  };
  std::vector<Straggler> stragglers;
  std::vector<DegradedLink> degraded_links;
};

struct Scenario {
  std::string name;
  std::string source_path;  // file it was read from, empty when built in code
  ModelConfig model;
  ClusterConfig cluster;
  TrainingConfig training;
  ParallelismConstraints parallelism;
  SearchConfig search;
  std::vector<Backend> backends;
  WhatIf whatif;
  // Failures, checkpoints and recovery (the scenario's reliability block); absent = not modelled.
  std::optional<ReliabilityConfig> reliability;
};

// A fully specified plan: every degree and switch decided.
struct Plan {
  int64_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, vpp = 1;
  // Expert tensor parallel degree: ranks that split each expert's FFN. 0 = same as tp
  // (Megatron's default for expert_tensor_parallel_size). Use expert_tp().
  int64_t etp = 0;
  int64_t micro_batch_size = 1;
  Schedule schedule = Schedule::kOneFOneB;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int64_t zero_stage = 0;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool tp_comm_overlap = false;
  // Megatron-Core's combined 1F1B: each steady-state step runs one micro-batch's forward beside
  // another's backward, layer by layer, so each EP all-to-all runs beside the other
  // micro-batch's compute (core/layer_cost.cc, ep_overlap_exposed_s).
  bool ep_comm_overlap = false;
  // Transformer Engine's CPU offloading (Megatron-Core --cpu-offloading-num-layers): the first
  // `activation_offload_layers` layers copy their saved activations to host memory as each
  // forward ends and back before their backward, so at most layers - n layers' activations are
  // on the GPU at once (core/framework_rules.h activation_offload_problem; the copies' time in
  // core/layer_cost.cc). 0 = off.
  int64_t activation_offload_layers = 0;
  // Layers per pipeline stage (size pp); empty = even split. Filled by the partitioner.
  std::vector<int64_t> layers_per_stage;
  // Recommendation models: the embedding-table sharding (core/dlrm_model.h describe form,
  // "t0:tw@3 t1:rw t2:cw2@0,1 t3:dp"), so that two sharding plans are two plans; empty for
  // transformer plans.
  std::string embedding_sharding;

  int64_t world_size() const { return tp * pp * dp * cp; }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // Model chunks each pipeline stage holds: vpp under the interleaved schedule, else 1.
  int64_t chunks_per_stage() const { return schedule == Schedule::kInterleaved ? std::max<int64_t>(vpp, 1) : 1; }
  bool operator==(const Plan&) const = default;
};

// The one description of a plan, as tables, messages, the store and the GUI show it:
// kDegrees "tp8 pp2 dp4 cp1 ep1 vpp2 mbs1" (" etpN" after ep when expert TP differs from tp);
// kFull adds " 1f1b sp recompute=selective zero1" (" sp" only with sequence parallelism,
// " tp-overlap" after it with TP communication overlap and tp > 1, " ep-overlap" with EP
// communication overlap and ep > 1; " offload=N" after the recompute word with N layers'
// activations offloaded);
// kWithLayers adds " layers=[5 5 6 6]" when the pipeline split is set. A recommendation plan
// ends, at every detail, with " tables=[t0:tw@3 t1:rw]" (its embedding sharding).
enum class PlanDetail : uint8_t { kDegrees, kFull, kWithLayers };
std::string describe(const Plan& plan, PlanDetail detail = PlanDetail::kWithLayers);

// Names as they appear in files and on the command line.
const char* to_string(Architecture);
const char* to_string(Precision);
const char* to_string(Optimizer);
const char* to_string(Topology);
const char* to_string(Schedule);
const char* to_string(Recompute);
const char* to_string(Objective);
const char* to_string(Backend);
const char* to_string(Activation);
const char* to_string(AttentionKernel);
const char* to_string(Framework);
const char* to_string(Fp8Recipe);

// Bytes of one element in the compute precision (fp8 activations are stored in bf16 by
// Transformer Engine, so fp8 compute still keeps 2-byte activations; see memory model).
double bytes_per_element(Precision);

// Dense peak of the GPU for the precision, TFLOP/s.
double peak_tflops(const GpuSpec&, Precision);

// Micro-batches per data-parallel rank per optimizer step.
inline int64_t num_micro_batches(const Scenario& s, const Plan& p) {
  return s.training.global_batch_size / (p.micro_batch_size * p.dp);
}

}  // namespace monarch
