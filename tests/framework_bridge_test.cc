// Export to and import from torchtitan, Megatron-LM, DeepSpeed and Megatron-Bridge: every key
// written is one the framework accepts (tests/data/framework_keys/, read from each framework's
// source by tools/framework_keys.py), and scenario -> export -> import gives back the same plan.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

#include "core/framework_bridge.h"
#include "core/framework_io.h"
#include "core/presets.h"
#include "core/scenario_io.h"


namespace monarch {
namespace {

using nlohmann::json;

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/tests/data";

std::set<std::string> key_list(const std::string& name) {
  std::ifstream in(kData + "/framework_keys/" + name + ".txt");
  EXPECT_TRUE(in) << name;
  std::set<std::string> keys;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') keys.insert(line);
  EXPECT_GT(keys.size(), 50u) << name;
  return keys;
}

Scenario scenario_of(const json& j) {
  auto s = scenario_from_json(j);
  if (!s)
    for (const auto& p : s.problems()) ADD_FAILURE() << p.to_string();
  return *s;
}

json cluster(int64_t gpus) { return {{"gpu", "H100-SXM"}, {"num_gpus", gpus}, {"gpus_per_node", 8}}; }

// A plan with its scenario, named for the test output.
struct Case {
  std::string name;
  Scenario scenario;
  Plan plan;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  {  // Dense Llama 3 8B, FSDP (ZeRO-3) with TP 2 on 64 GPUs.
    Case c{"dense_zero3", scenario_of({{"name", "llama3-8b"}, {"model", {{"preset", "llama3-8b"}}}, {"cluster", cluster(64)},
                                       {"training", {{"global_batch_size", 256}, {"precision", "bf16"}}}}),
           {}};
    c.plan.tp = 2;
    c.plan.dp = 32;
    c.plan.micro_batch_size = 2;
    c.plan.sequence_parallel = true;
    c.plan.zero_stage = 3;
    c.plan.recompute = Recompute::kSelective;
    v.push_back(c);
  }
  {  // Dense Llama 3 70B, uneven pipeline (80 layers over pp 6: 12, 14 x 4, 12), DDP.
    Case c{"uneven_pipeline", scenario_of({{"name", "llama3-70b"}, {"model", {{"preset", "llama3-70b"}}},
                                           {"cluster", cluster(96)},
                                           {"training", {{"global_batch_size", 128}, {"precision", "bf16"}}}}),
           {}};
    c.plan.tp = 8;
    c.plan.pp = 6;
    c.plan.dp = 2;
    c.plan.micro_batch_size = 1;
    c.plan.sequence_parallel = true;
    c.plan.zero_stage = 0;
    c.plan.recompute = Recompute::kFull;
    c.plan.layers_per_stage = {12, 14, 14, 14, 14, 12};
    v.push_back(c);
  }
  {  // Interleaved pipeline, even split: 80 layers over pp 4 x vpp 5.
    Case c{"interleaved", scenario_of({{"name", "llama3-70b"}, {"model", {{"preset", "llama3-70b"}}}, {"cluster", cluster(64)},
                                       {"training", {{"global_batch_size", 64}, {"precision", "bf16"}}}}),
           {}};
    c.plan.tp = 8;
    c.plan.pp = 4;
    c.plan.dp = 2;
    c.plan.vpp = 5;
    c.plan.schedule = Schedule::kInterleaved;
    c.plan.sequence_parallel = true;
    c.plan.zero_stage = 1;
    v.push_back(c);
  }
  {  // MoE (Mixtral-like 8 experts, top-2): EP 8 with expert TP 1 under TP 2, pp 2.
    Case c{"moe_ep_etp",
           scenario_of({{"name", "mixtral"},
                        {"model",
                         {{"architecture", "llama"}, {"num_layers", 32}, {"hidden_size", 4096}, {"num_attention_heads", 32},
                          {"num_kv_heads", 8}, {"ffn_hidden_size", 14336}, {"vocab_size", 32000}, {"seq_length", 4096},
                          {"num_experts", 8}, {"moe_top_k", 2}, {"moe_ffn_hidden_size", 14336}, {"moe_dropless", true}}},
                        {"cluster", cluster(64)},
                        {"training", {{"global_batch_size", 256}, {"precision", "bf16"}}}}),
           {}};
    c.plan.tp = 2;
    c.plan.pp = 2;
    c.plan.dp = 16;
    c.plan.ep = 8;
    c.plan.etp = 1;
    c.plan.sequence_parallel = true;
    c.plan.zero_stage = 0;
    v.push_back(c);
  }
  {  // MoE with token dropping at capacity factor 1.25, experts split over all of TP 2.
    Case c = v.back();
    c.name = "moe_capacity";
    c.scenario.model.moe_dropless = false;
    c.scenario.model.moe_capacity_factor = 1.25;
    c.plan.etp = 2;
    v.push_back(c);
  }
  return v;
}

// The shape of an MoE test model as a Hugging Face Mixtral config.json: torchtitan names a model
// by flavor only, so its import takes the shape from one.
json mixtral_hf_config(const ModelConfig& m) {
  return {{"model_type", "mixtral"}, {"num_hidden_layers", m.num_layers}, {"hidden_size", m.hidden_size},
          {"num_attention_heads", m.num_attention_heads}, {"num_key_value_heads", m.num_kv_heads},
          {"intermediate_size", m.moe_ffn_hidden_size}, {"vocab_size", m.vocab_size},
          {"max_position_embeddings", m.seq_length}, {"num_local_experts", m.num_experts},
          {"num_experts_per_tok", m.moe_top_k}, {"tie_word_embeddings", false}};
}

// Import options for reading back what `c` exported in format `f`: its GPU count and node size.
ImportOptions import_options(const Case& c, ConfigFormat f) {
  ImportOptions o;
  o.format = f;
  o.num_gpus = c.scenario.cluster.num_gpus;
  o.gpus_per_node = c.scenario.cluster.gpus_per_node;
  return o;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("monarch_bridge_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

const char* extension(ConfigFormat f) { return f == ConfigFormat::kTorchtitan ? ".toml" : ".sh"; }

// The keys an exported config sets, each with the key list it must be in.
std::vector<std::pair<std::string, std::string>> exported_keys(ConfigFormat f, const std::string& text) {
  std::vector<std::pair<std::string, std::string>> keys;
  const std::string path = write_temp("keys" + std::string(extension(f)), text);
  auto settings = read_framework_settings(path, text, f);
  EXPECT_TRUE(settings.ok());
  if (!settings) return keys;
  for (const auto& s : *settings) {
    if (s.key == "--nproc-per-node" || s.key == "--nnodes") continue;  // torchrun's, not the framework's
    std::string list = to_string(f);
    if (f == ConfigFormat::kMegatronBridge) list = "megatron_bridge";
    if (f == ConfigFormat::kDeepspeed) list = s.key.rfind("--", 0) == 0 ? "megatron_deepspeed" : "deepspeed";
    keys.emplace_back(list, s.key);
  }
  if (f == ConfigFormat::kTorchtitan) {  // the overrides in the header comment: --section.key=value
    const std::regex re(R"(--([a-z_.]+)=)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
      keys.emplace_back("torchtitan", (*it)[1].str());
  }
  return keys;
}

constexpr ConfigFormat kFormats[] = {ConfigFormat::kTorchtitan, ConfigFormat::kMegatron, ConfigFormat::kDeepspeed,
                                     ConfigFormat::kMegatronBridge};

TEST(FrameworkExport, EveryKeyWrittenIsOneTheFrameworkAccepts) {
  std::map<std::string, std::set<std::string>> lists;
  for (const char* n : {"torchtitan", "megatron", "deepspeed", "megatron_deepspeed", "megatron_bridge"}) lists[n] = key_list(n);
  int checked = 0;
  for (const Case& c : cases())
    for (ConfigFormat f : kFormats) {
      auto out = export_plan(c.scenario, c.plan, f);
      if (!out) continue;  // refusals are tested below
      for (const auto& [list, key] : exported_keys(f, out->text)) {
        EXPECT_TRUE(lists[list].count(key)) << c.name << " " << to_string(f) << ": " << key << " is not in " << list << ".txt";
        ++checked;
      }
    }
  EXPECT_GT(checked, 150);
}

// Every exported config is kept in tests/data/frameworks/golden/ (CASE.FORMAT.EXT): a change
// to what a framework is told shows in review. MONARCH_UPDATE_GOLDEN=1 rewrites the files.
TEST(FrameworkExport, MatchesTheGoldenFiles) {
  const std::filesystem::path dir = kData + "/frameworks/golden";
  const bool update = std::getenv("MONARCH_UPDATE_GOLDEN") != nullptr;
  int compared = 0;
  for (const Case& c : cases())
    for (ConfigFormat f : kFormats) {
      auto out = export_plan(c.scenario, c.plan, f);
      if (!out) continue;
      const auto path = dir / (c.name + "." + to_string(f) + extension(f));
      if (update) {
        std::filesystem::create_directories(dir);
        std::ofstream(path, std::ios::binary) << out->text;
      }
      std::ifstream in(path, std::ios::binary);
      ASSERT_TRUE(in) << path << " is missing (MONARCH_UPDATE_GOLDEN=1 writes it)";
      const std::string golden((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(out->text, golden) << path << " differs from the export (MONARCH_UPDATE_GOLDEN=1 rewrites it)";
      ++compared;
    }
  EXPECT_EQ(compared, 16);  // 20 less the four refusals
}

TEST(FrameworkExport, TheKeyListsHoldTheKeysTheIssueNames) {
  // A guard on the extraction itself: keys read by hand from each framework's source.
  const auto mlm = key_list("megatron");
  for (const char* k : {"--tensor-model-parallel-size", "--num-virtual-stages-per-pipeline-rank",
                        "--decoder-first-pipeline-num-layers", "--pipeline-model-parallel-layout",
                        "--use-distributed-optimizer", "--tp-comm-overlap", "--recompute-granularity", "--fp8-recipe",
                        "--account-for-embedding-in-pipeline-split", "--expert-tensor-parallel-size"})
    EXPECT_TRUE(mlm.count(k)) << k;
  EXPECT_FALSE(mlm.count("--virtual-pipeline-model-parallel-size"));  // there is no such flag
  const auto tt = key_list("torchtitan");
  for (const char* k : {"parallelism.data_parallel_replicate_degree", "parallelism.pipeline_parallel_microbatch_size",
                        "activation_checkpoint.selective_ac_option", "training.mixed_precision_reduce"})
    EXPECT_TRUE(tt.count(k)) << k;
  EXPECT_TRUE(key_list("deepspeed").count("zero_optimization.stage3_prefetch_bucket_size"));
  EXPECT_TRUE(key_list("megatron_bridge").count("comm_overlap.tp_comm_overlap"));
}

// The plan an imported scenario fixes must be the exported plan.
void expect_same_plan(const Case& c, ConfigFormat f, const Scenario& got) {
  if (f == ConfigFormat::kTorchtitan) EXPECT_EQ(got.training.framework, Framework::kTorchtitan);
  if (f == ConfigFormat::kDeepspeed) EXPECT_EQ(got.training.framework, Framework::kDeepspeed);
  const std::string what = c.name + " via " + to_string(f);
  const ParallelismConstraints& p = got.parallelism;
  const Plan& want = c.plan;
  EXPECT_EQ(p.tp.value_or(1), want.tp) << what;
  EXPECT_EQ(p.pp.value_or(1), want.pp) << what;
  EXPECT_EQ(p.cp.value_or(1), want.cp) << what;
  EXPECT_EQ(p.dp.value_or(got.cluster.num_gpus / (want.tp * want.pp * want.cp)), want.dp) << what;
  EXPECT_EQ(p.vpp.value_or(1), want.vpp) << what;
  if (c.scenario.model.is_moe()) {
    EXPECT_EQ(p.ep.value_or(1), want.ep) << what;
    EXPECT_EQ(p.etp.value_or(want.tp), want.expert_tp()) << what;
  }
  EXPECT_EQ(p.sequence_parallel.value_or(false), want.sequence_parallel) << what;
  EXPECT_EQ(p.recompute.value_or(Recompute::kNone), want.recompute) << what;
  EXPECT_EQ(p.zero_stage.value_or(0), want.zero_stage) << what;
  if (want.pp > 1) {
    EXPECT_EQ(p.schedule.value_or(want.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB), want.schedule) << what;
  }
  // Layers of every model chunk: the plan's uneven split comes back as layers_per_stage; an
  // even split stays automatic.
  if (!want.layers_per_stage.empty()) {
    ASSERT_TRUE(p.layers_per_stage.has_value()) << what;
    EXPECT_EQ(*p.layers_per_stage, want.layers_per_stage) << what;
  } else {
    EXPECT_FALSE(p.layers_per_stage.has_value()) << what;
  }
  EXPECT_EQ(got.training.micro_batch_size.value_or(-1), want.micro_batch_size) << what;
  EXPECT_EQ(got.training.global_batch_size, c.scenario.training.global_batch_size) << what;
  EXPECT_EQ(got.training.precision, c.scenario.training.precision) << what;
  EXPECT_EQ(got.model.num_layers, c.scenario.model.num_layers) << what;
  EXPECT_EQ(got.model.hidden_size, c.scenario.model.hidden_size) << what;
  EXPECT_EQ(got.model.num_kv_heads, c.scenario.model.num_kv_heads) << what;
  EXPECT_EQ(got.model.ffn_hidden_size, c.scenario.model.ffn_hidden_size) << what;
  EXPECT_EQ(got.model.vocab_size, c.scenario.model.vocab_size) << what;
  EXPECT_EQ(got.model.seq_length, c.scenario.model.seq_length) << what;
  EXPECT_EQ(got.model.num_experts, c.scenario.model.num_experts) << what;
  EXPECT_EQ(got.model.moe_top_k, c.scenario.model.moe_top_k) << what;
  EXPECT_EQ(got.model.moe_dropless, c.scenario.model.moe_dropless) << what;
  if (!c.scenario.model.moe_dropless) EXPECT_EQ(got.model.moe_capacity_factor, c.scenario.model.moe_capacity_factor) << what;
  EXPECT_EQ(got.model.tie_embeddings, c.scenario.model.tie_embeddings) << what;
}

TEST(FrameworkBridge, RoundTripGivesBackThePlan) {
  int round_trips = 0;
  for (const Case& c : cases())
    for (ConfigFormat f : kFormats) {
      auto out = export_plan(c.scenario, c.plan, f);
      if (!out) continue;
      const std::string path = write_temp(c.name + "_" + to_string(f) + extension(f), out->text);
      ImportOptions o = import_options(c, f);
      if (f == ConfigFormat::kTorchtitan && !out->warnings.empty()) o.model = "";  // shape given below
      auto imported = import_framework_config(path, o);
      if (f == ConfigFormat::kTorchtitan && c.scenario.model.preset.empty()) {
        // torchtitan names the model by flavor only: give the shape as a Hugging Face config.
        ASSERT_FALSE(out->warnings.empty()) << c.name;
        o.model = write_temp("hf_config.json", mixtral_hf_config(c.scenario.model).dump());
        imported = import_framework_config(path, o);
      }
      ASSERT_TRUE(imported.ok()) << c.name << " via " << to_string(f) << ": "
                                 << imported.problems().front().to_string() << "\n" << out->text;
      auto again = scenario_from_json(imported->scenario);
      ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
      expect_same_plan(c, f, *again);
      ++round_trips;
    }
  // 20 less the refusals: DeepSpeed (uneven, interleaved), torchtitan (ZeRO-1, token dropping).
  EXPECT_GE(round_trips, 16);
}

TEST(FrameworkBridge, CudaGraphsTravelToMegatronAndBack) {
  Case c = cases()[0];
  c.scenario.training.cuda_graphs = true;
  for (ConfigFormat f : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    auto out = export_plan(c.scenario, c.plan, f);
    ASSERT_TRUE(out.ok()) << to_string(f) << ": " << out.problems().front().to_string();
    EXPECT_NE(out->text.find(f == ConfigFormat::kMegatron ? "--cuda-graph-impl transformer_engine"
                                                          : "model.cuda_graph_impl=transformer_engine"),
              std::string::npos)
        << out->text;
    const ImportOptions o = import_options(c, f);
    auto imported = import_framework_config(write_temp("graphs_" + std::string(to_string(f)) + extension(f), out->text), o);
    ASSERT_TRUE(imported.ok()) << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    EXPECT_TRUE(again->training.cuda_graphs) << to_string(f);
  }
  // A dropless MoE layer is captured up to its dispatcher: the export says so.
  Case dropless = cases()[3];
  ASSERT_TRUE(dropless.scenario.model.moe_dropless);
  dropless.scenario.training.cuda_graphs = true;
  auto moe = export_plan(dropless.scenario, dropless.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(moe.ok()) << moe.problems().front().to_string();
  EXPECT_NE(moe->text.find("--cuda-graph-scope attn"), std::string::npos) << moe->text;
  EXPECT_EQ(export_plan(c.scenario, c.plan, ConfigFormat::kMegatron)->text.find("--cuda-graph-scope"), std::string::npos);
  // A capture narrower than the whole layer is read as graphs and noted as not modelled.
  const std::string scoped = write_temp("graphs_scope.sh", "MONARCH_ARGS=(\n  --tensor-model-parallel-size 2\n"
      "  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --vocab-size 32000\n"
      "  --micro-batch-size 1 --global-batch-size 64 --bf16 --sequence-parallel\n"
      "  --cuda-graph-impl local --cuda-graph-scope attn\n)\n");
  ImportOptions o;
  o.format = ConfigFormat::kMegatron;
  o.num_gpus = 16;
  auto r = import_framework_config(scoped, o);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  EXPECT_TRUE(scenario_from_json(r->scenario)->training.cuda_graphs);
  bool noted = false;
  for (const auto& l : r->left_out) noted |= l.find("--cuda-graph-scope") != std::string::npos;
  EXPECT_TRUE(noted);
  // Without the key the exports carry no graph flag, and the import leaves the layers eager.
  auto eager = export_plan(cases()[0].scenario, cases()[0].plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(eager.ok());
  EXPECT_EQ(eager->text.find("cuda-graph"), std::string::npos);
  for (ConfigFormat f : {ConfigFormat::kTorchtitan, ConfigFormat::kDeepspeed}) {
    auto out = export_plan(c.scenario, c.plan, f);
    ASSERT_FALSE(out.ok()) << to_string(f);
    std::string all;
    for (const auto& pr : out.problems()) all += pr.message + "\n";
    EXPECT_NE(all.find("CUDA graphs"), std::string::npos) << all;
  }
}

// The attention kernel travels in each framework's words: Megatron-LM's --attention-backend and
// Megatron-Bridge's model.attention_backend (flash = the flash-attn package, local = Megatron's
// own attention storing the scores; the default is TE's own choice, so nothing is written) and
// Megatron-DeepSpeed's --use-flash-attn-v2 / -v1.
TEST(FrameworkBridge, AttentionKernelTravelsToMegatronAndDeepspeedAndBack) {
  auto round_trip = [](Case c, AttentionKernel kernel, ConfigFormat f, const std::string& flag) {
    c.scenario.model.attention_kernel = kernel;
    auto out = export_plan(c.scenario, c.plan, f);
    EXPECT_TRUE(out.ok()) << to_string(f) << ": " << (out.ok() ? "" : out.problems().front().to_string());
    if (!out.ok()) return;
    EXPECT_NE(out->text.find(flag), std::string::npos) << out->text;
    const ImportOptions o = import_options(c, f);
    auto imported = import_framework_config(write_temp("attention_" + flag.substr(2, 14) + extension(f), out->text), o);
    ASSERT_TRUE(imported.ok()) << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    EXPECT_EQ(again->model.attention_kernel, kernel) << flag;
  };
  round_trip(cases()[0], AttentionKernel::kFlash2, ConfigFormat::kMegatron, "--attention-backend flash");
  round_trip(cases()[0], AttentionKernel::kMaterialized, ConfigFormat::kMegatron, "--attention-backend local");
  round_trip(cases()[3], AttentionKernel::kFlash2, ConfigFormat::kDeepspeed, "--use-flash-attn-v2");
  round_trip(cases()[3], AttentionKernel::kFlash1, ConfigFormat::kDeepspeed, "--use-flash-attn-v1");
  round_trip(cases()[3], AttentionKernel::kFlash1Triton, ConfigFormat::kDeepspeed, "--use-flash-attn-triton");
  round_trip(cases()[0], AttentionKernel::kFlash2, ConfigFormat::kMegatronBridge, "model.attention_backend=flash");
  round_trip(cases()[0], AttentionKernel::kMaterialized, ConfigFormat::kMegatronBridge, "model.attention_backend=local");
  EXPECT_EQ(export_plan(cases()[0].scenario, cases()[0].plan, ConfigFormat::kMegatronBridge)->text.find("attention_backend"),
            std::string::npos);
  // Megatron-DeepSpeed without a flash flag runs its CoreAttention, which stores the scores; the
  // default kernel is the flash-attn package there.
  Case ds = cases()[3];
  EXPECT_NE(export_plan(ds.scenario, ds.plan, ConfigFormat::kDeepspeed)->text.find("--use-flash-attn-v2"), std::string::npos);
  ds.scenario.model.attention_kernel = AttentionKernel::kMaterialized;
  auto plain = export_plan(ds.scenario, ds.plan, ConfigFormat::kDeepspeed);
  ASSERT_TRUE(plain.ok()) << plain.problems().front().to_string();
  EXPECT_EQ(plain->text.find("--use-flash-attn"), std::string::npos) << plain->text;
  const ImportOptions ds_options = import_options(ds, ConfigFormat::kDeepspeed);
  auto core_attention = import_framework_config(write_temp("attention_core.sh", plain->text), ds_options);
  ASSERT_TRUE(core_attention.ok()) << core_attention.problems().front().to_string();
  EXPECT_EQ(scenario_from_json(core_attention->scenario)->model.attention_kernel, AttentionKernel::kMaterialized);
  EXPECT_EQ(export_plan(cases()[0].scenario, cases()[0].plan, ConfigFormat::kMegatron)->text.find("--attention-backend"),
            std::string::npos);
  Case fa1 = cases()[0];
  fa1.scenario.model.attention_kernel = AttentionKernel::kFlash1;
  EXPECT_FALSE(export_plan(fa1.scenario, fa1.plan, ConfigFormat::kMegatron).ok());
  EXPECT_FALSE(export_plan(fa1.scenario, fa1.plan, ConfigFormat::kMegatronBridge).ok());
  fa1.scenario.model.attention_kernel = AttentionKernel::kFlash1Triton;
  for (ConfigFormat f : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    auto refused = export_plan(fa1.scenario, fa1.plan, f);
    ASSERT_FALSE(refused.ok()) << to_string(f);
    EXPECT_NE(refused.problems().front().to_string().find("attention_kernel is flash1-triton"), std::string::npos)
        << refused.problems().front().to_string();
  }
  // fused is cuDNN's attention, the default kernel; a backend Megatron does not have is named.
  const std::string args = "MONARCH_ARGS=(\n  --tensor-model-parallel-size 2\n"
      "  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --vocab-size 32000\n"
      "  --micro-batch-size 1 --global-batch-size 64 --bf16\n  --attention-backend ";
  ImportOptions o;
  o.format = ConfigFormat::kMegatron;
  o.num_gpus = 16;
  auto fused = import_framework_config(write_temp("attention_fused.sh", args + "fused\n)\n"), o);
  ASSERT_TRUE(fused.ok()) << fused.problems().front().to_string();
  EXPECT_EQ(scenario_from_json(fused->scenario)->model.attention_kernel, AttentionKernel::kFlash);
  const std::string bad_path = write_temp("attention_bad.sh", args + "sdpa\n)\n");
  auto bad = import_framework_config(bad_path, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.problems().front().where, bad_path + ":5");
  EXPECT_NE(bad.problems().front().message.find("--attention-backend"), std::string::npos) << bad.problems().front().message;
}

// The gradients' reduction type travels in each framework's own words and comes back.
TEST(FrameworkBridge, GradReduceTypeTravelsBothWays) {
  struct Want {
    ConfigFormat format;
    Framework framework;
    bool fp32;
    const char* words;
  };
  const Want wants[] = {{ConfigFormat::kMegatron, Framework::kMegatron, false, "--grad-reduce-in-bf16"},
                        {ConfigFormat::kTorchtitan, Framework::kTorchtitan, false, "mixed_precision_reduce = \"bfloat16\""},
                        {ConfigFormat::kDeepspeed, Framework::kDeepspeed, true, "\"communication_data_type\": \"fp32\""}};
  for (const Want& w : wants) {
    Case c = cases()[0];
    c.scenario.training.framework = w.framework;
    c.scenario.training.grad_reduce_in_fp32 = w.fp32;
    auto out = export_plan(c.scenario, c.plan, w.format);
    ASSERT_TRUE(out.ok()) << to_string(w.format) << ": " << out.problems().front().to_string();
    EXPECT_NE(out->text.find(w.words), std::string::npos) << out->text;
    const ImportOptions o = import_options(c, w.format);
    auto imported = import_framework_config(write_temp("grads_" + std::string(to_string(w.format)) + extension(w.format), out->text), o);
    ASSERT_TRUE(imported.ok()) << to_string(w.format) << ": " << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    ASSERT_TRUE(again->training.grad_reduce_in_fp32.has_value()) << to_string(w.format);
    EXPECT_EQ(*again->training.grad_reduce_in_fp32, w.fp32) << to_string(w.format);
  }
  // Megatron-Bridge's mixed-precision recipe reduces in fp32 whatever ddp says: a warning.
  Case c = cases()[0];
  c.scenario.training.grad_reduce_in_fp32 = false;
  auto bridge = export_plan(c.scenario, c.plan, ConfigFormat::kMegatronBridge);
  ASSERT_TRUE(bridge.ok()) << bridge.problems().front().to_string();
  bool warned = false;
  for (const auto& wn : bridge->warnings) warned |= wn.find("grad_reduce_in_fp32 = False") != std::string::npos;
  EXPECT_TRUE(warned);
  // Read back from Megatron-Bridge overrides: the recipe's own flag counts, ddp's is noted as
  // replaced by it.
  const ImportOptions o = import_options(c, ConfigFormat::kMegatronBridge);
  auto via_ddp = import_framework_config(write_temp("grads_ddp.txt", bridge->text + "ddp.grad_reduce_in_fp32=false\n"), o);
  ASSERT_TRUE(via_ddp.ok()) << via_ddp.problems().front().to_string();
  EXPECT_FALSE(scenario_from_json(via_ddp->scenario)->training.grad_reduce_in_fp32.has_value());
  bool replaced = false;
  for (const auto& l : via_ddp->left_out) replaced |= l.find("ddp.grad_reduce_in_fp32") != std::string::npos;
  EXPECT_TRUE(replaced);
  auto via_recipe = import_framework_config(
      write_temp("grads_recipe.txt", bridge->text + "mixed_precision.grad_reduce_in_fp32=false\n"), o);
  ASSERT_TRUE(via_recipe.ok()) << via_recipe.problems().front().to_string();
  const auto recipe_scenario = scenario_from_json(via_recipe->scenario);
  ASSERT_TRUE(recipe_scenario->training.grad_reduce_in_fp32.has_value());
  EXPECT_FALSE(*recipe_scenario->training.grad_reduce_in_fp32);
  // The defaults write nothing new.
  EXPECT_EQ(export_plan(cases()[0].scenario, cases()[0].plan, ConfigFormat::kMegatron)->text.find("--grad-reduce-in-bf16"), std::string::npos);
}

// The cross entropy's fusion travels as Megatron-LM's flag and Megatron-Bridge's model key. An
// argument list without the flag is Megatron-LM's unfused default; the scenario's default (fused,
// as NVIDIA's recipes run it) is written out.
TEST(FrameworkBridge, CrossEntropyFusionTravelsBothWaysAndItsAbsenceIsMegatronsUnfusedDefault) {
  for (const ConfigFormat format : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    for (const std::optional<bool> fused : {std::optional<bool>{}, std::optional<bool>{false}}) {
      Case c = cases()[0];
      c.scenario.training.cross_entropy_loss_fusion = fused;
      auto out = export_plan(c.scenario, c.plan, format);
      ASSERT_TRUE(out.ok()) << to_string(format) << ": " << out.problems().front().to_string();
      const bool written_fused = format == ConfigFormat::kMegatron
                                     ? out->text.find("--cross-entropy-loss-fusion") != std::string::npos
                                     : out->text.find("model.cross_entropy_loss_fusion=true") != std::string::npos;
      EXPECT_EQ(written_fused, fused.value_or(true)) << out->text;
      const ImportOptions o = import_options(c, format);
      auto imported = import_framework_config(write_temp("xent_" + std::string(to_string(format)) + extension(format), out->text), o);
      ASSERT_TRUE(imported.ok()) << to_string(format) << ": " << imported.problems().front().to_string();
      auto again = scenario_from_json(imported->scenario);
      ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
      ASSERT_TRUE(again->training.cross_entropy_loss_fusion.has_value()) << to_string(format);
      EXPECT_EQ(*again->training.cross_entropy_loss_fusion, fused.value_or(true)) << to_string(format);
    }
  }
}

// Query and key norms travel as Megatron-LM's --qk-layernorm and Megatron-Bridge's
// model.qk_layernorm; torchtitan's exported models and Megatron-DeepSpeed have none.
TEST(FrameworkBridge, QkLayernormTravelsBothWaysWhereTheFrameworkHasIt) {
  Case c = cases()[0];
  c.scenario.model.qk_layernorm = true;
  for (const ConfigFormat format : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    auto out = export_plan(c.scenario, c.plan, format);
    ASSERT_TRUE(out.ok()) << to_string(format) << ": " << out.problems().front().to_string();
    auto imported = import_framework_config(write_temp("qknorm_" + std::string(to_string(format)) + extension(format), out->text),
                                            import_options(c, format));
    ASSERT_TRUE(imported.ok()) << to_string(format) << ": " << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    EXPECT_TRUE(again->model.qk_layernorm) << to_string(format) << "\n" << out->text;
  }
  for (const ConfigFormat format : {ConfigFormat::kTorchtitan, ConfigFormat::kDeepspeed}) {
    auto out = export_plan(c.scenario, c.plan, format);
    ASSERT_FALSE(out.ok()) << to_string(format);
    std::string text;
    for (const auto& problem : out.problems()) text += problem.to_string() + "\n";
    EXPECT_NE(text.find("qk_layernorm"), std::string::npos) << text;
  }
}

// The fp8 recipe travels as Megatron-LM's --fp8-recipe and as Megatron-Bridge's mixed_precision
// recipe name; a scenario that states none exports Megatron-Core's default, delayed scaling.
TEST(FrameworkBridge, Fp8RecipeTravelsBothWays) {
  const std::optional<Fp8Recipe> recipes[] = {std::nullopt, Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise};
  for (const ConfigFormat format : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    for (const std::optional<Fp8Recipe>& recipe : recipes) {
      Case c = cases()[0];
      c.scenario.training.precision = Precision::kFp8;
      c.scenario.training.fp8_recipe = recipe;
      auto out = export_plan(c.scenario, c.plan, format);
      ASSERT_TRUE(out.ok()) << to_string(format) << ": " << out.problems().front().to_string();
      const ImportOptions o = import_options(c, format);
      auto imported = import_framework_config(write_temp("fp8_" + std::string(to_string(format)) + extension(format), out->text), o);
      ASSERT_TRUE(imported.ok()) << to_string(format) << ": " << imported.problems().front().to_string();
      auto again = scenario_from_json(imported->scenario);
      ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
      EXPECT_EQ(again->training.precision, Precision::kFp8);
      ASSERT_TRUE(again->training.fp8_recipe.has_value()) << to_string(format) << "\n" << out->text;
      EXPECT_EQ(*again->training.fp8_recipe, recipe.value_or(Fp8Recipe::kDelayed)) << to_string(format) << "\n" << out->text;
    }
  }
  Case c = cases()[0];
  c.scenario.cluster.gpu = find_gpu_preset("B200")->spec;
  c.scenario.training.precision = Precision::kFp8;
  c.scenario.training.fp8_recipe = Fp8Recipe::kMxfp8;
  auto megatron = export_plan(c.scenario, c.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(megatron.ok());
  EXPECT_NE(megatron->text.find("--fp8-recipe mxfp8"), std::string::npos) << megatron->text;
  EXPECT_NE(megatron->text.find("--fp8-format e4m3"), std::string::npos) << megatron->text;
  auto bridge = export_plan(c.scenario, c.plan, ConfigFormat::kMegatronBridge);
  ASSERT_TRUE(bridge.ok());
  EXPECT_NE(bridge->text.find("mixed_precision=bf16_with_mxfp8_mixed"), std::string::npos) << bridge->text;
}

// Activation offloading: Megatron-LM's --cpu-offloading-num-layers and Megatron-Bridge's
// model.cpu_offloading keys both ways; an argument list without them reads back as off;
// torchtitan and Megatron-DeepSpeed refuse it.
TEST(FrameworkBridge, ActivationOffloadingTravelsBothWays) {
  Case c = cases()[0];
  c.plan.recompute = Recompute::kNone;
  c.plan.activation_offload_layers = 12;
  for (const ConfigFormat format : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    auto out = export_plan(c.scenario, c.plan, format);
    ASSERT_TRUE(out.ok()) << to_string(format) << ": " << out.problems().front().to_string();
    const std::vector<std::string> written =
        format == ConfigFormat::kMegatron
            ? std::vector<std::string>{"--cpu-offloading-num-layers 12"}
            : std::vector<std::string>{"model.cpu_offloading=true", "model.cpu_offloading_num_layers=12",
                                       "model.cpu_offloading_weights=false"};
    for (const std::string& w : written) EXPECT_NE(out->text.find(w), std::string::npos) << w << "\n" << out->text;
    auto imported = import_framework_config(write_temp("offload_" + std::string(to_string(format)) + extension(format), out->text),
                                            import_options(c, format));
    ASSERT_TRUE(imported.ok()) << to_string(format) << ": " << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    ASSERT_TRUE(again->parallelism.activation_offload_layers.has_value()) << to_string(format);
    EXPECT_EQ(*again->parallelism.activation_offload_layers, 12) << to_string(format);
  }
  Case off = cases()[0];
  auto megatron = export_plan(off.scenario, off.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(megatron.ok());
  EXPECT_EQ(megatron->text.find("--cpu-offloading"), std::string::npos);
  auto imported = import_framework_config(write_temp("offload_off.sh", megatron->text), import_options(off, ConfigFormat::kMegatron));
  ASSERT_TRUE(imported.ok()) << imported.problems().front().to_string();
  auto again = scenario_from_json(imported->scenario);
  ASSERT_TRUE(again.ok() && again->parallelism.activation_offload_layers.has_value());
  EXPECT_EQ(*again->parallelism.activation_offload_layers, 0);
  for (const ConfigFormat format : {ConfigFormat::kTorchtitan, ConfigFormat::kDeepspeed}) {
    auto refused = export_plan(c.scenario, c.plan, format);
    ASSERT_FALSE(refused.ok()) << to_string(format);
    bool named = false;
    for (const auto& p : refused.problems()) named = named || p.message.find("activation offloading") != std::string::npos;
    EXPECT_TRUE(named) << to_string(format) << ": " << refused.problems().front().to_string();
  }
}

// EP communication overlap and the router's forced load balancing: Megatron-LM's flags and
// Megatron-Bridge's keys both ways; an MoE argument list without the overlap flag is Megatron's
// default, off; torchtitan carries the forced balancing (its debug option) but has no overlap,
// DeepSpeed neither.
TEST(FrameworkBridge, EpOverlapAndForcedLoadBalancingTravelBothWays) {
  auto all_problems = [](const auto& problems) {
    std::string text;
    for (const auto& p : problems) text += p.to_string() + "\n";
    return text;
  };
  Case c = cases()[3];
  c.plan.vpp = 2;
  c.plan.schedule = Schedule::kInterleaved;
  c.plan.ep_comm_overlap = true;
  c.scenario.model.moe_router_force_load_balancing = true;
  for (const ConfigFormat format : {ConfigFormat::kMegatron, ConfigFormat::kMegatronBridge}) {
    auto out = export_plan(c.scenario, c.plan, format);
    ASSERT_TRUE(out.ok()) << to_string(format) << ": " << out.problems().front().to_string();
    const std::vector<std::string> written =
        format == ConfigFormat::kMegatron
            ? std::vector<std::string>{"--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute", "--moe-router-force-load-balancing"}
            : std::vector<std::string>{"comm_overlap.overlap_moe_expert_parallel_comm=true", "comm_overlap.delay_wgrad_compute=true",
                                       "model.moe_router_force_load_balancing=true"};
    for (const std::string& w : written) EXPECT_NE(out->text.find(w), std::string::npos) << w << "\n" << out->text;
    const ImportOptions o = import_options(c, format);
    auto imported = import_framework_config(write_temp("ep_overlap_" + std::string(to_string(format)) + extension(format), out->text), o);
    ASSERT_TRUE(imported.ok()) << to_string(format) << ": " << imported.problems().front().to_string();
    auto again = scenario_from_json(imported->scenario);
    ASSERT_TRUE(again.ok()) << again.problems().front().to_string();
    ASSERT_TRUE(again->parallelism.ep_comm_overlap.has_value()) << to_string(format);
    EXPECT_TRUE(*again->parallelism.ep_comm_overlap) << to_string(format);
    EXPECT_TRUE(again->model.moe_router_force_load_balancing) << to_string(format);
  }
  // Without the overlap: Megatron-LM's argument list has no flag and reads back as off.
  Case off = c;
  off.plan.ep_comm_overlap = false;
  auto megatron = export_plan(off.scenario, off.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(megatron.ok());
  EXPECT_EQ(megatron->text.find("--overlap-moe-expert-parallel-comm"), std::string::npos);
  auto imported = import_framework_config(write_temp("ep_overlap_off.sh", megatron->text), import_options(off, ConfigFormat::kMegatron));
  ASSERT_TRUE(imported.ok()) << imported.problems().front().to_string();
  auto again = scenario_from_json(imported->scenario);
  ASSERT_TRUE(again.ok() && again->parallelism.ep_comm_overlap.has_value());
  EXPECT_FALSE(*again->parallelism.ep_comm_overlap);
  // torchtitan: the forced balancing is its debug option; the overlap is refused.
  auto titan = export_plan(off.scenario, off.plan, ConfigFormat::kTorchtitan);
  ASSERT_TRUE(titan.ok()) << titan.problems().front().to_string();
  EXPECT_NE(titan->text.find("moe_force_load_balance = true"), std::string::npos) << titan->text;
  ImportOptions titan_options = import_options(off, ConfigFormat::kTorchtitan);
  titan_options.model = write_temp("hf_config_force_balance.json", mixtral_hf_config(off.scenario.model).dump());
  auto titan_back = import_framework_config(write_temp("ep_force_balance.toml", titan->text), titan_options);
  ASSERT_TRUE(titan_back.ok()) << titan_back.problems().front().to_string();
  auto titan_again = scenario_from_json(titan_back->scenario);
  ASSERT_TRUE(titan_again.ok()) << titan_again.problems().front().to_string();
  EXPECT_TRUE(titan_again->model.moe_router_force_load_balancing);
  auto titan_overlap = export_plan(c.scenario, c.plan, ConfigFormat::kTorchtitan);
  ASSERT_FALSE(titan_overlap.ok());
  EXPECT_NE(all_problems(titan_overlap.problems()).find("EP communication overlap"), std::string::npos);
  auto ds = export_plan(c.scenario, c.plan, ConfigFormat::kDeepspeed);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(all_problems(ds.problems()).find("EP communication overlap"), std::string::npos);
  EXPECT_NE(all_problems(ds.problems()).find("forced load balancing"), std::string::npos);
}

TEST(FrameworkExport, RefusesWhatTheTargetCannotExpress) {
  const Case interleaved = cases()[2];
  auto ds = export_plan(interleaved.scenario, interleaved.plan, ConfigFormat::kDeepspeed);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.problems().front().message.find("interleaved"), std::string::npos) << ds.problems().front().message;

  Case gpipe = cases()[1];
  gpipe.plan.schedule = Schedule::kGpipe;
  EXPECT_FALSE(export_plan(gpipe.scenario, gpipe.plan, ConfigFormat::kMegatron).ok());
  gpipe.plan.zero_stage = 0;  // torchtitan has no ZeRO-1 (tested below)
  EXPECT_TRUE(export_plan(gpipe.scenario, gpipe.plan, ConfigFormat::kTorchtitan).ok());

  Case zero3_pp = cases()[1];
  zero3_pp.plan.zero_stage = 3;
  auto r = export_plan(zero3_pp.scenario, zero3_pp.plan, ConfigFormat::kDeepspeed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems().front().message.find("ZeRO-3"), std::string::npos);

  Case zero1 = cases()[0];  // FSDP2 has no optimizer-only sharding
  zero1.plan.zero_stage = 1;
  EXPECT_FALSE(export_plan(zero1.scenario, zero1.plan, ConfigFormat::kTorchtitan).ok());

  const Case dropping = cases()[4];  // torchtitan's MoE has no capacity factor
  auto tt = export_plan(dropping.scenario, dropping.plan, ConfigFormat::kTorchtitan);
  ASSERT_FALSE(tt.ok());
  EXPECT_NE(tt.problems().front().message.find("capacity factor 1.25"), std::string::npos) << tt.problems().front().message;
}

TEST(FrameworkExport, DeepspeedCarriesTokenDropping) {
  const Case dropless = cases()[3], dropping = cases()[4];
  auto a = export_plan(dropless.scenario, dropless.plan, ConfigFormat::kDeepspeed);
  auto b = export_plan(dropping.scenario, dropping.plan, ConfigFormat::kDeepspeed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->text.find("--disable-moe-token-dropping"), std::string::npos) << a->text;
  EXPECT_EQ(a->text.find("--moe-train-capacity-factor"), std::string::npos) << a->text;
  EXPECT_NE(b->text.find("--moe-train-capacity-factor 1.25"), std::string::npos) << b->text;
  EXPECT_NE(b->text.find("--enable-expert-tensor-parallelism"), std::string::npos) << b->text;

  Case narrow_experts = dropless;  // Megatron-DeepSpeed experts take the dense FFN size
  narrow_experts.scenario.model.moe_ffn_hidden_size = 4096;
  EXPECT_FALSE(export_plan(narrow_experts.scenario, narrow_experts.plan, ConfigFormat::kDeepspeed).ok());
}

// CUDA_LAUNCH_BLOCKING is the launch environment's, in no framework's config: every export
// says so, and the config itself is the same.
TEST(FrameworkExport, LaunchBlockingIsNamedAsTheEnvironmentItNeeds) {
  Case c = cases()[0];
  for (ConfigFormat f : {ConfigFormat::kTorchtitan, ConfigFormat::kMegatron, ConfigFormat::kDeepspeed, ConfigFormat::kMegatronBridge}) {
    c.scenario.training.cuda_launch_blocking = false;
    auto plain = export_plan(c.scenario, c.plan, f);
    c.scenario.training.cuda_launch_blocking = true;
    auto blocking = export_plan(c.scenario, c.plan, f);
    ASSERT_EQ(plain.ok(), blocking.ok()) << to_string(f);
    if (!plain.ok()) continue;
    EXPECT_EQ(plain->text, blocking->text) << to_string(f);
    ASSERT_EQ(blocking->warnings.size(), plain->warnings.size() + 1) << to_string(f);
    EXPECT_NE(blocking->warnings.back().find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << to_string(f);
  }
}

TEST(FrameworkExport, TorchtitanUsesTheFrameworksNamesAndFlavor) {
  auto out = export_plan(cases()[0].scenario, cases()[0].plan, ConfigFormat::kTorchtitan);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->warnings.empty());
  const std::string& t = out->text;
  EXPECT_NE(t.find("flavor = \"8B\""), std::string::npos) << t;
  EXPECT_NE(t.find("data_parallel_shard_degree = 32"), std::string::npos) << t;
  EXPECT_NE(t.find("data_parallel_replicate_degree = 1"), std::string::npos) << t;
  EXPECT_NE(t.find("--parallelism.tensor_parallel_degree=2"), std::string::npos) << t;
  EXPECT_NE(t.find("local_batch_size = 2"), std::string::npos) << t;
}

// torch.compile travels as torchtitan's [compile] section, and back; a TOML of the earlier
// releases says [training] compile; compile without the model among its components compiles no block.
TEST(FrameworkBridge, TorchtitanCompileTravelsBothWays) {
  Case c = cases()[0];
  c.scenario.training.framework = Framework::kTorchtitan;
  c.scenario.training.compile = true;
  auto out = export_plan(c.scenario, c.plan, ConfigFormat::kTorchtitan);
  ASSERT_TRUE(out.ok()) << out.problems().front().to_string();
  EXPECT_NE(out->text.find("[compile]\nenable = true"), std::string::npos) << out->text;
  ImportOptions o;
  o.format = ConfigFormat::kTorchtitan;
  o.num_gpus = c.scenario.cluster.num_gpus;
  auto back = import_framework_config(write_temp("compiled.toml", out->text), o);
  ASSERT_TRUE(back.ok()) << back.problems().front().to_string();
  EXPECT_TRUE(scenario_from_json(back->scenario)->training.compile);
  c.scenario.training.compile = false;
  out = export_plan(c.scenario, c.plan, ConfigFormat::kTorchtitan);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->text.find("[compile]"), std::string::npos) << out->text;
  const std::string base = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n";
  auto legacy = import_framework_config(write_temp("legacy.toml", base + "compile = true\n"), o);
  ASSERT_TRUE(legacy.ok()) << legacy.problems().front().to_string();
  EXPECT_TRUE(scenario_from_json(legacy->scenario)->training.compile);
  auto loss_only = import_framework_config(
      write_temp("loss_only.toml", base + "[compile]\nenable = true\ncomponents = [\"loss\"]\n"), o);
  ASSERT_TRUE(loss_only.ok()) << loss_only.problems().front().to_string();
  EXPECT_FALSE(scenario_from_json(loss_only->scenario)->training.compile);
}

TEST(FrameworkExport, MegatronUnevenSplitUsesTheFirstAndLastStageFlags) {
  auto out = export_plan(cases()[1].scenario, cases()[1].plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->text.find("--decoder-first-pipeline-num-layers 12"), std::string::npos) << out->text;
  EXPECT_NE(out->text.find("--decoder-last-pipeline-num-layers 12"), std::string::npos) << out->text;
  Case odd = cases()[1];
  odd.plan.layers_per_stage = {10, 14, 14, 14, 14, 14};
  odd.plan.layers_per_stage = {12, 13, 15, 14, 14, 12};
  auto layout = export_plan(odd.scenario, odd.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(layout.ok());
  EXPECT_NE(layout->text.find("--pipeline-model-parallel-layout \"Et*12|t*13|t*15|t*14|t*14|t*12L\""), std::string::npos)
      << layout->text;
}

TEST(FrameworkImport, TorchrunSizesTheClusterWhenNoOptionDoes) {
  const Case c = cases()[1];  // 96 GPUs, 8 per node: torchrun --nproc-per-node 8 --nnodes 12
  auto out = export_plan(c.scenario, c.plan, ConfigFormat::kMegatron);
  ASSERT_TRUE(out.ok());
  const std::string path = write_temp("torchrun.sh", out->text);
  ImportOptions o;
  o.format = ConfigFormat::kMegatron;
  auto r = import_framework_config(path, o);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  auto s = scenario_from_json(r->scenario);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cluster.num_gpus, 96);
  EXPECT_EQ(s->cluster.gpus_per_node, 8);
  for (const auto& l : r->left_out) EXPECT_EQ(l.find("--nnodes"), std::string::npos) << l;

  o.num_gpus = 192;  // an option wins, and the import says torchrun's size was not used
  auto wider = import_framework_config(path, o);
  ASSERT_TRUE(wider.ok()) << wider.problems().front().to_string();
  bool reported = false;
  for (const auto& l : wider->left_out) reported = reported || l.find("torchrun starts 96 GPUs") != std::string::npos;
  EXPECT_TRUE(reported);
  EXPECT_EQ(wider->scenario["cluster"]["num_gpus"], 192);
}

// Real configs from the frameworks' repositories (small copies in tests/data/frameworks/).
TEST(FrameworkImport, TorchtitanLlama3_8bAsShipped) {
  ImportOptions o;
  o.num_gpus = 64;
  o.gpu = "A100-80GB";
  auto r = import_framework_config(kData + "/frameworks/torchtitan_llama3_8b.toml", o);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  auto s = scenario_from_json(r->scenario);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->model.num_layers, 32);
  EXPECT_EQ(s->model.seq_length, 8192);
  EXPECT_EQ(s->parallelism.dp.value_or(0), 64);  // data_parallel_shard_degree = -1: the rest
  EXPECT_EQ(s->parallelism.zero_stage.value_or(-1), 3);  // FSDP
  EXPECT_EQ(s->training.micro_batch_size.value_or(0), 1);
  EXPECT_EQ(s->training.global_batch_size, 64);  // local 1 x dp 64
  EXPECT_EQ(s->parallelism.recompute.value_or(Recompute::kNone), Recompute::kSelective);
  // max_norm, steps, dataset, hf_assets_path are left out, each with its line.
  bool steps = false;
  for (const auto& l : r->left_out) steps |= l.find("torchtitan_llama3_8b.toml:15: training.steps") != std::string::npos;
  EXPECT_TRUE(steps);
  EXPECT_NE(r->scenario["description"].get<std::string>().find("training.steps"), std::string::npos);
}

TEST(FrameworkImport, MegatronGpt3_175bExampleScript) {
  ImportOptions o;
  o.num_gpus = 1024;
  o.gpu = "A100-80GB";
  auto r = import_framework_config(kData + "/frameworks/megatron_gpt3_175b.sh", o);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  auto s = scenario_from_json(r->scenario);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->model.architecture, Architecture::kGpt);
  EXPECT_EQ(s->model.num_layers, 96);
  EXPECT_EQ(s->model.hidden_size, 12288);
  EXPECT_EQ(s->model.vocab_size, 50257);
  EXPECT_EQ(s->parallelism.tp.value_or(0), 8);
  EXPECT_EQ(s->parallelism.pp.value_or(0), 16);
  EXPECT_EQ(s->training.precision, Precision::kFp16);
  EXPECT_EQ(s->training.global_batch_size, 1536);
  bool lr = false;
  for (const auto& l : r->left_out) lr |= l.find("megatron_gpt3_175b.sh:28: --lr") != std::string::npos;
  EXPECT_TRUE(lr);
}

TEST(FrameworkImport, MegatronMixtralExampleScript) {
  ImportOptions o;
  o.num_gpus = 64;
  auto r = import_framework_config(kData + "/frameworks/megatron_mixtral_8x7b.sh", o);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  auto s = scenario_from_json(r->scenario);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->model.architecture, Architecture::kLlama);
  EXPECT_EQ(s->model.num_experts, 8);
  EXPECT_EQ(s->model.moe_top_k, 2);
  EXPECT_TRUE(s->model.moe_dropless);
  EXPECT_EQ(s->model.vocab_size, 32000);
  EXPECT_EQ(s->parallelism.ep.value_or(0), 8);
  EXPECT_EQ(s->parallelism.pp.value_or(0), 4);
  EXPECT_EQ(s->parallelism.zero_stage.value_or(-1), 1);
  EXPECT_TRUE(s->parallelism.overlap_grad_reduce.value_or(false));
}

TEST(FrameworkImport, BadValuesNameTheirPlace) {
  const std::string path = write_temp("bad.sh", "ARGS=(\n  --tensor-model-parallel-size eight\n)\n");
  ImportOptions o;
  o.num_gpus = 8;
  auto r = import_framework_config(path, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems().front().where, path + ":2");
  const std::string toml = write_temp("bad.toml", "[parallelism]\ntensor_parallel_degree = = 2\n");
  auto t = import_framework_config(toml, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problems().front().where.rfind(toml + ":2:", 0), 0u) << t.problems().front().where;
  ImportOptions none;
  auto n = import_framework_config(kData + "/frameworks/torchtitan_llama3_8b.toml", none);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.problems().front().where, "--num-gpus");
}

}  // namespace
}  // namespace monarch
