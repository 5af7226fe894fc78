// Measurements of the CPU runtime against the analytical model (core/cost_model.h,
// core/model_math.h) for the same scenario and plan, fp32:
//  - bytes on the wire per collective kind and group per iteration: equal, exactly, for data
//    parallelism (ZeRO 0-3), the pipeline's point-to-point messages and the tied-embedding
//    all-reduce; for tensor parallelism, the analytical per-layer collectives plus the
//    collectives of the vocabulary-parallel embedding and cross-entropy and the
//    sequence-parallel gradient all-reduce, which the analytical model leaves out (computed
//    here term by term);
//  - peak memory per category of the busiest rank of each stage within 5% of stage_memory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/scenario_io.h"
#include "realrt/run_io.h"

namespace monarch::realrt {
namespace {

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/realrt/testdata/";
const std::string kTmp = std::string(MONARCH_BINARY_DIR) + "/realrt/measure_tmp/";

using Key = std::pair<std::string, std::string>;

struct Measured {
  std::map<Key, int64_t> wire_bytes;  // max over ranks, per iteration
  nlohmann::json ranks;
};

// Runs monarch-run on `scenario` with parallelism overrides written into a copy of the file.
Measured run(const std::string& name, const nlohmann::json& parallelism, int64_t num_gpus, Scenario* sc_out) {
  std::filesystem::create_directories(kTmp);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kData + "tiny_gpt_tp2_pp2.json"));
  j["parallelism"] = parallelism;
  j["cluster"]["num_gpus"] = num_gpus;
  j["cluster"]["gpus_per_node"] = num_gpus;
  const std::string in = kTmp + name + ".json", out = kTmp + name + ".result.json";
  std::ofstream(in) << j.dump(1);
  auto sc = read_scenario_file(in);
  EXPECT_TRUE(sc.ok());
  *sc_out = *sc;
  const std::string cmd = std::string("timeout 300 ") + MONARCH_MPIEXEC + " --allow-run-as-root --oversubscribe -np " +
                          std::to_string(num_gpus) + " " + MONARCH_RUN + " " + in + " --steps 2 --output " + out +
                          " > " + kTmp + name + ".log 2>&1";
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "see " << kTmp << name << ".log";
  Measured m;
  std::ifstream f(out);
  if (!f) return m;
  const auto r = nlohmann::json::parse(f);
  for (const auto& c : r.at("result").at("communication"))
    m.wire_bytes[{c.at("kind"), c.at("group")}] = c.at("bytes").get<int64_t>();
  m.ranks = r.at("ranks");
  return m;
}

std::map<Key, int64_t> predicted(const Scenario& sc) {
  auto plan = fixed_plan(sc);
  EXPECT_TRUE(plan.ok());
  const BackendResult r = estimate_plan(sc, *plan);
  std::map<Key, int64_t> out;
  for (const CommEntry& c : r.communication) out[{c.kind, c.group}] = c.bytes;
  return out;
}

// rs_factor: ZeRO-2 reduce-scatters every micro-batch (DeepSpeed), the analytical model once
// per step (as ZeRO-1): the measured reduce-scatter bytes are m times its figure.
void expect_equal_except_tp(const std::map<Key, int64_t>& meas, const std::map<Key, int64_t>& pred, int64_t rs_factor = 1) {
  for (const auto& [k, v] : pred) {
    if (k.second == "tp") continue;
    auto it = meas.find(k);
    ASSERT_NE(it, meas.end()) << k.first << " " << k.second << " predicted, not measured";
    EXPECT_EQ(it->second, (k.first == "reduce-scatter" ? rs_factor : 1) * v) << k.first << " " << k.second;
  }
  for (const auto& [k, v] : meas)
    if (k.second != "tp") EXPECT_TRUE(pred.count(k)) << k.first << " " << k.second << " measured, not predicted";
}

TEST(Measure, DataParallelBytesEqualThePredictionForEveryZeroStage) {
  for (int zero : {0, 1, 2, 3}) {
    Scenario sc;
    const Measured m = run("dp2_zero" + std::to_string(zero), {{"dp", 2}, {"zero_stage", zero}}, 2, &sc);
    const auto pred = predicted(sc);
    ASSERT_FALSE(m.wire_bytes.empty());
    expect_equal_except_tp(m.wire_bytes, pred, zero == 2 ? 2 : 1);  // 2 micro-batches per replica
  }
}

TEST(Measure, PipelineAndEmbeddingBytesEqualThePrediction) {
  Scenario sc;
  const Measured m = run("dp2_pp2", {{"dp", 2}, {"pp", 2}}, 4, &sc);
  const auto pred = predicted(sc);
  ASSERT_TRUE(pred.count({"send-recv", "pp"}));
  ASSERT_TRUE(pred.count({"all-reduce", "embedding"}));
  expect_equal_except_tp(m.wire_bytes, pred);
}

// Tensor parallel, 2 ranks, 4 micro-batches of N = 64 tokens, hidden 128, vocab 256, 4 layers.
TEST(Measure, TensorParallelBytesArePredictionPlusEmbeddingAndLossCollectives) {
  for (bool sp : {false, true}) {
    Scenario sc;
    const Measured m = run(sp ? "tp2_sp" : "tp2", {{"tp", 2}, {"sequence_parallel", sp}}, 2, &sc);
    const auto pred = predicted(sc);
    const int64_t mb = 4, N = 64, C = 128, L = 4;
    const int64_t act = N * C * 4;  // one [N, C] fp32 buffer; on 2 ranks AR, AG and RS wire = size x 1 or x 1/2
    // Outside the layers, per micro-batch (bytes are NCCL sizes; wire: AR x 1, AG / RS x 1/2):
    //   cross-entropy: 3 all-reduces of N floats (max, target logit, sum of exp);
    //   no SP: embedding output and output-layer input gradient: 2 all-reduces of [N, C];
    //   SP: those become reduce-scatters, plus all-gathers of the embedding's output gradient,
    //       the final norm output (forward) and again in the backward: 3 all-gathers of [N, C];
    //       and once per step the all-reduce of the replicated parameters' gradients
    //       (wpe [S, C], per layer 6 vectors of C, final norm 2 C).
    std::map<Key, int64_t> extra;
    extra[{"all-reduce", "tp"}] = mb * 3 * N * 4 + (sp ? (64 * C + L * 6 * C + 2 * C) * 4 : mb * 2 * act);
    if (sp) {
      extra[{"reduce-scatter", "tp"}] = mb * 2 * act / 2;
      extra[{"all-gather", "tp"}] = mb * 3 * act / 2;
    }
    for (const auto& [k, v] : m.wire_bytes) {
      if (k.second != "tp") continue;
      const int64_t want = (pred.count(k) ? pred.at(k) : 0) + (extra.count(k) ? extra.at(k) : 0);
      EXPECT_EQ(v, want) << k.first << " tp, sp " << sp;
    }
    for (const auto& [k, v] : pred)
      if (k.second == "tp") EXPECT_TRUE(m.wire_bytes.count(k)) << k.first;
  }
}

// Peak memory per category of the busiest rank of every stage (max over its ranks) within 5% of
// the analytical model's stage_memory, fp32 Adam (4 + 4 + 8 bytes per parameter before ZeRO),
// hidden and attention dropout 0.1 (gpt defaults): weights, gradients, optimizer states,
// activations (Korthikanti's terms with 4-byte elements and 1-byte masks; the runtime also keeps
// LayerNorm statistics, 2 x 4 bytes per token per norm, which the model leaves out) and
// communication buffers (sequence parallelism's all-gathered [s b, h] input, DeepSpeed ZeRO-2's
// gradient bucket, 0 otherwise: pipeline receives land in the input activations, sends go out
// of the output activation, ZeRO-1 reduce-scatters in place). The compute workspace (activation
// gradients, partial sums, attention scratch; realrt/memory.h) is no model category and is not
// compared. Largest gap (first stages of pipelines, +2..4%): a forward output stays alive until
// the next stage has received it (non-blocking send), where Megatron's batched p2p completes
// the send first.
struct MemCase {
  const char* name;
  nlohmann::json par;
  int64_t n;
};

void expect_memory_within_five_percent(const MemCase& c) {
  Scenario sc;
  const Measured m = run(c.name, c.par, c.n, &sc);
  auto plan = fixed_plan(sc);
  ASSERT_TRUE(plan.ok());
  const ModelShape shape = model_shape(sc.model);
  ASSERT_TRUE(shape.dropout && shape.attention_dropout);
  const auto layers = stage_layers(shape, *plan);
  ASSERT_FALSE(m.ranks.empty()) << c.name;
  std::map<int64_t, std::map<std::string, double>> busiest;  // stage -> category -> max bytes
  for (const auto& r : m.ranks)
    for (const auto& [k, v] : r.at("peak_memory").items()) {
      double& b = busiest[r.at("stage").get<int64_t>()][k];
      b = std::max(b, v.get<double>());
    }
  ASSERT_EQ(static_cast<int64_t>(busiest.size()), plan->pp) << c.name;
  for (const auto& [stage, got] : busiest) {
    const MemoryBreakdown pred = stage_memory(shape, sc, *plan, stage, layers[static_cast<size_t>(stage)]);
    const std::pair<const char*, double> want[] = {{"weights_bytes", pred.weights_bytes},
                                                   {"gradients_bytes", pred.gradients_bytes},
                                                   {"optimizer_bytes", pred.optimizer_bytes},
                                                   {"activations_bytes", pred.activations_bytes},
                                                   {"buffers_bytes", pred.buffers_bytes}};
    for (const auto& [key, w] : want) {
      const double g = got.at(key);
      if (c.par.value("zero_stage", 0) == 3 && std::string(key) == "buffers_bytes") {
        // Known gap: the runtime gathers a chunk's whole parameters for every micro-batch and
        // reduce-scatters a whole micro-batch's gradients; the model (FSDP / Megatron-FSDP)
        // holds one gathered layer and one prefetched. What holds: at least the model's figure,
        // and exactly the gathered parameters plus one micro-batch's gradients (4 + 4 bytes per
        // parameter of the stage, unsharded).
        const double stage_params = pred.weights_bytes / 4.0 * static_cast<double>(plan->dp);
        EXPECT_GE(g, w) << c.name;
        EXPECT_NEAR(g, 8.0 * stage_params, 0.05 * 8.0 * stage_params) << c.name << " stage " << stage;
        continue;
      }
      EXPECT_NEAR(g, w, 0.05 * w) << c.name << " stage " << stage << " " << key;
      ::testing::Test::RecordProperty(std::string(c.name) + "_stage" + std::to_string(stage) + "_" + key,
                     std::to_string(g) + " / " + std::to_string(w));
    }
  }
}

TEST(Measure, MemoryPerCategoryWithinFivePercentForDataParallelZero0To3) {
  for (int zero : {0, 1, 2, 3})
    expect_memory_within_five_percent(
        {("mem_dp2_zero" + std::to_string(zero)).c_str(), {{"dp", 2}, {"zero_stage", zero}}, 2});
}

TEST(Measure, MemoryPerCategoryWithinFivePercentForTensorAndSequenceParallel) {
  expect_memory_within_five_percent({"mem_tp2", {{"tp", 2}}, 2});
  expect_memory_within_five_percent({"mem_tp2_sp", {{"tp", 2}, {"sequence_parallel", true}}, 2});
}

TEST(Measure, MemoryPerCategoryWithinFivePercentForPipelineSchedules) {
  expect_memory_within_five_percent({"mem_pp2_1f1b", {{"pp", 2}}, 2});
  expect_memory_within_five_percent({"mem_tp2_pp2", {{"tp", 2}, {"pp", 2}}, 4});
  expect_memory_within_five_percent(
      {"mem_pp2_interleaved", {{"pp", 2}, {"vpp", 2}, {"pipeline_schedule", "interleaved-1f1b"}}, 2});
}

TEST(Measure, MemoryPerCategoryWithinFivePercentWithRecompute) {
  expect_memory_within_five_percent({"mem_tp2_full", {{"tp", 2}, {"activation_recompute", "full"}}, 2});
  expect_memory_within_five_percent(
      {"mem_tp2_sp_selective", {{"tp", 2}, {"sequence_parallel", true}, {"activation_recompute", "selective"}}, 2});
}

}  // namespace
}  // namespace monarch::realrt
