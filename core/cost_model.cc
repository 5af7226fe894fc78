// The GPU presets, calibration profiles and the compute-time model (GEMMs and memory-bound
// kernels). Collectives, layer costs and the iteration model are in their own files.
#include "core/cost_model.h"

#include <algorithm>
#include <cassert>
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
#include "core/cost_model_internal.h"

namespace monarch {

using namespace cost_detail;

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
// FlashAttention-3, Figs. 5-6). The H100 and H200 profiles take the rate measured on an H200
// instead (cuDNN's fused attention through PyTorch's SDPA, causal, head dim 128, held at the
// power limit; tests/data/gpu/h200-microbench-2.json and -3.json): forward and backward
// together 0.532 of the peak per clock at 8192 tokens, falling as s / (s + 800) (0.92 at 4096,
// 0.79-0.81 at 2048, 0.44 at 512 of the 8192-token rate; Hopper's kernels run larger tiles
// through deeper pipelines than FlashAttention-2 on A100, whose falloff is s / (s + 256)). Split
// in FlashAttention-3's forward : backward ratio and divided by the falloff at 8192 (0.911):
// 0.729 forward, 0.541 backward. With attention dropout 0.1 the same kernel takes 1.37-1.39x as
// long (h200-microbench-7.json), where FlashAttention-2 takes 1.14x (the other profiles' figure).
// HBM3 3.35 TB/s, ~2.9-3.0 TB/s measured. NCCL ring all-reduce bus bandwidth on DGX H100
// (NVLink4, 450 GB/s per direction): ~360 GB/s -> 0.80.
//
// H200 SXM: the H100 die at 700 W with HBM3e; GH200 (same die, same peak) reaches MAMF
// 821.0 / 989 = 83% (same source, CUDA 12.5) -> 0.83 / 0.937 = 0.885.
// An H200 measured here (tools/gpu_microbench.py, tests/data/gpu/h200-microbench.json): the
// 8192^3 bf16 product held at the 700 W limit runs 665 TFLOP/s at 1455 MHz, 0.845 of the peak
// per clock, which this ceiling gives; fp8 1211 TFLOP/s at 1335 MHz, which 0.74 at the
// sustained clock gives (docs/analytical_model.md, "Measured on an H200").
//
// B200 / GB200: 148 SMs, 256x256 two-SM tiles (tcgen05). No MAMF figure was published in
// the sources above when this was written; NVIDIA's cuBLAS 12.8 blog reports ~1.6-1.8 PFLOP/s
// bf16 GEMMs on B200 (of 2.25 dense), ~0.75 -> 0.80 before shape factors; fp8 ~3.2-3.5 of
// 4.5 in short runs (the sustained fp8 ceiling: "fp8 GEMMs at the power cap" below).
// Attention: cuDNN 9.7 SDPA on B200 ~1.3-1.5 PFLOP/s fwd bf16 (~0.6).
// The MAMF table (stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable
// Matmul FLOPS comparison table", 2025-2026 rows) bears the B200 figures out: bf16 1745.0 of
// 2250 (77.6%, torch 2.7.1 + CUDA 12.8), fp8 3432.5 of 4500 (76.3%). GB200 reaches less of
// its higher quoted peak (2500 / 5000, quoted at the clock its 1200 W allows): bf16 1822.0
// (72.9%), fp8 3615.6 (72.3%), 4-5% above a B200 where the quoted peaks differ by 11%. Its
// ceilings are the B200's times the ratio of the two measured fractions.
namespace {

constexpr double kGb200OverB200Bf16 = (1822.0 / 2500.0) / (1745.0 / 2250.0);
constexpr double kGb200OverB200Fp8 = (3615.6 / 5000.0) / (3432.5 / 4500.0);

//
// Sustained clocks: A100 SXM4's 312 TFLOP/s is quoted at 1410 MHz; NVIDIA's HPL Rpeak
// assumes the 1305 MHz it sustains at 400 W (glennklockwood.com/garden/peak-FLOPS), and
// under hours of dense fp16/bf16 tensor-core load boards settle at 1.2-1.3 GHz (nvidia-smi
// logs of MLPerf Training / Megatron runs). H100 SXM's 989 TFLOP/s is quoted at 1830 MHz; its
// default application clock is 1755 MHz and under sustained dense tensor load at 700 W it
// settles near 1.6 GHz (same kind of logs). Within those ranges the clock is the one constant
// set on the calibration runs (tests/data/validation/calibration.json): 0.865 for both, i.e.
// 1220 MHz (A100) and 1583 MHz (H100), leaves a mean signed error of 0.0% on the eight
// Korthikanti A100 runs and -0.1% on the ten DGXC H100 runs. H200 is the same die at the same
// 700 W: the H100's clock. B200 and GB200 have no calibration runs and take the same 0.865:
// Blackwell draws more power per quoted FLOP than Hopper (B200 2.25 PFLOP/s dense at 1000 W,
// 2.27x the H100's rate at 1.43x its power; GB200 2.5 at 1200 W), so a training load leaves its
// clock no more headroom under the power limit than Hopper's, whose held layers are measured
// below.
// Training layers held on an H200 at its 700 W limit (tools/gpu_microbench.py "layers",
// tests/data/gpu/h200-microbench-2.json) bear the H100/H200 value out: a Llama 3.1 8B block's
// forward and backward at 8192 tokens settles at 1560 MHz (0.852 of 1830), a GPT-3 175B block
// at TP 8 at 1635 MHz (0.893), against 1455 MHz (0.795) for the pure 8192^3 GEMM. The clock a
// step holds depends on how much of it keeps the tensor cores busy; 0.865 sits in the band of
// the calibration families' layers.
//
// tf32: fp32 training runs its GEMMs on the tensor cores as tf32 at half the 16-bit rate, with
// operands twice as wide, so a tile moves the same bytes per clock and the kernels reach the
// same fraction of their (tf32) peak. Measured on the H200: the 8192^3 tf32 product held at the
// power limit runs 344 TFLOP/s at 1492 MHz, 0.852 of the tf32 peak per clock, against bf16's
// 0.845 (h200-microbench-2.json). The 16-bit ceiling serves both.
// The one sustained clock, as a fraction of the quoted one: see above.
constexpr double kSustainedClockFraction = 0.865;

// fp8 GEMMs at the power cap. fp8 tensor cores draw more power per clock than bf16 ones, so an
// fp8 product settles at a lower clock than the step's sustained one. Measured on the H200
// (tests/data/gpu/h200-microbench.json, `sustained_fp8`): the 8192^3 e4m3 product held at the
// 700 W cap settles at 1335 MHz, where the bf16 one holds 1455 and the model's training steps
// 0.865 x 1830 = 1583; per clock the two precisions reach the same share of their peaks (0.84
// and 0.845). Hopper's fp8 ceilings are sustained figures with that lower clock in them: the
// H200's 0.74 is its per-clock ceiling (0.878, i.e. 0.839 at 8192^3 over that shape's waves and
// K loop) times 1335 / 1583, and the DGXC fp8 calibration runs bear it out beside the bf16 ones.
// Blackwell's figures are short runs that do not show it: MAMF's fp8 reaches 0.98 of bf16's share
// of the peak (3432.5 / 4500 against 1745.0 / 2250 on a B200), as do XLA's B200 products
// (OpenXLA xla/service/gpu/model/matmul_interpolator_data.h, sm_100, b 4 x 4096^3: 3279.7 e4m3
// and 1670.5 bf16 TFLOP/s), where the first timed window of each held H200 product (tens of
// milliseconds) already gives 0.91 (1426 and 787 TFLOP/s). No held Blackwell fp8 product has
// been measured; its ceiling takes the B200's per-clock share from MAMF times the H200's held fp8
// clock over the sustained one.
constexpr double kH200HeldFp8Clock_MHz = 1335.0;
constexpr double kH200QuotedClock_MHz = 1830.0;
constexpr double kFp8HeldClockShare = kH200HeldFp8Clock_MHz / (kSustainedClockFraction * kH200QuotedClock_MHz);
constexpr double kB200Bf16Ceiling = 0.80;
constexpr double kB200Fp8PerClockCeiling = kB200Bf16Ceiling * (3432.5 / 4500.0) / (1745.0 / 2250.0);
constexpr double kB200Fp8Ceiling = kB200Fp8PerClockCeiling * kFp8HeldClockShare;  // 0.663

constexpr double kClock = kSustainedClockFraction;  // every calibrated profile's
constexpr GpuProfile kA100{"A100", 108, 256, 128, 0.913, 0.913, 0.64, 0.53, 0.80, 0.78, kClock};
constexpr GpuProfile kH100{"H100", 132, 128, 256, 0.855, 0.72, 0.729, 0.541, 0.80, 0.80, kClock, &kCudnnHopperAttention};
constexpr GpuProfile kH200{"H200", 132, 128, 256, 0.885, 0.74, 0.729, 0.541, 0.80, 0.80, kClock, &kCudnnHopperAttention};
constexpr GpuProfile kB200{"B200", 148, 256, 256, kB200Bf16Ceiling, kB200Fp8Ceiling, 0.60, 0.47, 0.80, 0.80, kClock,
                           &kBlackwellAttention};
constexpr GpuProfile kGB200{"GB200", 148, 256, 256, kB200Bf16Ceiling * kGb200OverB200Bf16, kB200Fp8Ceiling * kGb200OverB200Fp8,
                            0.60, 0.47, 0.80, 0.80, kClock, &kBlackwellAttention};
constexpr GpuProfile kGeneric{"generic", 132, 128, 256, 0.80, 0.65, 0.60, 0.45, 0.80, 0.80, 0.90};

// K-loop prologue/epilogue of a GEMM tile: efficiency k / (k + kGemmKHalf). Writing a tile's
// outputs costs about as much as two 64-deep K steps of the main loop (CUTLASS/cuBLAS
// pipelined mainloop with 3-4 stages); measured bf16 GEMMs at K = 1024 run ~10% slower than
// at K = 8192 for large M, N (MAMF finder sweeps, ml-engineering).
constexpr double kGemmKHalf = 128.0;
// A half-size tile (to fill more SMs when few waves) runs ~8% below the large tile's rate
// (lower data reuse per CTA; cuBLAS heuristics pick it only when waves are short).
constexpr double kHalfTileRate = 0.92;
// Optimizer step per parameter shard, HBM bytes (Megatron-LM / apex multi-tensor apply):
// gradient-norm pass reads the fp32 grad (4); Adam reads the grad (4), reads and writes the
// fp32 master weight (8), m and v (16); copying the master weights into the 16-bit model
// weights reads 4 and writes 2. Mixed-precision Adam: 4 + 28 + 6 = 38 bytes.
constexpr double kAdamMixedBytesPerParam = 38.0;
constexpr double kAdamFp32BytesPerParam = 32.0;   // norm 4, grad 4, weight 8, m and v 16
constexpr double kSgdMixedBytesPerParam = 30.0;   // norm 4, grad 4, master 8, momentum 8, copy 6
constexpr double kSgdFp32BytesPerParam = 24.0;    // norm 4, grad 4, weight 8, momentum 8
}  // namespace

// NCCL bus bandwidth over InfiniBand/RoCE NICs: ~22.5-23 GB/s per 200 Gb/s HDR NIC and
// ~45-47 GB/s per 400 Gb/s NDR NIC in multi-node nccl-tests (NVIDIA DGX SuperPOD reference
// architectures) -> 0.9.
const double kInterNodeEfficiency = 0.9;

// See power_limit_clock_factor: the H200's idle draw at its top clock, 88 W of its 700 W TDP.
constexpr double kStaticPowerShareOfTdp = 88.0 / 700.0;

double static_power_W(double tdp_W) { return kStaticPowerShareOfTdp * tdp_W; }

double head_dim_rate(const HeadDimRates& rates, int64_t head_dim) {
  if (head_dim <= kMeasuredHeadDims[0]) return rates.at[0];
  for (int i = 1; i < kHeadDimPoints; ++i) {
    if (head_dim > kMeasuredHeadDims[i]) continue;
    const double f = static_cast<double>(head_dim - kMeasuredHeadDims[i - 1]) /
                     static_cast<double>(kMeasuredHeadDims[i] - kMeasuredHeadDims[i - 1]);
    return rates.at[i - 1] + f * (rates.at[i] - rates.at[i - 1]);
  }
  return rates.at[kHeadDimPoints - 1];
}

namespace {

const GpuProfile& profile_by_name(const std::string& name) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  std::string_view v(n);
  // A800 and H800 are the export variants of A100 and H100: the same dies and SM counts, only
  // NVLink capped (400 GB/s both directions), which the cluster's intra_node bandwidth states.
  if (v.find("A100") != std::string_view::npos || v.find("A800") != std::string_view::npos) return kA100;
  if (v.find("H100") != std::string_view::npos || v.find("H800") != std::string_view::npos) return kH100;
  if (v.find("H200") != std::string_view::npos || v.find("GH200") != std::string_view::npos) return kH200;
  if (v.find("GB200") != std::string_view::npos) return kGB200;
  if (v.find("B200") != std::string_view::npos || v.find("B100") != std::string_view::npos) return kB200;
  return kGeneric;
}

}  // namespace

// Every GEMM and collective of every plan asks it; the last name's answer is kept per thread.
const GpuProfile& gpu_profile(const GpuSpec& gpu) {
  thread_local std::string last_name;
  thread_local const GpuProfile* last = nullptr;
  if (last == nullptr || gpu.name != last_name) {
    last = &profile_by_name(gpu.name);
    last_name = gpu.name;
  }
  return *last;
}

bool gpu_runs_tp_comm_overlap(const GpuSpec& gpu) { return gpu.peak_tflops.fp8 > 0; }

double nccl_overlap_sm_share(const GpuSpec& gpu) {
  return kNcclOverlapSms / static_cast<double>(gpu_profile(gpu).sm_count);
}

double compute_end_beside_s(double compute_s, double comm_s, double share) {
  if (!(share > 0) || !(comm_s > 0)) return compute_s;
  if (share >= 1.0) return compute_s + comm_s;
  return comm_s * (1.0 - share) >= compute_s ? compute_s / (1.0 - share) : compute_s + share * comm_s;
}

bool gpu_runs_mxfp8(const GpuSpec& gpu) {
  const GpuProfile& p = gpu_profile(gpu);
  return &p != &kA100 && &p != &kH100 && &p != &kH200;
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

namespace cost_detail {

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

}  // namespace cost_detail

// ============================================================================ compute

namespace cost_detail {

Precision effective_precision(const GpuSpec& gpu, Precision p) {
  if (p == Precision::kFp8 && gpu.peak_tflops.fp8 <= 0) return Precision::kBf16;
  return p;
}

double base_efficiency(const GpuProfile& prof, Precision p) {
  switch (p) {
    case Precision::kFp8: return prof.gemm_efficiency_fp8;
    default: return prof.gemm_efficiency_16bit;  // bf16, fp16 and tf32 (see "tf32" above)
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

// Under a power cap the board lowers its clock until it draws the cap. Dynamic CMOS power is
// C V^2 f, and across the DVFS range the voltage scales with the frequency, so P ~ f^3 and the
// clock scales as the cube root of the dynamic power (`kClockPowerExponent`; the standard DVFS
// approximation, e.g. Hennessy & Patterson, Computer Architecture, 6th ed., Section 1.5). The
// board's static draw does not scale with the clock, so only the power above it does:
// clock ~ ((cap - static) / (TDP - static))^(1/3). The static share is the H200's idle draw at
// its top clock, 88 W of 700 (nvidia-smi before a held run starts; tests/data/gpu/
// h200-microbench-3.json, `static_power_W`), a lower bound on the static power under
// load (leakage grows with voltage and heat), so the clock stays an upper bound. The clock set
// at the TDP (`sustained_clock_fraction`) is the reference; HBM bandwidth has its own clock and
// is kept.
constexpr double kClockPowerExponent = 1.0 / 3.0;

double power_limit_clock_factor(const GpuSpec& gpu) {
  if (gpu.power_limit_W <= 0 || gpu.tdp_W <= 0 || gpu.power_limit_W >= gpu.tdp_W) return 1.0;
  const double static_W = static_power_W(gpu.tdp_W);
  assert(gpu.power_limit_W > static_W);  // the scenario reader refuses a cap at or below it
  return std::pow((gpu.power_limit_W - static_W) / (gpu.tdp_W - static_W), kClockPowerExponent);
}

double hbm_bytes_per_s(const GpuSpec& gpu, const GpuProfile& prof) {
  if (const CalibrationProfile* cal = profile_of(gpu); cal != nullptr && cal->memory_bandwidth_GBps > 0)
    return gbps_to_bytes_per_s(cal->memory_bandwidth_GBps);  // measured read + write
  return gbps_to_bytes_per_s(gpu.memory_bandwidth_GBps) * prof.memory_efficiency;
}

}  // namespace cost_detail

double gemm_efficiency(const GpuSpec& gpu, Precision precision, int64_t m, int64_t n, int64_t k) {
  const Precision p = effective_precision(gpu, precision);
  return gemm_eff(gpu_profile(gpu), p, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), 1.0) *
         power_limit_clock_factor(gpu);
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
  rate *= power_limit_clock_factor(gpu);
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
  rate *= power_limit_clock_factor(gpu);
  return std::max(flops / rate, mem_s) + kKernelGap_s;
}

DType grad_reduce_dtype(const TrainingConfig& t) {
  if (grad_reduce_in_fp32(t)) return DType::kFp32;
  return t.precision == Precision::kFp16 ? DType::kFp16 : DType::kBf16;
}

double grad_reduce_bytes_per_param(const TrainingConfig& t) { return grad_reduce_dtype(t) == DType::kFp32 ? 4.0 : 2.0; }

}  // namespace monarch
