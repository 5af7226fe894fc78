// Mixture-of-experts MLP block of the reference GPT (replaces the dense MLP of every layer when
// num_experts > 1), with expert parallelism through an all-to-all interface so the model needs
// no MPI.
//
// Router (Megatron-Core TopKRouter / Mixtral): logits = x @ router_w [C, E] (no bias), softmax
// over the E experts, top-k experts per token (ties to the lower expert index), gates
// renormalised over the chosen k (g_k = p_k / sum of the k chosen p; Mixtral, and Megatron's
// default softmax-after-top-k). With top_k 1 the gate is always 1 and the router learns only
// through the auxiliary loss.
//
// Experts: MLPs like the dense one with its activation, [C, F_e] + bias ([C, 2 F_e] gated for
// swiglu), activation, [F_e, C] + bias.
//
// Capacity (GShard / Megatron drop-and-pad, drop policy "position"): the routing group is one
// micro-batch of N = S x B tokens of one data-parallel replica; each expert takes at most
// capacity = moe_expert_capacity(N, E, k, capacity_factor) assignments of the group, first come
// first served in token order (row n = s * B + b); later assignments are dropped (that expert
// contributes nothing to the token; the residual carries it). Gates are normalised before
// dropping. Because the group is a micro-batch and a micro-batch holds the same samples under
// every plan with the same micro_batch_size, drop decisions never depend on the sharding: the
// single-process run drops exactly what the distributed one drops.
//
// Expert parallelism over P ranks: rank r holds experts [r E/P, (r+1) E/P). Each rank packs
// its tokens into a padded [E, capacity, C] buffer (zeros in empty slots), an all-to-all sends
// each rank its experts' [E/P, capacity, C] block from every rank, the experts run on
// P x capacity rows each, and a second all-to-all brings the outputs back (combine). The
// backward pass does the same two all-to-alls on the gradients. So every all-to-all moves
// E x capacity x C elements per rank, fixed, and a layer does 2 forward + 2 backward (+2 when
// full recompute reruns the forward).
//
// Expert tensor parallelism over Q ranks (Megatron-Core's expert_tensor_parallel_size, "MoE
// parallel folding"): each expert's fc is column-parallel (F_e / Q columns and bias entries per
// rank) and its proj row-parallel (F_e / Q rows; the proj bias is replicated and added after the
// reduction). After the dispatch all-to-all the Q ranks of the expert-TP group all-gather their
// [E/P, P * cap, C] expert inputs (the gathered tensor has Q x E x cap x C elements), each runs
// its slice of every local expert on all Q x P x cap rows, and a reduce-scatter over the group
// sums the partial outputs and hands each rank back its own rows before the combine all-to-all.
// The backward pass mirrors it (all-gather of the output gradients, reduce-scatter of the
// partial input gradients). Every rank of the group computes the whole proj-bias gradient from
// the gathered rows.
//
// Sequence parallelism (tensor parallelism with tp ranks): each TP rank routes its own sequence
// shard of the micro-batch (Megatron's MoE layer takes the sequence-parallel hidden states), so
// the routing group is that shard, capacity comes from its N / tp tokens, and the aux loss is the
// shard's. The single-process reference reproduces it by routing the micro-batch in tp
// contiguous groups (GptChunk with ChunkSpec::moe_route_groups).
//
// Auxiliary load-balancing loss (Switch Transformer eq. 4, Megatron switch_load_balancing_loss):
//   aux = kMoeAuxLossCoeff * E / (N^2 k) * sum_e count_e * sum_n p[n, e]
// with count_e the group's top-k assignments to expert e before dropping (a constant: the
// gradient flows through the probabilities). It is added to the training objective weighted
// like the group's tokens (so the step loss is mean cross-entropy + mean over micro-batches of
// the layers' aux losses) and is part of the reported loss.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario.h"
#include "realrt/memory.h"

namespace monarch::realrt {

// Weight of the load-balancing loss: alpha = 1e-2 (Switch Transformer, Fedus et al. 2021,
// section 2.2; Megatron-LM's MoE examples use moe_aux_loss_coeff 1e-2).
inline constexpr double kMoeAuxLossCoeff = 1e-2;

// Collectives of the expert-parallel group. out[P * n] receives from rank r, at r * n, the
// block rank r sent from its in[me * n .. me * n + n).
template <typename T>
class EpCollectives {
 public:
  virtual ~EpCollectives() = default;
  virtual void all_to_all(const T* in, T* out, int64_t n) = 0;
};

// Collectives of the expert-tensor-parallel group (same signatures as TpCollectives).
template <typename T>
class EtpCollectives {
 public:
  virtual ~EtpCollectives() = default;
  // out[Q * n] = the ranks' in[n] in rank order.
  virtual void all_gather(const T* in, T* out, int64_t n) = 0;
  // out[n] = sum over ranks of in[rank * n .. rank * n + n).
  virtual void reduce_scatter(const T* in, T* out, int64_t n) = 0;
};

struct MoeDims {
  int64_t tokens = 0;     // N, tokens of one routing group (micro-batch)
  int64_t hidden = 0;     // C
  int64_t experts = 0;    // E
  int64_t top_k = 1;      // k
  int64_t ffn = 0;        // F_e
  int64_t capacity = 0;   // slots per expert per group
  int64_t ep_size = 1;    // P
  int64_t ep_rank = 0;
  int64_t etp_size = 1;   // Q, expert tensor parallelism
  int64_t etp_rank = 0;
  Activation activation = Activation::kGelu;  // the experts' MLP activation (swiglu: gated fc)
  int64_t local_experts() const { return experts / ep_size; }
  int64_t local_ffn() const { return ffn / etp_size; }  // F_e / Q
  // fc output columns on this rank: F_e / Q, or 2 F_e / Q for a gated (swiglu) expert.
  int64_t local_fc() const { return activation == Activation::kSwiglu ? 2 * local_ffn() : local_ffn(); }
  // Rows every local expert runs on: capacity slots from each of the Q x P ranks.
  int64_t expert_rows() const { return etp_size * ep_size * capacity; }
  // Elements of one expert's parameters on this rank: fc_w [C, FC], fc_b [FC], proj_w [F/Q, C],
  // proj_b [C], with FC = local_fc().
  int64_t expert_params() const { return hidden * local_fc() + local_fc() + local_ffn() * hidden + hidden; }
};

// Parameters of one layer's block: the router and the rank's local experts, back to back in the
// order fc_w, fc_b, proj_w, proj_b (expert_params() elements each).
template <typename T>
struct MoeParams {
  const T* router_w = nullptr;  // [C, E]
  T* drouter_w = nullptr;
  const T* experts = nullptr;   // [E/P, expert_params()]
  T* dexperts = nullptr;
};

// What the forward pass keeps for the backward pass.
template <typename T>
struct MoeActs {
  Buf<T> probs;                 // [N, E] router probabilities
  std::vector<int32_t> expert;  // [N, k] chosen experts
  std::vector<int32_t> slot;    // [N, k] slot in the expert's capacity, -1 dropped
  Buf<T> gate;                  // [N, k] renormalised gates
  std::vector<int64_t> count;   // [E] assignments before dropping
  Buf<T> xin;                   // [E/P, Q * P * cap, C] expert inputs (padded)
  Buf<T> fch, fch_gelu;         // [E/P, Q * P * cap, F/Q]
  Buf<T> y;                     // [E, cap, C] expert outputs back at the token's rank
  T aux_weight = 0;             // weight of the aux loss in the objective
  void release();
};

template <typename T>
class MoeBlock {
 public:
  // ep may be null when dims.ep_size == 1, etp when dims.etp_size == 1.
  MoeBlock(const MoeDims& dims, EpCollectives<T>* ep, EtpCollectives<T>* etp = nullptr);
  const MoeDims& dims() const { return d_; }

  // out[N, C] = sum over the token's kept experts of gate x expert(x[N, C]). Returns the
  // auxiliary loss of the group times aux_weight.
  double forward(const MoeParams<T>& w, const T* x, T* out, MoeActs<T>& a, T aux_weight);
  // dx[N, C] = d objective / d x (overwritten) given dout[N, C]; adds the router's and the local
  // experts' gradients into w.drouter_w / w.dexperts.
  void backward(const MoeParams<T>& w, const T* x, const T* dout, T* dx, MoeActs<T>& a);

 private:
  // [E, cap, C] per destination <-> [E/P, P * cap, C] per local expert.
  void exchange_to_experts(const T* by_expert, T* by_local);
  void exchange_to_tokens(const T* by_local, T* by_expert);
  // [E/P, P * cap, C] of this rank -> [E/P, Q * P * cap, C] of the expert-TP group (all-gather).
  void gather_rows(const T* mine, T* all);
  // [E/P, Q * P * cap, C] partial sums -> [E/P, P * cap, C] summed over the group, this rank's
  // rows (reduce-scatter).
  void reduce_scatter_rows(const T* partial, T* mine);
  MoeDims d_;
  EpCollectives<T>* ep_;
  EtpCollectives<T>* etp_;
};

extern template class MoeBlock<float>;
extern template class MoeBlock<double>;

}  // namespace monarch::realrt
