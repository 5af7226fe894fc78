// The cost model's GPU constants against one H200 measured through PyTorch and cuBLAS
// (tools/gpu_microbench.py; tests/data/gpu/h200-microbench.json, the head dims of -8.json and
// -9.json and, held parts with the clock read beside each, h200-microbench-2.json, -3.json and
// -7.json: PyTorch 2.11, CUDA 13.0, cuBLAS 13.1, driver 580, the board at its 700 W limit).
// docs/analytical_model.md, "Measured on an H200", gives every figure and what it says about
// the model.
#include <gtest/gtest.h>

#include <cassert>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost_model.h"
#include "core/cost_model_internal.h"
#include "core/model_math.h"
#include "core/presets.h"
#include "core/profile.h"
#include "core/profile_io.h"
#include "core/scenario_io.h"

namespace monarch {
namespace {

nlohmann::json read_gpu_data(const std::string& name) {
  std::ifstream in(std::string(MONARCH_SOURCE_DIR) + "/tests/data/gpu/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

const nlohmann::json& h200() {
  static const nlohmann::json j = read_gpu_data("h200-microbench.json");
  return j;
}

const nlohmann::json& h200_held() {
  static const nlohmann::json j = read_gpu_data("h200-microbench-2.json");
  return j;
}

const GpuPreset& h200_preset() {
  const GpuPreset* p = find_gpu_preset("H200-SXM");
  assert(p != nullptr);  // a shipped preset
  return *p;
}

GpuSpec h200_spec() { return h200_preset().spec; }

// Hopper's dense 16-bit tensor cores do 4096 FLOP per SM and clock (twice the A100's 2048,
// NVIDIA H100 whitepaper), so the preset's 989.5 TFLOP/s is quoted at 989.5e12 / (132 x 4096)
// = 1830 MHz. A rate measured at another clock is scaled to that one.
constexpr double kHopperDenseFlopsPerSmClock = 4096.0;

double quoted_clock_MHz(const GpuSpec& gpu) {
  return gpu.peak_tflops.bf16 * 1e12 / (static_cast<double>(gpu_profile(gpu).sm_count) * kHopperDenseFlopsPerSmClock) / 1e6;
}

// A held run's rate as a fraction of `peak_tflops` at the clock it held.
double per_clock_fraction(const nlohmann::json& held, double peak_tflops) {
  return held.at("second_half_median_tflops").get<double>() /
         (peak_tflops * held.at("second_half_median_sm_MHz").get<double>() / quoted_clock_MHz(h200_spec()));
}

// The model's 8192^3 GEMM rate in `precision`, per clock (its sustained clock divided out),
// within 2% of a held product's (`held`, against `peak_tflops`). Returns the clock it held.
double expect_gemm_ceiling_per_clock(const nlohmann::json& held, Precision precision, double peak_tflops) {
  const GpuSpec gpu = h200_spec();
  const double clock_MHz = held.at("second_half_median_sm_MHz").get<double>();
  const double measured = per_clock_fraction(held, peak_tflops);
  const double model = gemm_efficiency(gpu, precision, 8192, 8192, 8192) / gpu_profile(gpu).sustained_clock_fraction;
  EXPECT_NEAR(model, measured, 0.02 * measured) << "measured " << measured << " per clock at " << clock_MHz << " MHz";
  return clock_MHz;
}

// One H200 running `model` (scenario-file keys), as the scenario reader builds it.
Scenario one_h200(const nlohmann::json& model) {
  const nlohmann::json j = {{"model", model},
                            {"cluster", {{"gpu", "H200-SXM"}, {"num_gpus", 1}, {"gpus_per_node", 1}}},
                            {"training", {{"global_batch_size", 1}, {"micro_batch_size", 1}}}};
  Expected<Scenario> s = scenario_from_json(j);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.problems().front().to_string());
  return s.ok() ? *s : Scenario{};
}

// An 8192^3 bf16 product run back to back for 30 s settles at the power limit (nvidia-smi:
// 692 W of 700, throttle reason "SW power cap") at 1455 MHz and 665 TFLOP/s: 0.845 of the peak
// at that clock. The preset's large-GEMM ceiling (0.885 x waves x K-loop, set on GH200's MAMF)
// gives the same per clock. The model's sustained clock (0.865, 1583 MHz, set on the calibration
// runs) lies above the pure GEMM's: a training step mixes in memory-bound kernels and
// communication that draw less power, so its clock settles higher.
TEST(MeasuredH200, LargeGemmCeilingPerClockMatchesTheSteadyStateProduct) {
  const GpuSpec gpu = h200_spec();
  const double clock_MHz = expect_gemm_ceiling_per_clock(h200().at("sustained_bf16"), Precision::kBf16, gpu.peak_tflops.bf16);
  EXPECT_NEAR(quoted_clock_MHz(gpu), 1830.0, 1.0);
  EXPECT_LT(clock_MHz / quoted_clock_MHz(gpu), gpu_profile(gpu).sustained_clock_fraction);
}

// The fp8 product draws more power per clock: it settles at 1335 MHz (bf16: 1455) and 1211
// TFLOP/s, 0.84 of the fp8 peak per clock. The preset's fp8 ceiling (0.74, vendor figures of
// sustained fp8 GEMMs) folds that lower clock in, so at the model's one sustained clock its rate
// is the measured steady-state rate.
TEST(MeasuredH200, Fp8GemmRateMatchesTheSteadyStateProduct) {
  const GpuSpec gpu = h200_spec();
  const nlohmann::json& s = h200().at("sustained_fp8");
  const double model_tflops = gpu.peak_tflops.fp8 * gemm_efficiency(gpu, Precision::kFp8, 8192, 8192, 8192);
  const double measured_tflops = s.at("second_half_median_tflops").get<double>();
  EXPECT_NEAR(model_tflops, measured_tflops, 0.03 * measured_tflops);
}

// Transformer blocks held at the power limit settle between the pure GEMM's clock and the
// boost clock, the more GEMM-bound the lower: a Llama 3.1 8B block at 8192 tokens at 1560 MHz
// (0.852 of 1830), a GPT-3 175B TP-8 block at 2048 tokens at 1635 MHz (0.893). The model's one
// sustained clock, set on the runs of those two families, lies between them, and every training
// layer holds a higher clock than the 8192^3 GEMM of the same run.
TEST(MeasuredH200, TrainingLayersHoldClocksAroundTheModelsSustainedClock) {
  const GpuSpec gpu = h200_spec();
  const double quoted_MHz = quoted_clock_MHz(gpu);
  const double gemm_MHz = h200_held().at("sustained_bf16").at("second_half_median_sm_MHz").get<double>();
  double llama = 0, gpt3 = 0;
  for (const nlohmann::json& layer : h200_held().at("layers")) {
    const double clock_MHz = layer.at("second_half_median_sm_MHz").get<double>();
    EXPECT_GT(clock_MHz, gemm_MHz) << layer.at("label");
    const std::string label = layer.at("label").get<std::string>();
    if (label == "layer llama3.1-8b") llama = clock_MHz / quoted_MHz;
    if (label == "layer gpt3-175b-tp8") gpt3 = clock_MHz / quoted_MHz;
  }
  const double model = gpu_profile(gpu).sustained_clock_fraction;
  EXPECT_NEAR(llama, 0.852, 0.005);
  EXPECT_LE(llama, model);
  EXPECT_GE(gpt3, model);
}

// fp32 training runs tf32 tensor cores at half the 16-bit rate with operands twice as wide: the
// same bytes per clock, the same fraction of the peak. The 8192^3 tf32 product held at the power
// limit runs 344 TFLOP/s at 1492 MHz, 0.852 of the tf32 peak per clock (bf16 0.845); the model's
// fp32 GEMM ceiling (the 16-bit one) gives the same per clock.
TEST(MeasuredH200, Tf32GemmCeilingPerClockMatchesTheSteadyStateProduct) {
  const GpuSpec gpu = h200_spec();
  expect_gemm_ceiling_per_clock(h200_held().at("sustained_tf32"), Precision::kFp32, gpu.peak_tflops.tf32);
  EXPECT_DOUBLE_EQ(gemm_efficiency(gpu, Precision::kFp32, 8192, 8192, 8192),
                   gemm_efficiency(gpu, Precision::kBf16, 8192, 8192, 8192));
}

// Causal SDPA (cuDNN, head dim 128, bf16) forward and backward held at the power limit, 32
// heads and 8192 tokens a call at 8192 to 512 tokens a sequence (h200-microbench-2.json and the
// 4096-token point of -3.json): per clock, the 8192-token rate is 0.532 of the peak, and the
// shorter sequences run 0.92, 0.79-0.81 and 0.44-0.45 of it. The H200 profile's fused-attention
// ceilings and its s / (s + 800) falloff give the same.
TEST(MeasuredH200, FusedAttentionRatePerClockAndItsShortSequenceFalloff) {
  const GpuSpec gpu = h200_spec();
  nlohmann::json held = h200_held().at("heldattention");
  for (const nlohmann::json& row : read_gpu_data("h200-microbench-3.json").at("heldattention"))
    if (row.at("seq").get<int>() == 4096) held.push_back(row);
  auto per_clock = [&](const nlohmann::json& row) { return per_clock_fraction(row, gpu.peak_tflops.bf16); };
  auto model_per_clock = [&](int64_t seq) {
    const Scenario s = one_h200({{"architecture", "llama"}, {"num_layers", 1}, {"hidden_size", 4096},
                                 {"num_attention_heads", 32}, {"ffn_hidden_size", 4096}, {"vocab_size", 1024},
                                 {"seq_length", seq}});
    Plan p;
    p.micro_batch_size = 8192 / seq;
    const cost_detail::LayerCompute lc = cost_detail::layer_compute(cost_detail::make_ctx(s), model_shape(s.model), p);
    const double seconds = lc.attn_fwd.s + lc.attn_bwd.s;
    return (lc.attn_fwd.flops + lc.attn_bwd.flops) / seconds / (gpu.peak_tflops.bf16 * 1e12 * gpu_profile(gpu).sustained_clock_fraction);
  };
  double measured_8192 = 0;
  for (const nlohmann::json& row : held)
    if (row.at("seq").get<int>() == 8192) measured_8192 = per_clock(row);
  ASSERT_GT(measured_8192, 0);
  EXPECT_NEAR(model_per_clock(8192), measured_8192, 0.03 * measured_8192);
  for (const nlohmann::json& row : held) {
    const auto seq = row.at("seq").get<int64_t>();
    const double measured = per_clock(row) / measured_8192;
    const double model = model_per_clock(seq) / model_per_clock(8192);
    EXPECT_NEAR(model, measured, 0.04) << seq << " tokens";
  }
}

// Attention dropout 0.1 inside the fused kernels, forward and backward, against none
// (h200-microbench-7.json, each pair timed back to back): cuDNN's attention, which Megatron's
// Transformer Engine runs on Hopper, takes 1.37-1.39x as long; FlashAttention-2, which
// torchtitan's SDPA ran on Hopper, 1.14-1.15x. The model's attention time moves by the same.
TEST(MeasuredH200, FusedAttentionDropoutCostsWhatTheKernelsMeasured) {
  const nlohmann::json rows = read_gpu_data("h200-microbench-7.json").at("dropout");
  auto model_ratio = [](const char* framework) {
    auto attention_s = [&](double dropout) {
      Scenario s = one_h200({{"architecture", "gpt"}, {"num_layers", 1}, {"hidden_size", 4096},
                             {"num_attention_heads", 32}, {"vocab_size", 1024}, {"seq_length", 8192},
                             {"attention_dropout", dropout}});
      s.training.framework = std::string(framework) == "torchtitan" ? Framework::kTorchtitan : Framework::kMegatron;
      const cost_detail::LayerCompute lc =
          cost_detail::layer_compute(cost_detail::make_ctx(s), model_shape(s.model), Plan{});
      return lc.attn_fwd.s + lc.attn_bwd.s;
    };
    return attention_s(0.1) / attention_s(0.0);
  };
  int checked = 0;
  for (const nlohmann::json& row : rows) {
    if (row.at("seq").get<int>() != 8192) continue;
    const std::string backend = row.at("backend").get<std::string>();
    const double measured = row.at("dropout_over_none").get<double>();
    const double model = model_ratio(backend == "flash" ? "torchtitan" : "megatron");
    EXPECT_NEAR(model, measured, 0.02 * measured) << backend;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Causal SDPA at head dims 64-256 (h200-microbench-8.json and -9.json: 2048 and 4096 tokens, the
// same 16384 tokens and ~4096 channels a call, each dim against the 128 of its round): both
// kernels are tuned for 128; FlashAttention-2 runs 0.70 of that rate at 160 and 0.72 at 80,
// cuDNN's attention 0.62 at 160 and 0.69 at 192. The model's attention rate at each head dim,
// against its rate at 128 (torchtitan runs FlashAttention-2 on Hopper, Megatron cuDNN's through
// Transformer Engine), is the mean measured ratio.
TEST(MeasuredH200, FusedAttentionRateAtEachHeadDimIsTheMeasuredOne) {
  std::map<std::pair<std::string, int64_t>, std::vector<double>> ratios;
  for (const char* file : {"h200-microbench-8.json", "h200-microbench-9.json"}) {
    const nlohmann::json rows = read_gpu_data(file).at("headdim");
    std::map<std::string, std::map<int64_t, double>> rounds;  // backend/seq/round -> dim -> TFLOP/s
    for (const nlohmann::json& r : rows)
      rounds[r.at("backend").get<std::string>() + "/" + std::to_string(r.at("seq").get<int>()) + "/" +
             std::to_string(r.value("round", 0))][r.at("head_dim").get<int64_t>()] = r.at("tflops").get<double>();
    for (const auto& [key, by_dim] : rounds)
      for (const auto& [dim, tflops] : by_dim)
        ratios[{key.substr(0, key.find('/')), dim}].push_back(tflops / by_dim.at(128));
  }
  auto model_rate = [](const char* framework, int64_t head_dim) {
    const int64_t heads = 4096 / head_dim;
    Scenario s = one_h200({{"architecture", "llama"}, {"num_layers", 1}, {"hidden_size", heads * head_dim},
                           {"num_attention_heads", heads}, {"ffn_hidden_size", 4096}, {"vocab_size", 1024},
                           {"seq_length", 2048}});
    s.training.framework = std::string(framework) == "torchtitan" ? Framework::kTorchtitan : Framework::kMegatron;
    Plan p;
    p.micro_batch_size = 8;
    const cost_detail::LayerCompute lc = cost_detail::layer_compute(cost_detail::make_ctx(s), model_shape(s.model), p);
    return (lc.attn_fwd.flops + lc.attn_bwd.flops) / (lc.attn_fwd.s + lc.attn_bwd.s);
  };
  int checked = 0;
  for (const auto& [key, values] : ratios) {
    if (key.second == 128) continue;
    double mean = 0;
    for (double v : values) mean += v / static_cast<double>(values.size());
    const char* framework = key.first == "flash" ? "torchtitan" : "megatron";
    const double model = model_rate(framework, key.second) / model_rate(framework, 128);
    EXPECT_NEAR(model, mean, 0.01) << key.first << " head dim " << key.second;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

// tools/host_floor_bench.py's Megatron-LM layer (its Python autograd Functions, fused kernels,
// RNG tracker and checkpointed recompute) on CUDA tensors too small to cost the GPU anything:
// the host time of one layer pass on a real CUDA stack. The same layer in the model (hidden 64,
// 4 heads, 8 tokens, materialized attention, full recompute) dispatches 36 + 36 + 72 ops at the
// per-op cost, which is this measurement over those 144 ops (3.33 ms, 23.2 us an op). Without
// recompute the same cost and the 108 ops of a forward and a backward give 2.51 ms, where the
// host measures 2.47 ms: the op counts split the layer as the real dispatch does.
TEST(MeasuredH200, HostFloorOfMegatronsLayerMatchesTheMeasuredGpuHost) {
  const Scenario s = one_h200({{"architecture", "gpt"}, {"num_layers", 8}, {"hidden_size", 64},
                               {"num_attention_heads", 4}, {"vocab_size", 512}, {"seq_length", 8},
                               {"attention_kernel", "materialized"}});
  Plan p;
  p.recompute = Recompute::kFull;
  const LayerCosts l = layer_costs(s, p);
  ASSERT_GT(l.host_forward_s, 0) << "the tiny layer must be host-bound";
  const double model_full_s =
      (l.forward_s + l.host_forward_s) + (l.recompute_s + l.host_recompute_s) + (l.backward_s + l.host_backward_s);
  const double measured_full_s = h200().at("host").at("layer_forward_recompute_backward_s").get<double>();
  EXPECT_NEAR(model_full_s, measured_full_s, 0.02 * measured_full_s) << "model " << model_full_s << " s";
  // Without recompute the pass is the forward and the backward alone.
  const double model_plain_s = (l.forward_s + l.host_forward_s) + (l.backward_s + l.host_backward_s);
  const double measured_plain_s = h200().at("host").at("layer_forward_backward_s").get<double>();
  EXPECT_NEAR(model_plain_s, measured_plain_s, 0.03 * measured_plain_s) << "model " << model_plain_s << " s";
}

// monarch-calibrate --device gpu's output on the same H200 (tests/data/gpu/h200-profile.json):
// the reader takes the file a real GPU wrote, and a scenario naming it takes its GEMM rates,
// times the sustained clock, in place of the preset's.
TEST(MeasuredH200, CalibrateProfileReadsBackAndDrivesTheGemmModel) {
  const std::string path = std::string(MONARCH_SOURCE_DIR) + "/tests/data/gpu/h200-profile.json";
  Expected<CalibrationProfile> prof = read_profile(path);
  ASSERT_TRUE(prof.ok()) << prof.problems().front().to_string();
  EXPECT_EQ(prof->device_name, "NVIDIA H200");
  EXPECT_EQ(prof->matmul.size(), 375u);  // 5^3 shapes in fp32, tf32 and bf16
  EXPECT_GT(prof->memory_bandwidth_GBps, 3000.0);
  GpuSpec gpu = h200_spec();
  gpu.profile = path;
  const double tflops = profile_matmul_tflops(*prof, Precision::kBf16, 8192, 8192, 8192);
  EXPECT_GT(tflops, 600.0);
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  const double t = compute_time_s(gpu, Precision::kBf16, flops, 0.0, 8192, 8192, 8192);
  EXPECT_NEAR(t, flops / (tflops * 1e12 * gpu_profile(gpu).sustained_clock_fraction), 5e-6);
  EXPECT_NE(t, compute_time_s(h200_spec(), Precision::kBf16, flops, 0.0, 8192, 8192, 8192));
}

}  // namespace
}  // namespace monarch
