// Cost model: seconds for compute, communication and a whole training iteration of a plan.
//
// Compute: a roofline per kernel, max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x
// efficiency)), where the GEMM efficiency depends on the matrix shape (wave quantization over
// the GPU's SMs and the K-loop prologue/epilogue) and on one measured ceiling per GPU kind and
// precision (GpuProfile, sources in cost_model.cc).
// Communication: NCCL-like alpha-beta costs per collective on the links the group really
// crosses (core/placement.h): NVLink inside a node; across nodes NCCL's flat ring, one channel
// per NIC, paced by the slower of its NVLink and NIC hops.
// Iteration: per pipeline stage and micro-batch, the layers' forward, backward and recompute
// plus exposed TP/CP/EP communication; the slowest stage paces m micro-batches; plus the
// pipeline bubble, exposed PP/DP communication and the optimizer step.
//
//   iteration_time = compute + bubble + optimizer + exposed_comm
//
// and each *_comm field of the breakdown is that group's total communication time on the
// critical rank, hidden or not.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/model_math.h"
#include "core/placement.h"
#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// Type in which the gradients are reduced over the data-parallel group (and the
// sequence-parallel and tied-embedding gradient all-reduces): fp32 where grad_reduce_in_fp32()
// (core/model_math.h) says so, else the 16-bit training type. Shared with the lowering.
DType grad_reduce_dtype(const TrainingConfig& training);
// Its bytes per parameter: 4 (fp32) or 2 (fp16, bf16).
double grad_reduce_bytes_per_param(const TrainingConfig& training);

// Fused attention's rate at a head dim against its rate at 128, the dim both kernels are tuned
// for and the profiles' ceilings are set at. Causal SDPA forward and backward on an H200 at
// 2048 and 4096 tokens, the same 16384 tokens and about 4096 channels a call (heads = 4096 / d),
// each dim against the 128 of the same round (tools/gpu_microbench.py --only headdim,
// tests/data/gpu/h200-microbench-8.json and -9.json; the mean of 4-5 calls a dim).
// Between the measured dims the rate is linear; below 64 and above 256 it keeps the end's.
inline constexpr int kHeadDimPoints = 8;
inline constexpr int64_t kMeasuredHeadDims[kHeadDimPoints] = {64, 80, 96, 112, 128, 160, 192, 256};
struct HeadDimRates {
  double at[kHeadDimPoints];  // at kMeasuredHeadDims
};
// The rate at `head_dim` against 128's.
double head_dim_rate(const HeadDimRates& rates, int64_t head_dim);

// What a fused attention kernel does away from the profile's ceiling (head dim 128, long
// sequences, no dropout).
struct FusedAttentionKernel {
  // The rate falls for short sequences as s / (s + this): the causal diagonal's half-empty
  // tiles and each tile row's prologue cost about this many tokens.
  double seq_half_tokens;
  // Attention dropout inside the kernel (a Philox draw per score element): its forward and
  // backward time with dropout over without.
  double dropout_factor;
  HeadDimRates head_dims;
};
// FlashAttention-2 (its sm80 kernels, which it runs on A100 and on Hopper alike: the tile
// shapes are chosen per head dim, the same for sm80 and sm90): the default profile's attention
// and torchtitan's SDPA on Hopper.
// - s / (s + 256): FA2 on A100 runs causal hdim-128 forward at ~130 TFLOP/s at 512 tokens vs
//   ~195 at 8k (Dao 2023);
// - dropout 0.1 takes 1.139x as long forward and backward at 2048 tokens, 1.146x at 8192
//   (PyTorch's SDPA with the flash backend forced on an H200, h200-microbench-7.json).
inline constexpr FusedAttentionKernel kFlash2Attention{256.0, 1.14, {{0.888, 0.721, 0.901, 0.837, 1.0, 0.703, 0.897, 0.879}}};
// cuDNN's attention on Hopper, which Transformer Engine's fused attention calls (the H100 / H200
// profiles; falloff and dropout measured on an H200, core/cost_model.cc).
inline constexpr FusedAttentionKernel kCudnnHopperAttention{800.0, 1.38, {{0.796, 0.687, 0.797, 0.876, 1.0, 0.623, 0.691, 0.802}}};
// Tri Dao's flash-attn package (FlashAttention-2) on Hopper as Transformer Engine calls it when
// cuDNN's attention is switched off (model.attention_kernel "flash2"): its rate is the Hopper
// profile's cuDNN rate divided by kCudnnOverFlashAttnHopper at every sequence length, so it
// keeps cuDNN's falloff; dropout and head dims as FlashAttention-2's kernels (core/layer_cost.cc).
inline constexpr FusedAttentionKernel kFlashAttnPackageHopper{kCudnnHopperAttention.seq_half_tokens,
                                                              kFlash2Attention.dropout_factor, kFlash2Attention.head_dims};
// cuDNN's attention on Blackwell, not measured away from its ceiling: FlashAttention-2's
// falloff and dropout cost, one rate for every head dim.
inline constexpr FusedAttentionKernel kBlackwellAttention{256.0, 1.14, {{1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}}};

// Measured behaviour of one GPU kind (one calibration per kind and precision).
struct GpuProfile {
  const char* kind = "generic";
  int64_t sm_count = 132;
  int64_t tile_m = 128, tile_n = 256;  // CTA tile of the large-GEMM kernels cuBLAS picks
  // Large-GEMM ceiling / dense peak, bf16/fp16, and tf32 (fp32 training): tf32 tensor cores
  // run at the same fraction of their peak per clock (core/cost_model.cc, "tf32").
  double gemm_efficiency_16bit = 0.8;
  double gemm_efficiency_fp8 = 0.65;   // large-GEMM ceiling / dense fp8 peak
  double flash_forward_efficiency = 0.6;   // fused attention forward FLOPs / peak (16-bit)
  double flash_backward_efficiency = 0.45;
  double memory_efficiency = 0.8;      // achieved / peak HBM bandwidth for elementwise kernels
  double nvlink_efficiency = 0.8;      // NCCL bus bandwidth / NVLink bandwidth per direction
  // Tensor-core clock sustained through hours of training at the board power limit, as a
  // fraction of the clock the dense peak is quoted at. Short GEMM benchmarks (MAMF) run
  // before the board reaches its power/thermal steady state.
  double sustained_clock_fraction = 0.9;
  const FusedAttentionKernel* attention_kernel = &kFlash2Attention;  // away from its ceiling
};

// The part of a board's draw that does not scale with its clock, W: a power cap at or below it
// leaves the tensor cores nothing (the scenario reader refuses such a cap).
double static_power_W(double tdp_W);

// Profile for the GPU (matched on the name: A100 and A800, H100 and H800, H200, B200, GB200;
// others generic).
const GpuProfile& gpu_profile(const GpuSpec& gpu);

// The share of the GPU's SMs a data-parallel collective or an overlapped EP all-to-all holds
// while it runs beside compute (kNcclOverlapSms of the profile's SMs, core/cost_model_internal.h):
// the compute it hides behind runs that much slower for as long as it runs. The analytical model
// charges it in overlapped_comm_cost_s; the SimGrid backend takes it from the GPU host's speed
// while such a collective is in flight.
double nccl_overlap_sm_share(const GpuSpec& gpu);

// When `compute_s` of compute ends beside a collective of `comm_s` in flight that holds `share`
// of the SMs, both starting together: s x comm_s late when the collective ends first, else at
// compute_s / (1 - share).
double compute_end_beside_s(double compute_s, double comm_s, double share);

// Whether TP communication overlap (Transformer Engine userbuffers, Megatron-LM
// --tp-comm-overlap, NeMo tp_comm_overlap) runs on this GPU: userbuffers rely on CUDA multicast
// handles inside the NVLink domain (a maintainer's answer in NVIDIA/TransformerEngine GitHub
// thread 1071), which Hopper and later provide. The GPU's fp8 tensor cores stand for the
// generation: A100 and earlier have none.
bool gpu_runs_tp_comm_overlap(const GpuSpec& gpu);

// Whether the GPU has MXFP8 tensor cores (block-scaled MMA, Blackwell and later; Transformer
// Engine refuses the mxfp8 recipe below compute capability 10.0): false for the Ampere and
// Hopper profiles, true for Blackwell's and for a GPU the presets do not know.
bool gpu_runs_mxfp8(const GpuSpec& gpu);

// A measured calibration profile (monarch-calibrate, docs/calibration_profile.md), read once
// per path and kept. When GpuSpec::profile names one, GEMM throughput (interpolated over its
// grid, times the sustained-clock fraction for GPUs), HBM bandwidth and intra-node collective
// bandwidth come from it; what it lacks (attention kernels, inter-node links, a precision it
// did not measure) falls back to the presets. A profile that cannot be read is reported here
// with its problems (callers check it when they read the scenario) and otherwise ignored.
// The path is used as given (relative paths from the working directory).
struct CalibrationProfile;
Expected<const CalibrationProfile*> calibration_profile(const std::string& path);

// Seconds for one GEMM-like kernel of `flops` FLOPs and `mem_bytes` HBM traffic with shape
// (m x k) . (k x n). m, n or k <= 0 marks an elementwise (memory-bound) kernel.
double compute_time_s(const GpuSpec& gpu, Precision precision, double flops, double mem_bytes,
                      int64_t m, int64_t n, int64_t k);

// Seconds for `batch` independent GEMMs (m x k) . (k x n) run as one batched kernel (torch.bmm,
// cublasGemmStridedBatched); `flops` and `mem_bytes` are the whole batch's. Every matrix's
// tiles fill the SMs together, and a matrix smaller than the large-GEMM tile runs in tiles
// cut to its size (rounded up to the 16 x 16 MMA fragment) rather than padded to 128 x 256.
double batched_compute_time_s(const GpuSpec& gpu, Precision precision, double flops, double mem_bytes,
                              int64_t batch, int64_t m, int64_t n, int64_t k);

// Shape-dependent GEMM efficiency (fraction of dense peak) for the GPU and precision.
double gemm_efficiency(const GpuSpec& gpu, Precision precision, int64_t m, int64_t n, int64_t k);

// Seconds for one collective. `bytes_per_rank` is NCCL's "size": the all-reduce buffer, the
// all-gather output / reduce-scatter input (all ranks' shards together), the all-to-all
// send buffer, the broadcast buffer.
double collective_time_s(CollectiveKind kind, int64_t bytes_per_rank, const GroupSpan& group,
                         const ClusterConfig& cluster);
// Hop latencies of one ring or tree collective (without NCCL's base latency) over n ranks on
// `nodes` nodes, at most `ranks_per_node` on one: NCCL's tuning model (src/graph/tuning.cc),
// the rule both backends use. A ring takes n - 1 steps per pass (two passes for all-reduce),
// nodes - 1 of them across nodes, the rest on NVLink; all-reduce over several nodes takes
// NCCL's double binary tree when that is shorter, 2 (r - 1) NVLink and 2 log2(nodes) NIC hops.
double collective_hops_latency_s(CollectiveKind kind, int64_t n, int64_t nodes, int64_t ranks_per_node,
                                 double intra_latency_s, double inter_latency_s);
// All-to-all details shared with the SimGrid decomposition (derivation in cost_model.cc).
// Latency waves: the peers NCCL keeps in flight at once are 32 p2p channels x 8 rounds per
// work batch; each wave of up to 256 peers pays one end-to-end latency of the slowest path.
int64_t all_to_all_latency_waves(int64_t group_size);
// Whether messages to other rails go over NVLink to the member on the destination's rail first
// (NCCL PXN): rail-optimized topology, group across nodes, several members per node.
bool all_to_all_uses_pxn(const GroupSpan& group, const ClusterConfig& cluster);
// Busiest member's bytes per link as fractions of its send buffer; on_rail: the NIC traffic
// stays on its rail switch (no leaf-uplink oversubscription).
struct AllToAllLoad {
  double nic_fraction = 0, nvlink_fraction = 0;
  bool on_rail = false;
};
AllToAllLoad all_to_all_load(const GroupSpan& group, const ClusterConfig& cluster);
double all_to_all_latency_s(const GroupSpan& group, const ClusterConfig& cluster);

// Bytes one rank sends on the wire for that collective (ring algorithms).
double collective_wire_bytes(CollectiveKind kind, int64_t bytes_per_rank, int64_t group_size);

// Seconds for one point-to-point message.
double p2p_time_s(int64_t bytes, bool crosses_nodes, const ClusterConfig& cluster);

// Per-layer costs of one micro-batch on one rank, for lowering into the task graph.
struct LayerCosts {
  // One transformer layer, one micro-batch, one rank. `recompute` is the forward work the
  // backward repeats (whole layer for full recompute, the attention core for selective).
  double forward_s = 0, backward_s = 0, recompute_s = 0;
  double forward_flops = 0, backward_flops = 0, recompute_flops = 0;
  double forward_mem_bytes = 0, backward_mem_bytes = 0, recompute_mem_bytes = 0;
  // Of the above, the MoE block (router, expert GEMMs, activation, token permutation), which
  // runs between the EP dispatch and combine all-to-alls; 0 for dense models.
  double moe_forward_s = 0, moe_backward_s = 0;
  double moe_forward_flops = 0, moe_backward_flops = 0;
  double moe_forward_mem_bytes = 0, moe_backward_mem_bytes = 0;
  // Host floor: seconds per pass that the GPU idles because the host dispatches the layer's
  // kernels more slowly than they run (eager PyTorch); not part of forward_s / backward_s /
  // recompute_s, which are GPU time. 0 when the GPU work, with the pass's exposed TP
  // collectives (which run while the host dispatches), is longer than the dispatch.
  double host_forward_s = 0, host_backward_s = 0, host_recompute_s = 0;

  struct Collective {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    GroupKind group = GroupKind::kTp;
    int64_t bytes = 0;          // NCCL size per rank
    int32_t forward_count = 0;    // per layer per micro-batch
    int32_t backward_count = 0;   // backward pass (without recomputation)
    int32_t recompute_count = 0;  // forward collectives recomputation runs again
    double time_s = 0;            // one operation
    bool fp32 = false;            // reduced in fp32 whatever the training precision
  };
  std::vector<Collective> collectives;  // TP and EP collectives of a layer
  // Tensor-parallel collectives outside the layers, per micro-batch, as Megatron-LM runs them
  // (counts per micro-batch). First virtual stage: the vocabulary-parallel embedding's
  // all-reduce (sequence parallel: reduce-scatter to the sequence shard, all-gather of its
  // gradient in the backward). Last virtual stage: the vocabulary-parallel cross-entropy's 3
  // fp32 all-reduces of one value per token (max logit, target logit, sum of exponentials),
  // the output layer's input-gradient all-reduce (sequence parallel: all-gather of the final
  // norm output in the forward and again in the backward for the weight gradient, beside the
  // input-gradient GEMM, and reduce-scatter of the input gradient).
  std::vector<Collective> embedding_collectives, output_collectives;
  double embedding_tp_total_s = 0, embedding_tp_exposed_s = 0;  // per micro-batch
  double output_tp_total_s = 0, output_tp_exposed_s = 0;
  // Sequence parallelism: parameters every TP rank holds in full (norms, row-parallel biases,
  // MoE router, learned positions) get partial gradients from their sequence shard; their
  // gradients (main_grad, in grad_reduce_dtype) are all-reduced over the TP group once per step
  // (Megatron finalize_model_grads, _allreduce_layernorm_grads). Parameters per layer, and what
  // the first / last stage add, and the bytes per parameter.
  double sp_grad_params_per_layer = 0, sp_grad_params_first = 0, sp_grad_params_last = 0;
  double sp_grad_bytes_per_param = 4;
  // Context parallelism: bytes of K and V each rank sends around the ring per layer.
  int64_t cp_send_bytes_forward = 0, cp_send_bytes_backward = 0;
  double cp_time_forward_s = 0, cp_time_backward_s = 0;  // total ring exchange time per layer
  // Exposed (not hidden) communication seconds per layer and micro-batch.
  double tp_exposed_s = 0, cp_exposed_s = 0, ep_exposed_s = 0;
  double tp_total_s = 0, cp_total_s = 0, ep_total_s = 0;

  // First stage: embedding; last stage: final norm, output projection, loss.
  double embedding_forward_s = 0, embedding_backward_s = 0;
  double embedding_forward_mem_bytes = 0, embedding_backward_mem_bytes = 0;
  double output_forward_s = 0, output_backward_s = 0;
  double output_forward_flops = 0, output_backward_flops = 0;
  double output_forward_mem_bytes = 0, output_backward_mem_bytes = 0;

  // Pipeline: activation message per micro-batch per stage boundary (its time depends on the
  // hop: p2p_time_s with pp_hop_crosses_nodes).
  int64_t pp_message_bytes = 0;

  // Activation offloading (Plan::activation_offload_layers): the bytes an offloaded layer copies
  // to host memory per micro-batch, and back (its saved activations), and the seconds per layer
  // and micro-batch (the stage's offload_stall_s over its layers) that the forward and the
  // backward wait for those copies. The waits count as exposed communication.
  int64_t offload_bytes = 0;
  double offload_forward_s = 0, offload_backward_s = 0;
};

// Seconds one pass over `layers` layers of `layer_s` each waits for Transformer Engine's CPU
// offloading (DefaultOffloadSynchronizer, transformer_engine/pytorch/cpu_offload.py) when
// `offloaded` of them copy their activations in `copy_s` each over the host link, one copy at a
// time on the offload stream. Forward: layer i < offloaded starts its copy when its forward ends
// (fwd_step of the next layer) and must have finished it before layer i + (layers - offloaded)
// starts (finish_offload_map), so that the GPU never holds more than layers - offloaded layers'
// activations. The backward is the same in reverse: the reload of the n-th offloaded layer from
// the end starts when the n-th backward has freed its set (start_reload_map) and must finish
// before that layer's backward. So both passes are this one recurrence; with copy_s <= layer_s
// and at least two sets on the GPU nothing waits.
double offload_stall_s(int64_t layers, int64_t offloaded, double layer_s, double copy_s);

LayerCosts layer_costs(const Scenario& scenario, const Plan& plan);

// Sequence parallelism: bytes of the once-per-step TP all-reduce of the replicated
// parameters' gradients of a model part of `layers` layers, with the embedding (`first`) and
// the final norm (`last`) when it holds them (0 without SP).
int64_t sp_grad_reduce_bytes(const LayerCosts& costs, int64_t layers, bool first, bool last);

// Seconds of the optimizer step on a rank that updates `sharded_params` parameters (after
// ZeRO sharding) and zeroes the gradients of `grad_params` (HBM bound).
double optimizer_step_time_s(const Scenario& scenario, double sharded_params, double grad_params);

// The fast path used by search: iteration time and peak memory only (>= 100k plans per
// second on one core; see bench/analytical_bench.cc).
struct QuickEstimate {
  double iteration_time_s = 0;  // 0: a misfit left untimed (MisfitTime::kSkip)
  double peak_memory_gib = 0;
  bool fits = false;
  std::string reject_reason;  // empty when it fits
  // iteration_time_s is only a lower bound on the plan's time, and above the caller's
  // time_bound_s: the fitting plan's busiest stage computes for longer than the bound, or its time
  // without the pipeline bubble already exceeds it.
  bool time_is_lower_bound = false;
};
// Whether quick_estimate times a plan that does not fit in memory. The search ranks only the
// plans that fit and reports the others by their memory, so it skips their time (most of an
// estimate's cost) unless a caller plots every plan.
enum class MisfitTime { kEstimate, kSkip };
// No bound on the time quick_estimate computes in full.
inline constexpr double kNoTimeBound = std::numeric_limits<double>::infinity();
// `time_bound_s`: a caller that only wants plans faster than this (a search's slowest kept plan)
// lets a fitting plan stop at a lower bound above it (QuickEstimate::time_is_lower_bound): its
// busiest stage's compute, before the layer's collectives are costed, or for a pipeline plan its
// time without the bubble, before the schedule that gives the bubble is run (most of the cost of a
// pipeline plan's estimate).
QuickEstimate quick_estimate(const Scenario& scenario, const Plan& plan, MisfitTime misfits = MisfitTime::kEstimate,
                             double time_bound_s = kNoTimeBound);

// The fewest layers whose activations `plan` must offload (Plan::activation_offload_layers) for
// its peak memory to fit the GPU's usable memory: 0 when it fits without, -1 when offloading
// cannot run with the plan (activation_offload_problem) or no number of layers makes it fit.
// Offloading never makes a plan faster, so the search tries only this one.
int64_t fewest_offload_layers_to_fit(const Scenario& scenario, const Plan& plan);

// The full result entry of the analytical backend.
BackendResult estimate_plan(const Scenario& scenario, const Plan& plan);

// Constants of the cost model (values and sources in cost_model.cc).
extern const double kInterNodeEfficiency;  // NCCL bus bandwidth / NIC line rate

}  // namespace monarch
