#include "core/model_math.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/framework_rules.h"
#include "core/pipeline_schedule.h"
#include "core/units.h"

namespace monarch {

AttentionKernel default_attention_kernel(const ModelConfig&) { return AttentionKernel::kFlash; }

ModelShape model_shape(const ModelConfig& c) {
  ModelShape m;
  m.layers = c.num_layers;
  m.hidden = c.hidden_size;
  m.heads = c.num_attention_heads > 0 ? c.num_attention_heads : 1;
  m.kv_heads = c.num_kv_heads > 0 ? c.num_kv_heads : m.heads;
  m.head_dim = c.head_dim > 0 ? c.head_dim : m.hidden / m.heads;
  m.ffn = c.ffn_hidden_size > 0 ? c.ffn_hidden_size : 4 * c.hidden_size;
  m.vocab = c.vocab_size;
  m.seq = c.seq_length;
  const bool gpt = c.architecture == Architecture::kGpt;
  m.gated_mlp = c.activation_kind() == Activation::kSwiglu;
  m.biases = gpt;
  m.layernorm = gpt;
  m.dropout = c.hidden_dropout_p() > 0;
  m.attention_dropout = c.attention_dropout_p() > 0;
  m.learned_positions = gpt;
  m.tied_embeddings = c.tie_embeddings;
  m.experts = c.num_experts > 1 ? c.num_experts : 0;
  m.top_k = c.moe_top_k > 0 ? c.moe_top_k : 1;
  m.expert_ffn = c.moe_ffn_hidden_size > 0 ? c.moe_ffn_hidden_size : m.ffn;
  m.capacity_factor = c.moe_capacity_factor;
  m.dropless = c.moe_dropless;
  m.force_balanced = c.moe_router_force_load_balancing;
  m.qk_norm = c.qk_layernorm;
  m.attention = c.attention_kernel.value_or(default_attention_kernel(c));
  return m;
}

// ---------------------------------------------------------------- parameters

int64_t qkv_width(const ModelShape& m) { return (m.heads + 2 * m.kv_heads) * m.head_dim; }
int64_t layer_ffn(const ModelShape& m) { return m.moe() ? m.expert_ffn : m.ffn; }
int64_t layer_fc1_params(const ModelShape& m) { return (m.gated_mlp ? 2 : 1) * m.hidden * layer_ffn(m); }

namespace {

int64_t norm_params(const ModelShape& m) { return m.layernorm ? 2 * m.hidden : m.hidden; }

// Weights of the linear layers (no biases), per layer.
int64_t attention_matrix_params(const ModelShape& m) {
  return m.hidden * qkv_width(m) + m.heads * m.head_dim * m.hidden;
}
int64_t mlp_matrix_params(const ModelShape& m, int64_t ffn) {
  return (m.gated_mlp ? 3 : 2) * m.hidden * ffn;
}
int64_t mlp_bias_params(const ModelShape& m, int64_t ffn) {
  return m.biases ? (m.gated_mlp ? 2 * ffn : ffn) + m.hidden : 0;
}

// The largest module whose parameters DeepSpeed's ZeRO-3 gathers at once (its hooks sit on
// every module that owns parameters): the word embedding or the output projection, the QKV
// projection, or the MLP's first linear (both halves of a gated MLP, which Megatron-DeepSpeed
// fuses) or, with experts, one expert's.
int64_t largest_zero3_module_params(const ModelShape& m, const ParameterCounts& pc) {
  return std::max({pc.embedding, pc.output, m.hidden * qkv_width(m), layer_fc1_params(m)});
}

}  // namespace

int64_t moe_expert_capacity(int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor) {
  if (experts <= 0) return 0;
  const double share = capacity_factor * static_cast<double>(tokens * top_k) / static_cast<double>(experts);
  const double cap = std::ceil(share - 1e-9 * share);  // an exact share (1.2 x 10 / 4 = 3) is not rounded up
  return std::max<int64_t>(1, static_cast<int64_t>(cap));
}

MoeTokenFlow moe_token_flow(const ModelShape& m, const Plan& p) {
  MoeTokenFlow f;
  if (!m.moe()) return f;
  const double tp = static_cast<double>(std::max<int64_t>(p.tp, 1));
  const double ep = static_cast<double>(std::max<int64_t>(p.ep, 1));
  const double etp = static_cast<double>(std::max<int64_t>(p.expert_tp(), 1));
  const double E = static_cast<double>(m.experts);
  f.tokens = static_cast<double>(p.micro_batch_size) * static_cast<double>(m.seq) / static_cast<double>(std::max<int64_t>(p.cp, 1));
  f.routed_tokens = f.tokens / tp;
  f.capacity = moe_expert_capacity(static_cast<int64_t>(std::llround(f.routed_tokens)), m.experts, m.top_k, m.capacity_factor);
  const double cap = static_cast<double>(f.capacity);
  f.dispatch_rows = E * cap;
  f.local_experts = E / ep;
  f.rows_per_expert = ep * etp * cap;
  f.expert_rows = etp * E * cap;
  f.expert_ffn_local = static_cast<double>(m.expert_ffn) / etp;
  return f;
}

ParameterCounts parameter_counts(const ModelShape& m) {
  ParameterCounts p;
  p.embedding = m.vocab * m.hidden + (m.learned_positions ? m.seq * m.hidden : 0);
  p.output = m.tied_embeddings ? 0 : m.vocab * m.hidden;
  p.final_norm = norm_params(m);
  // The query and key norms share one weight (and bias) of head_dim each across the heads.
  const int64_t qk_norm_params = m.qk_norm ? 2 * (m.layernorm ? 2 : 1) * m.head_dim : 0;
  p.attention_per_layer = norm_params(m) + attention_matrix_params(m) + (m.biases ? qkv_width(m) + m.hidden : 0) + qk_norm_params;
  if (m.moe()) {
    p.expert_per_layer = m.experts * (mlp_matrix_params(m, m.expert_ffn) + mlp_bias_params(m, m.expert_ffn));
    p.mlp_per_layer = norm_params(m) + m.hidden * m.experts /* router */ + p.expert_per_layer;
  } else {
    p.mlp_per_layer = norm_params(m) + mlp_matrix_params(m, m.ffn) + mlp_bias_params(m, m.ffn);
  }
  p.per_layer = p.attention_per_layer + p.mlp_per_layer;
  p.total = p.embedding + p.output + p.final_norm + m.layers * p.per_layer;
  return p;
}

double megatron_gpt_parameters(int64_t l, int64_t h, int64_t v, int64_t s) {
  const double L = static_cast<double>(l), H = static_cast<double>(h);
  return 12.0 * L * H * H * (1.0 + 13.0 / (12.0 * H) + static_cast<double>(v + s) / (12.0 * L * H));
}

std::vector<int64_t> default_layer_split(int64_t num_layers, int64_t virtual_stages, bool account_for_embedding,
                                         bool account_for_loss) {
  const int64_t v = std::max<int64_t>(virtual_stages, 1);
  const int64_t units = num_layers + (account_for_embedding ? 1 : 0) + (account_for_loss ? 1 : 0);
  std::vector<int64_t> out(static_cast<size_t>(v), units / v);
  const int64_t extra = units % v;
  const int64_t first = (v - extra) / 2;  // the remainder centred: the ends carry embedding and output
  for (int64_t i = 0; i < extra; ++i) ++out[static_cast<size_t>(first + i)];
  if (account_for_embedding) --out.front();
  if (account_for_loss) --out.back();
  // A unit too few for the ends (more virtual stages than units): take it from the middle.
  for (size_t i = 0; i < out.size(); ++i)
    while (out[i] < 0) {
      ++out[i];
      --*std::max_element(out.begin(), out.end());
    }
  return out;
}

std::vector<int64_t> virtual_stage_layers(int64_t num_layers, const Plan& plan) {
  const int64_t pp = std::max<int64_t>(plan.pp, 1), vpp = std::max<int64_t>(plan.vpp, 1);
  const auto given = static_cast<int64_t>(plan.layers_per_stage.size());
  if (given == pp * vpp) return plan.layers_per_stage;
  if (given != pp) return default_layer_split(num_layers, pp * vpp);
  // One count per stage: each stage's layers over its chunks, earlier chunks take the remainder.
  std::vector<int64_t> out(static_cast<size_t>(pp * vpp));
  for (int64_t s = 0; s < pp; ++s) {
    const int64_t n = plan.layers_per_stage[static_cast<size_t>(s)];
    for (int64_t c = 0; c < vpp; ++c) out[static_cast<size_t>(c * pp + s)] = n / vpp + (c < n % vpp ? 1 : 0);
  }
  return out;
}

std::vector<int64_t> stage_layers(const ModelShape& m, const Plan& plan) {
  const int64_t pp = std::max<int64_t>(plan.pp, 1);
  if (static_cast<int64_t>(plan.layers_per_stage.size()) == pp) return plan.layers_per_stage;
  const std::vector<int64_t> v = virtual_stage_layers(m.layers, plan);
  std::vector<int64_t> out(static_cast<size_t>(pp), 0);
  for (size_t i = 0; i < v.size(); ++i) out[i % static_cast<size_t>(pp)] += v[i];
  return out;
}

int64_t max_chunk_layers(const ModelShape& m, const Plan& plan) {
  const std::vector<int64_t> v = virtual_stage_layers(m.layers, plan);
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::vector<int64_t> fixed_layer_split(const Scenario& sc, const Plan& plan) {
  const ParallelismConstraints& c = sc.parallelism;
  const int64_t virtual_stages = std::max<int64_t>(plan.pp, 1) * std::max<int64_t>(plan.vpp, 1);
  if (c.layers_per_stage && static_cast<int64_t>(c.layers_per_stage->size()) == virtual_stages) return *c.layers_per_stage;
  if (c.account_for_embedding || c.account_for_loss)
    return default_layer_split(sc.model.num_layers, virtual_stages, c.account_for_embedding, c.account_for_loss);
  return {};
}

int64_t pipeline_split_units(const Scenario& sc) {
  const ParallelismConstraints& c = sc.parallelism;
  return sc.model.num_layers + (c.account_for_embedding ? 1 : 0) + (c.account_for_loss ? 1 : 0);
}

StageParameters layer_parameters(const ModelShape& m, const Plan& plan) {
  const double t = static_cast<double>(plan.tp);
  const double ep = static_cast<double>(std::max<int64_t>(plan.ep, 1));
  const double etp = static_cast<double>(plan.expert_tp());
  const double norm = static_cast<double>(norm_params(m));
  StageParameters sp;
  // Attention: column-parallel QKV (weights and bias split), row-parallel projection (weight
  // split, bias replicated), norm replicated.
  double attn = static_cast<double>(attention_matrix_params(m) + (m.biases ? qkv_width(m) : 0)) / t +
                (m.biases ? static_cast<double>(m.hidden) : 0.0) + norm;
  double mlp_dense = 0, mlp_expert = 0;
  if (m.moe()) {
    // Each expert's fc1 columns and fc2 rows split over the expert-TP group.
    const double one_expert = static_cast<double>(mlp_matrix_params(m, m.expert_ffn)) / etp +
                              static_cast<double>(mlp_bias_params(m, m.expert_ffn)) / etp;
    mlp_dense = norm + static_cast<double>(m.hidden * m.experts);
    mlp_expert = static_cast<double>(m.experts) / ep * one_expert;
  } else {
    const double fc2_bias = m.biases ? static_cast<double>(m.hidden) : 0.0;
    mlp_dense = norm + static_cast<double>(mlp_matrix_params(m, m.ffn)) / t +
                (static_cast<double>(mlp_bias_params(m, m.ffn)) - fc2_bias) / t + fc2_bias;
  }
  sp.dense = attn + mlp_dense;
  sp.expert = mlp_expert;
  sp.gemm_dense = static_cast<double>(attention_matrix_params(m) + (m.moe() ? 0 : mlp_matrix_params(m, m.ffn))) / t;
  sp.gemm_expert = m.moe() ? static_cast<double>(m.experts) / ep * static_cast<double>(mlp_matrix_params(m, m.expert_ffn)) / etp : 0.0;
  return sp;
}

StageParameters stage_parameters(const ModelShape& m, const Plan& plan, int64_t stage, int64_t layers) {
  const double t = static_cast<double>(plan.tp);
  const double norm = static_cast<double>(norm_params(m));
  const StageParameters one = layer_parameters(m, plan);
  const double L = static_cast<double>(layers);
  StageParameters sp;
  sp.dense = L * one.dense;
  sp.expert = L * one.expert;
  sp.gemm_dense = L * one.gemm_dense;
  sp.gemm_expert = L * one.gemm_expert;
  const double word = static_cast<double>(m.vocab * m.hidden) / t;  // vocab-parallel
  if (stage == 0) sp.dense += word + (m.learned_positions ? static_cast<double>(m.seq * m.hidden) : 0.0);
  if (stage == plan.pp - 1) {
    sp.dense += norm;
    // Untied: the output projection. Tied with pp > 1: Megatron keeps a copy of the word
    // embeddings on the last stage and all-reduces its gradient with the first stage.
    if (!m.tied_embeddings || plan.pp > 1) sp.dense += word;
  }
  return sp;
}

// ---------------------------------------------------------------- FLOPs

double attention_core_forward_flops_per_token(const ModelShape& m) {
  // QK^T: 2 s d per head, attention x V: 2 s d per head -> 4 s h (full matrix).
  return 4.0 * static_cast<double>(m.seq) * static_cast<double>(m.heads * m.head_dim);
}

double layer_forward_flops_per_token(const ModelShape& m) {
  double gemm_params = static_cast<double>(attention_matrix_params(m));
  if (m.moe()) {
    gemm_params += static_cast<double>(m.hidden * m.experts) +
                   static_cast<double>(m.top_k) * static_cast<double>(mlp_matrix_params(m, m.expert_ffn));
  } else {
    gemm_params += static_cast<double>(mlp_matrix_params(m, m.ffn));
  }
  return 2.0 * gemm_params + attention_core_forward_flops_per_token(m);
}

double output_forward_flops_per_token(const ModelShape& m) {
  return 2.0 * static_cast<double>(m.hidden) * static_cast<double>(m.vocab);
}

FlopsPerIteration flops_per_iteration(const ModelShape& m, const TrainingConfig& t, Recompute r) {
  const double tokens = static_cast<double>(t.global_batch_size) * static_cast<double>(m.seq);
  const double L = static_cast<double>(m.layers);
  const double fwd = tokens * (L * layer_forward_flops_per_token(m) + output_forward_flops_per_token(m));
  FlopsPerIteration f;
  f.model = 3.0 * fwd;
  f.hardware = f.model;
  if (r == Recompute::kFull) f.hardware += tokens * L * layer_forward_flops_per_token(m);
  if (r == Recompute::kSelective) f.hardware += tokens * L * attention_core_forward_flops_per_token(m);
  return f;
}

// ---------------------------------------------------------------- activations

double korthikanti_table2_bytes(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t, bool sp, Recompute r) {
  const double sbh = static_cast<double>(s) * static_cast<double>(b) * static_cast<double>(h);
  const double T = static_cast<double>(t);
  const double attn = 5.0 * static_cast<double>(a) * static_cast<double>(s) / static_cast<double>(h);
  if (r == Recompute::kFull) return sp ? 2.0 * sbh / T : 2.0 * sbh;
  const double base = sp ? 34.0 / T : 10.0 + 24.0 / T;
  return sbh * (base + (r == Recompute::kSelective ? 0.0 : attn / T));
}

double saved_gemm_input_bytes(Precision precision) {
  return precision == Precision::kFp8 ? 1.0 : bytes_per_element(precision);
}

double layer_activation_bytes(const ModelShape& m, int64_t micro_batch, int64_t tp, int64_t cp, bool sp,
                              Recompute r, double e, int64_t etp, double gemm_input_bytes, Framework framework) {
  const bool torchtitan_block = framework == Framework::kTorchtitan;
  const double g = gemm_input_bytes > 0 ? gemm_input_bytes : e;  // saved GEMM inputs
  const double t = static_cast<double>(tp);
  const double s_local = static_cast<double>(m.seq) / static_cast<double>(cp);
  const double T = s_local * static_cast<double>(micro_batch);  // tokens on this rank
  const double h = static_cast<double>(m.hidden);
  const double sp_div = sp ? t : 1.0;  // sequence parallel shards the replicated part
  if (r == Recompute::kFull) return e * T * h / sp_div;  // the layer input only
  if (r == Recompute::kSelective && torchtitan_block && !m.moe()) {
    // torchtitan's op-level policy (torchtitan/distributed/activation_checkpoint.py
    // _custom_policy) keeps the block input, the attention kernel's output and fp32 log-sum-exp,
    // and every other matmul output in the order wq, wk, wv, wo, w1, w3, w2: wq, wv, w1 and, with
    // a gate, w2 (a partial sum of h columns under TP); the rest is recomputed.
    const double q_cols = static_cast<double>(m.heads * m.head_dim);
    const double kv_cols = static_cast<double>(m.kv_heads * m.head_dim);
    const double ffn_cols = static_cast<double>(m.ffn);
    return e * T * h / sp_div + e * T * (2.0 * q_cols + kv_cols + ffn_cols) / t + (m.gated_mlp ? e * T * h : 0.0) +
           4.0 * static_cast<double>(m.heads) * T / t;
  }

  const double mask = 1.0;  // dropout masks: one byte per element
  // Replicated across TP ranks unless sequence parallel: the two norm inputs, the inputs of
  // QKV and of the first MLP projection (the norm outputs), the two hidden dropout masks.
  double replicated = 2.0 * e * T * h + 2.0 * g * T * h + (m.dropout ? 2.0 * mask * T * h : 0.0);
  // torchtitan without recompute keeps the gathered QKV and fc1 inputs whole (one for an MoE
  // layer, whose MLP takes the sequence shard).
  double gathered = 0;
  if (torchtitan_block && r == Recompute::kNone && sp && tp > 1) {
    gathered = (m.moe() ? 1.0 : 2.0) * g * T * h;
    replicated -= gathered;
  }
  // Split across TP ranks: Q, K, V; the attention projection input; the MLP internals.
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double q = static_cast<double>(m.heads * m.head_dim);
  double split = e * T * (q + 2.0 * kv) + g * T * q;
  if (m.qk_norm) split += e * T * (q + kv);  // the query and key norms keep their inputs
  double experts_local = 0;  // the expert block, already per rank
  if (m.moe()) {
    Plan p;
    p.tp = tp;
    p.cp = cp;
    p.etp = etp;
    p.micro_batch_size = micro_batch;
    const MoeTokenFlow f = moe_token_flow(m, p);
    const double rows = f.expert_rows;  // etp x E x cap, after the ETP all-gather
    const double fc1_out = (m.gated_mlp ? 2.0 : 1.0) * f.expert_ffn_local;  // 1/etp of the columns
    if (framework == Framework::kMegatron) {
      // Megatron-Core's TEGroupedMLP: each Transformer Engine GroupedLinear keeps its input for
      // the weight gradient as a dense linear layer does, the fp8 copy in fp8 training
      // (grouped_linear.py keeps the quantized inputs, columnwise usage only); the activation
      // keeps its 16-bit input (the fc1 output) and the fp32 routing probability of each row.
      // Since Megatron-Core 0.13 the activation applies the probabilities (experts.py
      // activation_func_with_probs; commit 2659630721, "Memory efficient token permutation"),
      // so the combine's unpermute weighs nothing and keeps nothing.
      experts_local += g * rows * h + e * rows * fc1_out + g * rows * f.expert_ffn_local + 4.0 * rows;
    } else {
      // DeepSpeed-MoE and torchtitan: the expert input and FFN internals in 16-bit, and the
      // combine, which weighs the returned expert outputs (E x cap rows, h wide) by their gates,
      // keeps them for the gate gradient (the CPU runtime's moe.cc keeps the same).
      experts_local += e * rows * h + e * rows * (fc1_out + f.expert_ffn_local) + e * f.dispatch_rows * h;
    }
    // fp32 router probabilities of the T / tp tokens this rank routes (replicated over TP
    // without sequence parallelism, which Megatron's MoE layer does not allow with tp > 1), and
    // the fp32 top-k gates of the routed tokens.
    experts_local += 4.0 * f.routed_tokens * static_cast<double>(m.experts);
    experts_local += 4.0 * f.routed_tokens * static_cast<double>(m.top_k);
  } else {
    // GeLU: its input (fc1 output) and the fc2 input; SwiGLU: gate and up, and the fc2 input.
    split += T * static_cast<double>(m.ffn) * (e * (m.gated_mlp ? 2.0 : 1.0) + g);
  }
  double core = 0;  // attention core, split across TP ranks (heads)
  const double a = static_cast<double>(m.heads);
  if (m.attention == AttentionKernel::kMaterialized) {
    // Scores of the local queries against all keys: softmax output, dropout mask and output.
    const double scores = a * T * static_cast<double>(m.seq);
    core = m.attention_dropout ? (2.0 * e + mask) * scores : e * scores;
  } else {
    core = 4.0 * a * T;  // fp32 log-sum-exp per row
  }
  if (r == Recompute::kSelective) core = 0;
  return replicated / sp_div + gathered + (split + core) / t + experts_local;
}

double micro_batches_in_flight(const Plan& plan, int64_t stage, int64_t m, Framework framework) {
  const int64_t p = std::max<int64_t>(plan.pp, 1);
  // EP communication overlap: Megatron-Core's combined 1F1B runs one forward more before its
  // first backward (extra_warmup_forwards), one more chunk pass in flight.
  const int64_t extra = extra_warmup_forwards(plan);
  if (p == 1) return static_cast<double>(std::min<int64_t>(1 + extra, m));
  const int64_t v = plan.chunks_per_stage();
  return static_cast<double>(peak_in_flight(plan.schedule, p, stage, m, v, framework, extra).chunk_passes) /
         static_cast<double>(v);
}

// ---------------------------------------------------------------- memory

StateBytesPerParameter state_bytes_per_parameter(Precision p, Optimizer o) {
  const bool mixed = p != Precision::kFp32;
  StateBytesPerParameter b;
  b.weights = mixed ? 2 : 4;
  b.gradients = 4;  // fp32 gradient accumulation (Megatron main_grad; fp32 training)
  if (o == Optimizer::kAdam) {
    b.optimizer = 8 + (mixed ? 4 : 0);  // m, v (+ fp32 master weights)
  } else {
    b.optimizer = 4 + (mixed ? 4 : 0);  // momentum (+ fp32 master weights)
  }
  return b;
}

bool grad_reduce_in_fp32(const TrainingConfig& t) {
  if (t.precision == Precision::kFp32) return true;
  if (t.grad_reduce_in_fp32) return *t.grad_reduce_in_fp32;
  switch (t.framework) {
    case Framework::kMegatron: return t.precision != Precision::kFp16;
    case Framework::kDeepspeed: return false;
    case Framework::kTorchtitan: return true;
  }
  return true;
}

Fp8Recipe fp8_recipe(const TrainingConfig& t) {
  if (t.fp8_recipe) return *t.fp8_recipe;
  return t.framework == Framework::kTorchtitan ? Fp8Recipe::kTensorwise : Fp8Recipe::kDelayed;
}

StateBytesPerParameter state_bytes_per_parameter(const TrainingConfig& t, int64_t zero_stage) {
  StateBytesPerParameter b = state_bytes_per_parameter(t.precision, t.optimizer);
  if (t.precision == Precision::kFp32) return b;
  if (t.framework == Framework::kMegatron) b.gradients = grad_reduce_in_fp32(t) ? 4 : 2;
  if (t.framework == Framework::kDeepspeed) {
    const bool sixteen_bit = t.precision == Precision::kFp16 || t.precision == Precision::kBf16;
    if (runs_deepspeed_bf16_optimizer(t.framework, t.precision, zero_stage))
      b.gradients = 4 + 2;  // fp32 accumulators and the bf16 .grad
    else if (sixteen_bit)
      b.gradients = 2;  // the 16-bit .grad
  }
  return b;
}

namespace {
// Activation memory a CUDA-graphed layer holds beyond the eager one, as a fraction (NeMo's
// CUDA-graph guide: "~20%"; its GPT-3 20B example needed 15 GB more).
constexpr double kCudaGraphActivationOverhead = 0.20;
}  // namespace

double plan_layer_activation_bytes(const ModelShape& m, const Scenario& sc, const Plan& plan) {
  return layer_activation_bytes(m, plan.micro_batch_size, plan.tp, plan.cp, plan.sequence_parallel, plan.recompute,
                                bytes_per_element(sc.training.precision), plan.etp,
                                saved_gemm_input_bytes(sc.training.precision), sc.training.framework);
}

MemoryBreakdown stage_memory(const ModelShape& m, const Scenario& sc, const Plan& plan, int64_t stage,
                             int64_t layers) {
  MemoryBreakdown mem;
  const StageParameters params = stage_parameters(m, plan, stage, layers);
  const StateBytesPerParameter sb = state_bytes_per_parameter(sc.training, plan.zero_stage);
  const double dense_shards = static_cast<double>(plan.dp * plan.cp);
  // Expert states are sharded over the expert-DP group: tp x cp x dp / (etp x ep) ranks.
  const double expert_shards = static_cast<double>(plan.tp) * dense_shards /
                               static_cast<double>(plan.expert_tp() * std::max<int64_t>(plan.ep, 1));
  auto states = [&](double bytes_per_param, bool sharded) {
    return bytes_per_param * (sharded ? params.dense / dense_shards + params.expert / expert_shards
                                      : params.dense + params.expert);
  };
  mem.weights_bytes = states(sb.weights, plan.zero_stage >= 3);
  // Fp8 training keeps the linear layers' primary weights in fp8, 1 byte, with no 16-bit copy
  // (Transformer Engine fp8_model_init; NeMo's bf16_with_fp8_mixed sets fp8_params=True,
  // Megatron-LM --fp8-param-gather): those weights cost 1 byte less each. Embeddings, output
  // layer and norms stay 16-bit.
  const bool fp8 = sc.training.precision == Precision::kFp8;
  const double gemm_unsharded = params.gemm_dense + params.gemm_expert;
  const double gemm_held = plan.zero_stage >= 3 ? params.gemm_dense / dense_shards + params.gemm_expert / expert_shards
                                                : gemm_unsharded;
  if (fp8) mem.weights_bytes -= (sb.weights - kFp8WeightBytes) * gemm_held;
  mem.gradients_bytes = states(sb.gradients, plan.zero_stage >= 2);
  mem.optimizer_bytes =
      states(sb.optimizer, shards_optimizer_states(sc.training.framework, sc.training.precision, plan.zero_stage));

  const double e = bytes_per_element(sc.training.precision);
  const int64_t mbs = plan.micro_batch_size;
  const int64_t n_mb = std::max<int64_t>(num_micro_batches(sc, plan), 1);
  const double in_flight = micro_batches_in_flight(plan, stage, n_mb, sc.training.framework);
  const double g_in = saved_gemm_input_bytes(sc.training.precision);
  const double per_layer = plan_layer_activation_bytes(m, sc, plan);
  const double t = static_cast<double>(plan.tp);
  const double sp_div = plan.sequence_parallel ? t : 1.0;
  const double T = static_cast<double>(m.seq) / static_cast<double>(plan.cp) * static_cast<double>(mbs);
  const double h = static_cast<double>(m.hidden);
  // Activation offloading (pp 1, activation_offload_problem): the GPU holds at most layers - n
  // layers' activations at once; Transformer Engine's default schedule stalls the forward (and
  // the reloads) to keep it so (DefaultOffloadSynchronizer: "peak memory usage of saving
  // activations is (num_layers - num_offloaded_layers) * T").
  const int64_t offloaded = stage == 0 ? std::min(plan.activation_offload_layers, layers) : 0;
  double act = static_cast<double>(layers - offloaded) * per_layer * in_flight;
  if (stage == 0 && m.dropout) act += T * h / sp_div * in_flight;  // embedding dropout mask
  // Full recompute re-runs one layer's forward at a time in the backward pass (Megatron's
  // checkpointed layers, granularity full, one layer per checkpoint): that layer's whole
  // activations (as without recompute, its output included) exist again, once, on top of the
  // kept layer inputs. On the last stage the micro-batch's output-layer activations are freed by
  // then (its backward ran first), so the peak holds the larger of the two.
  const double recomputed = plan.recompute == Recompute::kFull && layers > 0
                                ? layer_activation_bytes(m, mbs, plan.tp, plan.cp, plan.sequence_parallel, Recompute::kNone, e, plan.etp, g_in,
                                                         sc.training.framework)
                                : 0.0;
  if (stage == plan.pp - 1) {
    // Korthikanti et al. 2022, section 4.3: final norm input and output projection input
    // (2sbh/t each with sequence parallelism) and the fp32 logits for the loss (4sbv/t).
    // One micro-batch's head at a time, unless the schedule runs every forward first (GPipe,
    // Megatron's interleaving with m = p): then all of them.
    const int64_t v = plan.chunks_per_stage();
    const double last_in_flight =
        plan.pp > 1 ? static_cast<double>(
                          peak_in_flight(plan.schedule, plan.pp, stage, n_mb, v, sc.training.framework,
                                         extra_warmup_forwards(plan)).last_chunk_passes)
                    : 1.0;
    const double head = 2.0 * e * T * h / sp_div + 4.0 * T * static_cast<double>(m.vocab) / t;
    act += std::max(head * last_in_flight, head * (last_in_flight - 1.0) + recomputed);
  } else {
    act += recomputed;
  }
  // CUDA graphs keep every temporary tensor of a captured pass allocated in the graph's memory
  // pool for the graph's lifetime (NeMo, docs/source/features/optimizations/cudagraphs.md:
  // activation memory ~20% higher, 15 GB more for GPT-3 20B).
  if (sc.training.cuda_graphs) act *= 1.0 + kCudaGraphActivationOverhead;
  mem.activations_bytes = act;

  // Temporary buffers.
  double buffers = 0;
  const ParameterCounts pc = parameter_counts(m);
  if (plan.zero_stage >= 3 && sc.training.framework == Framework::kDeepspeed) {
    // DeepSpeed ZeRO-3 gathers module by module: gathered parameters stay live up to
    // stage3_max_live_parameters, never fewer than the module in use (a module beyond that
    // limit leaves no room to prefetch the next: PartitionedParameterCoordinator caps the
    // prefetch at the limit minus what is live), and a module's full-size gradient exists
    // before it leaves through the reduce bucket (deepspeed/runtime/zero/
    // partitioned_param_coordinator.py, stage3.py).
    const double module = std::min(static_cast<double>(largest_zero3_module_params(m, pc)) / t, params.total());
    const double live = std::max(std::min(kZero3MaxLiveParameters, params.total()), module);
    buffers += sb.weights * live + sb.weights * std::max(std::min(kZeroReduceBucketElements, params.total()), module);
  } else if (plan.zero_stage >= 3) {
    // FSDP2 (torchtitan) and Megatron FSDP unshard a whole block: it and its prefetched
    // successor are live (never fewer than stage3_max_live_parameters' worth when the blocks are
    // small), and gradients leave through a reduce bucket as in ZeRO-2.
    const double layer_pair = 2.0 * static_cast<double>(pc.per_layer) / t;
    const double live = std::max(std::min(kZero3MaxLiveParameters, params.total()), std::min(layer_pair, params.total()));
    buffers += sb.weights * live + sb.weights * std::min(kZeroReduceBucketElements, params.total());
    // Fp8: the gathered linear weights arrive in fp8 (1 byte less each) and get their
    // transposes cached while live (1 byte): the live buffer holds as many bytes as in 16-bit.
  }
  if (plan.zero_stage == 2)  // DeepSpeed's gradient reduction bucket
    buffers += sb.weights * std::min(kZeroReduceBucketElements, params.total());
  if (plan.tp > 1 && plan.sequence_parallel) buffers += e * T * h;  // all-gathered layer input
  if (plan.tp_comm_overlap && plan.tp > 1) buffers += 2.0 * e * T * h;  // userbuffers for overlapped TP
  // Fp8 on Hopper: the columnwise (transposed) fp8 copy of each linear weight for the dgrad and
  // wgrad GEMMs, kept for the step (Transformer Engine Float8Tensor transpose cache).
  if (fp8 && plan.zero_stage < 3) buffers += kFp8TransposeBytes * gemm_unsharded;
  mem.buffers_bytes = buffers;
  return mem;
}

double usable_memory_gib(const GpuSpec& gpu) {
  return gpu.memory_gib * (1.0 - kFragmentationFraction) - kCudaContextReserve_gib - kNcclReserve_gib;
}

double host_link_bytes_per_s(const GpuSpec& gpu) {
  const std::string& n = gpu.name;
  const bool two_gpu_grace = n.find("GB200") != std::string::npos || n.find("GB300") != std::string::npos;
  if (two_gpu_grace) return std::min(kNvlinkC2c_GBps, kGraceMemory_GBps / 2.0) * 1e9;
  if (n.find("GH200") != std::string::npos) return std::min(kNvlinkC2c_GBps, kGraceMemory_GBps) * 1e9;
  const bool ampere = n.find("A100") != std::string::npos || n.find("A800") != std::string::npos;
  const double pcie_GBps = ampere ? kPcie4x16_GBps : kPcie5x16_GBps;
  return pcie_GBps * 1e9 * kPcieTlpPayloadFraction;
}

}  // namespace monarch
