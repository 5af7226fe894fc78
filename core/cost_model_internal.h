// Shared by the files of the cost model (cost_model.cc: GPU presets, calibration profiles and
// compute; collective_cost.cc; layer_cost.cc; iteration_cost.cc). Not a public header.
#pragma once

#include <algorithm>

#include "core/cost_model.h"
#include "core/profile.h"

namespace monarch::cost_detail {

// Gap between dependent kernels on one stream without CUDA graphs (launch + tail),
// ~2-4 us in Nsight Systems traces of Megatron-LM layers.
inline constexpr double kKernelGap_s = 2.5e-6;
// Communication overlapped with compute slows both down (SMs and HBM shared): hidden up to
// this fraction of the compute window (NCCL uses 16-32 SMs of 108-132, kNcclOverlapSms).
inline constexpr double kOverlapEfficiency = 0.9;
// SMs an NCCL collective holds while it runs beside compute: a hidden data-parallel
// reduce-scatter or all-gather (or EP all-to-all) slows the compute it hides behind by this share
// of the GPU's SMs for as long as it runs. NCCL launches one CTA per channel (src/enqueue.cc:
// grid = nChannels); a ring's channels are the topology search's, duplicated (src/graph/
// search.cc, connect.cc "Duplication"; on sm90 across nodes doubled again below 16), 16-32 on
// DGX A100 / H100 nodes. An H100 all-gather beside a GEMM runs 24 CTAs in an Nsight Systems trace
// (NVIDIA developer forums, "Compute-Communication Overlap Causes Severe GEMM Performance
// Degradation because of Tail Effect", 2025). Agrawal et al. 2025 (arXiv 2507.03114) measure an
// average 18.9% (at most 40%) compute slowdown when collectives overlap GPT and Llama layers on
// A100 and H100; 24 of 108-132 SMs is 18-22%. The GEMM that loses SMs also runs extra tile
// waves (the trace's tail); the SM share is the first-order term.
inline constexpr double kNcclOverlapSms = 24.0;
// Seconds a collective of `comm_s` adds when it overlaps `window_s` of compute on a GPU of
// `sm_count` SMs while its kernels hold `held_sms` of them (a share s): the pair ends when the
// later of the compute (slowed while the collective runs, compute_end_beside_s) and the
// collective does, max(s x comm_s, comm_s - window). The window hides at most
// kOverlapEfficiency of itself.
inline double overlapped_comm_cost_s(double comm_s, double window_s, double held_sms, int64_t sm_count) {
  const double hidden_s = kOverlapEfficiency * window_s;
  const double share = held_sms / static_cast<double>(sm_count);
  return std::max(compute_end_beside_s(hidden_s, comm_s, share), comm_s) - hidden_s;
}

// The calibration profile the GPU names, or nullptr when it names none (or it cannot be read).
const CalibrationProfile* profile_of(const GpuSpec& gpu);
// Measured matrix-product throughput for the shape, FLOP/s, or 0 when the profile has none.
double profile_flops_per_s(const CalibrationProfile* prof, const GpuProfile& gp, Precision p, double m, double n,
                           double k);
// fp8 falls back to bf16 on GPUs without fp8 tensor cores.
Precision effective_precision(const GpuSpec& gpu, Precision p);
// HBM bytes the optimizer step moves per parameter of its shard.
double optimizer_bytes_per_param(Precision p, Optimizer o);
// GEMM efficiency of the preset for an m x n x k product (batch of them), tile waves included.
double gemm_eff(const GpuProfile& prof, Precision p, double m, double n, double k, double batch);
// Achievable HBM bandwidth, bytes/s: measured when the profile has it, else the preset.
double hbm_bytes_per_s(const GpuSpec& gpu, const GpuProfile& prof);
// The tensor cores' rate under the GPU's power cap, as a fraction of the rate at its TDP
// (1 without a cap): every compute rate is multiplied by it, peaks for MFU are not.
double power_limit_clock_factor(const GpuSpec& gpu);

// One kernel or a sum of kernels: time, FLOPs and HBM bytes.
struct Op {
  double s = 0, flops = 0, bytes = 0;
  Op& operator+=(const Op& o) {
    s += o.s;
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};
// The same op run n times.
inline Op operator*(double n, const Op& o) { return Op{n * o.s, n * o.flops, n * o.bytes}; }

struct Ctx {
  const GpuSpec* gpu;
  const GpuProfile* prof;
  Precision prec;       // training precision (fp8 GEMMs where TE runs them)
  Precision prec16;     // precision of non-fp8 kernels (attention, output layer)
  double e;             // activation element bytes
  double peak_gemm, peak16;  // tensor-core peaks at the clock of the GPU's power cap
  double power_clock = 1.0;  // power_limit_clock_factor of the GPU, for measured rates
  double hbm;
  const CalibrationProfile* cal;  // measured throughput, or nullptr
  bool graphed_layers = false;    // training.cuda_graphs and the whole layer is captured
  // What the training stack runs (training.framework, training.compile): the loss kernels'
  // bytes per logit, the attention kernel's efficiencies, torchtitan's eager block and its
  // separate q, k, v and w1, w3 projections.
  double loss_forward_bytes_per_logit = 0, loss_backward_bytes_per_logit = 0;
  double flash_forward_efficiency = 0, flash_backward_efficiency = 0;
  const FusedAttentionKernel* attention_kernel = &kFlash2Attention;
  bool eager_block = false;
  bool separate_projections = false;
  // TP communication overlap runs on Transformer Engine's userbuffers (Megatron), whose
  // pipelined reduce-scatters take SMs from their GEMMs; torchtitan's async TP does not.
  bool te_userbuffers = false;
  // FSDP2 (torchtitan's ZeRO-2/3) copies every gathered layer out of the all-gather buffer and
  // its gradients into the reduce-scatter buffer on the compute stream (add_fsdp2_copy_kernels).
  bool fsdp2_copies = false;
  double grad_reduce_bytes = 0;  // bytes per gradient element of the reduce-scatter
  bool fp8_params = false;       // the linear layers' weights gathered in fp8
  Framework framework = Framework::kMegatron;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // how each fp8 cast scales (fp8 runs only)
  // How the MoE layer's local experts run their GEMMs: 0 = one grouped kernel for all of them
  // (torchtitan's torch._grouped_mm), else one GEMM per expert, this many at a time.
  double expert_gemms_at_once = 0;
  Precision training_precision = Precision::kBf16;  // as the scenario states it (prec: as run)
};

Ctx make_ctx(const Scenario& s);

// Bytes of `params` weights as ZeRO / FSDP gathers them: `elem_bytes` each (the compute
// precision), the linear layers' `gemm_params` in fp8 when the weights are kept in fp8.
inline double gathered_weight_bytes(double elem_bytes, bool fp8_params, double params, double gemm_params) {
  return elem_bytes * params - (fp8_params ? (elem_bytes - kFp8WeightBytes) * gemm_params : 0.0);
}

// Per-layer compute of the plan's micro-batch: forward, backward and recompute passes.
struct LayerCompute {
  Op fwd, bwd, recompute;
  double host_fwd_s = 0, host_bwd_s = 0, host_recompute_s = 0;  // host dispatch time per pass
  double extra_host_ops_per_pass = 0;  // ops beyond the layer's counted ones, forward and backward each
  double extra_host_ops_backward = 0;  // and beyond those, in the backward only
  Op attn_fwd;  // attention core forward (for CP overlap and selective recompute)
  Op attn_bwd;  // and its backward
  Op moe_fwd, moe_bwd;  // of fwd / bwd: the MoE block (router, expert GEMMs, activation, permutation)
  double gemm_fwd_s = 0, gemm_bwd_s = 0;  // GEMM time (for TP overlap windows)
  // The GEMMs a TP collective runs beside under TP communication overlap, in layer order QKV,
  // projection, fc1, fc2 (fc1 and fc2 are 0 in an MoE layer, whose MLP has no TP pair): the
  // forward and the backward (input and weight gradients) time of each.
  double tp_gemm_fwd_s[4] = {}, tp_gemm_bwd_s[4] = {};
  // Under torchtitan's op-level recompute, the recomputed matmul that each TP block's gathered
  // input feeds (wk; w3 with a gate, else none): what async TP can hide that gather behind.
  double tp_regather_gemm_s[2] = {};
};

LayerCompute layer_compute(const Ctx& c, const ModelShape& m, const Plan& p);
// The kernels Megatron-LM's own layers (materialized attention's stack) run beyond Transformer
// Engine's fused ones: the QKV bias add, the bias-gradient reductions, the q/k/v gradient
// concatenation. Adds them to lc for a micro-batch of T local tokens.
void add_megatron_local_layer_kernels(const Ctx& c, const ModelShape& m, const Plan& p, double T, LayerCompute& lc);
// The per-layer costs (compute, collectives, host) from the layer's compute.
LayerCosts layer_costs_impl(const Scenario& sc, const Plan& p, const ModelShape& m, const Ctx& c,
                            const LayerCompute& lc);

}  // namespace monarch::cost_detail
