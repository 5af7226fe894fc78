#include "core/model_math.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/presets.h"
#include "core/units.h"

namespace monarch {
namespace {

ModelConfig gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq = 2048, int64_t vocab = 51200) {
  ModelConfig m;
  m.architecture = Architecture::kGpt;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.tie_embeddings = true;
  // The published Megatron GPT runs these tests reproduce stored the attention scores.
  m.attention_kernel = AttentionKernel::kMaterialized;
  return m;
}

ModelConfig llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t ffn, int64_t vocab, int64_t seq) {
  ModelConfig m;
  m.architecture = Architecture::kLlama;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.tie_embeddings = false;
  return m;
}

// Narayanan et al. 2021 (Megatron-LM SC'21), Table 1: heads, hidden, layers and the printed
// parameter count in billions (V = 51200, s = 2048, tied embeddings).
struct Table1Row {
  double billions;
  int64_t heads, hidden, layers;
};
constexpr Table1Row kTable1[] = {{1.7, 24, 2304, 24},      {3.6, 32, 3072, 30},     {7.5, 32, 4096, 36},
                                 {18.4, 48, 6144, 40},     {39.1, 64, 8192, 48},    {76.1, 80, 10240, 60},
                                 {145.6, 96, 12288, 80},   {310.1, 128, 16384, 96}, {529.6, 128, 20480, 105},
                                 {1008.0, 160, 25600, 128}};

TEST(Parameters, MegatronTable1To0Point1PercentOrThePrintedDigit) {
  for (const Table1Row& r : kTable1) {
    const ParameterCounts p = parameter_counts(model_shape(gpt(r.layers, r.hidden, r.heads)));
    const double b = static_cast<double>(p.total) / 1e9;
    // The table prints one decimal: the small models are only known to +-0.05 B.
    EXPECT_LE(std::fabs(b - r.billions), std::max(0.001 * r.billions, 0.05)) << r.billions << "B: " << b;
    // Exact count = Megatron's closed form + the final LayerNorm (2h), which the form omits.
    EXPECT_NEAR(static_cast<double>(p.total), megatron_gpt_parameters(r.layers, r.hidden, 51200, 2048) + 2.0 * r.hidden, 1.0);
  }
  // The large ones to 0.1%.
  for (const Table1Row& r : kTable1) {
    if (r.billions < 39) continue;
    const double b = static_cast<double>(parameter_counts(model_shape(gpt(r.layers, r.hidden, r.heads))).total) / 1e9;
    EXPECT_NEAR(b, r.billions, 0.001 * r.billions);
  }
}

TEST(Parameters, LlamaAndMixtralMatchTheirReleasedCheckpoints) {
  // Hugging Face model cards / safetensors index: Llama 3.1 8B 8,030,261,248 parameters,
  // Llama 3 70B 70,553,706,496, Mixtral 8x7B 46,702,792,704.
  EXPECT_EQ(parameter_counts(model_shape(llama(32, 4096, 32, 8, 14336, 128256, 8192))).total, 8030261248);
  EXPECT_EQ(parameter_counts(model_shape(llama(80, 8192, 64, 8, 28672, 128256, 8192))).total, 70553706496);
  ModelConfig mixtral = llama(32, 4096, 32, 8, 14336, 32000, 4096);
  mixtral.num_experts = 8;
  mixtral.moe_top_k = 2;
  const ParameterCounts p = parameter_counts(model_shape(mixtral));
  EXPECT_EQ(p.total, 46702792704);
  EXPECT_EQ(p.expert_per_layer, 8 * 3 * 4096 * 14336);
}

TEST(Parameters, TiedEmbeddingsAndPerStageShares) {
  ModelConfig m = gpt(24, 2048, 16);
  const ModelShape tied = model_shape(m);
  m.tie_embeddings = false;
  const ModelShape untied = model_shape(m);
  EXPECT_EQ(parameter_counts(untied).total - parameter_counts(tied).total, 51200 * 2048);

  // Summed over stages and TP ranks, the shares are the model (plus the output copy Megatron
  // keeps on the last stage for tied embeddings when pp > 1, and replicated norms/biases).
  Plan p;
  p.pp = 4;
  p.tp = 1;
  const std::vector<int64_t> layers = stage_layers(untied, p);
  double sum = 0;
  for (int64_t s = 0; s < 4; ++s) sum += stage_parameters(untied, p, s, layers[static_cast<size_t>(s)]).total();
  EXPECT_DOUBLE_EQ(sum, static_cast<double>(parameter_counts(untied).total));
  // With TP the matrices split; the embedding is vocabulary-parallel.
  p.tp = 8;
  const StageParameters first = stage_parameters(untied, p, 0, 6);
  // (learned position embeddings, s x h, are replicated)
  EXPECT_NEAR(first.dense, static_cast<double>(6 * parameter_counts(untied).per_layer + 51200 * 2048) / 8 + 2048.0 * 2048,
              0.01 * first.dense);
}

// One split rule for the cost model, the partitioner and the lowering: the remainder goes to
// the middle stages (the first and last also run the embedding and the output layer).
TEST(Parameters, UnevenLayersGoToTheMiddleStages) {
  Plan p;
  p.pp = 4;
  EXPECT_EQ(stage_layers(model_shape(gpt(10, 1024, 16)), p), (std::vector<int64_t>{2, 3, 3, 2}));
  p.layers_per_stage = {1, 4, 4, 1};
  EXPECT_EQ(stage_layers(model_shape(gpt(10, 1024, 16)), p), p.layers_per_stage);
}

TEST(Parameters, TheDefaultSplitCoversVirtualStagesAndMegatronsFlags) {
  EXPECT_EQ(default_layer_split(32, 4), (std::vector<int64_t>{8, 8, 8, 8}));
  EXPECT_EQ(default_layer_split(10, 4), (std::vector<int64_t>{2, 3, 3, 2}));
  // Llama 3.1 405B: 126 layers on pp 8 x vpp 8 = 64 model chunks of 2, the two end chunks 1.
  std::vector<int64_t> llama = default_layer_split(126, 64);
  ASSERT_EQ(llama.size(), 64u);
  EXPECT_EQ(llama.front(), 1);
  EXPECT_EQ(llama.back(), 1);
  for (size_t i = 1; i + 1 < llama.size(); ++i) EXPECT_EQ(llama[i], 2);
  // Megatron's account-for flags give the same split (the embedding and loss count as layers).
  EXPECT_EQ(default_layer_split(126, 64, true, true), llama);
  EXPECT_EQ(default_layer_split(31, 4, true, false), (std::vector<int64_t>{7, 8, 8, 8}));
  // 30 layers on pp 4 x vpp 8 with both flags: the end chunks hold only the embedding / loss.
  std::vector<int64_t> proxy = default_layer_split(30, 32, true, true);
  EXPECT_EQ(proxy.front(), 0);
  EXPECT_EQ(proxy.back(), 0);
  int64_t sum = 0;
  for (int64_t n : proxy) sum += n;
  EXPECT_EQ(sum, 30);
  // Per stage, a plan with vpp sums its chunks (chunk c of stage s at c x pp + s).
  Plan p;
  p.pp = 8;
  p.vpp = 8;
  ModelConfig m = gpt(126, 1024, 16);
  EXPECT_EQ(virtual_stage_layers(126, p), llama);
  EXPECT_EQ(stage_layers(model_shape(m), p), (std::vector<int64_t>{15, 16, 16, 16, 16, 16, 16, 15}));
  EXPECT_EQ(max_chunk_layers(model_shape(m), p), 2);
  // A per-stage split is spread over the stage's chunks, earlier chunks first.
  p.pp = 2;
  p.vpp = 2;
  p.layers_per_stage = {5, 4};
  EXPECT_EQ(virtual_stage_layers(9, p), (std::vector<int64_t>{3, 2, 2, 2}));
}

// ---------------------------------------------------------------- FLOPs

TEST(Flops, MatchMegatronFormulasAndTheirPublishedMfu) {
  // Narayanan et al. 2021, eq. 3: 72 B s l h^2 (1 + s / 6h + V / 12lh) without recompute and
  // 96 B s l h^2 (1 + s / 6h + V / 16lh) with full recompute.
  const ModelShape m = model_shape(gpt(48, 6144, 64));
  TrainingConfig t;
  t.global_batch_size = 4;
  const double B = 4, s = 2048, l = 48, h = 6144, V = 51200;
  const FlopsPerIteration none = flops_per_iteration(m, t, Recompute::kNone);
  EXPECT_NEAR(none.model, 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), 1e-9 * none.model);
  EXPECT_DOUBLE_EQ(none.hardware, none.model);
  const FlopsPerIteration full = flops_per_iteration(m, t, Recompute::kFull);
  EXPECT_NEAR(full.hardware, 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), 1e-9 * full.hardware);
  EXPECT_DOUBLE_EQ(full.model, none.model);
  const FlopsPerIteration sel = flops_per_iteration(m, t, Recompute::kSelective);
  EXPECT_GT(sel.hardware, sel.model);
  EXPECT_LT(sel.hardware, full.hardware);
  // Megatron-LM README (Korthikanti et al. 2022): 22B, 8 A100s, 1.10 s per iteration = 41.5% MFU.
  EXPECT_NEAR(none.model / 1.10 / 8 / 312e12, 0.415, 0.003);
}

// ---------------------------------------------------------------- activations

// Korthikanti et al. 2022, Table 2, for every combination of TP, sequence parallelism and
// recompute: the term-by-term derivation in layer_activation_bytes reproduces the printed
// formulas, and the printed formulas are what the paper prints.
TEST(Activations, KorthikantiTable2EveryCombination) {
  for (const auto& [layers, h, a] : {std::tuple{48, 6144, 64}, {96, 12288, 96}, {105, 20480, 128}, {128, 25600, 160}}) {
    const ModelShape m = model_shape(gpt(layers, h, a));
    ASSERT_EQ(m.attention, AttentionKernel::kMaterialized);
    const double s = 2048;
    for (int64_t b : {1, 4})
      for (int64_t t : {1, 2, 4, 8})
        for (bool sp : {false, true})
          for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
            const double table = korthikanti_table2_bytes(2048, b, h, a, t, sp, r);
            const double sbh = s * static_cast<double>(b) * h;
            const double T = static_cast<double>(t), attn = 5.0 * a * s / h;
            double printed = 0;
            if (r == Recompute::kFull) printed = 2 * sbh;                      // "sbh x 2"
            else if (t == 1) printed = sbh * (34 + (r == Recompute::kNone ? attn : 0));  // no parallelism
            else if (!sp) printed = sbh * (10 + 24 / T + (r == Recompute::kNone ? attn / T : 0));
            else printed = sbh * (34 / T + (r == Recompute::kNone ? attn / T : 0));
            // Table 2 prints 2sbh for full recompute; with sequence parallelism the stored
            // layer input is itself sharded along the sequence, 2sbh/t (Megatron stores it so).
            if (r == Recompute::kFull && sp) printed /= T;
            EXPECT_DOUBLE_EQ(table, printed) << h << " t" << t << " sp" << sp << " r" << static_cast<int>(r);
            EXPECT_NEAR(layer_activation_bytes(m, b, t, 1, sp, r, 2.0), table, 1e-9 * table)
                << h << " t" << t << " sp" << sp << " r" << static_cast<int>(r);
          }
  }
}

TEST(Activations, FlashAttentionGqaSwigluAndContextParallel) {
  const ModelShape m = model_shape(llama(32, 4096, 32, 8, 14336, 128256, 8192));
  ASSERT_EQ(m.attention, AttentionKernel::kFlash);
  // Per token, tp 1, bf16: norms 4h + QKV/fc1 inputs 4h, Q 2h, K and V 2 x 2 x 1024,
  // projection input 2h, SwiGLU 3 x 2f, log-sum-exp 4a bytes.
  const double per_token = 4.0 * 2 * 4096 + 2.0 * 4096 + 4.0 * 1024 + 2.0 * 4096 + 6.0 * 14336 + 4.0 * 32;
  EXPECT_NEAR(layer_activation_bytes(m, 1, 1, 1, false, Recompute::kNone, 2.0), 8192 * per_token, 1.0);
  // Context parallelism splits the sequence.
  EXPECT_NEAR(layer_activation_bytes(m, 1, 1, 4, false, Recompute::kNone, 2.0), 2048 * per_token, 1.0);
  // No quadratic term: doubling the sequence doubles the memory.
  ModelConfig longer = llama(32, 4096, 32, 8, 14336, 128256, 16384);
  EXPECT_NEAR(layer_activation_bytes(model_shape(longer), 1, 1, 1, false, Recompute::kNone, 2.0),
              2 * 8192 * per_token, 1.0);
}

// The expert block of Qwen3-30B-A3B (128 experts of 768, top 8, hidden 2048, capacity factor 1)
// at micro-batch 2 and EP 8: 8192 tokens route 65,536 rows, and each rank's 16 experts take
// 4,096 rows each from the 8 ranks of the group, 65,536 rows in all. Megatron-Core keeps per row
// the fc1 input (h), the activation's input (2 x 768), the fc2 input (768) and an fp32
// probability; the GEMM inputs at 1 byte in fp8 training (Transformer Engine GroupedLinear keeps
// its quantized copy). DeepSpeed and torchtitan keep the rows in 16-bit and an h-wide copy of the
// routed rows for the gate gradient.
TEST(Activations, MegatronExpertsKeepFp8GemmInputsAndNoCombineInput) {
  ModelConfig c = llama(48, 2048, 32, 4, 6144, 151936, 4096);
  c.head_dim = 128;
  c.num_experts = 128;
  c.moe_top_k = 8;
  c.moe_ffn_hidden_size = 768;
  const ModelShape m = model_shape(c);
  Plan p;
  p.micro_batch_size = 2;
  p.ep = 8;
  const MoeTokenFlow f = moe_token_flow(m, p);
  ASSERT_DOUBLE_EQ(f.expert_rows, 65536.0);
  ASSERT_DOUBLE_EQ(f.dispatch_rows, 65536.0);
  const double rows = 65536.0, h = 2048.0, fe = 768.0;
  auto act = [&](double gemm_input_bytes, Framework fw) {
    return layer_activation_bytes(m, 2, 1, 1, false, Recompute::kNone, 2.0, 0, gemm_input_bytes, fw);
  };
  // bf16: the same rows either way, but no combine input in Megatron-Core.
  EXPECT_DOUBLE_EQ(act(2.0, Framework::kDeepspeed) - act(2.0, Framework::kMegatron), 2.0 * rows * h - 4.0 * rows);
  EXPECT_DOUBLE_EQ(act(2.0, Framework::kTorchtitan), act(2.0, Framework::kDeepspeed));
  // fp8: each GEMM input at 1 byte: the two norm outputs (the QKV input and the expert block's
  // input), the projection input, and the experts' fc1 and fc2 inputs.
  const double dense_saved = 8192.0 * (2.0 * h + 32.0 * 128.0);
  EXPECT_DOUBLE_EQ(act(2.0, Framework::kMegatron) - act(1.0, Framework::kMegatron), dense_saved + rows * (h + fe));
  // The whole expert block of the fp8 layer: 0.39 GB against 0.84 GB kept the 16-bit way with
  // the combine input.
  const double megatron_block = rows * (h + 2.0 * 2.0 * fe + fe + 4.0) + 4.0 * 8192.0 * (128.0 + 8.0);
  const double older_block = rows * (2.0 * h + 2.0 * 3.0 * fe + 2.0 * h) + 4.0 * 8192.0 * (128.0 + 8.0);
  EXPECT_NEAR(megatron_block / 1e9, 0.39, 0.005);
  EXPECT_NEAR(older_block / 1e9, 0.84, 0.005);
  EXPECT_DOUBLE_EQ(act(2.0, Framework::kDeepspeed) - act(1.0, Framework::kMegatron),
                   older_block - megatron_block + dense_saved);
}

// Dropout masks (1 byte per element) only where the probability is > 0: two hidden masks of
// s b h per layer (after attention, after the MLP), and the attention-probability mask with its
// dropout output (a s^2 b x (1 + 2) bytes); gpt defaults to 0.1 / 0.1 (Megatron), llama to 0.
TEST(Activations, DropoutMasksFollowTheProbabilities) {
  const int64_t s = 2048, b = 1, h = 4096, a = 32;
  const double sbh = static_cast<double>(s * b * h), as2b = static_cast<double>(a * s * s * b);
  ModelConfig c = gpt(32, h, a, s);
  EXPECT_DOUBLE_EQ(c.hidden_dropout_p(), 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout_p(), 0.1);
  EXPECT_DOUBLE_EQ(llama(32, 4096, 32, 8, 14336, 128256, 8192).hidden_dropout_p(), 0.0);
  const double with_both = layer_activation_bytes(model_shape(c), b, 1, 1, false, Recompute::kNone, 2.0);
  EXPECT_NEAR(with_both, korthikanti_table2_bytes(s, b, h, a, 1, false, Recompute::kNone), 1e-6 * with_both);
  c.hidden_dropout = 0.0;
  const double attn_only = layer_activation_bytes(model_shape(c), b, 1, 1, false, Recompute::kNone, 2.0);
  EXPECT_NEAR(with_both - attn_only, 2.0 * sbh, 1e-6);
  c.attention_dropout = 0.0;
  const double none = layer_activation_bytes(model_shape(c), b, 1, 1, false, Recompute::kNone, 2.0);
  EXPECT_NEAR(attn_only - none, 3.0 * as2b, 1e-6);  // mask (1 byte) + dropout output (2 bytes)
  c.hidden_dropout = 0.2;  // hidden masks back, attention mask still off
  EXPECT_NEAR(layer_activation_bytes(model_shape(c), b, 1, 1, false, Recompute::kNone, 2.0) - none, 2.0 * sbh, 1e-6);
  EXPECT_TRUE(model_shape(c).dropout);
  EXPECT_FALSE(model_shape(c).attention_dropout);
}

TEST(Activations, MicroBatchesInFlightPerSchedule) {
  Plan p;
  p.pp = 8;
  p.schedule = Schedule::kGpipe;
  EXPECT_EQ(micro_batches_in_flight(p, 0, 64), 64);
  p.schedule = Schedule::kOneFOneB;
  EXPECT_EQ(micro_batches_in_flight(p, 0, 64), 8);
  EXPECT_EQ(micro_batches_in_flight(p, 7, 64), 1);
  EXPECT_EQ(micro_batches_in_flight(p, 0, 4), 4);  // fewer micro-batches than stages
  p.schedule = Schedule::kInterleaved;
  p.vpp = 3;
  // Korthikanti et al. 2022, section 4.2.3: p (1 + (p - 1) / (p v)) on the first stage.
  EXPECT_NEAR(micro_batches_in_flight(p, 0, 64), 8.0 * (1 + 7.0 / 24), 1e-12);
  EXPECT_NEAR(micro_batches_in_flight(p, 7, 64), (2.0 * 8 + 1) / 3, 1e-12);
  // With as many micro-batches as stages Megatron runs every forward first, on every stage;
  // torch's ScheduleInterleaved1F1B does not: (v - 1) r + 2 (p - 1 - s) + 1 chunk passes.
  EXPECT_EQ(micro_batches_in_flight(p, 7, 8), 8);
  EXPECT_NEAR(micro_batches_in_flight(p, 7, 8, Framework::kTorchtitan), (2.0 * 8 + 1) / 3, 1e-12);
  p.pp = 1;
  EXPECT_EQ(micro_batches_in_flight(p, 0, 64), 1);
}

// ---------------------------------------------------------------- memory per rank

Scenario scenario_for(const ModelConfig& m, int64_t gpus, int64_t gbs) {
  Scenario s;
  s.model = m;
  s.cluster.gpu.name = "A100-80GB";
  s.cluster.gpu.memory_gib = 80;
  s.cluster.gpu.peak_tflops = {19.5, 156, 312, 312, 0};
  s.cluster.gpu.memory_bandwidth_GBps = 2039;
  s.cluster.num_gpus = gpus;
  s.cluster.gpus_per_node = 8;
  s.training.global_batch_size = gbs;
  return s;
}

TEST(Memory, ModelStatesPerZeroStage) {
  const ModelConfig mc = gpt(8, 1024, 16);
  const ModelShape m = model_shape(mc);
  const Scenario s = scenario_for(mc, 8, 8);
  Plan p;
  p.dp = 8;
  const double P = stage_parameters(m, p, 0, 8).total();
  auto per_param = [&](int64_t zero) {
    p.zero_stage = zero;
    const MemoryBreakdown b = stage_memory(m, s, p, 0, 8);
    return (b.weights_bytes + b.gradients_bytes + b.optimizer_bytes) / P;
  };
  EXPECT_NEAR(per_param(0), 18.0, 1e-9);             // 2 + 4 + 12
  EXPECT_NEAR(per_param(1), 6.0 + 12.0 / 8, 1e-9);   // Megatron distributed optimizer
  EXPECT_NEAR(per_param(2), 2.0 + 16.0 / 8, 1e-9);
  EXPECT_NEAR(per_param(3), 18.0 / 8, 1e-9);
  Scenario fp32 = s;
  fp32.training.precision = Precision::kFp32;
  p.zero_stage = 0;
  const MemoryBreakdown b = stage_memory(m, fp32, p, 0, 8);
  EXPECT_NEAR((b.weights_bytes + b.gradients_bytes + b.optimizer_bytes) / P, 16.0, 1e-9);
}

// DeepSpeed's bf16 training without ZeRO runs its BF16_Optimizer: fp32 gradients for every
// parameter beside the last backward's bf16 .grad, fp32 master weights and Adam moments for the rank's data-parallel partition only
// (BLOOM-176B's "it implements its own zero stage 1 equivalent"). Its fp16 training without ZeRO
// (FP16_Optimizer) and Megatron's bf16 DDP keep every state on every rank.
TEST(Memory, DeepspeedBf16WithoutZeroShardsTheOptimizerStates) {
  const ModelConfig mc = gpt(8, 1024, 16);
  const ModelShape m = model_shape(mc);
  Scenario s = scenario_for(mc, 8, 8);
  Plan p;
  p.dp = 8;
  const double P = stage_parameters(m, p, 0, 8).total();
  auto per_param = [&]() {
    const MemoryBreakdown b = stage_memory(m, s, p, 0, 8);
    return (b.weights_bytes + b.gradients_bytes + b.optimizer_bytes) / P;
  };
  EXPECT_NEAR(per_param(), 18.0, 1e-9);  // Megatron bf16: 2 + 4 + 12
  s.training.framework = Framework::kDeepspeed;
  EXPECT_NEAR(per_param(), 2.0 + 6.0 + 12.0 / 8, 1e-9);  // fp32 accumulators beside the bf16 .grad
  p.zero_stage = 1;  // DeepSpeed's ZeRO optimizer: the bf16 .grad, states sharded
  EXPECT_NEAR(per_param(), 2.0 + 2.0 + 12.0 / 8, 1e-9);
  p.zero_stage = 0;
  s.training.precision = Precision::kFp16;
  EXPECT_NEAR(per_param(), 16.0, 1e-9);  // 2 + 2 (fp16 .grad) + 12
}

// Fp8 with fp8 primary weights: the linear layers' weights take 1 byte (no 16-bit copy) plus
// 1 byte of cached transpose; the rest of the parameters stay 16-bit. Under ZeRO-3 the fp8
// buffers follow the gathered (live) parameters, not the unsharded model.
TEST(Memory, Fp8KeepsLinearWeightsInFp8AndShardsItsBuffersUnderZero3) {
  const ModelConfig mc = gpt(8, 1024, 16);
  const ModelShape m = model_shape(mc);
  Scenario bf16 = scenario_for(mc, 8, 8);
  Scenario fp8 = bf16;
  fp8.training.precision = Precision::kFp8;
  Plan p;
  p.dp = 8;
  const StageParameters sp = stage_parameters(m, p, 0, 8);
  EXPECT_NEAR(sp.gemm_dense, 8.0 * 12.0 * 1024 * 1024, 1.0);  // 4h^2 attention + 8h^2 MLP per layer
  EXPECT_LT(sp.gemm_dense, sp.total());
  const MemoryBreakdown a = stage_memory(m, bf16, p, 0, 8);
  const MemoryBreakdown b = stage_memory(m, fp8, p, 0, 8);
  EXPECT_NEAR(a.weights_bytes - b.weights_bytes, sp.gemm_dense, 1.0);
  EXPECT_NEAR(b.buffers_bytes - a.buffers_bytes, kFp8TransposeBytes * sp.gemm_dense, 1.0);
  // ZeRO-3 on 8 ranks: the fp8 weights are sharded with the rest and no buffer is sized on the
  // unsharded parameters.
  p.zero_stage = 3;
  const MemoryBreakdown a3 = stage_memory(m, bf16, p, 0, 8);
  const MemoryBreakdown b3 = stage_memory(m, fp8, p, 0, 8);
  EXPECT_NEAR(a3.weights_bytes - b3.weights_bytes, sp.gemm_dense / 8.0, 1.0);
  EXPECT_NEAR(b3.buffers_bytes, a3.buffers_bytes, 1.0);
}

// ZeRO-3's gathered parameters. DeepSpeed gathers module by module: GPT 530B (Megatron-LM SC'21
// Table 2: 105 layers, hidden 20480, on 640 A100 without model parallelism) holds its largest
// module, fc1 (h x 4h = 1.68e9 parameters, above stage3_max_live_parameters' 1e9, so nothing is
// prefetched beside it), and that module's full-size gradient: 2 x 1.68e9 x 2 bytes. FSDP2
// unshards whole blocks: a block and its prefetched successor, plus the reduce bucket. The
// published run, micro-batch 4 with full recompute, fit in 80 GB with DeepSpeed.
TEST(Memory, DeepspeedZeroThreeHoldsItsLargestModuleAndFsdpABlockPair) {
  const ModelConfig mc = gpt(105, 20480, 128);
  const ModelShape m = model_shape(mc);
  Scenario s = scenario_for(mc, 640, 2560);
  s.training.precision = Precision::kFp16;
  s.training.framework = Framework::kDeepspeed;
  s.cluster.gpu = find_gpu_preset("A100-80GB")->spec;
  Plan p;
  p.dp = 640;
  p.zero_stage = 3;
  p.micro_batch_size = 4;
  p.recompute = Recompute::kFull;
  const double fc1 = 20480.0 * 4 * 20480;
  const MemoryBreakdown ds = stage_memory(m, s, p, 0, 105);
  EXPECT_NEAR(ds.buffers_bytes, 2.0 * 2.0 * fc1, 1.0);
  EXPECT_LT(bytes_to_gib(ds.total_bytes()), usable_memory_gib(s.cluster.gpu));
  s.training.framework = Framework::kTorchtitan;
  const MemoryBreakdown fsdp = stage_memory(m, s, p, 0, 105);
  EXPECT_NEAR(fsdp.buffers_bytes, 2.0 * (2.0 * static_cast<double>(parameter_counts(m).per_layer) + kZeroReduceBucketElements), 1.0);
}

// Korthikanti et al. 2022, Figure 1: per-GPU memory of the first pipeline stage for the 22B,
// 175B, 530B and 1T models (configurations of their Table 3, micro-batch 1 except 22B at 4),
// split into parameters + optimizer state (18 bytes per parameter, no data parallelism) and
// activations (Table 2 x layers; with 1F1B the first stage holds p micro-batches of L/p
// layers). The figure's message: with tensor parallelism alone the activations do not fit
// an 80 GB A100 (22B, 175B, 530B, 1T), with sequence parallelism + selective recompute all
// four fit. The figure leaves out the embedding-dropout, output-layer and loss activations
// (section 4.3), the interleaving factor, temporary buffers and the framework reserve;
// below they are subtracted from our stage memory to compare like with like. The published
// bar heights are not printed in the paper's text; the GiB figures below are the formulas'.
TEST(Memory, KorthikantiFigure1) {
  struct Case {
    const char* name;
    int64_t layers, hidden, heads, tp, pp, b;
    double states_gib, baseline_act_gib, present_act_gib;
  };
  const Case cases[] = {
      {"22B", 48, 6144, 64, 8, 1, 4, 46.3, 59.2, 9.6},
      {"175B", 96, 12288, 96, 8, 8, 1, 45.7, 51.8, 9.6},
      {"530B", 105, 20480, 128, 8, 35, 1, 31.7, 86.1, 17.4},
      {"1T", 128, 25600, 160, 8, 64, 1, 33.0, 131.2, 26.6},
  };
  for (const Case& c : cases) {
    const ModelConfig mc = gpt(c.layers, c.hidden, c.heads);
    const ModelShape m = model_shape(mc);
    Scenario s = scenario_for(mc, c.tp * c.pp, c.b * 512);
    Plan p;
    p.tp = c.tp;
    p.pp = c.pp;
    p.micro_batch_size = c.b;
    const int64_t lps = c.layers / c.pp;
    const double states = 18.0 * static_cast<double>(parameter_counts(m).total) / static_cast<double>(c.tp * c.pp);
    EXPECT_NEAR(bytes_to_gib(states), c.states_gib, 0.01 * c.states_gib) << c.name;
    // The first stage holds L/p layers' shares, the (vocabulary-parallel) word embedding and
    // the (replicated) position embedding.
    const double stage0 = stage_parameters(m, p, 0, lps).total();
    const double expect0 = (static_cast<double>(lps * parameter_counts(m).per_layer) + 51200.0 * c.hidden) / c.tp +
                           2048.0 * c.hidden;
    EXPECT_NEAR(stage0, expect0, 0.01 * expect0) << c.name;

    const double pf = static_cast<double>(c.pp);
    const double layers_held = static_cast<double>(lps) * pf;  // 1F1B: p micro-batches of L/p layers
    for (bool present : {false, true}) {
      p.sequence_parallel = present;
      p.recompute = present ? Recompute::kSelective : Recompute::kNone;
      const MemoryBreakdown mem = stage_memory(m, s, p, 0, lps);
      // Remove what the figure leaves out: the embedding dropout mask (sbh/t with SP, x p).
      const double T = 2048.0 * static_cast<double>(c.b);
      const double emb = T * c.hidden / (present ? c.tp : 1) * std::min<double>(pf, 512);
      const double layers_only = mem.activations_bytes - emb - (c.pp == 1 ? (2.0 * 2 * T * c.hidden / (present ? c.tp : 1) + 4.0 * T * 51200 / c.tp) : 0.0);
      EXPECT_NEAR(layers_only, layers_held * korthikanti_table2_bytes(2048, c.b, c.hidden, c.heads, c.tp, present, p.recompute),
                  1e-6 * layers_only) << c.name;
      EXPECT_NEAR(bytes_to_gib(layers_only), present ? c.present_act_gib : c.baseline_act_gib, 0.01 * layers_only / kGiB + 0.05)
          << c.name << (present ? " present work" : " baseline");
      const double total_gib = bytes_to_gib(states + layers_only);
      if (present) EXPECT_LT(total_gib, 80.0) << c.name;
      else EXPECT_GT(total_gib, 80.0) << c.name;
    }
  }
}

TEST(Memory, FitsAgainstUsableMemoryWithTheReserve) {
  GpuSpec g;
  g.memory_gib = 80;
  EXPECT_NEAR(usable_memory_gib(g), 80 * (1 - kFragmentationFraction) - kCudaContextReserve_gib - kNcclReserve_gib, 1e-12);
  EXPECT_LT(usable_memory_gib(g), 80);
}

// The gradient buffer follows each framework's default: 16-bit for fp16 under Megatron-LM and
// for DeepSpeed's 16-bit .grad (FP16_Optimizer, ZeRO-1/2 in fp16 or bf16); DeepSpeed's
// BF16_Optimizer (bf16, ZeRO 0) holds fp32 accumulators and the bf16 .grad; fp32 otherwise.
// Weights and optimizer states do not depend on the framework.
TEST(Memory, GradientBufferBytesFollowTheFramework) {
  TrainingConfig t;
  t.optimizer = Optimizer::kAdam;
  t.precision = Precision::kFp16;
  for (int64_t zero : {0, 1, 2}) {
    t.framework = Framework::kMegatron;
    EXPECT_EQ(state_bytes_per_parameter(t, zero).gradients, 2);
    t.framework = Framework::kDeepspeed;
    EXPECT_EQ(state_bytes_per_parameter(t, zero).gradients, 2);
    t.framework = Framework::kTorchtitan;
    EXPECT_EQ(state_bytes_per_parameter(t, zero).gradients, 4);
  }
  t.framework = Framework::kDeepspeed;
  t.precision = Precision::kBf16;
  EXPECT_EQ(state_bytes_per_parameter(t, 0).gradients, 6);
  EXPECT_EQ(state_bytes_per_parameter(t, 1).gradients, 2);
  EXPECT_EQ(state_bytes_per_parameter(t, 2).gradients, 2);
  for (Framework f : {Framework::kMegatron, Framework::kDeepspeed, Framework::kTorchtitan}) {
    t.framework = f;
    for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kFp32}) {
      t.precision = p;
      const int64_t zero = 1;
      const bool deepspeed_bf16 = f == Framework::kDeepspeed && p == Precision::kBf16;
      EXPECT_EQ(state_bytes_per_parameter(t, zero).gradients, deepspeed_bf16 ? 2 : 4);
      EXPECT_EQ(state_bytes_per_parameter(t, zero).weights, state_bytes_per_parameter(p, t.optimizer).weights);
      EXPECT_EQ(state_bytes_per_parameter(t, zero).optimizer, state_bytes_per_parameter(p, t.optimizer).optimizer);
    }
  }
}

}  // namespace
}  // namespace monarch
