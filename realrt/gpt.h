// Reference GPT of the real runtime (llm.c style, readable, fp32 in the runtime and fp64 in the
// gradient check): token embedding + learned positions, pre-LayerNorm transformer layers (causal
// multi-head attention, an MLP with GeLU, squared ReLU or SwiGLU), final LayerNorm, output projection tied to the token
// embedding, cross-entropy. Matrix products go through BLAS.
//
// A GptChunk is the part of the model one rank holds for one virtual pipeline stage: a range of
// layers, plus the embedding on the first chunk and the final norm + output + loss on the last.
// It is written for Megatron tensor parallelism from the start: with tp_size 1 it is the plain
// single-process model; with tp_size T it holds the rank's shard:
//   - attention QKV and MLP fc are column-parallel (output features split; heads split),
//   - attention output projection and MLP fc-proj are row-parallel (input features split),
//   - the token embedding / output projection is vocabulary-parallel, with a vocabulary-parallel
//     cross-entropy (all-reduces of the row max, the target logit and the sum of exponentials),
//   - with sequence parallelism the LayerNorm / residual regions hold S/T of the sequence and the
//     all-reduces of tensor parallelism become all-gather (before a column-parallel linear) and
//     reduce-scatter (after a row-parallel linear), as in Megatron-LM (Korthikanti et al. 2022).
// The tensor-parallel collectives are reached through TpCollectives so the model needs no MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"
#include "realrt/memory.h"
#include "realrt/moe.h"

namespace monarch::realrt {

struct GptConfig {
  int64_t num_layers = 0;
  int64_t hidden = 0;      // C
  int64_t heads = 0;       // NH
  int64_t ffn = 0;         // F (4 C for gpt)
  int64_t vocab = 0;       // V
  int64_t seq = 0;         // S
  // Mixture of experts (realrt/moe.h): every layer's MLP is a block of `experts` experts when
  // experts > 1.
  int64_t experts = 0;     // E
  int64_t top_k = 0;       // k
  int64_t moe_ffn = 0;     // F_e
  double capacity_factor = 1.0;
  bool moe() const { return experts > 1; }
  // Dropout probabilities (model.hidden_dropout / model.attention_dropout), 0 <= p < 1.
  double hidden_dropout = 0;     // embedding output, after the attention projection, after the MLP
  double attention_dropout = 0;  // attention probabilities
  // The MLP's activation (model.activation); swiglu's fc is [C, 2F] (gate and up), fc-proj [F, C].
  Activation activation = Activation::kGelu;
};

// What the dropout masks of one micro-batch are drawn from. Each mask element is a pure function
// (splitmix64 hash) of the seed, the global sample index (step * global batch + index in the
// batch, so it also tells the step), the layer, the site and the element's global position
// (token position and global feature, or global head, query and key position), never of the
// rank or the sharding: every plan, and recomputation, draws the same masks.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t first_sample = 0;  // global sample index of the micro-batch's first sample
};

// Dropout sites, in the order Megatron applies them.
enum class DropoutSite : uint64_t { kEmbedding = 1, kAttentionProbs = 2, kAttentionOutput = 3, kMlpOutput = 4 };

// keep[rows, width] (1 = kept) for rows row0 .. row0 + rows - 1 of a [N, width] activation in
// (sequence, batch) order with `batch` samples per micro-batch: element (n, j) is token position
// n / batch of sample first_sample + n % batch, feature j.
void dropout_rows_mask(uint8_t* keep, const DropoutKey& key, int64_t layer, DropoutSite site, int64_t row0,
                       int64_t rows, int64_t width, int64_t batch, double p);
// keep[S, S] of the attention probabilities of global head `head` of sample b of the micro-batch.
void dropout_attention_mask(uint8_t* keep, const DropoutKey& key, int64_t layer, int64_t b, int64_t head, int64_t heads,
                            int64_t seq, double p);

// The real runtime runs architecture "gpt", dense or mixture of experts (num_experts > 1,
// moe_top_k in [1, num_experts], moe_ffn_hidden_size default ffn_hidden_size); anything else is
// a problem naming the key.
Expected<GptConfig> gpt_config_from(const ModelConfig& model);

// Adam hyper-parameters of the real runtime: constant learning rate, no weight decay, bias
// correction; lr 1e-3 and betas (0.9, 0.95) as in Megatron-LM's GPT examples, eps 1e-8 (PyTorch).
inline constexpr double kAdamLearningRate = 1e-3;
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.95;
inline constexpr double kAdamEps = 1e-8;
// Std of the normal initialisation of weights (GPT-2); residual output projections use
// kInitStd / sqrt(2 L) (GPT-2 paper, section 2.3).
inline constexpr double kInitStd = 0.02;

// Collectives a chunk needs inside its tensor-parallel group. Buffers hold n elements per rank.
template <typename T>
class TpCollectives {
 public:
  virtual ~TpCollectives() = default;
  virtual void all_reduce_sum(T* buf, int64_t n) = 0;
  virtual void all_reduce_max(T* buf, int64_t n) = 0;
  // out[T * n] = the ranks' in[n] in rank order.
  virtual void all_gather(const T* in, T* out, int64_t n) = 0;
  // out[n] = sum over ranks of in[rank * n .. rank * n + n).
  virtual void reduce_scatter(const T* in, T* out, int64_t n) = 0;
};

struct ChunkSpec {
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool has_embedding = false;  // first chunk of the model
  bool has_head = false;       // last chunk: final norm, output projection, loss
  int64_t tp_rank = 0;
  int64_t tp_size = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int64_t micro_batch_size = 1;  // B
  // Expert parallelism (MoE only; tp_size > 1 needs sequence_parallel): this rank holds experts
  // [ep_rank E/ep_size, (ep_rank + 1) E/ep_size) of every layer, each sharded over the
  // expert-tensor-parallel group (etp_size ranks; realrt/moe.h).
  int64_t ep_rank = 0;
  int64_t ep_size = 1;
  int64_t etp_rank = 0;
  int64_t etp_size = 1;
  // Routing groups per micro-batch in one chunk (MoE): the chunk's rows are routed in this many
  // contiguous groups, each with its own capacity and aux loss. The distributed runtime routes
  // one group per rank (its sequence shard under SP); the single-process reference of a plan
  // with tp ranks and SP uses tp groups so that it drops and balances exactly as that plan.
  int64_t moe_route_groups = 1;
};

// How a parameter is split over the tensor-parallel group.
enum class ShardKind {
  kReplicated,  // every TP rank holds the whole tensor
  kColumns,     // [IC, OC] column-parallel: OC / T columns (a bias: OC / T entries)
  kColumns2,    // gated fc [C, 2F]: the gate and up sections each split by columns
  kColumns3,    // QKV [C, 3C]: the q, k and v sections each split by columns (heads)
  kRows,        // [IC, OC] row-parallel, or the vocabulary-parallel embedding [V, C]: IC / T rows
};

struct ParamInfo {
  std::string name;        // e.g. "h3.qkv_w", "wte"; the same on every rank holding it
  int64_t offset = 0;      // in the chunk's flat parameter buffer
  int64_t rows = 0;        // full shape (before sharding); a vector has rows 1
  int64_t cols = 0;
  ShardKind shard = ShardKind::kReplicated;
  bool expert = false;     // an expert's tensor: sharded over the expert-TP group, not TP
  double init_std = 0;     // normal(0, std); 0 with init_value for constants
  double init_value = 0;
  int64_t size = 0;        // local elements
};

// Parameters of one chunk in a flat buffer: tensor-parallel sharded tensors first, then the ones
// replicated across the TP group (LayerNorms, row-parallel biases, positions) from
// replicated_offset on, so sequence parallelism can all-reduce their gradients in one call.
// MoE: the rank's experts come last, from expert_offset on (their gradients are reduced over the
// expert-data-parallel group, the rest over data parallelism); expert_offset == total when dense.
struct ParamLayout {
  std::vector<ParamInfo> params;
  int64_t replicated_offset = 0;
  int64_t expert_offset = 0;
  int64_t total = 0;
  const ParamInfo* find(const std::string& name) const;
};

ParamLayout make_param_layout(const GptConfig& cfg, const ChunkSpec& spec);

// Fills params[layout.total] deterministically from seed: each full tensor is drawn from its own
// stream (splitmix64 of seed and the tensor name, Box-Muller normals) and then sliced to the
// shard, so every plan starts from the same model.
template <typename T>
void init_params(T* params, const ParamLayout& layout, const GptConfig& cfg, const ChunkSpec& spec, uint64_t seed);

// Deterministic synthetic token stream (no download): sample g of the run (g = step *
// global_batch + index in the batch) is S + 1 tokens from a noisy affine recurrence
//   x0 = h(seed, g, 0) mod V;  x_{k+1} = (5 x_k + 3 + e_k) mod V, with e_k = h(seed, g, k+1) mod V
//   when h(seed, g, k+1) / V mod 4 == 0 (a random jump a quarter of the time) and 0 otherwise,
// h = splitmix64. Inputs are x_0..x_{S-1}, targets x_1..x_S; a model can learn the recurrence,
// so the loss falls. Writes tokens[S*B] and targets[S*B] in (sequence, batch) order for the B
// samples first_sample .. first_sample + B - 1.
void synthetic_batch(int32_t* tokens, int32_t* targets, uint64_t seed, int64_t first_sample, int64_t batch,
                     int64_t seq, int64_t vocab);

template <typename T>
class GptChunk {
 public:
  // tp may be null when spec.tp_size == 1, ep when spec.ep_size == 1, etp when spec.etp_size == 1.
  GptChunk(const GptConfig& cfg, const ChunkSpec& spec, TpCollectives<T>* tp, EpCollectives<T>* ep = nullptr,
           EtpCollectives<T>* etp = nullptr);

  const GptConfig& config() const { return cfg_; }
  const ChunkSpec& spec() const { return spec_; }
  const ParamLayout& layout() const { return layout_; }
  // Rows of an activation exchanged with the neighbouring chunks: N/T with sequence parallelism.
  int64_t local_rows() const { return nl_; }
  int64_t activation_elems() const { return nl_ * cfg_.hidden; }

  // The flat parameter and gradient buffers (layout().total elements) the chunk reads and adds
  // into; owned by the caller (ZeRO decides where they live).
  void bind(T* params, T* grads) { params_ = params; grads_ = grads; }

  // Forward pass of micro-batch mb. First chunk: tokens[S*B]; others: input[N_l, C] (copied).
  // Last chunk: targets[S*B]; every token's loss is weighted by loss_scale (1 / tokens per step)
  // and the weighted sum over this micro-batch is returned (0 on other chunks), plus, with MoE,
  // the chunk's layers' auxiliary losses weighted by loss_scale x tokens (realrt/moe.h).
  // `dropout` names the micro-batch's masks (unused when both probabilities are 0).
  double forward(int64_t mb, const int32_t* tokens, const int32_t* targets, const T* input, T loss_scale,
                 const DropoutKey& dropout = {});
  // Output activation [N_l, C] of micro-batch mb (not on the last chunk).
  const T* output(int64_t mb) const;
  // Pipeline receive straight into the chunk's input activation, as Megatron keeps the received
  // tensor as the stage's input: returns micro-batch mb's input [N_l, C] (not on the first
  // chunk) for the caller to fill before forward(mb, ..., input = null, ...).
  T* prepare_input(int64_t mb);
  // Hands over micro-batch mb's output activation (not on the last chunk) for sending: the
  // backward pass does not need it, so it lives only until the send completes (Megatron's
  // deallocate_output_tensor). Empty when the chunk has no layers.
  Buf<T> take_output(int64_t mb);
  // Backward pass of micro-batch mb: dout[N_l, C] (ignored on the last chunk). Gradients are added
  // into the bound gradient buffer; returns dinput[N_l, C] (null on the first chunk), valid until
  // the next call. Frees the micro-batch's activations.
  const T* backward(int64_t mb, const T* dout);
  // The weighted aux losses (MoE) included in the last forward()'s return value.
  double aux_loss() const { return aux_loss_; }
  // Drops micro-batch mb's activations without a backward pass (evaluation only).
  void discard(int64_t mb) { acts_.erase(mb); }

 private:
  // Activations of one layer for one micro-batch (shapes with N = S*B, Nl = N/T under sequence
  // parallelism else N, CL = C/T, FL = F/T, NHL = NH/T).
  struct LayerActs {
    Buf<T> ln1;        // [Nl, C]  LayerNorm 1 output (sequence shard under SP; re-gathered in backward)
    Buf<T> ln1_mean;   // [Nl]
    Buf<T> ln1_rstd;   // [Nl]
    Buf<T> qkv;        // [N, 3*CL] q | k | v of this rank's heads
    Buf<T> att;        // [B, NHL, S, S] softmax probabilities (not with selective recompute)
    Buf<uint8_t> att_mask;  // [B, NHL, S, S] attention dropout keep mask (idem, p > 0)
    Buf<T> att_drop;   // [B, NHL, S, S] dropped-out probabilities, the input of P V (idem)
    Buf<T> atty;       // [N, CL]   attention output before the projection
    Buf<uint8_t> mask1;  // [Nl, C] hidden dropout keep mask after the attention projection
    Buf<T> res2;       // [Nl, C]  residual after attention
    Buf<T> ln2;        // [Nl, C]
    Buf<T> ln2_mean;   // [Nl]
    Buf<T> ln2_rstd;   // [Nl]
    Buf<T> fch;        // [N, FL]  fc output before GeLU
    Buf<T> fch_gelu;   // [N, FL]
    Buf<uint8_t> mask2;  // [Nl, C] hidden dropout keep mask after the MLP
    Buf<T> out;        // [Nl, C]  layer output (residual after the MLP)
    std::vector<MoeActs<T>> moe;  // MoE block, one per routing group (instead of fch, fch_gelu)
  };

  struct MbActs {
    Buf<T> in;                     // [Nl, C] chunk input (embedding output on the first chunk)
    Buf<uint8_t> emb_mask;         // [Nl, C] embedding dropout keep mask (first chunk, p > 0)
    DropoutKey key;
    std::vector<LayerActs> layers;
    Buf<T> lnf;                    // [Nl, C] final LayerNorm output (last chunk)
    Buf<T> lnf_mean, lnf_rstd;     // [Nl]
    Buf<T> dlogits;                // [N, V/T] d loss / d logits, computed in the forward pass
    std::vector<int32_t> tokens;   // [N] (first chunk)
  };
  const T* p(const std::string& name) const;
  T* g(const std::string& name);
  MoeParams<T> moe_params(int64_t l);
  struct LayerParams;
  LayerParams layer_params(int64_t l);
  void layer_forward(int64_t l, const T* in, LayerActs& a, const DropoutKey& key);
  void layer_backward(int64_t l, const T* in, LayerActs& a, const T* dout, T* din, const DropoutKey& key);
  // Masks of a hidden dropout site for this rank's rows (the sequence shard under SP).
  void hidden_mask(Buf<uint8_t>& keep, const DropoutKey& key, int64_t layer, DropoutSite site);
  // Attention dropout masks per (sample, local head): the kept ones, or regenerated into
  // head_mask[S, S] on demand.
  std::function<const uint8_t*(int64_t, int64_t)> attention_masks(const LayerActs& a, const DropoutKey& key,
                                                                    int64_t l, Buf<uint8_t>& head_mask);
  void release_layer_internals(LayerActs& a);
  // Tensor-parallel regions (Megatron's f/g and their sequence-parallel forms).
  void gather_rows(const T* local, T* full, int64_t width);       // [Nl,w] -> [N,w]; identity w/o SP
  // [N, C] for gather_rows: the all-gather buffer of sequence parallelism (Megatron's global
  // memory buffer, a communication buffer), else compute workspace.
  Buf<T> gather_buffer() const;
  void reduce_rows(T* partial, T* local, int64_t width);          // [N,w] partial -> [Nl,w] summed
  void all_reduce_if_tp(T* buf, int64_t n);

  GptConfig cfg_;
  ChunkSpec spec_;
  TpCollectives<T>* tp_;
  ParamLayout layout_;
  std::map<std::string, int64_t> offsets_;
  int64_t n_, nl_, cl_, fl_, vl_, nhl_, hd_;  // rows, local rows, local widths
  T* params_ = nullptr;
  T* grads_ = nullptr;
  std::map<int64_t, MbActs> acts_;
  Buf<T> dbuf_a_, dbuf_b_;
  std::unique_ptr<MoeBlock<T>> moe_;  // null when dense
  T loss_scale_ = 0;                  // of the current forward pass (aux weight: x group tokens)
  double aux_loss_ = 0;               // weighted aux losses of the current forward pass
};

extern template class GptChunk<float>;
extern template class GptChunk<double>;

}  // namespace monarch::realrt
