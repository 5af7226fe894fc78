// Per-layer forward/backward compute and communication of a transformer (dense and MoE) under a plan.
#include "core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/collectives.h"
#include "core/framework_rules.h"
#include "core/pipeline_schedule.h"
#include "core/plan_warnings.h"
#include "core/profile.h"
#include "core/units.h"
#include "core/cost_model_internal.h"

namespace monarch {

using namespace cost_detail;

// ============================================================================ layer costs

namespace {

// Host floor of eager PyTorch: every op a layer runs costs the host its Python call, the ATen
// dispatcher, autograd recording and cudaLaunchKernel before its kernel reaches the stream,
// ~5-25 us per op (PyTorch dispatch chain: ~1 us Python, ~1 us pybind11, 1-3 us autograd, 1-2 us
// dispatcher, 1-5 us backend selection, 1-3 us cudaLaunchKernel; Kineto traces of Megatron-LM
// layers show 10-20 us CPU per aten op on A100 hosts). When a layer's kernels run faster than
// that, the GPU idles between them: a pass takes max(GPU time, host time) (the host runs ahead
// while long kernels queue, so only the excess shows), its exposed TP collectives included
// (`hide_comm_under_host`). With training.cuda_launch_blocking every launch waits for its
// kernel, so the host never runs ahead: a pass takes GPU time + host time.
// The value is measured: Megatron-LM's layer (its Python autograd Functions, fused kernels, RNG
// tracker and checkpointed recompute) dispatched on an H200 node's host on CUDA tensors too small
// to cost the GPU anything (tools/host_floor_bench.py --cuda, PyTorch 2.11; tests/data/gpu/
// h200-microbench.json) takes 3.33 ms for forward, recomputed forward and backward, 144 ops
// (36 + 36 + 72): 23.2 us per op. Two later runs on the same node took 3.37 and 3.81 ms (a host's
// own spread, ~13%; tests/data/gpu/h200-microbench-4.json). vTrain's single-node A100 runs
// (Megatron-DeepSpeed, tests/data/validation/vtrain-single.json), host-bound at micro-batch 1 and
// TP 1-4, bear it out: their mean signed error is -2.3%, -2.5% and +2.5% at TP 1, 2 and 4
// (docs/analytical_model.md, "Host floor").
constexpr double kEagerHostPerOp_s = 23.2e-6;
// PyTorch ops one transformer layer dispatches, counted in Megatron-LM's ParallelTransformerLayer
// (megatron/model/transformer.py, the Megatron-DeepSpeed fork alike) with the fused LayerNorm,
// scale-mask-softmax, bias-GeLU and bias-dropout-add kernels: forward, LayerNorm; QKV linear,
// view, split; attention: 2 views, empty buffer, baddbmm, view, fused softmax, RNG-tracker fork,
// dropout, 2 views, bmm, view, permute, contiguous, view; projection linear; TP all-reduce;
// bias-dropout-add (bias add, dropout, residual add); LayerNorm; fc1 linear, bias-GeLU, fc2
// linear, TP all-reduce, bias-dropout-add; module calls (8 nn.Module __call__ with hooks) -> 36.
constexpr double kLayerForwardHostOps = 36.0;
// Backward: about two ops per forward op. Megatron's linear layers, fused LayerNorm, fused
// softmax, bias-GeLU, the TP region copies and the checkpointed block are Python
// torch.autograd.Functions, so their backward runs Python again, and each linear layer's backward
// issues an input-gradient GEMM, a weight-gradient GEMM (accumulating into main_grad) and a bias
// gradient reduction; the views get view-backward nodes; 12 parameter tensors (4 weights,
// 4 biases, 2 LayerNorms x 2) get gradient-accumulation ops -> 72.
constexpr double kLayerBackwardHostOps = 72.0;
// A layer captured as CUDA graphs (training.cuda_graphs; Transformer Engine's
// make_graphed_callables, which Megatron-Core's --cuda-graph-impl transformer_engine calls per
// layer, as torch.cuda.make_graphed_callables does) runs as one autograd Function: forward, the
// Function's apply, a copy of the new input into the graph's static input, the forward graph's
// replay; backward, the autograd node, a copy of the incoming gradient into the static gradient,
// the backward graph's replay (transformer_engine/pytorch/graph.py, Graphed.forward / backward).
// Three host ops per pass, at the eager per-op cost.
constexpr double kGraphedLayerForwardHostOps = 3.0;
constexpr double kGraphedLayerBackwardHostOps = 3.0;
// FlashAttention backward does 5 matmuls (recomputing the scores) for the forward's 2.
constexpr double kFlashBackwardFlopsRatio = 2.5;
// Context-parallel ring attention (Transformer Engine): per ring step the partial results
// are merged in fp32, one read and one write of 4 bytes per element.
constexpr double kCpMergeBytesPerElement = 8.0;
// Causal attention: flash kernels skip the tiles above the diagonal (half the work).
constexpr double kCausalWorkFraction = 0.5;
// Elementwise backward kernels read the saved input and the incoming gradient and write the
// outgoing gradient: about twice the forward traffic.
constexpr double kBackwardElementwiseFactor = 2.0;
// Fused vocab-parallel cross entropy per logit element: forward reads the 16-bit logits and
// makes fp32 max/exp/sum passes (2 + 3 x 4 bytes); backward reads fp32 softmax and writes the
// gradient (4 + 2 + 4 bytes). Megatron-Core's fused_vocab_parallel_cross_entropy
// (megatron/core/fusions/fused_cross_entropy.py, --cross-entropy-loss-fusion).
constexpr double kLossForwardBytesPerLogit = 14.0;
constexpr double kLossBackwardBytesPerLogit = 10.0;
// The unfused vocab-parallel cross entropy on an fp32 copy of the logits: Megatron-DeepSpeed's
// loss (GPTModelPipe's CrossEntropy, megatron/model/gpt_model.py) and Megatron-Core's without
// --cross-entropy-loss-fusion (Megatron-LM's default; megatron/core/tensor_parallel/
// cross_entropy.py, whose calculate_logits_max casts to float) run the same steps, one kernel
// per step, most of them in place: forward, the cast (read 2, write 4 bytes), the max (read 4),
// subtracting it (read and write 4), exp (read and write 4), the sum (read 4) and the division
// that leaves the softmax for the backward (read and write 4); backward, scaling the softmax by
// the incoming gradient (read and write 4) and the cast's backward to 16-bit (read 4, write 2).
constexpr double kUnfusedLossForwardBytesPerLogit = 38.0;
constexpr double kUnfusedLossBackwardBytesPerLogit = 14.0;
// HBM bytes per parameter and micro-batch of DeepSpeed's BF16_Optimizer gradient accumulation
// (runs_deepspeed_bf16_optimizer, core/framework_rules.h): hp_grad.add_(lp.grad.to(fp32)) reads
// the 2-byte gradient and writes its 4-byte cast, then reads the cast and the 4-byte
// accumulator and writes the accumulator. Megatron accumulates inside the weight-gradient GEMM
// (gradient_accumulation_fusion into main_grad), FSDP2 in its reduce-scatter copy-in.
constexpr double kBf16OptimizerAccumulateBytesPerParam = 2.0 + 4.0 + 4.0 + 4.0 + 4.0;
// torchtitan's loss, F.cross_entropy on the logits cast to fp32 (torchtitan's
// components/loss.py cross_entropy_loss: pred.flatten(0, 1).float()): the cast (read 2, write
// 4 bytes), log-softmax in PyTorch's row kernel (reads for the max, the sum of exponentials and
// the output, writes the output: 16) and the NLL gather; backward, the NLL gradient written
// into zeros (4), log-softmax's backward (reads the gradient for its row sum, then the gradient
// and the output, writes: 16) and the cast's backward (read 4, write 2).
constexpr double kTorchLossForwardBytesPerLogit = 22.0;
constexpr double kTorchLossBackwardBytesPerLogit = 26.0;

// --- torchtitan's transformer block in eager PyTorch (training.compile off, its default;
// torchtitan/models/llama3/model.py and the RMSNorm of torchtitan/models/norms.py). Each op is its
// own kernel and a pass over HBM, where Transformer Engine's and Megatron's fused kernels make
// one. Bytes per element of the tensor the op works on, 16-bit activations:
// - RMSNorm, `(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight`:
//   forward the cast (read 2, write 4), pow (8), mean (4), the scaling multiply (8), the cast
//   back (6) and the weight multiply (4): 36 (fused: 4); backward through the same autograd
//   graph: weight multiply and its weight-gradient reduction (12), the casts (6 + 6), the
//   scaling multiply's two gradients and the row sum (24), mean's expanded gradient (4), pow's
//   (12) and the sum of the two gradients of x (12): 76 (fused: 8).
constexpr double kEagerNormForwardBytesPerElement = 36.0;
constexpr double kEagerNormBackwardBytesPerElement = 76.0;
constexpr double kEagerNormForwardKernels = 7.0;
constexpr double kEagerNormBackwardKernels = 10.0;
// - LayerNorm (gpt), nn.LayerNorm: one ATen kernel forward (native_layer_norm: read x, write y,
//   fp32 mean and rstd per row) and, backward, native_layer_norm_backward's input-gradient kernel
//   and its weight- and bias-gradient reduction (aten/src/ATen/native/cuda/layer_norm_kernel.cu):
//   the fused kernel's bytes, one more launch backward.
constexpr double kEagerLayerNormBackwardKernels = 2.0;
// - rotary embedding on q and k, apply_rotary_emb: cast to fp32 (read 2, write 4), complex
//   multiply by freqs_cis (read 4, write 4), cast back (read 4, write 2): 20 forward, the same
//   three kernels backward (fused: 4 and 8).
constexpr double kEagerRopeForwardBytesPerElement = 20.0;
constexpr double kEagerRopeBackwardBytesPerElement = 20.0;
constexpr double kEagerRopeKernelsPerTensor = 3.0;
// - SwiGLU, `w2(F.silu(w1(x)) * w3(x))`: silu (read 2, write 2) and the product (read 4,
//   write 2): 10 per element of the FFN width (fused: 6); backward the product's two
//   gradients (12) and silu's (6): 18 (fused: 12).
constexpr double kEagerSwigluForwardBytesPerElement = 10.0;
constexpr double kEagerSwigluBackwardBytesPerElement = 18.0;
// PyTorch's scaled_dot_product_attention picks FlashAttention-2 first by its fixed backend
// priority, cuDNN's attention only when asked (pytorch/pytorch#142132, 2024-12: the default SDPA
// at 329.5 TFLOP/s against cuDNN's 631 on H100, batch 1, 24 heads, 4608 tokens, head dim 128,
// forward; transformers PR 48163: cuDNN 1.7-2.3x faster on Hopper for training shapes). On
// Hopper that is 0.333 of the bf16 peak forward where FlashAttention-3 / cuDNN reach 0.66; the
// backward keeps FlashAttention-2's backward-to-forward ratio on A100 (0.53 / 0.64, Dao 2023):
// 0.276. On Ampere FlashAttention-2 is what the A100 profile measures already.
constexpr double kSdpaFlash2HopperForwardEfficiency = 0.333;
// Megatron-LM's fused scale-mask-softmax runs only when the attention batches (micro-batch x
// local heads) are a multiple of 4, the CUDA kernel's batches per block (FusedScaleMaskSoftmax's
// kernel check, megatron/model/fused_softmax.py; the copy in vTrain's src/model/fused_softmax.py
// reads `attn_batch_size % 4 == 0`). Otherwise it runs op by op in fp32 (softmax_in_fp32, on with
// fp16's query-key layer scaling): forward the cast (read 2, write 4 bytes per score), the scale
// (8), the causal masked_fill (read 4 and the 1-byte mask, write 4), softmax (8) and the cast back
// (6): 37 against the fused 4; backward the same five autograd nodes: 41 against the fused 6.
// Four more ops each way on the host.
constexpr int64_t kFusedSoftmaxBatchesPerBlock = 4;
constexpr double kUnfusedSoftmaxForwardBytesPerScore = 37.0;
constexpr double kUnfusedSoftmaxBackwardBytesPerScore = 41.0;
constexpr double kUnfusedSoftmaxExtraHostOps = 4.0;
constexpr double kSdpaFlash2HopperBackwardEfficiency = 0.333 * 0.53 / 0.64;
// Tri Dao's flash-attn package on Hopper (model.attention_kernel "flash2", Transformer Engine's
// FlashAttention backend): cuDNN's fused attention runs forward + backward 1.5877x as fast at 8192
// tokens (batch 2, 32 query and 4 KV heads, head dim 128, causal) and 1.5968x at 2048 (batch 2, 16
// heads, head dim 128, causal) on an H100 SXM (Transformer Engine docs/examples/attention/
// attention.ipynb at commit 88c0c9143, August 2024: flash-attn 2.4.2 against cuDNN 9.x). The same
// ratio at both lengths: the package takes the profile's cuDNN rates divided by it, both passes
// (no split is published). PyTorch SDPA's own FlashAttention-2 build runs slower on Hopper
// (kSdpaFlash2Hopper*, 1.7-1.8x below cuDNN on the H200 here, h200-microbench.json).
constexpr double kCudnnOverFlashAttnHopper = (1.5877 + 1.5968) / 2.0;
// The first generation of fused attention against FlashAttention-2 on the same GPU, by pass
// (Dao 2023, "FlashAttention-2", section 4.1, A100, head dim 64 and 128, causal or not, 512-16k
// tokens): FlashAttention-2 is "around 2x faster than FlashAttention" (FlashAttention-1's CUDA
// kernels, model.attention_kernel "flash1") in both passes, and "around 1.3-1.5x faster than
// FlashAttention in Triton in the forward pass and around 2x faster in the backward pass" (the
// Triton port, "flash1-triton"; the middle of the forward's range).
constexpr double kFlash1RateOfFlash2 = 0.5;
constexpr double kFlash1TritonForwardRateOfFlash2 = 1.0 / 1.4;
constexpr double kFlash1TritonBackwardRateOfFlash2 = 0.5;
// Fp8 (Transformer Engine): each fp8 GEMM operand is cast (read 16-bit, write fp8) and, for
// the wgrad/dgrad GEMMs on Hopper, transposed (write fp8 again): 2 + 1 + 1 bytes per element.
constexpr double kFp8CastBytesPerElement = 4.0;
// Of those, the transposed copy (the wgrad GEMM's column-major operand).
constexpr double kFp8TransposeBytesPerElement = 1.0;
// Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) runs one cuBLAS GEMM per
// local expert, expert i on compute stream i mod 4 (nvte_multi_stream_cublas_gemm,
// common/gemm/cublaslt_gemm.cu; get_num_compute_streams() returns 4, common/util/
// multi_stream.cpp; TE 2.7): four experts' GEMMs share the SMs at a time, each its own kernel
// with its own wave quantization. Its fp8 inputs and output gradients are quantized per expert
// (split_quantize), except under delayed scaling, whose casts TE fuses into one
// multi-tensor cast-transpose kernel (multi_tensor_quantize_impl, pytorch/csrc/extensions/
// cast.cpp: "only have fused kernel for FP8 delayed scaling").
// DeepSpeed's Experts module runs its experts one after another (deepspeed/moe/experts.py).
constexpr double kTeGroupedGemmStreams = 4.0;
// An fp8 element (E4M3 forward, E5M2 gradients): 1 byte.
constexpr double kFp8BytesPerElement = 1.0;
// Vocabulary-parallel cross-entropy reduces in fp32: Megatron-LM's _VocabParallelCrossEntropy
// casts the logits to float before its all-reduces of the max logit, the target logit and the
// sum of exponentials (megatron/core/tensor_parallel/cross_entropy.py).
constexpr double kLossReduceBytesPerToken = 4.0;
// Zeroing the fp32 gradient buffer each iteration (write 4 bytes per parameter held).
constexpr double kGradZeroBytesPerParam = 4.0;
// TP communication overlap (Transformer Engine userbuffers, Megatron --tp-comm-overlap, NeMo
// tp_comm_overlap): the overlapped collectives run as kernels that hold SMs while the GEMM they
// hide behind runs on the rest. SMs per overlapped GEMM in NeMo's / Megatron-Bridge's H100
// configs (userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192 in
// nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py): bulk overlaps in the
// backward 4, 24, 2 and 4, ring-exchange all-gathers on the copy engines (0-1): 4.5 on average
// over the eight overlapped GEMMs other than the two below.
constexpr double kTpOverlapCommSms = 4.5;
// The pipelined reduce-scatters after the projection and fc2 (Transformer Engine's "pipeline"
// method) set an SM margin: their GEMM runs on the SMs less num_sm for its whole length
// (set_sm_margin; transformer_engine/pytorch/module/base.py initialize_ub defaults: num_sm 16,
// set_sm_margin for every method but ring_exchange; NeMo's H100 configs 24 and 16, GPT-3
// 175B's 24 and 20).
constexpr double kTpOverlapPipelineSms = 16.0;

// --- Mixture-of-experts layers (Megatron-Core MoELayer: TopKRouter, MoEAlltoAllTokenDispatcher,
// TEGroupedMLP; megatron/core/transformer/moe/).
//
// Dropless load imbalance: tokens routed to the busiest expert / the mean per expert, within
// one micro-batch, once the auxiliary load-balancing loss (coefficient 1e-2, Megatron's
// recommendation) has settled. Measured: Mixtral 8x7B routes ~10-16% of a domain's tokens to
// each of its 8 experts against the uniform 12.5% (Jiang et al. 2024, Mixtral of Experts,
// arXiv:2401.04088, Fig. 7: max / mean ~1.3 per layer and domain); aux-loss-balanced 64-expert
// models keep the busiest expert at ~1.5-1.7x the mean over whole validation sets (Wang et al.
// 2024, Auxiliary-Loss-Free Load Balancing, arXiv:2408.15664, MaxVio ~0.5-0.7). Megatron-Core's
// MoE README warns of worse imbalance in the first few hundred steps. 1.3: converged
// coarse-grained routing, the regime of published throughput runs.
constexpr double kMoeExpertLoadImbalance = 1.3;
// Small kernels of one MoE layer's router and dispatcher per forward (and again per backward),
// with --moe-permute-fusion and without router fusion, counted from router.py and
// token_dispatcher.py (Megatron-Core 0.9-0.12): router logits cast to fp32, softmax, top-k,
// probability gather, aux loss (token counts, mean probabilities, product, sum, scale), z-loss;
// dispatcher: tokens per expert, split sizes, fused permute, chunk sort, fused unpermute,
// probability scaling. Each costs at least one kernel gap (kKernelGap_s).
constexpr double kMoeRouterDispatchKernels = 20.0;
// Dropless dispatch sizes its all-to-all and the grouped GEMM's m_splits on the host:
// MoEAlltoAllTokenDispatcher copies the per-expert token counts to the CPU and synchronizes the
// stream once per forward. The GPU queue drains, and idles until the host has dispatched the
// next kernels (PyTorch eager dispatch and launch of the all-to-all and the permutation,
// ~30-50 us between the sync and the next kernel in Nsight Systems traces of MoE layers).
constexpr double kMoeHostSync_s = 40e-6;

// How much longer the busiest rank of the expert-parallel group works than the mean, for one
// MoE layer. Drop-and-pad routing gives every expert exactly its capacity (1). Dropless routing
// lets the busiest expert's rank pace the all-to-all and the expert GEMMs; a rank holds E/ep
// experts whose excess loads add up like independent deviations, so its relative excess falls
// as 1/sqrt(E/ep). With ep == 1 no rank waits for another, nor with the router's forced load
// balancing (its random logits spread the tokens evenly).
double moe_rank_imbalance(const ModelShape& m, const Plan& p) {
  if (!m.moe() || !m.dropless || m.force_balanced || p.ep <= 1) return 1.0;
  const double local_experts = static_cast<double>(m.experts) / static_cast<double>(p.ep);
  return 1.0 + (kMoeExpertLoadImbalance - 1.0) / std::sqrt(local_experts);
}

}  // namespace

namespace cost_detail {

namespace {

// Hopper's profiles hold cuDNN's fused attention, which FlashAttention-2's kernels do not reach.
bool profile_holds_cudnn_hopper_attention(const Ctx& c) {
  const std::string_view kind = c.prof->kind;
  return kind == "H100" || kind == "H200";
}

// FlashAttention-2's rates on this GPU: the profile's on Ampere (what the A100 profile measures),
// PyTorch SDPA's FlashAttention-2 on Hopper (whose profiles hold cuDNN's faster kernels).
void use_flash2_rates(Ctx& c) {
  if (profile_holds_cudnn_hopper_attention(c)) {
    c.flash_forward_efficiency = kSdpaFlash2HopperForwardEfficiency;
    c.flash_backward_efficiency = kSdpaFlash2HopperBackwardEfficiency;
    c.attention_kernel = &kFlash2Attention;
  }
}

// The unfused vocab-parallel cross entropy on an fp32 copy of the logits (kUnfusedLoss*).
void use_unfused_loss(Ctx& c) {
  c.loss_forward_bytes_per_logit = kUnfusedLossForwardBytesPerLogit;
  c.loss_backward_bytes_per_logit = kUnfusedLossBackwardBytesPerLogit;
}

// Tri Dao's flash-attn package, Transformer Engine's FlashAttention backend: on Hopper the
// profile's cuDNN rates over kCudnnOverFlashAttnHopper; elsewhere the profile's (FlashAttention-2
// on Ampere; Blackwell's not measured).
void use_flash_attn_package_rates(Ctx& c) {
  if (profile_holds_cudnn_hopper_attention(c)) {
    c.flash_forward_efficiency = c.prof->flash_forward_efficiency / kCudnnOverFlashAttnHopper;
    c.flash_backward_efficiency = c.prof->flash_backward_efficiency / kCudnnOverFlashAttnHopper;
    c.attention_kernel = &kFlashAttnPackageHopper;
  }
}

}  // namespace

Ctx make_ctx(const Scenario& s) {
  Ctx c;
  c.gpu = &s.cluster.gpu;
  c.prof = &gpu_profile(s.cluster.gpu);
  c.prec = effective_precision(s.cluster.gpu, s.training.precision);
  c.framework = s.training.framework;
  c.training_precision = s.training.precision;
  c.fp8_recipe = fp8_recipe(s.training);
  c.prec16 = c.prec == Precision::kFp8 ? Precision::kBf16 : c.prec;
  c.e = bytes_per_element(s.training.precision);
  // The rates the layer's kernels run at: under a power cap the clock is lower.
  c.power_clock = power_limit_clock_factor(s.cluster.gpu);
  c.peak_gemm = peak_tflops(s.cluster.gpu, c.prec) * kTera * c.power_clock;
  c.peak16 = peak_tflops(s.cluster.gpu, c.prec16) * kTera * c.power_clock;
  c.hbm = hbm_bytes_per_s(s.cluster.gpu, *c.prof);
  c.cal = profile_of(s.cluster.gpu);
  c.graphed_layers = s.training.cuda_graphs && cuda_graphs_capture_whole_layer(s.model);
  c.flash_forward_efficiency = c.prof->flash_forward_efficiency;
  c.flash_backward_efficiency = c.prof->flash_backward_efficiency;
  c.attention_kernel = c.prof->attention_kernel;
  c.loss_forward_bytes_per_logit = kLossForwardBytesPerLogit;  // fused (torch.compile fuses torchtitan's too)
  c.loss_backward_bytes_per_logit = kLossBackwardBytesPerLogit;
  switch (s.training.framework) {
    case Framework::kMegatron:
      c.te_userbuffers = true;
      c.expert_gemms_at_once = kTeGroupedGemmStreams;
      if (!s.training.cross_entropy_loss_fusion.value_or(true)) use_unfused_loss(c);
      break;
    case Framework::kDeepspeed:
      use_unfused_loss(c);
      c.expert_gemms_at_once = 1.0;
      // Megatron-DeepSpeed has no Transformer Engine attention: its fused attention is the
      // flash-attn package (--use-flash-attn-v2: ParallelAttention's flash path calls
      // flash_attn_varlen_func, megatron/model/transformer.py), so on Hopper "flash" runs the
      // package, not cuDNN's kernels.
      use_flash_attn_package_rates(c);
      break;
    case Framework::kTorchtitan: {
      c.fsdp2_copies = true;
      c.grad_reduce_bytes = grad_reduce_bytes_per_param(s.training);
      c.fp8_params = s.training.precision == Precision::kFp8;
      c.eager_block = !s.training.compile;
      c.separate_projections = true;
      if (c.eager_block) {
        c.loss_forward_bytes_per_logit = kTorchLossForwardBytesPerLogit;
        c.loss_backward_bytes_per_logit = kTorchLossBackwardBytesPerLogit;
      }
      use_flash2_rates(c);
      break;
    }
  }
  if (s.model.attention_kernel == AttentionKernel::kFlash2) use_flash_attn_package_rates(c);
  if (s.model.attention_kernel == AttentionKernel::kFlash1 || s.model.attention_kernel == AttentionKernel::kFlash1Triton) {
    const bool triton = s.model.attention_kernel == AttentionKernel::kFlash1Triton;
    use_flash2_rates(c);
    c.flash_forward_efficiency *= triton ? kFlash1TritonForwardRateOfFlash2 : kFlash1RateOfFlash2;
    c.flash_backward_efficiency *= triton ? kFlash1TritonBackwardRateOfFlash2 : kFlash1RateOfFlash2;
  }
  return c;
}

}  // namespace cost_detail

namespace {

// One GEMM (m x k) . (k x n), `batch` times, in precision p. Operand bytes per element `ein`,
// output `eout`; `c_extra_bytes` adds accumulation traffic (fp32 main_grad read + write).
Op gemm(const Ctx& c, Precision p, double m, double n, double k, double batch, double ein, double eout,
        double c_extra_bytes = 0) {
  Op o;
  o.flops = 2.0 * m * n * k * batch;
  o.bytes = batch * (ein * (m * k + k * n) + eout * m * n) + c_extra_bytes;
  double rate = profile_flops_per_s(c.cal, *c.prof, p, m * batch, n, k) * c.power_clock;  // batched: one taller GEMM
  if (!(rate > 0)) rate = (p == c.prec ? c.peak_gemm : c.peak16) * gemm_eff(*c.prof, p, m, n, k, batch);
  o.s = std::max(o.flops / rate, o.bytes / c.hbm) + kKernelGap_s;
  return o;
}

Op elementwise(const Ctx& c, double bytes) {
  Op o;
  o.bytes = bytes;
  o.s = bytes / c.hbm + kKernelGap_s;
  return o;
}

// Forward GEMM and its backward pair (dgrad + wgrad accumulating into fp32 main_grad).
struct GemmCost {
  Op fwd, bwd;
};
// The input-gradient GEMM of a linear layer (m x k) . (k x n): dX = dY W^T, m x k.
Op linear_dgrad(const Ctx& c, double m, double n, double k, bool fp8_ok, double batch = 1.0) {
  const Precision p = fp8_ok ? c.prec : c.prec16;
  return gemm(c, p, m, k, n, batch, p == Precision::kFp8 ? 1.0 : c.e, c.e);
}

// Rows of a linear layer's input that its own fp8 cast reads and writes, and rows of the
// transposed copy it makes for the wgrad GEMM (fp8 only): both m unless the input is cast once
// for several layers (InputCast::shared) or before a gather (InputCast::before_gather).
struct InputCast {
  double cast_rows = -1, transpose_rows = -1;  // < 0: all m rows
  static InputCast shared() { return {0, 0}; }
  static InputCast before_gather(double shard_rows) { return {shard_rows, -1}; }
};

GemmCost sum_of(GemmCost a, const GemmCost& b) {
  a.fwd += b.fwd;
  a.bwd += b.bwd;
  return a;
}
GemmCost sum_of(const GemmCost& a, const GemmCost& b, const GemmCost& c) { return sum_of(sum_of(a, b), c); }

// The GEMMs of a linear layer, `batch` times: forward, input gradient, and weight gradient
// into fp32 main_grad.
GemmCost linear_gemms(const Ctx& c, double m, double n, double k, bool fp8_ok, double batch) {
  const Precision p = fp8_ok ? c.prec : c.prec16;
  const double ein = p == Precision::kFp8 ? 1.0 : c.e;
  GemmCost g;
  g.fwd = gemm(c, p, m, n, k, batch, ein, c.e);
  g.bwd = linear_dgrad(c, m, n, k, fp8_ok, batch);
  g.bwd += gemm(c, p, k, n, m, batch, ein, 4.0, batch * 4.0 * k * n);  // wgrad into fp32 main_grad
  return g;
}

// Quantizing `tensors` tensors to fp8, `elements` 16-bit elements in all, writing `cast_bytes`
// in all (kFp8CastBytesPerElement per element, less a transposed copy not made). Delayed,
// MXFP8 and block scaling cast each tensor in one kernel (the scale comes from the amax history
// or is found inside the kernel's block); per-tensor current scaling runs an amax pass over the
// 16-bit input first, then a kernel that turns the amax into the scale, then the cast
// (Float8CurrentScalingQuantizer::quantize_impl, transformer_engine/pytorch/csrc/quantizer.cpp,
// TE 2.7: nvte_compute_amax, nvte_compute_scale_from_amax, nvte_quantize_v2).
// `amax_found`: the kernel that wrote the input also found its amax (a Transformer Engine norm,
// te_norm_input_cast), so current scaling runs only the scale and the cast.
constexpr double kCurrentScalingKernelsPerCast = 3.0;
Op fp8_quantize(const Ctx& c, double elements, double cast_bytes, double tensors, bool amax_found = false) {
  double kernels = tensors, bytes = cast_bytes;
  if (c.fp8_recipe == Fp8Recipe::kTensorwise) {
    kernels *= kCurrentScalingKernelsPerCast - (amax_found ? 1.0 : 0.0);
    if (!amax_found) bytes += c.e * elements;  // the amax pass reads the input once more
  }
  return Op{bytes / c.hbm + kernels * kKernelGap_s, 0, bytes};
}

// Rows of a linear layer's output gradient that its backward quantizes: all m in one
// cast-transpose, or, where Transformer Engine gathers the gradient of a row-parallel linear
// under sequence parallelism (grad_output_preprocess, module/base.py, TE 2.7), the rank's shard
// before the all-gather. Per-tensor scaled fp8 (delayed, tensorwise) is quantized and gathered
// row-wise only (supports_only_rowwise_all_gather), and the weight gradient's transposed copy is
// made from the gathered m rows (grad_output.update_usage(columnwise_usage=True),
// module/linear.py): a transpose kernel reading and writing 1 byte per element. MXFP8 and block
// scaling quantize both copies of the shard in one cast and gather them.
struct GradCast {
  double shard_rows = -1;  // < 0: no gather, all m rows cast in one pass
};

// Transposing `tensors` fp8 tensors of `elements` in all (the column-wise copy a weight-gradient
// GEMM reads, made from fp8 rows): read and write 1 byte per element, one kernel each.
Op fp8_transpose(const Ctx& c, double elements, double tensors) {
  const double bytes = 2.0 * kFp8BytesPerElement * elements;
  return Op{bytes / c.hbm + tensors * kKernelGap_s, 0, bytes};
}

// A linear layer's fp8 casts, added to its GEMMs: the forward casts its input (and makes the
// transposed copy the weight gradient reads), the backward its output gradient. `tensors`
// separately quantized tensors make up each (one per expert of a grouped linear).
void add_fp8_casts(const Ctx& c, double m, double n, double k, double batch, InputCast cast, double tensors, GemmCost& g,
                   GradCast grad = {}) {
  const double cast_rows = cast.cast_rows < 0 ? m : cast.cast_rows;
  const double transpose_rows = cast.transpose_rows < 0 ? m : cast.transpose_rows;
  const double input_bytes = (kFp8CastBytesPerElement - kFp8TransposeBytesPerElement) * cast_rows +
                             kFp8TransposeBytesPerElement * transpose_rows;
  if (input_bytes > 0) g.fwd += fp8_quantize(c, cast_rows * k * batch, input_bytes * k * batch, tensors);
  if (grad.shard_rows < 0) {
    g.bwd += fp8_quantize(c, m * n * batch, kFp8CastBytesPerElement * m * n * batch, tensors);
    return;
  }
  const double shard = grad.shard_rows * n * batch;
  if (c.fp8_recipe == Fp8Recipe::kMxfp8 || c.fp8_recipe == Fp8Recipe::kBlockwise) {
    g.bwd += fp8_quantize(c, shard, kFp8CastBytesPerElement * shard, tensors);
    return;
  }
  g.bwd += fp8_quantize(c, shard, (kFp8CastBytesPerElement - kFp8TransposeBytesPerElement) * shard, tensors);
  g.bwd += fp8_transpose(c, m * n * batch, tensors);
}

GemmCost linear(const Ctx& c, double m, double n, double k, bool fp8_ok, double batch = 1.0, InputCast cast = {},
                GradCast grad = {}) {
  GemmCost g = linear_gemms(c, m, n, k, fp8_ok, batch);
  if (fp8_ok && c.prec == Precision::kFp8) add_fp8_casts(c, m, n, k, batch, cast, 1.0, g, grad);
  return g;
}

// Whether the norm before QKV and the dense fc1 quantizes its own output: Megatron-Core's
// linear_qkv and linear_fc1 are Transformer Engine's LayerNormLinear / LayerNormMLP
// (TELayerNormColumnParallelLinear), which hand their fp8 quantizer to the norm.
bool te_norm_quantizes_input(const Ctx& c) {
  return c.prec == Precision::kFp8 && c.framework == Framework::kMegatron && !c.separate_projections;
}

// The fp8 input of a Transformer Engine norm-linear (te_norm_quantizes_input), T rows of k
// elements, beyond the norm's own pass (transformer_engine/pytorch/csrc/extensions/
// normalization.cpp layernorm_fwd / rmsnorm_fwd, module/layernorm_linear.py; TE 2.7):
// - delayed scaling: the norm kernel writes the fp8 rows itself ("Always used fused kernel for
//   FP8 delayed scaling"): no cast (the norm's 1-byte write is norm_fp8_write_saved_bytes);
// - per-tensor current scaling: the norm writes 16 bits and their amax in one kernel
//   (create_hp_tensor_with_amax), then quantize_with_amax turns the amax into the scale and
//   casts: two kernels, no amax pass;
// - MXFP8 and blockwise: a separate cast kernel that writes both copies, as for any input.
// Under sequence parallelism the rank quantizes its T / tp rows before the all-gather; per-tensor
// scaled fp8 is gathered row-wise only (supports_only_rowwise_all_gather) and the backward makes
// the weight gradient's transposed copy from the gathered rows (ln_out_total.update_usage(
// columnwise_usage=True)): a transpose kernel reading and writing 1 byte per element. Without
// the gather the delayed norm's transposed copy is an nvte_transpose right after the norm
// (common/normalization/layernorm/ln_api.cpp), and the current-scaling cast writes both copies.
struct NormInputCast {
  Op fwd, bwd;
};
NormInputCast te_norm_input_cast(const Ctx& c, const Plan& p, double T, double k) {
  const bool gathered = p.sequence_parallel && p.tp > 1;
  const double local = (gathered ? T / static_cast<double>(p.tp) : T) * k;  // elements quantized
  const Op transpose = fp8_transpose(c, T * k, 1.0);
  NormInputCast out;
  switch (c.fp8_recipe) {
    case Fp8Recipe::kDelayed:
      (gathered ? out.bwd : out.fwd) += transpose;
      break;
    case Fp8Recipe::kTensorwise:
      if (gathered) {
        out.fwd = fp8_quantize(c, local, (kFp8CastBytesPerElement - kFp8TransposeBytesPerElement) * local, 1.0, true);
        out.bwd = transpose;
      } else {
        out.fwd = fp8_quantize(c, local, kFp8CastBytesPerElement * local, 1.0, true);
      }
      break;
    case Fp8Recipe::kMxfp8:
    case Fp8Recipe::kBlockwise:
      out.fwd = fp8_quantize(c, local, kFp8CastBytesPerElement * local, 1.0);
      break;
  }
  return out;
}

// Bytes a Transformer Engine norm does not write because it writes its output in fp8 (delayed
// scaling, te_norm_input_cast): rows of k elements, 1 byte each instead of e.
double norm_fp8_write_saved_bytes(const Ctx& c, double rows, double k) {
  if (!te_norm_quantizes_input(c) || c.fp8_recipe != Fp8Recipe::kDelayed) return 0.0;
  return (c.e - kFp8BytesPerElement) * rows * k;
}

// A local expert's linear layer, the way the framework runs the experts' GEMMs
// (Ctx::expert_gemms_at_once, kTeGroupedGemmStreams) and quantizes their fp8 operands.
GemmCost expert_linear(const Ctx& c, double m, double n, double k, double experts) {
  if (c.expert_gemms_at_once <= 0) return linear(c, m, n, k, true, experts);
  const double at_once = std::min(c.expert_gemms_at_once, experts);
  const double rounds = std::floor(experts / at_once), rest = experts - rounds * at_once;
  GemmCost g = linear_gemms(c, m, n, k, true, at_once);
  for (Op* o : {&g.fwd, &g.bwd}) *o = rounds * *o;
  if (rest > 0) g = sum_of(g, linear_gemms(c, m, n, k, true, rest));
  if (c.prec == Precision::kFp8) {
    const bool fused = c.fp8_recipe == Fp8Recipe::kDelayed && c.framework == Framework::kMegatron;
    add_fp8_casts(c, m, n, k, experts, InputCast{}, fused ? 1.0 : experts, g);
  }
  return g;
}

// The passes torchtitan's eager block (training.compile off) makes beyond the fused kernels
// counted in layer_compute: the RMSNorms (a LayerNorm is one kernel), the rotary embedding and
// SwiGLU op by op
// (kEager*BytesPerElement, less the fused bytes already counted), and with grouped-query
// attention repeat_kv's copies of k and v to every query head (forward: read and write each
// repeated element; backward: the sum back over the repeats, reading the repeated gradient and
// writing the kv-sized one).
// FSDP2's copies around its collectives, on the compute stream, per layer and micro-batch
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):
// - foreach_all_gather_copy_out: after each all-gather the current stream waits for it and
//   split_with_sizes_copy moves the gathered layer from the flat all-gather buffer into the
//   parameters' own tensors, reading and writing every unsharded weight once; ZeRO-3 gathers
//   (and copies) again before the backward, ZeRO-2 keeps the forward's;
// - foreach_reduce: chunk_cat copies the layer's unsharded gradients into the reduce-scatter
//   buffer, in the reduce dtype (bf16 -> fp32 by default), on the current stream before the
//   reduce-scatter stream waits for it.
// The all-gather copy-in and the post-reduce cast touch only the 1/n shard and are left out.
void add_fsdp2_copy_kernels(const Ctx& c, const ModelShape& m, const Plan& p, LayerCompute& lc) {
  if (!c.fsdp2_copies || p.zero_stage < 2 || p.dp * p.cp <= 1) return;
  const StageParameters w = layer_parameters(m, p);
  const double copy_out = 2.0 * gathered_weight_bytes(c.e, c.fp8_params, w.total(), w.gemm_dense + w.gemm_expert);
  const double copy_in = (c.e + c.grad_reduce_bytes) * w.total();
  lc.fwd += Op{copy_out / c.hbm + kKernelGap_s, 0, copy_out};
  const double bwd = copy_in + (p.zero_stage >= 3 ? copy_out : 0.0);
  lc.bwd += Op{bwd / c.hbm + (p.zero_stage >= 3 ? 2.0 : 1.0) * kKernelGap_s, 0, bwd};
}

// torchtitan's sequence-parallel collectives run on DTensor's Shard(1), the sequence dim of its
// [batch, seq, hidden] activations, and each one moves the T x h tensor through HBM once more on
// the compute stream (Megatron's [seq, batch, hidden] layout gathers along dim 0 and needs none
// of it):
// - a plain all-gather or reduce-scatter: the functional collectives reach NCCL along dim 0
//   only, so all_gather_tensor concatenates the gathered chunks along the sequence after the
//   gather, torch.cat(torch.chunk(res, group_size, dim=0), dim=gather_dim), and
//   reduce_scatter_tensor concatenates the input's chunks before it: a read and a write of
//   T x h (torch/distributed/_functional_collectives.py);
// - async TP's fused all-gather and matmul copies the rank's shard into the symmetric-memory
//   buffer and into the gathered output (_pipelined_all_gather_and_consume): two reads and
//   writes of T / tp x h;
// - its fused matmul and reduce-scatter reduces the tp partial products it pulled from its peers
//   in one more kernel (reduce_partials / torch.sum over them): a read of T x h and a write of
//   T / tp x h (torch/distributed/_symmetric_memory/__init__.py).
// Async TP leaves the backward reduce-scatters of the input gradients plain
// (hides_tp_input_gradient_reduce_scatter).
void add_sequence_dim_copies(const Ctx& c, const ModelShape& m, const Plan& p, double T, LayerCompute& lc) {
  if (c.framework != Framework::kTorchtitan || p.tp <= 1 || !p.sequence_parallel) return;
  const double t = static_cast<double>(p.tp);
  const double Th = T * static_cast<double>(m.hidden);
  const double e_ag = c.prec == Precision::kFp8 ? kFp8BytesPerElement : c.e;
  const bool fused = p.tp_comm_overlap;
  const double ag_bytes = fused ? 4.0 * e_ag * Th / t : 2.0 * e_ag * Th;
  const double rs_bytes = fused ? c.e * Th * (1.0 + 1.0 / t) : 2.0 * c.e * Th;
  const double plain_rs_bytes = 2.0 * c.e * Th;
  const double blocks = m.moe() ? 1.0 : 2.0;
  auto pass = [&](double ag, double rs) {
    const double bytes = blocks * (ag + rs);
    return Op{bytes / c.hbm + 2.0 * blocks * kKernelGap_s, 0, bytes};
  };
  lc.fwd += pass(ag_bytes, rs_bytes);
  lc.bwd += pass(ag_bytes, plain_rs_bytes);  // output gradients' gathers, input gradients' scatters
  if (p.recompute == Recompute::kFull) lc.recompute += pass(ag_bytes, rs_bytes);
  if (p.recompute == Recompute::kSelective) lc.recompute += pass(ag_bytes, 0.0);  // the inputs gathered again
}

bool bf16_optimizer_accumulates(const Ctx& c, const Plan& p) {
  return runs_deepspeed_bf16_optimizer(c.framework, c.training_precision, p.zero_stage);
}

// Parameter tensors of one layer on a rank, as Megatron builds it: the QKV, projection, fc1
// (gate and up fused) and fc2 weights, their biases where the model has them, two norms (weight,
// and bias for LayerNorm); an MoE layer's MLP is the router and each local expert's fc1 and fc2.
double layer_parameter_tensors(const ModelShape& m, const Plan& p) {
  const double linear = m.biases ? 2.0 : 1.0;
  const double norms = 2.0 * (m.layernorm ? 2.0 : 1.0);
  const double mlp =
      m.moe() ? 1.0 + 2.0 * linear * static_cast<double>(m.experts / std::max<int64_t>(p.ep, 1)) : 2.0 * linear;
  return 2.0 * linear + mlp + norms;
}

// DeepSpeed's BF16_Optimizer adds each micro-batch's gradients of the layer's parameters into
// its fp32 buffers after the backward (kBf16OptimizerAccumulateBytesPerParam): two kernels per
// parameter tensor, each an op for the host.
void add_bf16_optimizer_accumulation(const Ctx& c, const ModelShape& m, const Plan& p, LayerCompute& lc) {
  if (!bf16_optimizer_accumulates(c, p)) return;
  const double bytes = kBf16OptimizerAccumulateBytesPerParam * layer_parameters(m, p).total();
  const double kernels = 2.0 * layer_parameter_tensors(m, p);
  lc.bwd += Op{bytes / c.hbm + kernels * kKernelGap_s, 0, bytes};
  lc.extra_host_ops_backward += kernels;
}

Op add_eager_block_kernels(const Ctx& c, const ModelShape& m, const Plan& p, double T, LayerCompute& lc) {
  const double e = c.e;
  const double t = static_cast<double>(p.tp);
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads * m.head_dim) / t;
  const double kv = static_cast<double>(m.kv_heads * m.head_dim) / t;
  const double T_rep = p.sequence_parallel ? T / t : T;
  double fwd = 0, bwd = 0;
  double fwd_kernels = 2.0, bwd_kernels = 2.0 * kEagerLayerNormBackwardKernels;
  if (!m.layernorm) {  // RMSNorm op by op
    fwd = 2.0 * (kEagerNormForwardBytesPerElement - 2.0 * e) * h * T_rep;
    bwd = 2.0 * (kEagerNormBackwardBytesPerElement - 4.0 * e) * h * T_rep;
    fwd_kernels = 2.0 * kEagerNormForwardKernels;
    bwd_kernels = 2.0 * kEagerNormBackwardKernels;
  }
  if (!m.learned_positions) {
    fwd += (kEagerRopeForwardBytesPerElement - 2.0 * e) * (q + kv) * T;
    bwd += (kEagerRopeBackwardBytesPerElement - 4.0 * e) * (q + kv) * T;
    fwd_kernels += 2.0 * kEagerRopeKernelsPerTensor;
    bwd_kernels += 2.0 * kEagerRopeKernelsPerTensor;
  }
  if (m.qk_norm && !m.layernorm) {  // the query and key RMSNorms, op by op
    fwd += (kEagerNormForwardBytesPerElement - 2.0 * e) * (q + kv) * T;
    bwd += (kEagerNormBackwardBytesPerElement - 4.0 * e) * (q + kv) * T;
    fwd_kernels += 2.0 * kEagerNormForwardKernels;
    bwd_kernels += 2.0 * kEagerNormBackwardKernels;
  } else if (m.qk_norm) {  // nn.LayerNorm: one kernel each way, its bytes the fused ones
    fwd_kernels += 2.0;
    bwd_kernels += 2.0 * kEagerLayerNormBackwardKernels;
  }
  if (m.gated_mlp && !m.moe()) {
    const double f = static_cast<double>(m.ffn) / t;
    fwd += (kEagerSwigluForwardBytesPerElement - 3.0 * e) * f * T;
    bwd += (kEagerSwigluBackwardBytesPerElement - 6.0 * e) * f * T;
    fwd_kernels += 1.0;
    bwd_kernels += 1.0;
  }
  if (m.kv_heads < m.heads) {
    fwd += 2.0 * 2.0 * e * q * T;     // keys and values, q-sized each
    bwd += 2.0 * e * (q + kv) * T;    // their gradients summed back
    fwd_kernels += 2.0;
    bwd_kernels += 2.0;
  }
  const Op forward{fwd / c.hbm + fwd_kernels * kKernelGap_s, 0, fwd};
  lc.fwd += forward;
  lc.bwd += Op{bwd / c.hbm + bwd_kernels * kKernelGap_s, 0, bwd};
  return forward;
}

}  // namespace

namespace cost_detail {

// Megatron-LM's own layers (the stack of materialized attention, before Transformer Engine)
// run kernels that Transformer Engine fuses away, each a pass over HBM with its own launch:
// - forward: the QKV linear adds its bias after the GEMM (`output = torch.matmul(...)`,
//   then `output = output + bias`: read, write; LinearWithGradAccumulationAndAsyncCommunication
//   in megatron/core/tensor_parallel/layers.py). The projection, fc1 and fc2 pass their biases
//   on to the fused bias-dropout-add and bias-GeLU kernels (skip_bias_add), counted above.
// - backward: each bias gradient is a column sum of the output gradient, one reduction
//   reading it (`grad_bias = grad_output.sum(dim=0)` for QKV; autograd's sum over the
//   broadcast bias of bias-GeLU and of the two bias-dropout-adds); the q, k, v gradients are
//   concatenated into the QKV output gradient (the backward of torch.split in
//   split_tensor_along_last_dim: read, write).
void add_megatron_local_layer_kernels(const Ctx& c, const ModelShape& m, const Plan& p, double T, LayerCompute& lc) {
  const double e = c.e;
  const double t = static_cast<double>(p.tp);
  const double h = static_cast<double>(m.hidden);
  const double qkv_cols = static_cast<double>(m.heads * m.head_dim + 2 * m.kv_heads * m.head_dim) / t;
  const double T_rep = p.sequence_parallel ? T / t : T;
  lc.bwd += elementwise(c, 2.0 * e * T * qkv_cols);  // q, k, v gradients concatenated
  if (!m.biases) return;
  lc.fwd += elementwise(c, 2.0 * e * T * qkv_cols);  // QKV bias add
  lc.bwd += elementwise(c, e * T * qkv_cols);        // QKV bias gradient
  lc.bwd += elementwise(c, e * T_rep * h);           // projection bias gradient
  if (m.moe()) return;                               // expert biases: the experts' own layout
  lc.bwd += elementwise(c, e * T * (m.gated_mlp ? 2.0 : 1.0) * static_cast<double>(m.ffn) / t);  // fc1 bias gradient
  lc.bwd += elementwise(c, e * T_rep * h);           // fc2 bias gradient
}

LayerCompute layer_compute(const Ctx& c, const ModelShape& m, const Plan& p) {
  LayerCompute lc;
  const double t = static_cast<double>(p.tp);
  const double b = static_cast<double>(p.micro_batch_size);
  const double s = static_cast<double>(m.seq);
  const double s_local = s / static_cast<double>(p.cp);
  const double T = b * s_local;
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double d = static_cast<double>(m.head_dim);
  const double heads_local = static_cast<double>(m.heads) / t;
  const double T_rep = p.sequence_parallel ? T / t : T;  // tokens of the replicated region
  const double e = c.e;

  // --- GEMMs
  GemmCost gemms[5];
  int n_gemms = 0;
  int first_moe_gemm = 5;  // gemms from here on belong to the MoE block
  // torchtitan's separate projections share one fp8 cast of their common input where torchao's
  // float8 TP casts it once before the sequence-parallel gather (PrepareFloat8ModuleInput: the
  // gathered float8 tensor feeds wq, wk and wv, or w1 and w3), or where torch.compile merges the
  // identical casts each Float8Linear makes (AOTAutograd's common-subexpression elimination,
  // functorch config cse). Eager without TP, each casts its own.
  const bool float8_tp = c.separate_projections && p.tp > 1 && p.sequence_parallel;
  const InputCast first_cast = float8_tp ? InputCast::before_gather(T / t) : InputCast{};
  const InputCast other_cast = c.separate_projections && (float8_tp || !c.eager_block) ? InputCast::shared() : InputCast{};
  // A Transformer Engine norm-linear's input is quantized with its norm (te_norm_input_cast).
  const bool norm_quantizes = te_norm_quantizes_input(c);
  const InputCast norm_input_cast = norm_quantizes ? InputCast::shared() : first_cast;
  // QKV: one fused GEMM (Megatron's linear_qkv), or torchtitan's wq, wk and wv.
  gemms[n_gemms++] = c.separate_projections
                         ? sum_of(linear(c, T, q / t, h, true, 1.0, first_cast), linear(c, T, kv / t, h, true, 1.0, other_cast),
                                  linear(c, T, kv / t, h, true, 1.0, other_cast))
                         : linear(c, T, (q + 2.0 * kv) / t, h, true, 1.0, norm_input_cast);
  // The projection's and fc2's output gradients arrive sequence-sharded under sequence
  // parallelism; Transformer Engine quantizes the shard before gathering it (GradCast).
  const GradCast row_parallel_grad =
      norm_quantizes && p.sequence_parallel && p.tp > 1 ? GradCast{T / t} : GradCast{};
  gemms[n_gemms++] = linear(c, T, h, q / t, true, 1.0, {}, row_parallel_grad);  // attention projection
  if (m.moe()) {
    // Token flow (model_math.h MoeTokenFlow): the router sees the T / tp tokens of this rank's
    // sequence shard; each of the E / ep local experts computes on its capacity slots from every
    // rank of the EP group and of the ETP group (ep x etp x cap rows), 1/etp of its columns:
    // the FLOPs per rank are the same for every etp.
    const MoeTokenFlow f = moe_token_flow(m, p);
    const double E = static_cast<double>(m.experts);
    first_moe_gemm = n_gemms;
    gemms[n_gemms++] = linear(c, f.routed_tokens, E, h, false);  // router
    gemms[n_gemms++] = expert_linear(c, f.rows_per_expert, (m.gated_mlp ? 2.0 : 1.0) * f.expert_ffn_local, h, f.local_experts);
    gemms[n_gemms++] = expert_linear(c, f.rows_per_expert, h, f.expert_ffn_local, f.local_experts);  // row-parallel partial sums
  } else {
    const double f = static_cast<double>(m.ffn);
    // fc1: gate and up in one GEMM (Megatron's linear_fc1), or torchtitan's w1 and w3.
    gemms[n_gemms++] = c.separate_projections && m.gated_mlp
                           ? sum_of(linear(c, T, f / t, h, true, 1.0, first_cast), linear(c, T, f / t, h, true, 1.0, other_cast))
                           : linear(c, T, (m.gated_mlp ? 2.0 : 1.0) * f / t, h, true, 1.0, norm_input_cast);
    gemms[n_gemms++] = linear(c, T, h, f / t, true, 1.0, {}, row_parallel_grad);  // fc2
  }
  // TP communication overlap with sequence parallelism splits each forward GEMM that an
  // all-gather feeds (QKV, fc1) or a reduce-scatter drains (projection, fc2) into tp chunks of
  // T / tp rows, one per ring step (Transformer Engine userbuffers split_overlap_ag /
  // split_overlap_rs; the pipelined reduce-scatter uses num_splits = 4 in NeMo's configs): tp
  // smaller GEMMs, each with its own wave quantization and kernel launch. In the backward the
  // projection's and fc2's input-gradient GEMMs take the output gradient as a ring exchange
  // all-gathers it (proj_dgrad / fc2_dgrad: RingExchangeOverlapCfg in NeMo's userbuffers
  // configs, nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py): tp chunks too.
  // QKV's and fc1's backward overlaps are bulk (the gather or reduce-scatter runs beside the
  // whole GEMM on a few SMs), so those GEMMs stay whole.
  if (p.tp_comm_overlap && p.tp > 1 && p.sequence_parallel && !m.moe()) {
    const double dims[4][2] = {{(q + 2.0 * kv) / t, h}, {h, q / t},
                               {(m.gated_mlp ? 2.0 : 1.0) * static_cast<double>(m.ffn) / t, h},
                               {h, static_cast<double>(m.ffn) / t}};
    // Each chunk casts its share of what the whole GEMM casts (float8 TP: the shard, before the
    // gather).
    for (int i = 0; i < 4; ++i) {
      const InputCast whole_cast = i % 2 == 0 ? norm_input_cast : InputCast{};
      const InputCast chunk_cast{whole_cast.cast_rows < 0 ? -1 : whole_cast.cast_rows / t,
                                 whole_cast.transpose_rows < 0 ? -1 : whole_cast.transpose_rows / t};
      gemms[i].fwd = t * linear(c, T / t, dims[i][0], dims[i][1], true, 1.0, chunk_cast).fwd;
    }
    for (int i : {1, 3}) {
      const Op whole = linear_dgrad(c, T, dims[i][0], dims[i][1], true);
      const Op parts = t * linear_dgrad(c, T / t, dims[i][0], dims[i][1], true);
      gemms[i].bwd += Op{parts.s - whole.s, parts.flops - whole.flops, parts.bytes - whole.bytes};
    }
    if (c.te_userbuffers) {
      const double sms = static_cast<double>(c.prof->sm_count);
      for (int i : {1, 3}) gemms[i].fwd.s *= sms / (sms - kTpOverlapPipelineSms);
    }
  }
  for (int i = 0; i < (m.moe() ? 2 : 4); ++i) {
    lc.tp_gemm_fwd_s[i] = gemms[i].fwd.s;
    lc.tp_gemm_bwd_s[i] = gemms[i].bwd.s;
  }
  for (int i = 0; i < n_gemms; ++i) {
    const GemmCost& g = gemms[i];
    lc.fwd += g.fwd;
    lc.bwd += g.bwd;
    lc.gemm_fwd_s += g.fwd.s;
    lc.gemm_bwd_s += g.bwd.s;
    if (i >= first_moe_gemm) {
      lc.moe_fwd += g.fwd;
      lc.moe_bwd += g.bwd;
    }
  }
  if (norm_quantizes) {  // QKV's input, and the dense fc1's (an MoE layer's experts cast their own)
    const NormInputCast cast = te_norm_input_cast(c, p, T, h);
    const double inputs = m.moe() ? 1.0 : 2.0;
    lc.fwd += inputs * cast.fwd;
    lc.bwd += inputs * cast.bwd;
  }

  // --- attention core
  Op attn_fwd, attn_bwd;
  if (m.attention != AttentionKernel::kMaterialized) {
    // Local queries against the causal half of all keys (ring attention balances the halves).
    const double work = 4.0 * T * s * kCausalWorkFraction * q / t;
    // The kernel's rate at this sequence length and head dim against its ceiling.
    const FusedAttentionKernel& k = *c.attention_kernel;
    const double shape_eff = s_local / (s_local + k.seq_half_tokens) * head_dim_rate(k.head_dims, m.head_dim);
    // Dropout on the attention probabilities runs inside the fused kernel.
    const double dropout = m.attention_dropout ? k.dropout_factor : 1.0;
    attn_fwd.flops = work;
    const double clock = c.prof->sustained_clock_fraction;
    attn_fwd.s = dropout * work / (c.peak16 * clock * c.flash_forward_efficiency * shape_eff) + kKernelGap_s;
    attn_fwd.bytes = e * T * (2.0 * q + 2.0 * kv) / t;
    attn_bwd.flops = kFlashBackwardFlopsRatio * work;
    attn_bwd.s = dropout * attn_bwd.flops / (c.peak16 * clock * c.flash_backward_efficiency * shape_eff) + kKernelGap_s;
    attn_bwd.bytes = 2.0 * attn_fwd.bytes;
  } else {
    // Materialized scores: batched GEMMs over b x a/t heads, full s x s (masking does not
    // skip work), fused scale-mask-softmax, dropout.
    const double batch = b * heads_local;
    const double scores = batch * s_local * s;  // elements
    attn_fwd += gemm(c, c.prec16, s_local, s, d, batch, e, e);  // Q K^T
    const bool fused_softmax = static_cast<int64_t>(batch) % kFusedSoftmaxBatchesPerBlock == 0;
    attn_fwd += elementwise(c, fused_softmax ? 2.0 * e * scores : kUnfusedSoftmaxForwardBytesPerScore * scores);
    if (m.attention_dropout) attn_fwd += elementwise(c, (2.0 * e + 1.0) * scores);  // dropout + mask
    attn_fwd += gemm(c, c.prec16, s_local, d, s, batch, e, e);  // P V
    attn_bwd += gemm(c, c.prec16, s_local, s, d, batch, e, e);  // dP = dO V^T
    attn_bwd += gemm(c, c.prec16, s, d, s_local, batch, e, e);  // dV = P^T dO
    if (m.attention_dropout) attn_bwd += elementwise(c, (2.0 * e + 1.0) * scores);
    attn_bwd += elementwise(c, fused_softmax ? 3.0 * e * scores : kUnfusedSoftmaxBackwardBytesPerScore * scores);
    if (!fused_softmax) lc.extra_host_ops_per_pass += kUnfusedSoftmaxExtraHostOps;
    attn_bwd += gemm(c, c.prec16, s_local, d, s, batch, e, e);  // dQ = dS K
    attn_bwd += gemm(c, c.prec16, s, d, s_local, batch, e, e);  // dK = dS^T Q
    // The context [b, a, s, d] becomes [s, b, a d] for the projection: permute + contiguous,
    // a copy (read, write), and its backward copies the gradient back (Megatron-LM
    // CoreAttention.forward, megatron/model/transformer.py; Megatron-Core's DotProductAttention).
    const double context = T * q / t;
    attn_fwd += elementwise(c, 2.0 * e * context);
    attn_bwd += elementwise(c, 2.0 * e * context);
  }
  if (p.cp > 1 && m.attention != AttentionKernel::kMaterialized) {
    // Ring attention merges each step's partial output into an fp32 accumulator rescaled by
    // the log-sum-exp (forward), and accumulates dQ, dK, dV in fp32 across steps (backward).
    const double steps = static_cast<double>(p.cp);
    attn_fwd += elementwise(c, steps * kCpMergeBytesPerElement * T * q / t);
    attn_bwd += elementwise(c, steps * kCpMergeBytesPerElement * T * (q + 2.0 * kv) / t);
  }
  lc.attn_fwd = attn_fwd;
  lc.attn_bwd = attn_bwd;
  lc.fwd += attn_fwd;
  lc.bwd += attn_bwd;

  // --- elementwise (forward bytes; backward kBackwardElementwiseFactor x)
  double ew = 0;
  double moe_expert_ew_bytes = 0;  // of ew: the experts' activation and the permutations
  const double norm_rw = 2.0 * e * h * T_rep;  // read input, write output
  ew += 2.0 * norm_rw;                         // two norms
  const double mask = m.dropout ? 1.0 : 0.0;
  ew += 2.0 * (3.0 * e + mask) * h * T_rep;    // two (bias-dropout-)residual adds
  if (m.moe()) {
    const MoeTokenFlow f = moe_token_flow(m, p);
    const double moe_ew = (m.gated_mlp ? 3.0 : 2.0) * e * f.expert_ffn_local * f.expert_rows  // activation
                          + 4.0 * e * h * f.dispatch_rows;  // permute and unpermute (this rank's routed copies)
    ew += moe_ew;
    moe_expert_ew_bytes = moe_ew;
    // The block's share of the one fused elementwise pass below (no extra kernel gap).
    lc.moe_fwd.bytes += moe_ew;
    lc.moe_fwd.s += moe_ew / c.hbm;
    lc.moe_bwd.bytes += kBackwardElementwiseFactor * moe_ew;
    lc.moe_bwd.s += kBackwardElementwiseFactor * moe_ew / c.hbm;
  } else {
    const double f = static_cast<double>(m.ffn) / t;
    ew += (m.gated_mlp ? 3.0 : 2.0) * e * f * T;  // SwiGLU (read 2, write 1) or bias-GeLU
  }
  if (!m.learned_positions) ew += 2.0 * e * (q + kv) / t * T;  // rotary embedding on q and k
  if (m.qk_norm) {
    // The query and key norms (Megatron-Core's q_layernorm and k_layernorm, TENorm over each
    // head's head_dim): a norm's read and write of q and k, two more modules for the host.
    ew += 2.0 * e * (q + kv) / t * T;
    lc.extra_host_ops_per_pass += 2.0;
  }
  // The norms before QKV and the dense fc1 write fp8 where Transformer Engine fuses the cast.
  const double norm_saved = (m.moe() ? 1.0 : 2.0) * norm_fp8_write_saved_bytes(c, T_rep, h);
  Op elementwise_fwd = elementwise(c, ew - norm_saved);
  lc.fwd += elementwise_fwd;
  lc.bwd += elementwise(c, kBackwardElementwiseFactor * ew);
  if (m.attention == AttentionKernel::kMaterialized) add_megatron_local_layer_kernels(c, m, p, T, lc);
  if (c.eager_block) elementwise_fwd += add_eager_block_kernels(c, m, p, T, lc);

  // --- MoE router and dispatcher kernels, host sync, and the busiest rank's extra work
  if (m.moe()) {
    const double ep = static_cast<double>(std::max<int64_t>(p.ep, 1));
    const double local_experts = static_cast<double>(m.experts) / ep;
    // Rows the rank's experts see: E x cap received, times etp after the expert-TP all-gather.
    const double routed = moe_token_flow(m, p).expert_rows;
    Op dispatch_fwd, dispatch_bwd;
    // With ep > 1 and several experts per rank the received tokens arrive grouped by source
    // rank: the dispatcher sorts them into per-expert chunks after the dispatch all-to-all (and
    // the expert-TP all-gather) and back before the combine (sort_chunks_by_idxs), reading and
    // writing every row each time; the backward applies the inverse sorts.
    if (p.ep > 1 && local_experts > 1.0) dispatch_fwd.bytes = dispatch_bwd.bytes = 2.0 * 2.0 * e * h * routed;
    dispatch_fwd.s = dispatch_fwd.bytes / c.hbm + kMoeRouterDispatchKernels * kKernelGap_s + (m.dropless ? kMoeHostSync_s : 0.0);
    dispatch_bwd.s = dispatch_bwd.bytes / c.hbm + kMoeRouterDispatchKernels * kKernelGap_s;
    // Dropless: the busiest rank of the EP group keeps the others waiting at the combine
    // all-to-all for (imbalance - 1) x its expert GEMMs and expert elementwise passes.
    const double r = moe_rank_imbalance(m, p);
    Op wait_fwd, wait_bwd;
    if (r > 1.0) {
      double expert_fwd_s = moe_expert_ew_bytes / c.hbm, expert_bwd_s = kBackwardElementwiseFactor * moe_expert_ew_bytes / c.hbm;
      for (int i = first_moe_gemm + 1; i < n_gemms; ++i) {  // the expert GEMMs (after the router)
        expert_fwd_s += gemms[i].fwd.s;
        expert_bwd_s += gemms[i].bwd.s;
      }
      wait_fwd.s = (r - 1.0) * expert_fwd_s;
      wait_bwd.s = (r - 1.0) * expert_bwd_s;
    }
    for (const Op& o : {dispatch_fwd, wait_fwd}) {
      lc.fwd += o;
      lc.moe_fwd += o;
    }
    for (const Op& o : {dispatch_bwd, wait_bwd}) {
      lc.bwd += o;
      lc.moe_bwd += o;
    }
  }

  if (p.recompute == Recompute::kFull) lc.recompute = lc.fwd;
  if (p.recompute == Recompute::kSelective) lc.recompute = attn_fwd;
  if (p.recompute == Recompute::kSelective && c.separate_projections) {
    lc.tp_regather_gemm_s[0] = linear(c, T, kv / t, h, true).fwd.s;  // wk
    if (!m.moe() && m.gated_mlp) lc.tp_regather_gemm_s[1] = linear(c, T, static_cast<double>(m.ffn) / t, h, true).fwd.s;  // w3
  }
  if (p.recompute == Recompute::kSelective && c.separate_projections && !m.moe()) {
    // torchtitan's selective recompute is its op-level policy (activation_checkpoint.mode
    // "selective", selective_ac_option "op"; torchtitan/distributed/activation_checkpoint.py
    // _custom_policy): it saves the attention kernel's outputs and every other matmul's, in the
    // block's order wq, wk, wv, wo, w1, w3, w2, and recomputes the rest in the backward: wk, wo
    // and w3 (w2 without a gate), and every elementwise op.
    const double f = static_cast<double>(m.ffn) / t;
    lc.recompute = linear(c, T, kv / t, h, true).fwd;
    lc.recompute += gemms[1].fwd;  // wo
    lc.recompute += m.gated_mlp ? linear(c, T, f, h, true).fwd : gemms[3].fwd;
    lc.recompute += elementwise_fwd;
  }
  add_sequence_dim_copies(c, m, p, T, lc);
  add_fsdp2_copy_kernels(c, m, p, lc);  // after the recompute: it gathers nothing again
  add_bf16_optimizer_accumulation(c, m, p, lc);
  // The floor is PyTorch's: a device measured by monarch-calibrate as a CPU runs the project's
  // own runtime (C++ calling BLAS, no Python dispatch), so none there.
  const bool eager = c.cal == nullptr || c.cal->device_kind == DeviceKind::kGpu;
  // A layer whose graphs capture only part of it (dropless MoE) keeps the eager count, an upper
  // bound.
  const double fwd_ops = c.graphed_layers ? kGraphedLayerForwardHostOps : kLayerForwardHostOps;
  const double bwd_ops = c.graphed_layers ? kGraphedLayerBackwardHostOps : kLayerBackwardHostOps;
  const double extra_ops = c.graphed_layers ? 0.0 : lc.extra_host_ops_per_pass;
  lc.host_fwd_s = eager ? (fwd_ops + extra_ops) * kEagerHostPerOp_s : 0.0;
  lc.host_bwd_s = eager ? (bwd_ops + extra_ops + lc.extra_host_ops_backward) * kEagerHostPerOp_s : 0.0;
  // Full recompute runs the layer's forward again inside the backward (a checkpointed block:
  // the same ops from Python again; never with CUDA graphs, see cuda_graph_problem); selective
  // recompute only the attention core's few ops.
  if (p.recompute == Recompute::kFull) lc.host_recompute_s = lc.host_fwd_s;
  return lc;
}

namespace {

// Seconds the TP collectives of one layer's passes add under TP communication overlap with
// sequence parallelism: each runs beside the GEMM it feeds or drains, and only that GEMM can
// hide it (Transformer Engine userbuffers pair every overlap with one GEMM; torch's async TP
// fuses each all-gather with the matmul after it and each reduce-scatter with the matmul before
// it: fused_all_gather_matmul, fused_matmul_reduce_scatter). Forward, and a full recompute
// again: the all-gather beside QKV and fc1, the reduce-scatter beside the projection and fc2.
// Backward: the output gradient's all-gather beside the projection's and fc2's input-gradient
// GEMM, the input gradient's reduce-scatter beside QKV's and fc1's weight-gradient GEMM (a
// GEMM's two backward products have its forward's FLOPs each, so half its backward time each),
// or in full where the stack cannot overlap it (hides_tp_input_gradient_reduce_scatter), and the
// saved input's gather again where the stack gathers it (tp_gathered_input): beside QKV's and
// fc1's input-gradient GEMM, or beside the recomputed matmul it feeds.
double tp_overlap_cost_s(const LayerCompute& lc, double ag_s, double rs_s, bool full, bool input_grad_rs_hidden,
                         TpGatheredInput gathered, int64_t sm_count) {
  auto beside = [sm_count](double comm_s, double gemm_s) {
    return overlapped_comm_cost_s(comm_s, gemm_s, kTpOverlapCommSms, sm_count);
  };
  double fwd = 0, bwd = 0;
  for (int in : {0, 2}) {  // QKV then the projection; fc1 then fc2
    const int out = in + 1;
    if (lc.tp_gemm_fwd_s[in] <= 0) continue;  // an MoE layer's MLP
    fwd += beside(ag_s, lc.tp_gemm_fwd_s[in]) + beside(rs_s, lc.tp_gemm_fwd_s[out]);
    bwd += beside(ag_s, 0.5 * lc.tp_gemm_bwd_s[out]) +
           (input_grad_rs_hidden ? beside(rs_s, 0.5 * lc.tp_gemm_bwd_s[in]) : rs_s);
    if (gathered == TpGatheredInput::kGatheredInBackward) bwd += beside(ag_s, 0.5 * lc.tp_gemm_bwd_s[in]);
    if (gathered == TpGatheredInput::kGatheredInRecompute) bwd += beside(ag_s, lc.tp_regather_gemm_s[in / 2]);
  }
  return fwd * (full ? 2.0 : 1.0) + bwd;
}

// A host-bound pass leaves the GPU idle between the host's launches, and a collective the
// compute stream waits on (c10d's NCCL stream, no overlap) runs in those gaps: the pass takes
// max(host, GPU compute + its exposed communication), not the host time plus the communication.
// So each pass's host excess shrinks by that pass's share of the group's exposed time (the
// collectives' forward, recompute and backward counts weigh it).
void hide_comm_under_host(GroupKind group, double exposed_s, LayerCosts& out) {
  double fwd = 0, rec = 0, bwd = 0;
  for (const LayerCosts::Collective& col : out.collectives) {
    if (col.group != group) continue;
    fwd += col.forward_count * col.time_s;
    rec += col.recompute_count * col.time_s;
    bwd += col.backward_count * col.time_s;
  }
  const double all = fwd + rec + bwd;
  if (!(all > 0) || !(exposed_s > 0)) return;
  const double scale = exposed_s / all;
  out.host_forward_s = std::max(0.0, out.host_forward_s - scale * fwd);
  out.host_recompute_s = std::max(0.0, out.host_recompute_s - scale * rec);
  out.host_backward_s = std::max(0.0, out.host_backward_s - scale * bwd);
}

// EP communication overlap (Plan::ep_comm_overlap): Megatron-Core's combined 1F1B runs each
// steady-state step as one micro-batch's forward beside another's backward, layer by layer
// (megatron/core/models/common/model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run,
// 0.14), the all-to-alls on a communication stream beside the other pass's compute:
//   comm stream: combine_bwd | dispatch_fwd -> dispatch_bwd      | combine_fwd
//   comp stream: attn_fwd    | mlp_bwd + mlp_bwd_dw -> mlp_fwd   | attn_bwd
// so each of a layer's four all-to-alls hides behind one compute window: the attention forward,
// the expert block's backward, its forward, the attention backward (the router and the
// permutation count with the expert block here; Megatron runs them with the attention). What a
// window cannot hide stays exposed, and the hidden part takes its SMs from the compute
// (overlapped_comm_cost_s). Only the steady state pairs passes: the warm-up forwards and the
// cool-down backwards run alone, their all-to-alls exposed (ep_overlap_unpaired_passes, the
// first stage's, whose warm-up is the longest). Seconds of EP all-to-all per layer and
// micro-batch, averaged over the stage's passes.
double ep_overlap_exposed_s(const Scenario& sc, const Plan& p, const LayerCompute& lc, double a2a_s, int64_t sm_count) {
  const double sms = kNcclOverlapSms;
  const double paired = overlapped_comm_cost_s(a2a_s, lc.fwd.s - lc.moe_fwd.s, sms, sm_count) +
                        overlapped_comm_cost_s(a2a_s, lc.moe_bwd.s, sms, sm_count) +
                        overlapped_comm_cost_s(a2a_s, lc.moe_fwd.s, sms, sm_count) +
                        overlapped_comm_cost_s(a2a_s, lc.bwd.s - lc.moe_bwd.s, sms, sm_count);
  const int64_t v = p.chunks_per_stage(), m = std::max<int64_t>(num_micro_batches(sc, p), 1);
  const double alone = static_cast<double>(ep_overlap_unpaired_passes(p, 0, m)) / static_cast<double>(m * v);
  return alone * 4.0 * a2a_s + (1.0 - alone) * paired;
}

}  // namespace

LayerCosts layer_costs_impl(const Scenario& sc, const Plan& p, const ModelShape& m, const Ctx& c,
                            const LayerCompute& lc) {
  LayerCosts out;
  out.forward_s = lc.fwd.s;
  out.backward_s = lc.bwd.s;
  out.recompute_s = lc.recompute.s;
  // The host time a pass adds beside its kernels: all of it when each launch waits for its
  // kernel (training.cuda_launch_blocking), else what exceeds the kernels.
  const bool blocking = sc.training.cuda_launch_blocking;
  out.host_forward_s = blocking ? lc.host_fwd_s : std::max(0.0, lc.host_fwd_s - lc.fwd.s);
  out.host_backward_s = blocking ? lc.host_bwd_s : std::max(0.0, lc.host_bwd_s - lc.bwd.s);
  out.host_recompute_s = blocking ? lc.host_recompute_s : std::max(0.0, lc.host_recompute_s - lc.recompute.s);
  out.forward_flops = lc.fwd.flops;
  out.backward_flops = lc.bwd.flops;
  out.recompute_flops = lc.recompute.flops;
  out.forward_mem_bytes = lc.fwd.bytes;
  out.backward_mem_bytes = lc.bwd.bytes;
  out.recompute_mem_bytes = lc.recompute.bytes;
  out.moe_forward_s = lc.moe_fwd.s;
  out.moe_backward_s = lc.moe_bwd.s;
  out.moe_forward_flops = lc.moe_fwd.flops;
  out.moe_backward_flops = lc.moe_bwd.flops;
  out.moe_forward_mem_bytes = lc.moe_fwd.bytes;
  out.moe_backward_mem_bytes = lc.moe_bwd.bytes;

  const ClusterConfig& cl = sc.cluster;
  const int64_t gpn = cl.gpus_per_node;
  const double t = static_cast<double>(p.tp);
  const double T = static_cast<double>(p.micro_batch_size) * static_cast<double>(m.seq) / static_cast<double>(p.cp);
  const double h = static_cast<double>(m.hidden);
  const double e = c.e;
  const bool full = p.recompute == Recompute::kFull;

  // --- tensor parallel
  if (p.tp > 1) {
    const GroupSpan span = group_span(GroupKind::kTp, p, gpn);
    const int64_t S = static_cast<int64_t>(e * T * h);
    double hidden_window_s = 0;  // collectives hidden behind GEMMs
    double total = 0, exposed = 0, ag_s = 0, rs_s = 0;
    TpGatheredInput gathered = TpGatheredInput::kGatheredInBackward;
    if (p.sequence_parallel) {
      // In fp8 every sequence-parallel all-gather moves fp8 elements: Transformer Engine casts
      // the LayerNorm output to fp8 before gathering it for the QKV and fc1 GEMMs (and again for
      // their weight gradients), and casts the output gradient to fp8 before gathering it for
      // the projection's and fc2's backward (module/layernorm_linear.py, base.py
      // grad_output_preprocess). The reduce-scatters reduce the 16-bit GEMM outputs.
      const int64_t S_ag = c.prec == Precision::kFp8 ? static_cast<int64_t>(kFp8BytesPerElement * T * h) : S;
      const double ag = collective_time_s(CollectiveKind::kAllGather, S_ag, span, cl);
      const double rs = collective_time_s(CollectiveKind::kReduceScatter, S, span, cl);
      // Blocks with a TP (sequence-parallel) gather / scatter pair: attention and the dense MLP.
      // An MoE layer's MLP block takes the sequence shard as it is (Megatron-Core MoELayer: the
      // router sees the T / tp local tokens; its only TP-like traffic is the expert-TP
      // all-gather / reduce-scatter on kExpertTp), so only attention has the pair there.
      // The CPU runtime measures exactly this (realrt_measure_tests).
      const int32_t blocks = m.moe() ? 1 : 2;
      const int32_t fwd_n = blocks, bwd_n = blocks + (full ? blocks : 0);
      // Backward: reduce-scatter of the input gradients (1 per block), all-gather of the output
      // gradients (1 per block), and the block inputs gathered again for the weight gradients
      // where the stack does (tp_gathered_input): in the backward, which Megatron overlaps with
      // the dgrad GEMM, or in torchtitan's op-level recomputation, before its first matmul.
      gathered = tp_gathered_input(sc.training.framework, p.recompute);
      const int32_t regather_bwd = gathered == TpGatheredInput::kGatheredInBackward ? blocks : 0;
      const int32_t regather_rec = gathered == TpGatheredInput::kGatheredInRecompute ? blocks : 0;
      const int32_t rec_n = full ? blocks : 0;
      out.collectives.push_back(
          {CollectiveKind::kAllGather, GroupKind::kTp, S_ag, fwd_n, blocks + regather_bwd, rec_n + regather_rec, ag});
      out.collectives.push_back({CollectiveKind::kReduceScatter, GroupKind::kTp, S, fwd_n, blocks, rec_n, rs});
      ag_s = ag;
      rs_s = rs;
      total = (fwd_n + bwd_n + regather_bwd + regather_rec) * ag + (fwd_n + bwd_n) * rs;
      const double redo = static_cast<double>(regather_bwd) * ag;
      const double redo_exposed = std::max(0.0, redo - kOverlapEfficiency * 0.5 * lc.gemm_bwd_s);
      exposed = (fwd_n + bwd_n) * (ag + rs) + redo_exposed + regather_rec * ag;
      hidden_window_s = lc.gemm_fwd_s * (full ? 2.0 : 1.0) + lc.gemm_bwd_s;
    } else {
      const double ar = collective_time_s(CollectiveKind::kAllReduce, S, span, cl);
      const int32_t fwd_n = 2, bwd_n = 2 + (full ? 2 : 0);
      out.collectives.push_back({CollectiveKind::kAllReduce, GroupKind::kTp, S, fwd_n, 2, full ? 2 : 0, ar});
      total = (fwd_n + bwd_n) * ar;
      exposed = total;
      hidden_window_s = lc.gemm_fwd_s * (full ? 2.0 : 1.0) + lc.gemm_bwd_s;
    }
    // While hidden, the communication kernels hold kTpOverlapCommSms of the SMs the GEMMs
    // would use.
    if (p.tp_comm_overlap)
      exposed = p.sequence_parallel ? tp_overlap_cost_s(lc, ag_s, rs_s, full,
                                                        hides_tp_input_gradient_reduce_scatter(sc.training.framework),
                                                        gathered, c.prof->sm_count)
                                    : overlapped_comm_cost_s(total, hidden_window_s, kTpOverlapCommSms, c.prof->sm_count);
    out.tp_total_s = total;
    out.tp_exposed_s = exposed;
    // A blocking launch of a collective waits for it too, so nothing hides under the host then.
    if (!p.tp_comm_overlap && !sc.training.cuda_launch_blocking) hide_comm_under_host(GroupKind::kTp, exposed, out);
  }

  // --- context parallel: ring exchange of K and V (Megatron/TE P2P ring attention), hidden
  // behind the attention steps.
  if (p.cp > 1) {
    const GroupSpan span = group_span(GroupKind::kCp, p, gpn);
    const double kv = static_cast<double>(m.kv_heads * m.head_dim);
    const int64_t kv_bytes = static_cast<int64_t>(e * T * 2.0 * kv / t);
    const double hops = static_cast<double>(p.cp - 1);
    const double hop_s = p2p_time_s(kv_bytes, span.crosses_nodes(), cl);
    out.cp_send_bytes_forward = static_cast<int64_t>(hops) * kv_bytes;
    out.cp_send_bytes_backward = 2 * out.cp_send_bytes_forward;  // K, V again and dK, dV
    out.cp_time_forward_s = hops * hop_s;
    out.cp_time_backward_s = 2.0 * hops * hop_s;
    out.cp_total_s = out.cp_time_forward_s * (full ? 2.0 : 1.0) + out.cp_time_backward_s;
    const double attn_s = lc.attn_fwd.s;
    const double fwd_exposed = std::max(0.0, out.cp_time_forward_s - kOverlapEfficiency * attn_s);
    const double bwd_exposed = std::max(0.0, out.cp_time_backward_s - kOverlapEfficiency * kFlashBackwardFlopsRatio * attn_s);
    out.cp_exposed_s = fwd_exposed * (full ? 2.0 : 1.0) + bwd_exposed;
  }

  // --- expert parallel: token dispatch and combine, and the expert-TP gather / scatter
  // (docs/analytical_model.md, "Mixture of experts"). Both sit on the critical path between attention and the experts (the
  // experts need the tokens), so they are exposed, not overlapped. Their time is the layer's
  // EP communication (TimeBreakdown::ep_comm holds the expert block's all-to-all and ETP time).
  const MoeTokenFlow flow = moe_token_flow(m, p);
  if (m.moe() && p.ep > 1) {
    const GroupSpan span = group_span(GroupKind::kEp, p, gpn);
    // NCCL size of one all-to-all: every rank sends capacity slots of every expert for the
    // T / tp tokens it routes, padded (Megatron's drop-and-pad dispatch,
    // moe_pad_expert_input_to_capacity), so the send buffer is E x cap x h; 1/ep of it to each
    // EP peer (itself included).
    const int64_t S = static_cast<int64_t>(e * flow.dispatch_rows * h);
    double a2a = collective_time_s(CollectiveKind::kAllToAll, S, span, cl);
    a2a *= moe_rank_imbalance(m, p);  // dropless: the busiest rank's receive paces the exchange
    const int32_t fwd_n = 2, bwd_n = 2 + (full ? 2 : 0);
    out.collectives.push_back({CollectiveKind::kAllToAll, GroupKind::kEp, S, fwd_n, 2, full ? 2 : 0, a2a});
    out.ep_total_s += (fwd_n + bwd_n) * a2a;
    out.ep_exposed_s += p.ep_comm_overlap ? ep_overlap_exposed_s(sc, p, lc, a2a, c.prof->sm_count)
                                          : (fwd_n + bwd_n) * a2a;
  }
  if (m.moe() && p.expert_tp() > 1) {
    // Expert tensor parallel: after the dispatch every expert-TP rank all-gathers the rows of
    // its etp peers (NCCL size: the gathered etp x E x cap x h tensor, as the TP sequence-parallel
    // all-gather); after the experts the row-parallel fc2 partial sums are reduce-scattered back
    // (same size). Backward: all-gather of the output gradients, reduce-scatter of the input
    // gradients. Full recompute repeats the forward pair.
    const GroupSpan span = group_span(GroupKind::kExpertTp, p, gpn);
    const int64_t S = static_cast<int64_t>(e * flow.expert_rows * h);
    const double ag = collective_time_s(CollectiveKind::kAllGather, S, span, cl);
    const double rs = collective_time_s(CollectiveKind::kReduceScatter, S, span, cl);
    const int32_t rec_n = full ? 1 : 0;
    out.collectives.push_back({CollectiveKind::kAllGather, GroupKind::kExpertTp, S, 1, 1, rec_n, ag});
    out.collectives.push_back({CollectiveKind::kReduceScatter, GroupKind::kExpertTp, S, 1, 1, rec_n, rs});
    const double total = (2 + rec_n) * (ag + rs);
    out.ep_total_s += total;
    out.ep_exposed_s += total;
  }

  // --- embedding (first stage) and output layer + loss (last stage)
  const double V = static_cast<double>(m.vocab);
  {
    Op fwd = elementwise(c, 2.0 * e * T * h);  // gather rows, write
    // Backward: dense embedding gradient (V/t x h, 16-bit) accumulated into fp32 main_grad;
    // DeepSpeed's BF16_Optimizer casts it and adds it to its fp32 buffer instead.
    const double accumulate = bf16_optimizer_accumulates(c, p) ? kBf16OptimizerAccumulateBytesPerParam : 8.0;
    Op bwd = elementwise(c, V / t * h * (e + accumulate) + e * T * h);
    out.embedding_forward_s = fwd.s;
    out.embedding_backward_s = bwd.s;
    out.embedding_forward_mem_bytes = fwd.bytes;
    out.embedding_backward_mem_bytes = bwd.bytes;
  }
  double output_dgrad_s = 0;  // the output layer's input-gradient GEMM
  {
    const double T_out = T;  // the output GEMM sees all local tokens (sequence gathered)
    GemmCost g = linear(c, T_out, V / t, h, false);
    output_dgrad_s = gemm(c, c.prec16, T_out, h, V / t, 1.0, c.e, c.e).s;
    Op norm = elementwise(c, 2.0 * e * h * (p.sequence_parallel ? T / t : T));
    Op loss_f = elementwise(c, c.loss_forward_bytes_per_logit * T_out * V / t);
    Op loss_b = elementwise(c, c.loss_backward_bytes_per_logit * T_out * V / t);
    out.output_forward_s = g.fwd.s + norm.s + loss_f.s;
    // A tied output layer on its own stage holds a copy of the word embedding, whose gradient
    // DeepSpeed's BF16_Optimizer accumulates there too (with pp 1 the embedding's is the same).
    const Op accumulate = bf16_optimizer_accumulates(c, p) && (p.pp > 1 || !m.tied_embeddings)
                              ? elementwise(c, kBf16OptimizerAccumulateBytesPerParam * V / t * h)
                              : Op{};
    out.output_backward_s = g.bwd.s + kBackwardElementwiseFactor * norm.s + loss_b.s + accumulate.s;
    out.output_forward_flops = g.fwd.flops;
    out.output_backward_flops = g.bwd.flops;
    out.output_forward_mem_bytes = g.fwd.bytes + norm.bytes + loss_f.bytes;
    out.output_backward_mem_bytes = g.bwd.bytes + kBackwardElementwiseFactor * norm.bytes + loss_b.bytes + accumulate.bytes;
  }

  // --- tensor-parallel collectives outside the layers, per micro-batch (see cost_model.h).
  // Megatron-LM: VocabParallelEmbedding (reduce_from_tensor_model_parallel_region, or
  // reduce_scatter_to_sequence_parallel_region with sequence parallelism), the output layer's
  // ColumnParallelLinear (copy_to_tensor_model_parallel_region: all-reduce of the input
  // gradient; sequence parallel: all-gather in, reduce-scatter of the input gradient) and
  // vocab_parallel_cross_entropy. With learned positions and sequence parallelism Megatron-Core
  // all-reduces the embedding and splits it instead (LanguageModelEmbedding); this model takes
  // the reduce-scatter for every model (the reduce_scatter_embeddings path), as the CPU runtime
  // does, and the position embedding's gradient joins the replicated parameters' all-reduce.
  if (p.tp > 1) {
    const GroupSpan span = group_span(GroupKind::kTp, p, gpn);
    const int64_t S = static_cast<int64_t>(e * T * h);                       // one [T, h] activation
    const int64_t ce = static_cast<int64_t>(kLossReduceBytesPerToken * T);  // one fp32 value per token
    auto col = [&](CollectiveKind k, int64_t bytes, int32_t fwd, int32_t bwd, bool fp32 = false) {
      return LayerCosts::Collective{k, GroupKind::kTp, bytes, fwd, bwd, 0, collective_time_s(k, bytes, span, cl), fp32};
    };
    using CK = CollectiveKind;
    double hidden_s = 0;  // the backward re-gather beside the input-gradient GEMM
    if (p.sequence_parallel) {
      out.embedding_collectives = {col(CK::kReduceScatter, S, 1, 0), col(CK::kAllGather, S, 0, 1)};
      out.output_collectives = {col(CK::kAllGather, S, 1, 1), col(CK::kAllReduce, ce, 3, 0, true),
                                col(CK::kReduceScatter, S, 0, 1)};
      hidden_s = std::min(out.output_collectives[0].time_s, kOverlapEfficiency * output_dgrad_s);
    } else {
      out.embedding_collectives = {col(CK::kAllReduce, S, 1, 0)};
      out.output_collectives = {col(CK::kAllReduce, ce, 3, 0, true), col(CK::kAllReduce, S, 0, 1)};
    }
    for (const auto& x : out.embedding_collectives) out.embedding_tp_total_s += (x.forward_count + x.backward_count) * x.time_s;
    for (const auto& x : out.output_collectives) out.output_tp_total_s += (x.forward_count + x.backward_count) * x.time_s;
    out.embedding_tp_exposed_s = out.embedding_tp_total_s;
    out.output_tp_exposed_s = out.output_tp_total_s - hidden_s;
    if (p.sequence_parallel) {
      const double norm = static_cast<double>(parameter_counts(m).final_norm);
      const double hd = static_cast<double>(m.hidden);
      out.sp_grad_params_per_layer = 2.0 * norm + (m.biases ? hd : 0.0) +  // two norms, projection bias
                                     (m.moe() ? hd * static_cast<double>(m.experts) : (m.biases ? hd : 0.0));  // router / fc2 bias
      out.sp_grad_params_first = m.learned_positions ? static_cast<double>(m.seq) * hd : 0.0;
      out.sp_grad_params_last = norm;
      out.sp_grad_bytes_per_param = grad_reduce_bytes_per_param(sc.training);
    }
  }

  // --- pipeline message: 1/t of the activation per rank. With sequence parallelism the
  // tensor is already sharded; without it Megatron sends 1/t from each TP rank and
  // all-gathers it over NVLink on arrival (scatter/gather optimization, Narayanan et al. 2021
  // section 4.1), which costs little next to the inter-node send and is not counted.
  // DeepSpeed's PipelineEngine does the same whenever the model-parallel group has more than
  // one rank: it sends a PartitionedTensor of the activation and of its gradient and
  // all-gathers it over the slice group on arrival (deepspeed/runtime/pipe/engine.py,
  // is_pipe_partitioned / is_grad_partitioned, on by default since the engine's first version).
  if (p.pp > 1) out.pp_message_bytes = static_cast<int64_t>(e * T * h / t);

  // --- activation offloading (pp 1: the stage is the whole model)
  if (p.activation_offload_layers > 0) {
    out.offload_bytes = static_cast<int64_t>(plan_layer_activation_bytes(m, sc, p));
    const double copy_s = static_cast<double>(out.offload_bytes) / host_link_bytes_per_s(cl.gpu);
    const double layers = static_cast<double>(m.layers);
    out.offload_forward_s =
        offload_stall_s(m.layers, p.activation_offload_layers, out.forward_s + out.host_forward_s, copy_s) / layers;
    out.offload_backward_s =
        offload_stall_s(m.layers, p.activation_offload_layers, out.backward_s + out.host_backward_s, copy_s) / layers;
  }
  return out;
}

}  // namespace cost_detail

double offload_stall_s(int64_t layers, int64_t offloaded, double layer_s, double copy_s) {
  if (offloaded <= 0 || layers <= offloaded) return 0.0;
  const int64_t on_gpu = layers - offloaded;  // activation sets the GPU may hold
  std::vector<double> copy_end(static_cast<size_t>(offloaded));
  double now = 0, stream_free = 0;
  for (int64_t k = 0; k < layers; ++k) {
    // Layer k may start once the copy of layer k - on_gpu has finished (its memory is free).
    const int64_t wait_for = k - on_gpu;
    if (wait_for >= 0 && wait_for < offloaded) now = std::max(now, copy_end[static_cast<size_t>(wait_for)]);
    now += layer_s;
    if (k < offloaded) {
      stream_free = std::max(now, stream_free) + copy_s;
      copy_end[static_cast<size_t>(k)] = stream_free;
    }
  }
  return std::max(0.0, now - static_cast<double>(layers) * layer_s);  // not a rounding residue below 0
}

int64_t sp_grad_reduce_bytes(const LayerCosts& L, int64_t layers, bool first, bool last) {
  const double params = static_cast<double>(layers) * L.sp_grad_params_per_layer + (first ? L.sp_grad_params_first : 0.0) +
                        (last ? L.sp_grad_params_last : 0.0);
  return static_cast<int64_t>(L.sp_grad_bytes_per_param * params);
}

double optimizer_step_time_s(const Scenario& sc, double sharded_params, double grad_params) {
  const GpuProfile& prof = gpu_profile(sc.cluster.gpu);
  return (optimizer_bytes_per_param(sc.training.precision, sc.training.optimizer) * sharded_params +
          kGradZeroBytesPerParam * grad_params) / hbm_bytes_per_s(sc.cluster.gpu, prof);
}

LayerCosts layer_costs(const Scenario& sc, const Plan& p) {
  const ModelShape m = model_shape(sc.model);
  const Ctx c = make_ctx(sc);
  const LayerCompute lc = layer_compute(c, m, p);
  return layer_costs_impl(sc, p, m, c, lc);
}

}  // namespace monarch
