#include "core/cost_model.h"

#include "core/framework_rules.h"
#include "core/plan_warnings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#include "core/collectives.h"
#include "core/profile.h"
#include "core/profile_io.h"
#include "core/units.h"

namespace monarch {

// ============================================================================ constants
//
// GPU profiles. gemm_efficiency_* is the large-GEMM ceiling divided by the shape factors of
// gemm_efficiency() at the shape where it was measured, so that the model reproduces the
// measurement there.
//
// A100 SXM: 108 SMs, 256x128 CTA tiles for large bf16 GEMMs (cuBLAS ampere_bf16_s16816gemm
// 256x128 kernels; NVIDIA A100 whitepaper for the SM count). Maximum achievable matmul FLOPS
// (MAMF) 267.9 of 312 TFLOP/s = 85.9% at 6912x16384x2048 (S. Bekman, ml-engineering,
// compute/accelerator MAMF table, CUDA 12.1): 0.859 / k-factor(2048) 0.941 = 0.913.
// FlashAttention-2 on A100, head dim 128, causal: ~200 TFLOP/s forward (64%), ~165 backward
// (53%) at long sequences (Dao 2023, FlashAttention-2, Figs. 4-6). HBM2e 2.0 TB/s, ~1.7 TB/s
// reached by bandwidth tests (85%); fused elementwise kernels reach ~80%.
// NCCL all_reduce_perf bus bandwidth on DGX A100 (NVLink3 via NVSwitch, 300 GB/s per
// direction): ~230-240 GB/s -> 0.78.
//
// H100 SXM: 132 SMs, 128x256 tiles (cuBLAS sm90 128x256x64 WGMMA kernels). MAMF 792.1 of 989
// = 80.1% at 6144x17920x2816 (same source, CUDA 12.1): 0.801 / (waves 0.979 x k 0.957) =
// 0.855. FP8: cuBLASLt fp8 GEMMs reach ~1,300-1,400 of 1,979 TFLOP/s for large shapes
// (NVIDIA Transformer Engine and cuBLAS 12 release figures; ~0.68) -> 0.72 before the shape
// factors. FlashAttention-3 / cuDNN fused attention, bf16, head dim 128, causal, 8-16k
// tokens: ~620-660 TFLOP/s forward (~0.65), ~470-500 backward (~0.49) (Shah et al. 2024,
// FlashAttention-3, Figs. 5-6). HBM3 3.35 TB/s, ~2.9-3.0 TB/s measured. NCCL ring
// all-reduce bus bandwidth on DGX H100 (NVLink4, 450 GB/s per direction): ~360 GB/s -> 0.80.
//
// H200 SXM: the H100 die at 700 W with HBM3e; GH200 (same die, same peak) reaches MAMF
// 821.0 / 989 = 83% (same source, CUDA 12.5) -> 0.83 / 0.937 = 0.885.
//
// B200 / GB200: 148 SMs, 256x256 two-SM tiles (tcgen05). No MAMF figure was published in
// the sources above when this was written; NVIDIA's cuBLAS 12.8 blog reports ~1.6-1.8 PFLOP/s
// bf16 GEMMs on B200 (of 2.25 dense), ~0.75 -> 0.80 before shape factors; fp8 ~3.2-3.5 of
// 4.5 -> 0.75. Attention: cuDNN 9.7 SDPA on B200 ~1.3-1.5 PFLOP/s fwd bf16 (~0.6).
namespace {

//
// Sustained clocks: A100 SXM4's 312 TFLOP/s is quoted at 1410 MHz; NVIDIA's HPL Rpeak
// assumes the 1305 MHz it sustains at 400 W (glennklockwood.com/garden/peak-FLOPS), and
// under hours of dense fp16/bf16 tensor-core load boards settle at 1.2-1.3 GHz (nvidia-smi
// logs of MLPerf Training / Megatron runs) -> 1245 / 1410 = 0.88. H100 SXM's 989 TFLOP/s is quoted at 1830 MHz; its default application clock is
// 1755 MHz and under sustained dense tensor load at 700 W it settles near 1600-1650 MHz
// (nvidia-smi clock logs in MLPerf Training / Megatron runs) -> 0.885. H200 (same die,
// same 700 W, cooler HBM3e) and B200 (1000 W) are taken alike, 0.9.
constexpr GpuProfile kA100{"A100", 108, 256, 128, 0.913, 0.913, 0.60, 0.64, 0.53, 0.80, 0.78, 0.88};
constexpr GpuProfile kH100{"H100", 132, 128, 256, 0.855, 0.72, 0.60, 0.66, 0.49, 0.80, 0.80, 0.885};
constexpr GpuProfile kH200{"H200", 132, 128, 256, 0.885, 0.74, 0.62, 0.66, 0.49, 0.80, 0.80, 0.90};
constexpr GpuProfile kB200{"B200", 148, 256, 256, 0.80, 0.75, 0.60, 0.60, 0.47, 0.80, 0.80, 0.90};
constexpr GpuProfile kGeneric{"generic", 132, 128, 256, 0.80, 0.65, 0.60, 0.60, 0.45, 0.80, 0.80, 0.90};

// K-loop prologue/epilogue of a GEMM tile: efficiency k / (k + kGemmKHalf). Writing a tile's
// outputs costs about as much as two 64-deep K steps of the main loop (CUTLASS/cuBLAS
// pipelined mainloop with 3-4 stages); measured bf16 GEMMs at K = 1024 run ~10% slower than
// at K = 8192 for large M, N (MAMF finder sweeps, ml-engineering).
constexpr double kGemmKHalf = 128.0;
// A half-size tile (to fill more SMs when few waves) runs ~8% below the large tile's rate
// (lower data reuse per CTA; cuBLAS heuristics pick it only when waves are short).
constexpr double kHalfTileRate = 0.92;
// Gap between dependent kernels on one stream without CUDA graphs (launch + tail),
// ~2-4 us in Nsight Systems traces of Megatron-LM layers.
constexpr double kKernelGap_s = 2.5e-6;
// Host floor of eager PyTorch: every op a layer runs costs the host its Python call, the ATen
// dispatcher, autograd recording and cudaLaunchKernel before its kernel reaches the stream,
// ~5-25 us per op (PyTorch dispatch chain: ~1 us Python, ~1 us pybind11, 1-3 us autograd, 1-2 us
// dispatcher, 1-5 us backend selection, 1-3 us cudaLaunchKernel; Kineto traces of Megatron-LM
// layers show 10-20 us CPU per aten op on A100 hosts). When a layer's kernels run faster than
// that, the GPU idles between them: a pass takes max(GPU time, host time) (the host runs ahead
// while long kernels queue, so only the excess shows).
constexpr double kEagerHostPerOp_s = 15e-6;
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
// FlashAttention efficiency falls for short sequences: s / (s + kFlashSeqHalf). FA2 on A100
// runs causal hdim-128 forward at ~130 TFLOP/s at 512 tokens vs ~195 at 8k (Dao 2023).
constexpr double kFlashSeqHalf_tokens = 256.0;
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
// gradient (4 + 2 + 4 bytes). Megatron-LM cross_entropy.py.
constexpr double kLossForwardBytesPerLogit = 14.0;
constexpr double kLossBackwardBytesPerLogit = 10.0;
// Fp8 (Transformer Engine): each fp8 GEMM operand is cast (read 16-bit, write fp8) and, for
// the wgrad/dgrad GEMMs on Hopper, transposed (write fp8 again): 2 + 1 + 1 bytes per element.
constexpr double kFp8CastBytesPerElement = 4.0;
// Optimizer step per parameter shard, HBM bytes (Megatron-LM / apex multi-tensor apply):
// gradient-norm pass reads the fp32 grad (4); Adam reads the grad (4), reads and writes the
// fp32 master weight (8), m and v (16); copying the master weights into the 16-bit model
// weights reads 4 and writes 2. Mixed-precision Adam: 4 + 28 + 6 = 38 bytes.
constexpr double kAdamMixedBytesPerParam = 38.0;
constexpr double kAdamFp32BytesPerParam = 32.0;   // norm 4, grad 4, weight 8, m and v 16
constexpr double kSgdMixedBytesPerParam = 30.0;   // norm 4, grad 4, master 8, momentum 8, copy 6
constexpr double kSgdFp32BytesPerParam = 24.0;    // norm 4, grad 4, weight 8, momentum 8
// Vocabulary-parallel cross-entropy reduces in fp32: Megatron-LM's _VocabParallelCrossEntropy
// casts the logits to float before its all-reduces of the max logit, the target logit and the
// sum of exponentials (megatron/core/tensor_parallel/cross_entropy.py).
constexpr double kLossReduceBytesPerToken = 4.0;
// Zeroing the fp32 gradient buffer each iteration (write 4 bytes per parameter held).
constexpr double kGradZeroBytesPerParam = 4.0;
// Communication overlapped with compute slows both down (SMs and HBM shared): hidden up to
// this fraction of the compute window (NCCL uses 8-32 SMs of 108-132; Megatron reports
// ~5-10% compute slowdown with overlapped DP communication).
constexpr double kOverlapEfficiency = 0.9;
// TP communication overlap (Transformer Engine userbuffers, Megatron --tp-comm-overlap, NeMo
// tp_comm_overlap): the overlapped collectives run as kernels that hold SMs while the GEMM they
// hide behind runs on the rest. SMs per overlapped GEMM in NeMo's / Megatron-Bridge's H100
// configs (comm_overlap.py, userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192): pipelined
// reduce-scatter after the projection and fc2 24 and 16, bulk overlaps in the backward 4, 24, 2
// and 4, ring-exchange all-gathers on the copy engines (0-1): 7.4 on average over a layer's ten
// overlapped GEMMs (fp8 and GPT-3 175B configs 3.6-3.9).
constexpr double kTpOverlapCommSms = 8.0;

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
// as 1/sqrt(E/ep). With ep == 1 no rank waits for another.
double moe_rank_imbalance(const ModelShape& m, const Plan& p) {
  if (!m.moe() || !m.dropless || p.ep <= 1) return 1.0;
  const double local_experts = static_cast<double>(m.experts) / static_cast<double>(p.ep);
  return 1.0 + (kMoeExpertLoadImbalance - 1.0) / std::sqrt(local_experts);
}

}  // namespace

// NCCL bus bandwidth over InfiniBand/RoCE NICs: ~22.5-23 GB/s per 200 Gb/s HDR NIC and
// ~45-47 GB/s per 400 Gb/s NDR NIC in multi-node nccl-tests (NVIDIA DGX SuperPOD reference
// architectures) -> 0.9.
const double kInterNodeEfficiency = 0.9;

const GpuProfile& gpu_profile(const GpuSpec& gpu) {
  std::string n;
  for (char c : gpu.name) n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  std::string_view v(n);
  if (v.find("A100") != std::string_view::npos) return kA100;
  if (v.find("H100") != std::string_view::npos || v.find("H800") != std::string_view::npos) return kH100;
  if (v.find("H200") != std::string_view::npos || v.find("GH200") != std::string_view::npos) return kH200;
  if (v.find("B200") != std::string_view::npos || v.find("B100") != std::string_view::npos) return kB200;
  return kGeneric;
}

// ============================================================================ profiles

Expected<const CalibrationProfile*> calibration_profile(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Expected<CalibrationProfile>>> cache;
  std::shared_ptr<const Expected<CalibrationProfile>> entry;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(path);
    if (it == cache.end()) {
      it = cache.emplace(path, std::make_shared<const Expected<CalibrationProfile>>(read_profile(path))).first;
    }
    entry = it->second;
  }
  if (!entry->ok()) return entry->problems();
  return &entry->value();  // entries are never removed: the pointer stays valid
}

namespace {

const CalibrationProfile* profile_of(const GpuSpec& gpu) {
  if (gpu.profile.empty()) return nullptr;
  Expected<const CalibrationProfile*> p = calibration_profile(gpu.profile);
  return p.ok() ? *p : nullptr;
}

// Measured matrix-product throughput for the shape, FLOP/s, or 0 when the profile has none.
// GPU profiles are short measurements at boost clocks: scaled by the sustained-clock fraction
// like the preset ceilings.
double profile_flops_per_s(const CalibrationProfile* prof, const GpuProfile& gp, Precision p, double m, double n,
                           double k) {
  if (prof == nullptr) return 0;
  const double tf = profile_matmul_tflops(*prof, p, static_cast<int64_t>(std::max(1.0, m)),
                                          static_cast<int64_t>(std::max(1.0, n)), static_cast<int64_t>(std::max(1.0, k)));
  if (!(tf > 0)) return 0;
  return tf * kTera * (prof->device_kind == DeviceKind::kGpu ? gp.sustained_clock_fraction : 1.0);
}

}  // namespace

// ============================================================================ compute

namespace {

Precision effective_precision(const GpuSpec& gpu, Precision p) {
  if (p == Precision::kFp8 && gpu.peak_tflops.fp8 <= 0) return Precision::kBf16;
  return p;
}

double base_efficiency(const GpuProfile& prof, Precision p) {
  switch (p) {
    case Precision::kFp8: return prof.gemm_efficiency_fp8;
    case Precision::kFp32: return prof.gemm_efficiency_tf32;
    default: return prof.gemm_efficiency_16bit;
  }
}

double optimizer_bytes_per_param(Precision p, Optimizer o) {
  const bool mixed = p != Precision::kFp32;
  if (o == Optimizer::kAdam) return mixed ? kAdamMixedBytesPerParam : kAdamFp32BytesPerParam;
  return mixed ? kSgdMixedBytesPerParam : kSgdFp32BytesPerParam;
}

double ceil_div(double a, double b) { return std::ceil(a / b); }

double tile_utilization(const GpuProfile& prof, double m, double n, double batch, double tm, double tn) {
  const double tiles = ceil_div(m, tm) * ceil_div(n, tn) * batch;
  const double sms = static_cast<double>(prof.sm_count);
  const double waves = ceil_div(tiles, sms);
  return (m * n * batch) / (waves * sms * tm * tn);
}

double gemm_eff(const GpuProfile& prof, Precision p, double m, double n, double k, double batch) {
  const double tm = static_cast<double>(prof.tile_m), tn = static_cast<double>(prof.tile_n);
  const double big = tile_utilization(prof, m, n, batch, tm, tn);
  const double half = kHalfTileRate * std::max(tile_utilization(prof, m, n, batch, tm, tn / 2),
                                               tile_utilization(prof, m, n, batch, tm / 2, tn));
  return base_efficiency(prof, p) * prof.sustained_clock_fraction * std::max(big, half) * (k / (k + kGemmKHalf));
}

double hbm_bytes_per_s(const GpuSpec& gpu, const GpuProfile& prof) {
  if (const CalibrationProfile* cal = profile_of(gpu); cal != nullptr && cal->memory_bandwidth_GBps > 0)
    return gbps_to_bytes_per_s(cal->memory_bandwidth_GBps);  // measured read + write
  return gbps_to_bytes_per_s(gpu.memory_bandwidth_GBps) * prof.memory_efficiency;
}

}  // namespace

double gemm_efficiency(const GpuSpec& gpu, Precision precision, int64_t m, int64_t n, int64_t k) {
  const Precision p = effective_precision(gpu, precision);
  return gemm_eff(gpu_profile(gpu), p, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), 1.0);
}

double compute_time_s(const GpuSpec& gpu, Precision precision, double flops, double mem_bytes, int64_t m,
                      int64_t n, int64_t k) {
  const GpuProfile& prof = gpu_profile(gpu);
  const double mem_s = mem_bytes / hbm_bytes_per_s(gpu, prof);
  if (m <= 0 || n <= 0 || k <= 0) return mem_s + kKernelGap_s;
  const Precision p = effective_precision(gpu, precision);
  double rate = profile_flops_per_s(profile_of(gpu), prof, p, static_cast<double>(m), static_cast<double>(n),
                                    static_cast<double>(k));
  if (!(rate > 0))
    rate = peak_tflops(gpu, p) * kTera *
           gemm_eff(prof, p, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), 1.0);
  return std::max(flops / rate, mem_s) + kKernelGap_s;
}

// Tensor-core MMA fragment of one warp (16 x 16, wmma m16n16k16 / mma.sync tiles; CUDA C++
// Programming Guide, "Warp Matrix Functions"): the smallest tile a GEMM kernel pads a matrix to.
constexpr double kMmaFragmentDim = 16.0;

double batched_compute_time_s(const GpuSpec& gpu, Precision precision, double flops, double mem_bytes,
                              int64_t batch, int64_t m, int64_t n, int64_t k) {
  const GpuProfile& prof = gpu_profile(gpu);
  const double mem_s = mem_bytes / hbm_bytes_per_s(gpu, prof);
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return mem_s + kKernelGap_s;
  const Precision p = effective_precision(gpu, precision);
  const double bm = static_cast<double>(m), bn = static_cast<double>(n), bk = static_cast<double>(k);
  const double nb = static_cast<double>(batch);
  double rate = profile_flops_per_s(profile_of(gpu), prof, p, bm * nb, bn, bk);  // as one taller GEMM
  if (!(rate > 0)) {
    const double tm = std::min(static_cast<double>(prof.tile_m), kMmaFragmentDim * ceil_div(bm, kMmaFragmentDim));
    const double tn = std::min(static_cast<double>(prof.tile_n), kMmaFragmentDim * ceil_div(bn, kMmaFragmentDim));
    rate = peak_tflops(gpu, p) * kTera * base_efficiency(prof, p) * prof.sustained_clock_fraction *
           tile_utilization(prof, bm, bn, nb, tm, tn) * (bk / (bk + kGemmKHalf));
  }
  return std::max(flops / rate, mem_s) + kKernelGap_s;
}

// ============================================================================ communication

namespace {

double intra_bytes_per_s(const ClusterConfig& c) {
  const GpuProfile& prof = gpu_profile(c.gpu);
  return gbps_to_bytes_per_s(c.intra_node.bandwidth_GBps) * prof.nvlink_efficiency;
}

// Inter-node bandwidth available to one GPU: its share of the node's NICs.
double nic_bytes_per_s_per_gpu(const ClusterConfig& c, bool rail_aligned) {
  const double gpn = static_cast<double>(std::max<int64_t>(c.gpus_per_node, 1));
  const double nics = static_cast<double>(c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node);
  double bw = gbps_to_bytes_per_s(c.inter_node.bandwidth_GBps) * kInterNodeEfficiency * std::min(1.0, nics / gpn);
  // Oversubscribed leaf uplinks slow traffic that leaves the leaf. On a rail-optimized
  // network, traffic between GPUs of the same local index stays on its rail switch.
  const bool stays_on_rail = c.topology == Topology::kRailOptimized && rail_aligned;
  if (c.topology != Topology::kStar && !stays_on_rail && c.oversubscription > 1.0) bw /= c.oversubscription;
  return bw;
}

}  // namespace

// All-to-all (NCCL's ncclGroupStart + ncclSend/ncclRecv to every peer, nccl-tests alltoall_perf).
//
// Concurrency: NCCL turns the n - 1 peer exchanges into p2p "rounds" (round d: send to rank + d,
// receive from rank - d) spread over its p2p channels; each channel runs up to
// NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 rounds of one work batch at once, one warp group each
// (src/enqueue.cc addP2pToPlan / ncclP2pChannelBaseForRound, src/include/device.h), and NCCL
// opens up to NCCL_MAX_P2P_NCHANNELS = MAXCHANNELS = 32 p2p channels. So up to 32 x 8 = 256
// peers are in flight together: every link the exchange uses (NVLink port, NIC) streams at
// once and the time is the busiest link's bytes over its bandwidth (max, not a sum), plus one
// end-to-end latency of the slowest path per wave of 256 peers (not n - 1 latencies in series).
// nccl-tests (S. Jeaugey, NVIDIA/nccl-tests#130): "a portion of the traffic will be local ...
// the portion that's going through the network will determine the global time"; busbw = algbw x
// (n-1)/n = N/(N-1) x the network bandwidth per GPU on N nodes.
namespace {
constexpr int64_t kP2pChannels = 32;         // NCCL_MAX_P2P_NCHANNELS default (MAXCHANNELS)
constexpr int64_t kP2pRoundsPerBatch = 8;    // NCCL_MAX_DEV_WORK_P2P_PER_BATCH
}  // namespace

int64_t all_to_all_latency_waves(int64_t n) {
  if (n <= 1) return 0;
  constexpr int64_t in_flight = kP2pChannels * kP2pRoundsPerBatch;
  return (n - 1 + in_flight - 1) / in_flight;
}

bool all_to_all_uses_pxn(const GroupSpan& g, const ClusterConfig& c) {
  return c.topology == Topology::kRailOptimized && g.crosses_nodes() && g.ranks_per_node > 1;
}

// Per-GPU load of the busiest member, as fractions of its send buffer S (group of n, at most r
// members per node, N nodes):
// - NIC: the bytes for members on other nodes, (n - r) / n. Rail-optimized networks: NCCL's
//   PXN (default since NCCL 2.12, NCCL_PXN_DISABLE=0) first moves a message for a remote GPU on
//   another rail over NVLink to the local member on that rail, whose NIC sends it on the rail
//   (NVIDIA "Doubling all2all performance with NCCL 2.12", 2022). Each NIC then carries its
//   node's traffic for its own rail, r x (N - 1) x S / n: the same volume, but it never leaves
//   the rail switch, so leaf uplink oversubscription does not apply. Without PXN (fat tree) the
//   messages cross the leaf uplinks. A NIC shared by several GPUs (nics < gpus per node) is
//   shared in nic_bytes_per_s_per_gpu.
// - NVLink: the on-node members' bytes (r - 1) / n, plus with PXN the forwarded share of the
//   off-node bytes, (n - r) / n x (r - 1) / r (what goes to other rails); sent once and received
//   once by the rail GPU, both ports of the NVSwitch full duplex. N x r = n: (r - 1) / r.
AllToAllLoad all_to_all_load(const GroupSpan& g, const ClusterConfig& c) {
  AllToAllLoad l;
  const double n = static_cast<double>(g.size);
  if (g.size <= 1) return l;
  const double r = static_cast<double>(std::max<int64_t>(1, g.crosses_nodes() ? g.ranks_per_node : g.size));
  l.nvlink_fraction = (r - 1.0) / n;
  if (!g.crosses_nodes()) return l;
  l.nic_fraction = (n - r) / n;
  l.on_rail = g.rail_aligned;
  if (all_to_all_uses_pxn(g, c)) {
    l.nvlink_fraction += (n - r) / n * (r - 1.0) / r;
    l.on_rail = true;
  }
  return l;
}

double all_to_all_latency_s(const GroupSpan& g, const ClusterConfig& c) {
  const double alpha = us_to_s(g.crosses_nodes() ? c.inter_node.latency_us : c.intra_node.latency_us);
  return static_cast<double>(all_to_all_latency_waves(g.size)) * alpha;
}

double collective_wire_bytes(CollectiveKind kind, int64_t bytes, int64_t n) {
  if (n <= 1) return 0;
  return collective_bus_factor(kind, static_cast<double>(n)) * static_cast<double>(bytes);
}

double collective_time_s(CollectiveKind kind, int64_t bytes_per_rank, const GroupSpan& g, const ClusterConfig& c) {
  if (g.size <= 1 || bytes_per_rank <= 0) return 0;
  const double S = static_cast<double>(bytes_per_rank);
  const double n = static_cast<double>(g.size);
  const double lat_intra = us_to_s(c.intra_node.latency_us);
  const double lat_inter = us_to_s(c.inter_node.latency_us);
  const double steps_factor = kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  const double bw_intra = intra_bytes_per_s(c);
  const CalibrationProfile* cal = profile_of(c.gpu);
  if (!g.crosses_nodes()) {
    if (cal != nullptr) {
      const double t = profile_collective_time_s(*cal, kind, static_cast<int>(g.size), bytes_per_rank);
      if (t > 0) return t;  // measured on this node (nccl-tests style)
    }
    if (kind == CollectiveKind::kAllToAll) return all_to_all_latency_s(g, c) + collective_bus_factor(kind, n) * S / bw_intra;
    return steps_factor * (n - 1.0) * lat_intra + collective_bus_factor(kind, n) * S / bw_intra;
  }
  // Across nodes: r members per node, N nodes. Hierarchical algorithm: an intra-node phase on
  // NVLink and an inter-node phase where each of the r GPUs moves 1/r of the data over its
  // own NIC share (NCCL rings/trees use one NIC per GPU rail).
  const double r = static_cast<double>(g.ranks_per_node);
  const double N = static_cast<double>(g.nodes);
  const double bw_nic = nic_bytes_per_s_per_gpu(c, g.rail_aligned);
  if (kind == CollectiveKind::kAllToAll) {
    const AllToAllLoad load = all_to_all_load(g, c);
    return all_to_all_latency_s(g, c) +
           std::max(S * load.nic_fraction / nic_bytes_per_s_per_gpu(c, load.on_rail), S * load.nvlink_fraction / bw_intra);
  }
  double intra = r > 1 ? collective_bus_factor(kind, r) * S / bw_intra + steps_factor * (r - 1.0) * lat_intra : 0.0;
  if (cal != nullptr && r > 1) {
    const double t = profile_collective_time_s(*cal, kind, static_cast<int>(r), bytes_per_rank);
    if (t > 0) intra = t;
  }
  // Latency: a ring takes N - 1 steps per phase; for all-reduce over many nodes NCCL switches
  // to double binary trees, 2 log2(N) steps (NCCL_ALGO ring/tree tuning model).
  double inter_steps = steps_factor * (N - 1.0);
  if (kind == CollectiveKind::kAllReduce) inter_steps = std::min(inter_steps, 2.0 * std::ceil(std::log2(N)));
  const double inter = collective_bus_factor(kind, N) * S / r / bw_nic + inter_steps * lat_inter;
  return intra + inter;
}

double p2p_time_s(int64_t bytes, bool crosses_nodes, const ClusterConfig& c) {
  if (bytes <= 0) return 0;
  const double S = static_cast<double>(bytes);
  if (!crosses_nodes) return us_to_s(c.intra_node.latency_us) + S / intra_bytes_per_s(c);
  return us_to_s(c.inter_node.latency_us) + S / nic_bytes_per_s_per_gpu(c, true);
}

// ============================================================================ layer costs

namespace {

struct Op {
  double s = 0, flops = 0, bytes = 0;
  Op& operator+=(const Op& o) {
    s += o.s;
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

struct Ctx {
  const GpuSpec* gpu;
  const GpuProfile* prof;
  Precision prec;       // training precision (fp8 GEMMs where TE runs them)
  Precision prec16;     // precision of non-fp8 kernels (attention, output layer)
  double e;             // activation element bytes
  double peak_gemm, peak16;
  double hbm;
  const CalibrationProfile* cal;  // measured throughput, or nullptr
};

Ctx make_ctx(const Scenario& s) {
  Ctx c;
  c.gpu = &s.cluster.gpu;
  c.prof = &gpu_profile(s.cluster.gpu);
  c.prec = effective_precision(s.cluster.gpu, s.training.precision);
  c.prec16 = c.prec == Precision::kFp8 ? Precision::kBf16 : c.prec;
  c.e = bytes_per_element(s.training.precision);
  c.peak_gemm = peak_tflops(s.cluster.gpu, c.prec) * kTera;
  c.peak16 = peak_tflops(s.cluster.gpu, c.prec16) * kTera;
  c.hbm = hbm_bytes_per_s(s.cluster.gpu, *c.prof);
  c.cal = profile_of(s.cluster.gpu);
  return c;
}

// One GEMM (m x k) . (k x n), `batch` times, in precision p. Operand bytes per element `ein`,
// output `eout`; `c_extra_bytes` adds accumulation traffic (fp32 main_grad read + write).
Op gemm(const Ctx& c, Precision p, double m, double n, double k, double batch, double ein, double eout,
        double c_extra_bytes = 0) {
  Op o;
  o.flops = 2.0 * m * n * k * batch;
  o.bytes = batch * (ein * (m * k + k * n) + eout * m * n) + c_extra_bytes;
  double rate = profile_flops_per_s(c.cal, *c.prof, p, m * batch, n, k);  // batched: as one taller GEMM
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
GemmCost linear(const Ctx& c, double m, double n, double k, bool fp8_ok, double batch = 1.0) {
  const Precision p = fp8_ok ? c.prec : c.prec16;
  const double ein = p == Precision::kFp8 ? 1.0 : c.e;
  GemmCost g;
  g.fwd = gemm(c, p, m, n, k, batch, ein, c.e);
  g.bwd = gemm(c, p, m, k, n, batch, ein, c.e);                         // dgrad: dX = dY W^T
  g.bwd += gemm(c, p, k, n, m, batch, ein, 4.0, batch * 4.0 * k * n);  // wgrad into fp32 main_grad
  if (p == Precision::kFp8) {
    g.fwd += elementwise(c, kFp8CastBytesPerElement * m * k * batch);
    g.bwd += elementwise(c, kFp8CastBytesPerElement * m * n * batch);
  }
  return g;
}

struct LayerCompute {
  Op fwd, bwd, recompute;
  double host_fwd_s = 0, host_bwd_s = 0, host_recompute_s = 0;  // host dispatch time per pass
  Op attn_fwd;  // attention core forward (for CP overlap and selective recompute)
  Op moe_fwd, moe_bwd;  // of fwd / bwd: the MoE block (router, expert GEMMs, activation, permutation)
  double gemm_fwd_s = 0, gemm_bwd_s = 0;  // GEMM time (for TP overlap windows)
};

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
  gemms[n_gemms++] = linear(c, T, (q + 2.0 * kv) / t, h, true);  // QKV
  gemms[n_gemms++] = linear(c, T, h, q / t, true);               // attention projection
  if (m.moe()) {
    // Token flow (model_math.h MoeTokenFlow): the router sees the T / tp tokens of this rank's
    // sequence shard; each of the E / ep local experts computes on its capacity slots from every
    // rank of the EP group and of the ETP group (ep x etp x cap rows), 1/etp of its columns:
    // the FLOPs per rank are the same for every etp.
    const MoeTokenFlow f = moe_token_flow(m, p);
    const double E = static_cast<double>(m.experts);
    first_moe_gemm = n_gemms;
    gemms[n_gemms++] = linear(c, f.routed_tokens, E, h, false);  // router
    gemms[n_gemms++] = linear(c, f.rows_per_expert, (m.gated_mlp ? 2.0 : 1.0) * f.expert_ffn_local, h, true, f.local_experts);
    gemms[n_gemms++] = linear(c, f.rows_per_expert, h, f.expert_ffn_local, true, f.local_experts);  // row-parallel partial sums
  } else {
    const double f = static_cast<double>(m.ffn);
    gemms[n_gemms++] = linear(c, T, (m.gated_mlp ? 2.0 : 1.0) * f / t, h, true);  // fc1 (gate+up)
    gemms[n_gemms++] = linear(c, T, h, f / t, true);                               // fc2
  }
  // TP communication overlap with sequence parallelism splits each forward GEMM that an
  // all-gather feeds (QKV, fc1) or a reduce-scatter drains (projection, fc2) into tp chunks of
  // T / tp rows, one per ring step (Transformer Engine userbuffers split_overlap_ag /
  // split_overlap_rs; the pipelined reduce-scatter uses num_splits = 4 in NeMo's configs): tp
  // smaller GEMMs, each with its own wave quantization and kernel launch.
  if (p.tp_comm_overlap && p.tp > 1 && p.sequence_parallel && !m.moe()) {
    const double dims[4][2] = {{(q + 2.0 * kv) / t, h}, {h, q / t},
                               {(m.gated_mlp ? 2.0 : 1.0) * static_cast<double>(m.ffn) / t, h},
                               {h, static_cast<double>(m.ffn) / t}};
    for (int i = 0; i < 4; ++i) {
      const Op one = linear(c, T / t, dims[i][0], dims[i][1], true).fwd;
      gemms[i].fwd = Op{t * one.s, t * one.flops, t * one.bytes};
    }
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

  // --- attention core
  Op attn_fwd, attn_bwd;
  if (m.attention == AttentionKernel::kFlash) {
    // Local queries against the causal half of all keys (ring attention balances the halves).
    const double work = 4.0 * T * s * kCausalWorkFraction * q / t;
    const double seq_eff = s_local / (s_local + kFlashSeqHalf_tokens);
    attn_fwd.flops = work;
    const double clock = c.prof->sustained_clock_fraction;
    attn_fwd.s = work / (c.peak16 * clock * c.prof->flash_forward_efficiency * seq_eff) + kKernelGap_s;
    attn_fwd.bytes = e * T * (2.0 * q + 2.0 * kv) / t;
    attn_bwd.flops = kFlashBackwardFlopsRatio * work;
    attn_bwd.s = attn_bwd.flops / (c.peak16 * clock * c.prof->flash_backward_efficiency * seq_eff) + kKernelGap_s;
    attn_bwd.bytes = 2.0 * attn_fwd.bytes;
  } else {
    // Materialized scores: batched GEMMs over b x a/t heads, full s x s (masking does not
    // skip work), fused scale-mask-softmax, dropout.
    const double batch = b * heads_local;
    const double scores = batch * s_local * s;  // elements
    attn_fwd += gemm(c, c.prec16, s_local, s, d, batch, e, e);  // Q K^T
    attn_fwd += elementwise(c, 2.0 * e * scores);               // softmax: read, write
    if (m.attention_dropout) attn_fwd += elementwise(c, (2.0 * e + 1.0) * scores);  // dropout + mask
    attn_fwd += gemm(c, c.prec16, s_local, d, s, batch, e, e);  // P V
    attn_bwd += gemm(c, c.prec16, s_local, s, d, batch, e, e);  // dP = dO V^T
    attn_bwd += gemm(c, c.prec16, s, d, s_local, batch, e, e);  // dV = P^T dO
    if (m.attention_dropout) attn_bwd += elementwise(c, (2.0 * e + 1.0) * scores);
    attn_bwd += elementwise(c, 3.0 * e * scores);               // softmax backward
    attn_bwd += gemm(c, c.prec16, s_local, d, s, batch, e, e);  // dQ = dS K
    attn_bwd += gemm(c, c.prec16, s, d, s_local, batch, e, e);  // dK = dS^T Q
  }
  if (p.cp > 1 && m.attention == AttentionKernel::kFlash) {
    // Ring attention merges each step's partial output into an fp32 accumulator rescaled by
    // the log-sum-exp (forward), and accumulates dQ, dK, dV in fp32 across steps (backward).
    const double steps = static_cast<double>(p.cp);
    attn_fwd += elementwise(c, steps * kCpMergeBytesPerElement * T * q / t);
    attn_bwd += elementwise(c, steps * kCpMergeBytesPerElement * T * (q + 2.0 * kv) / t);
  }
  lc.attn_fwd = attn_fwd;
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
  lc.fwd += elementwise(c, ew);
  lc.bwd += elementwise(c, kBackwardElementwiseFactor * ew);

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
  // The floor is PyTorch's: a device measured by monarch-calibrate as a CPU runs the project's
  // own runtime (C++ calling BLAS, no Python dispatch), so none there.
  const bool eager = c.cal == nullptr || c.cal->device_kind == DeviceKind::kGpu;
  lc.host_fwd_s = eager ? kLayerForwardHostOps * kEagerHostPerOp_s : 0.0;
  lc.host_bwd_s = eager ? kLayerBackwardHostOps * kEagerHostPerOp_s : 0.0;
  // Full recompute runs the layer's forward again inside the backward (a checkpointed block:
  // the same ops from Python again); selective recompute only the attention core's few ops.
  if (p.recompute == Recompute::kFull) lc.host_recompute_s = lc.host_fwd_s;
  return lc;
}

struct Derived {
  ModelShape shape;
  Ctx ctx;
  LayerCompute lc;
  LayerCosts costs;
  std::vector<int64_t> layers;
  int64_t micro_batches = 1;
};

LayerCosts layer_costs_impl(const Scenario& sc, const Plan& p, const ModelShape& m, const Ctx& c,
                            const LayerCompute& lc) {
  LayerCosts out;
  out.forward_s = lc.fwd.s;
  out.backward_s = lc.bwd.s;
  out.recompute_s = lc.recompute.s;
  out.host_forward_s = std::max(0.0, lc.host_fwd_s - lc.fwd.s);
  out.host_backward_s = std::max(0.0, lc.host_bwd_s - lc.bwd.s);
  out.host_recompute_s = std::max(0.0, lc.host_recompute_s - lc.recompute.s);
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
    double total = 0, exposed = 0;
    if (p.sequence_parallel) {
      const double ag = collective_time_s(CollectiveKind::kAllGather, S, span, cl);
      const double rs = collective_time_s(CollectiveKind::kReduceScatter, S, span, cl);
      // Blocks with a TP (sequence-parallel) gather / scatter pair: attention and the dense MLP.
      // An MoE layer's MLP block takes the sequence shard as it is (Megatron-Core MoELayer: the
      // router sees the T / tp local tokens; its only TP-like traffic is the expert-TP
      // all-gather / reduce-scatter on kExpertTp), so only attention has the pair there.
      // The CPU runtime measures exactly this (realrt_measure_tests).
      const int32_t blocks = m.moe() ? 1 : 2;
      const int32_t fwd_n = blocks, bwd_n = blocks + (full ? blocks : 0);
      // Backward: reduce-scatter of the input gradients (1 per block), all-gather of the output
      // gradients (1 per block), and the all-gather of the saved (sharded) inputs again for the
      // weight gradients, which Megatron overlaps with the dgrad GEMM (1 per block).
      const int32_t rec_n = full ? blocks : 0;
      out.collectives.push_back({CollectiveKind::kAllGather, GroupKind::kTp, S, fwd_n, 2 * blocks, rec_n, ag});
      out.collectives.push_back({CollectiveKind::kReduceScatter, GroupKind::kTp, S, fwd_n, blocks, rec_n, rs});
      total = (fwd_n + bwd_n + blocks) * ag + (fwd_n + bwd_n) * rs;
      const double redo = static_cast<double>(blocks) * ag;
      const double redo_exposed = std::max(0.0, redo - kOverlapEfficiency * 0.5 * lc.gemm_bwd_s);
      exposed = (fwd_n + bwd_n) * (ag + rs) + redo_exposed;
      hidden_window_s = lc.gemm_fwd_s * (full ? 2.0 : 1.0) + lc.gemm_bwd_s;
    } else {
      const double ar = collective_time_s(CollectiveKind::kAllReduce, S, span, cl);
      const int32_t fwd_n = 2, bwd_n = 2 + (full ? 2 : 0);
      out.collectives.push_back({CollectiveKind::kAllReduce, GroupKind::kTp, S, fwd_n, 2, full ? 2 : 0, ar});
      total = (fwd_n + bwd_n) * ar;
      exposed = total;
      hidden_window_s = lc.gemm_fwd_s * (full ? 2.0 : 1.0) + lc.gemm_bwd_s;
    }
    if (p.tp_comm_overlap) {
      exposed = std::max(0.0, total - kOverlapEfficiency * hidden_window_s);
      // While hidden, the communication kernels hold kTpOverlapCommSms of the SMs the GEMMs
      // would use.
      exposed += (total - exposed) * kTpOverlapCommSms / static_cast<double>(c.prof->sm_count);
    }
    out.tp_total_s = total;
    out.tp_exposed_s = exposed;
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
    out.ep_exposed_s += (fwd_n + bwd_n) * a2a;
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
    // Backward: dense embedding gradient (V/t x h, 16-bit) accumulated into fp32 main_grad.
    Op bwd = elementwise(c, V / t * h * (e + 8.0) + e * T * h);
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
    Op loss_f = elementwise(c, kLossForwardBytesPerLogit * T_out * V / t);
    Op loss_b = elementwise(c, kLossBackwardBytesPerLogit * T_out * V / t);
    out.output_forward_s = g.fwd.s + norm.s + loss_f.s;
    out.output_backward_s = g.bwd.s + kBackwardElementwiseFactor * norm.s + loss_b.s;
    out.output_forward_flops = g.fwd.flops;
    out.output_backward_flops = g.bwd.flops;
    out.output_forward_mem_bytes = g.fwd.bytes + norm.bytes + loss_f.bytes;
    out.output_backward_mem_bytes = g.bwd.bytes + kBackwardElementwiseFactor * norm.bytes + loss_b.bytes;
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
    }
  }

  // --- pipeline message: 1/t of the activation per rank. With sequence parallelism the
  // tensor is already sharded; without it Megatron sends 1/t from each TP rank and
  // all-gathers it over NVLink on arrival (scatter/gather optimization, Narayanan et al. 2021
  // section 4.1), which costs little next to the inter-node send and is not counted.
  // DeepSpeed's PipelineEngine sends the whole activation from every TP rank
  // (deepspeed/runtime/pipe/engine.py _exec_send_activations -> p2p.send: no scatter/gather).
  if (p.pp > 1) {
    const bool whole = sc.training.framework == Framework::kDeepspeed;
    out.pp_message_bytes = static_cast<int64_t>(e * T * h / (whole ? 1.0 : t));
    out.pp_message_s = p2p_time_s(out.pp_message_bytes, pp_hop_crosses_nodes(p, gpn), cl);
  }
  return out;
}

}  // namespace

int64_t sp_grad_reduce_bytes(const LayerCosts& L, int64_t layers, bool first, bool last) {
  const double params = static_cast<double>(layers) * L.sp_grad_params_per_layer + (first ? L.sp_grad_params_first : 0.0) +
                        (last ? L.sp_grad_params_last : 0.0);
  return static_cast<int64_t>(kGradReduceBytes * params);
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

// ============================================================================ iteration

namespace {

// Reason the plan cannot run at all, or empty.
std::string plan_problem(const Scenario& sc, const Plan& p, const ModelShape& m) {
  char buf[200];
  if (sc.model.architecture == Architecture::kDlrm)
    return "the analytical model covers transformer models (gpt, llama); dlrm is not modelled";
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1 || p.ep < 1 || p.vpp < 1 || p.micro_batch_size < 1)
    return "every parallel degree and the micro-batch size must be at least 1";
  if (sc.cluster.num_gpus > 0 && p.world_size() != sc.cluster.num_gpus) {
    std::snprintf(buf, sizeof buf, "tp x pp x dp x cp = %lld, the cluster has %lld GPUs",
                  static_cast<long long>(p.world_size()), static_cast<long long>(sc.cluster.num_gpus));
    return buf;
  }
  if (m.heads % p.tp != 0 || m.kv_heads % p.tp != 0) return "tensor parallel degree must divide the attention and key/value heads";
  if (p.layers_per_stage.empty()) {
    if (m.layers < p.pp * p.vpp) return "fewer layers than pipeline stages x virtual stages";
  } else {
    const auto n = static_cast<int64_t>(p.layers_per_stage.size());
    if (n != p.pp && n != p.pp * p.vpp) return "layers_per_stage needs one entry per pipeline stage or per model chunk";
    int64_t sum = 0;
    for (int64_t l : p.layers_per_stage) {
      if (l < 0) return "layers_per_stage has a negative entry";
      sum += l;
    }
    if (sum != m.layers) return "layers_per_stage does not sum to the model's layers";
  }
  if (m.seq % p.cp != 0) return "context parallel degree must divide the sequence length";
  if (p.etp < 0) return "expert tensor parallel degree must be at least 1";
  if ((p.tp * p.dp * p.cp) % (p.expert_tp() * p.ep) != 0) {
    std::snprintf(buf, sizeof buf, "etp x ep = %lld x %lld must divide the ranks of a pipeline stage (tp x cp x dp = %lld)",
                  static_cast<long long>(p.expert_tp()), static_cast<long long>(p.ep),
                  static_cast<long long>(p.tp * p.cp * p.dp));
    return buf;
  }
  if (!m.moe() && p.expert_tp() != p.tp) return "expert tensor parallelism needs a mixture-of-experts model";
  if (m.moe() && m.expert_ffn % p.expert_tp() != 0) {
    std::snprintf(buf, sizeof buf, "expert tensor parallel degree %lld must divide the expert FFN size %lld",
                  static_cast<long long>(p.expert_tp()), static_cast<long long>(m.expert_ffn));
    return buf;
  }
  if (m.moe() && p.tp > 1 && !p.sequence_parallel)
    return "MoE with tensor parallelism needs sequence parallelism (Megatron's MoELayer: \"During training, performance may "
           "degrade if MoE and tensor parallelism are enabled without also enabling sequence parallelism\")";
  if (m.moe() && m.experts % p.ep != 0) return "expert parallel degree must divide the number of experts";
  if (!m.moe() && p.ep > 1) return "expert parallelism needs a mixture-of-experts model";
  if (sc.training.global_batch_size % (p.micro_batch_size * p.dp) != 0)
    return "global batch size is not a multiple of micro_batch_size x dp";
  if (p.vpp > 1 && p.schedule != Schedule::kInterleaved) return "virtual stages need the interleaved schedule";
  if (p.zero_stage < 0 || p.zero_stage > 3) return "zero stage must be 0..3";
  return framework_problem(sc.training.framework, p);
}

struct IterationModel {
  TimeBreakdown breakdown;
  double iteration_s = 0;
  std::vector<CommEntry> comm;  // only filled when `detail`
  int64_t critical_stage = 0;
};

void add_comm(std::vector<CommEntry>& v, const char* kind, const char* group, double bytes, int64_t count, double time_s) {
  if (count <= 0 || bytes <= 0) return;
  for (CommEntry& c : v) {
    if (c.kind == kind && c.group == group) {
      c.bytes += static_cast<int64_t>(bytes);
      c.count += count;
      c.time_s += time_s;
      return;
    }
  }
  v.push_back(CommEntry{kind, group, static_cast<int64_t>(bytes), count, time_s});
}

IterationModel iteration(const Scenario& sc, const Plan& p, const ModelShape& m, const Ctx& c,
                         const LayerCompute& lc, const LayerCosts& L, const std::vector<int64_t>& layers,
                         bool detail) {
  IterationModel it;
  const int64_t nmb = std::max<int64_t>(num_micro_batches(sc, p), 1);
  const double mb = static_cast<double>(nmb);
  const int64_t pp = p.pp;
  const double v = p.schedule == Schedule::kInterleaved ? static_cast<double>(std::max<int64_t>(p.vpp, 1)) : 1.0;
  const ClusterConfig& cl = sc.cluster;
  const int64_t gpn = cl.gpus_per_node;

  const double layer_compute_s = lc.fwd.s + lc.bwd.s + lc.recompute.s;
  const double layer_host_s = L.host_forward_s + L.host_backward_s + L.host_recompute_s;
  const double layer_exposed_s = L.tp_exposed_s + L.cp_exposed_s + L.ep_exposed_s;
  const double pp_per_mb = pp > 1 ? 2.0 * v * L.pp_message_s : 0.0;

  // Slowest stage per micro-batch.
  double worst = -1, worst_compute = 0, worst_exposed = 0, worst_host = 0;
  int64_t worst_stage = 0;
  for (int64_t st = 0; st < pp; ++st) {
    const double nl = static_cast<double>(layers[static_cast<size_t>(st)]);
    double comp = nl * layer_compute_s;
    const double host = nl * layer_host_s;
    if (st == 0) comp += L.embedding_forward_s + L.embedding_backward_s;
    if (st == pp - 1) comp += L.output_forward_s + L.output_backward_s;
    double exp = nl * layer_exposed_s;
    if (st == 0) exp += L.embedding_tp_exposed_s;
    if (st == pp - 1) exp += L.output_tp_exposed_s;
    if (comp + exp + host > worst) {
      worst = comp + exp + host;
      worst_compute = comp;
      worst_exposed = exp;
      worst_host = host;
      worst_stage = st;
    }
  }
  it.critical_stage = worst_stage;
  const double nl_w = static_cast<double>(layers[static_cast<size_t>(worst_stage)]);

  TimeBreakdown& b = it.breakdown;
  b.compute = mb * worst_compute;
  b.host = mb * worst_host;
  b.tp_comm = mb * (nl_w * L.tp_total_s + (worst_stage == 0 ? L.embedding_tp_total_s : 0.0) +
                    (worst_stage == pp - 1 ? L.output_tp_total_s : 0.0));
  b.cp_comm = mb * nl_w * L.cp_total_s;
  b.ep_comm = mb * nl_w * L.ep_total_s;
  b.pp_comm = mb * pp_per_mb;
  double exposed = mb * (worst_exposed + pp_per_mb);
  // Sequence parallelism: the replicated parameters' gradient all-reduce after the backward,
  // once per step on every rank (the stage with the most of them paces it).
  if (p.tp > 1 && p.sequence_parallel) {
    const GroupSpan tspan = group_span(GroupKind::kTp, p, gpn);
    int64_t most_bytes = 0;
    for (int64_t st = 0; st < pp; ++st)
      most_bytes = std::max(most_bytes, sp_grad_reduce_bytes(L, layers[static_cast<size_t>(st)], st == 0, st == pp - 1));
    const double sp_ar = collective_time_s(CollectiveKind::kAllReduce, most_bytes, tspan, cl);
    b.tp_comm += sp_ar;
    exposed += sp_ar;
  }
  b.bubble = pp > 1 ? (static_cast<double>(pp) - 1.0) / v * (worst + pp_per_mb) : 0.0;

  // --- data parallel gradient reduction and parameter gathers
  const int64_t dense_group = p.dp * p.cp;
  double dp_total = 0, dp_exposed = 0;
  // DeepSpeed reduces the gradients after the backward, not beside it, without ZeRO (the
  // engine's allreduce_gradients at the accumulation boundary, deepspeed/runtime/engine.py;
  // overlap_comm applies to ZeRO stages 1-2 only) and under its pipeline engine (the
  // ReduceGrads instruction after the last micro-batch, deepspeed/runtime/pipe/schedule.py).
  const bool ds_after_backward = sc.training.framework == Framework::kDeepspeed && (p.zero_stage == 0 || pp > 1);
  const bool overlap_grads = p.overlap_grad_reduce && !ds_after_backward;
  double opt_params = 0, grad_params = 0;
  {
    // The rank with the most parameters (first or last stage) paces the reduction.
    StageParameters most{};
    for (int64_t st : {int64_t{0}, pp - 1, worst_stage}) {
      const StageParameters sp = stage_parameters(m, p, st, layers[static_cast<size_t>(st)]);
      if (sp.total() > most.total()) most = sp;
    }
    const GroupSpan dspan = group_span(GroupKind::kDpCp, p, gpn);
    const GroupSpan espan = group_span(GroupKind::kExpertDp, p, gpn);
    const double w_bytes = c.e;  // weights are gathered in the compute precision (16-bit; fp32 training 4)
    const double bwd_window = nl_w * (lc.bwd.s + lc.recompute.s + L.host_backward_s + L.host_recompute_s);
    const double fwd_window = nl_w * (lc.fwd.s + L.host_forward_s);
    // Fp8 primary weights (see stage_memory): the linear layers' weights are gathered in fp8.
    const bool fp8_params = sc.training.precision == Precision::kFp8;
    auto group_cost = [&](double params, double gemm_params, const GroupSpan& span, const char* name) {
      if (span.size <= 1 || params <= 0) return;
      const int64_t g_bytes = static_cast<int64_t>(kGradReduceBytes * params);
      const int64_t w_all = static_cast<int64_t>(w_bytes * params - (fp8_params ? (w_bytes - kFp8WeightBytes) * gemm_params : 0.0));
      if (p.zero_stage == 0) {
        const double ar = collective_time_s(CollectiveKind::kAllReduce, g_bytes, span, cl);
        dp_total += ar;
        dp_exposed += overlap_grads ? std::max(0.0, ar - kOverlapEfficiency * bwd_window) : ar;
        if (detail) add_comm(it.comm, "all-reduce", name, collective_wire_bytes(CollectiveKind::kAllReduce, g_bytes, span.size), 1, ar);
      } else if (p.zero_stage <= 2) {
        // ZeRO-1 (Megatron's distributed optimizer): one reduce-scatter per step, after the
        // last micro-batch. ZeRO-2 (DeepSpeed stage 2) keeps only the gradient shard, so it
        // reduce-scatters every micro-batch's gradients as its backward produces them
        // (deepspeed/runtime/zero/stage_1_and_2.py: with partition_gradients the backward hooks
        // call reduce_independent_p_g_buckets_and_remove_grads on every backward, gradient
        // accumulation does not defer them): m reduce-scatters per step.
        const double rs = collective_time_s(CollectiveKind::kReduceScatter, g_bytes, span, cl);
        const double ag = collective_time_s(CollectiveKind::kAllGather, w_all, span, cl);
        const int64_t n_rs = p.zero_stage == 2 ? nmb : 1;
        const double rs_n = static_cast<double>(n_rs);
        dp_total += rs_n * rs + ag;
        dp_exposed += rs_n * (overlap_grads ? std::max(0.0, rs - kOverlapEfficiency * bwd_window) : rs);
        dp_exposed += p.overlap_param_gather ? std::max(0.0, ag - kOverlapEfficiency * fwd_window) : ag;
        if (detail) {
          add_comm(it.comm, "reduce-scatter", name,
                   rs_n * collective_wire_bytes(CollectiveKind::kReduceScatter, g_bytes, span.size), n_rs, rs_n * rs);
          add_comm(it.comm, "all-gather", name, collective_wire_bytes(CollectiveKind::kAllGather, w_all, span.size), 1, ag);
        }
      } else {
        // ZeRO-3 / FSDP: gather the weights before each micro-batch's forward and backward and
        // reduce-scatter its gradients, layer by layer, prefetching the next layer.
        const double rs = collective_time_s(CollectiveKind::kReduceScatter, g_bytes, span, cl);
        const double ag = collective_time_s(CollectiveKind::kAllGather, w_all, span, cl);
        const double per_mb = 2.0 * ag + rs;
        const double window = p.overlap_param_gather || p.overlap_grad_reduce ? kOverlapEfficiency * (fwd_window + bwd_window) : 0.0;
        dp_total += mb * per_mb;
        dp_exposed += mb * std::max(0.0, per_mb - window) + (nl_w > 0 ? ag / nl_w : ag);
        if (detail) {
          add_comm(it.comm, "reduce-scatter", name, mb * collective_wire_bytes(CollectiveKind::kReduceScatter, g_bytes, span.size), nmb, mb * rs);
          add_comm(it.comm, "all-gather", name, 2.0 * mb * collective_wire_bytes(CollectiveKind::kAllGather, w_all, span.size), 2 * nmb, 2.0 * mb * ag);
        }
      }
    };
    group_cost(most.dense, most.gemm_dense, dspan, "dp");
    group_cost(most.expert, most.gemm_expert, espan, "edp");
    // Tied embeddings over a pipeline: the first and last stage all-reduce the word
    // embedding gradient after the backward (Megatron's embedding group).
    if (m.tied_embeddings && pp > 1) {
      const GroupSpan two = group_span(GroupKind::kEmbedding, p, gpn);
      const int64_t bytes = static_cast<int64_t>(kGradReduceBytes * static_cast<double>(m.vocab * m.hidden) / static_cast<double>(p.tp));
      const double ar = collective_time_s(CollectiveKind::kAllReduce, bytes, two, cl);
      dp_total += ar;
      dp_exposed += ar;
      if (detail) add_comm(it.comm, "all-reduce", "embedding", collective_wire_bytes(CollectiveKind::kAllReduce, bytes, 2), 1, ar);
    }
    const double shards_dense = p.zero_stage >= 1 ? static_cast<double>(dense_group) : 1.0;
    const double shards_expert = p.zero_stage >= 1 ? static_cast<double>(group_size(GroupKind::kExpertDp, p)) : 1.0;
    opt_params = most.dense / shards_dense + most.expert / shards_expert;
    grad_params = p.zero_stage >= 2 ? opt_params : most.total();
  }
  b.dp_comm = dp_total;
  exposed += dp_exposed;

  // --- optimizer step (memory bound)
  b.optimizer = optimizer_step_time_s(sc, opt_params, grad_params);

  b.exposed_comm = exposed;
  it.iteration_s = b.compute + b.host + b.bubble + b.optimizer + b.exposed_comm;

  if (detail) {
    const double nl_mb = mb * nl_w;
    // TP and EP collectives: per (kind, group) the busiest stage's figures, as a measurement
    // reports the busiest rank.
    std::vector<CommEntry> busiest;
    for (int64_t st = 0; st < pp; ++st) {
      std::vector<CommEntry> mine;
      auto add = [&](const LayerCosts::Collective& col, int64_t count) {
        if (count <= 0) return;
        const GroupSpan span = group_span(col.group, p, gpn);
        add_comm(mine, to_string(col.kind), to_string(col.group),
                 static_cast<double>(count) * collective_wire_bytes(col.kind, col.bytes, span.size), count,
                 static_cast<double>(count) * col.time_s);
      };
      const int64_t layers_mb = nmb * layers[static_cast<size_t>(st)];
      for (const LayerCosts::Collective& col : L.collectives)
        add(col, layers_mb * (col.forward_count + col.backward_count + col.recompute_count));
      if (st == 0)
        for (const LayerCosts::Collective& col : L.embedding_collectives) add(col, nmb * (col.forward_count + col.backward_count));
      if (st == pp - 1)
        for (const LayerCosts::Collective& col : L.output_collectives) add(col, nmb * (col.forward_count + col.backward_count));
      if (p.tp > 1 && p.sequence_parallel) {
        const int64_t bytes = sp_grad_reduce_bytes(L, layers[static_cast<size_t>(st)], st == 0, st == pp - 1);
        add_comm(mine, "all-reduce", "tp", collective_wire_bytes(CollectiveKind::kAllReduce, bytes, p.tp), 1,
                 collective_time_s(CollectiveKind::kAllReduce, bytes, group_span(GroupKind::kTp, p, gpn), cl));
      }
      for (const CommEntry& e : mine) {
        auto it_b = std::find_if(busiest.begin(), busiest.end(),
                                 [&](const CommEntry& x) { return x.kind == e.kind && x.group == e.group; });
        if (it_b == busiest.end()) busiest.push_back(e);
        else if (e.bytes > it_b->bytes) *it_b = e;
      }
    }
    for (const CommEntry& e : busiest) add_comm(it.comm, e.kind.c_str(), e.group.c_str(), static_cast<double>(e.bytes), e.count, e.time_s);
    if (p.cp > 1) {
      const double fwd_mult = p.recompute == Recompute::kFull ? 2.0 : 1.0;
      const int64_t count = static_cast<int64_t>(nl_mb * (fwd_mult + 2.0) * static_cast<double>(p.cp - 1));
      add_comm(it.comm, "send-recv", "cp",
               nl_mb * (fwd_mult * static_cast<double>(L.cp_send_bytes_forward) + static_cast<double>(L.cp_send_bytes_backward)),
               count, b.cp_comm);
    }
    if (pp > 1) {
      const int64_t count = static_cast<int64_t>(2.0 * v * mb);
      add_comm(it.comm, "send-recv", "pp", static_cast<double>(count) * static_cast<double>(L.pp_message_bytes), count, b.pp_comm);
    }
  }
  return it;
}

std::string gib_text(double gib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", gib);
  return buf;
}

}  // namespace

QuickEstimate quick_estimate(const Scenario& sc, const Plan& p) {
  QuickEstimate q;
  const ModelShape m = model_shape(sc.model);
  q.reject_reason = plan_problem(sc, p, m);
  if (!q.reject_reason.empty()) return q;
  const Ctx c = make_ctx(sc);
  const LayerCompute lc = layer_compute(c, m, p);
  const LayerCosts L = layer_costs_impl(sc, p, m, c, lc);
  const std::vector<int64_t> layers = stage_layers(m, p);
  const IterationModel it = iteration(sc, p, m, c, lc, L, layers, false);
  q.iteration_time_s = it.iteration_s;

  // Peak memory: the first stage (most activations in flight, embedding), the last (output
  // and logits) and the stage with the most layers.
  int64_t most = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] > layers[static_cast<size_t>(most)]) most = static_cast<int64_t>(i);
  double peak = 0;
  for (int64_t st : {int64_t{0}, p.pp - 1, most}) {
    const MemoryBreakdown mem = stage_memory(m, sc, p, st, layers[static_cast<size_t>(st)]);
    peak = std::max(peak, bytes_to_gib(mem.total_bytes()));
  }
  q.peak_memory_gib = peak;
  const double usable = usable_memory_gib(sc.cluster.gpu);
  q.fits = peak <= usable;
  if (!q.fits) {
    q.reject_reason = "needs " + gib_text(peak) + " GiB per GPU, " + sc.cluster.gpu.name + " has " +
                      gib_text(usable) + " GiB usable (" + gib_text(sc.cluster.gpu.memory_gib) +
                      " minus the framework reserve)";
  }
  return q;
}

BackendResult estimate_plan(const Scenario& sc, const Plan& p) {
  BackendResult r;
  r.backend = "analytical";
  r.plan = p;
  r.warnings = plan_warnings(sc, p);
  const ModelShape m = model_shape(sc.model);
  const std::string problem = plan_problem(sc, p, m);
  const double usable = usable_memory_gib(sc.cluster.gpu);
  r.memory.capacity_gib = usable;
  if (!problem.empty()) {
    r.memory.fits = false;
    return r;
  }
  const std::vector<int64_t> layers = stage_layers(m, p);
  const Ctx c = make_ctx(sc);
  const LayerCompute lc = layer_compute(c, m, p);
  const LayerCosts L = layer_costs_impl(sc, p, m, c, lc);
  const IterationModel it = iteration(sc, p, m, c, lc, L, layers, true);

  r.iteration_time_s = it.iteration_s;
  r.time_breakdown_s = it.breakdown;
  r.communication = it.comm;
  const double tokens = static_cast<double>(sc.training.global_batch_size) * static_cast<double>(m.seq);
  r.tokens_per_s = tokens / it.iteration_s;
  const FlopsPerIteration f = flops_per_iteration(m, sc.training, p.recompute);
  r.model_flops_per_iteration = f.model;
  r.hardware_flops_per_iteration = f.hardware;
  const double gpus = static_cast<double>(p.world_size());
  r.model_tflops_per_gpu = f.model / it.iteration_s / gpus / kTera;
  r.hardware_tflops_per_gpu = f.hardware / it.iteration_s / gpus / kTera;
  const double peak = peak_tflops(sc.cluster.gpu, sc.training.precision);
  r.mfu = peak > 0 ? r.model_tflops_per_gpu / peak : 0;
  r.hfu = peak > 0 ? r.hardware_tflops_per_gpu / peak : 0;

  double peak_gib = 0;
  for (int64_t st = 0; st < p.pp; ++st) {
    const MemoryBreakdown mem = stage_memory(m, sc, p, st, layers[static_cast<size_t>(st)]);
    StageMemory sm;
    sm.stage = st;
    sm.layers = layers[static_cast<size_t>(st)];
    sm.weights_gib = bytes_to_gib(mem.weights_bytes);
    sm.gradients_gib = bytes_to_gib(mem.gradients_bytes);
    sm.optimizer_gib = bytes_to_gib(mem.optimizer_bytes);
    sm.activations_gib = bytes_to_gib(mem.activations_bytes);
    sm.buffers_gib = bytes_to_gib(mem.buffers_bytes);
    sm.total_gib = bytes_to_gib(mem.total_bytes());
    peak_gib = std::max(peak_gib, sm.total_gib);
    r.memory.stages.push_back(sm);
  }
  r.memory.peak_gib = peak_gib;
  r.memory.fits = peak_gib <= usable;
  return r;
}

}  // namespace monarch
