#include "core/scenario_io.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/model_math.h"
#include "core/presets.h"
#include "core/scenario_io_bad_cases.h"

namespace monarch {
namespace {

using nlohmann::json;
using testing_cases::apply_edits;
using testing_cases::BadCase;
using testing_cases::base_scenario;
using testing_cases::kBadCases;

std::string all_messages(const Problems& ps) {
  std::string s;
  for (const auto& p : ps) s += p.to_string() + "\n";
  return s;
}

TEST(ScenarioIo, TheSpecExampleLoads) {
  auto s = scenario_from_json(base_scenario());
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.num_layers, 96);
  EXPECT_EQ(s->model.ffn_hidden_size, 4 * 12288);  // gpt default
  EXPECT_EQ(s->model.num_kv_heads, 96);            // = heads by default
  EXPECT_TRUE(s->model.tie_embeddings);            // gpt default
  EXPECT_EQ(s->cluster.gpu.name, "A100-80GB");
  EXPECT_DOUBLE_EQ(s->cluster.gpu.peak_tflops.bf16, 312);
  EXPECT_EQ(*s->parallelism.tp, 8);
  EXPECT_EQ(*s->parallelism.vpp, 3);
  EXPECT_EQ(*s->parallelism.schedule, Schedule::kInterleaved);  // vpp > 1
  EXPECT_EQ(*s->parallelism.recompute, Recompute::kSelective);
  EXPECT_EQ(s->cluster.num_nodes(), 8);
  EXPECT_TRUE(s->backends.empty());  // empty = default
}

// The stack's rules refuse a pinned choice only: what the search may still choose is left to it.
TEST(ScenarioIo, FrameworkRulesRefusePinnedChoicesOnly) {
  json j = base_scenario();
  j["training"]["framework"] = "deepspeed";
  j["parallelism"].erase("vpp");  // pp 8 pinned, vpp searched: the search keeps vpp 1
  j["parallelism"]["zero_stage"] = 1;
  EXPECT_TRUE(scenario_from_json(j).ok());
  j["parallelism"].erase("pp");  // ZeRO-3 with the pipeline degree searched: pp 1 remains
  j["parallelism"]["zero_stage"] = 3;
  EXPECT_TRUE(scenario_from_json(j).ok());
  j["parallelism"]["pp"] = 8;
  auto s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems().front().where, "/parallelism/zero_stage");
  EXPECT_NE(s.problems().front().message.find("training.framework is \"deepspeed\""), std::string::npos);
}

// Reduced-layer proxies of Llama 3.1 405B (30 layers on pp 4 x vpp 8): with both account-for
// flags the 32 model chunks hold the embedding, 30 layers and the loss; without, 32 chunks
// cannot each hold a layer.
TEST(ScenarioIo, AccountForFlagsLetEndChunksHoldOnlyTheEmbeddingOrTheLoss) {
  json j = base_scenario();
  j["model"]["num_layers"] = 30;
  j["parallelism"] = {{"tp", 2}, {"pp", 4}, {"dp", 8}, {"vpp", 8}, {"account_for_embedding_in_pipeline_split", true},
                      {"account_for_loss_in_pipeline_split", true}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  j["parallelism"].erase("account_for_loss_in_pipeline_split");
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems().front().where, "/parallelism/vpp");
}

// The same for whole pipeline stages: DeepSpeed's 'type:transformer|embedding' split ran
// BLOOM-176B's 70 layers on 72 stages, the first holding only the embedding and the last only
// the output layer and the loss. Here 6 layers on 8 stages.
TEST(ScenarioIo, AccountForFlagsLetEndStagesHoldOnlyTheEmbeddingOrTheLoss) {
  json j = base_scenario();
  j["model"]["num_layers"] = 6;
  j["parallelism"] = {{"tp", 2}, {"pp", 8}, {"dp", 4}, {"account_for_embedding_in_pipeline_split", true},
                      {"account_for_loss_in_pipeline_split", true}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  Plan p;
  p.pp = 8;
  EXPECT_EQ(fixed_layer_split(*s, p), (std::vector<int64_t>{0, 1, 1, 1, 1, 1, 1, 0}));
  j["parallelism"].erase("account_for_loss_in_pipeline_split");
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems().front().where, "/parallelism/pp");
  EXPECT_NE(s.problems().front().message.find("the embedding and the loss where the account_for flags count them (7)"),
            std::string::npos)
      << s.problems().front().message;
}

class BadScenario : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadScenario, IsRefusedNamingThePath) {
  const BadCase& c = GetParam();
  auto s = scenario_from_json(apply_edits(c), MONARCH_SOURCE_DIR);
  ASSERT_FALSE(s.ok()) << c.name;
  bool found = false;
  for (const auto& p : s.problems())
    if (p.where == c.where && p.message.find(c.message) != std::string::npos) found = true;
  EXPECT_TRUE(found) << c.name << ": expected a problem at " << c.where << " mentioning \"" << c.message
                     << "\", got:\n"
                     << all_messages(s.problems());
  for (const auto& p : s.problems()) EXPECT_EQ(p.to_string().find('\n'), std::string::npos) << "one line per problem";
}

std::string case_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string n;
  for (const char* c = info.param.name; *c; ++c) n += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, BadScenario, ::testing::ValuesIn(kBadCases), case_name);

TEST(ScenarioIo, TheTableHoldsAtLeastFortyDistinctCases) {
  EXPECT_GE(std::size(kBadCases), 40u);
}

TEST(ScenarioIo, AllProblemsAreReportedNotJustTheFirst) {
  json j = base_scenario();
  j["model"]["hidden_size"] = -1;
  j["cluster"]["gpu"] = "A100";
  j["training"]["precision"] = "bf17";
  auto s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  std::string all = all_messages(s.problems());
  EXPECT_NE(all.find("/model/hidden_size"), std::string::npos) << all;
  EXPECT_NE(all.find("/cluster/gpu"), std::string::npos) << all;
  EXPECT_NE(all.find("/training/precision"), std::string::npos) << all;
}

TEST(ScenarioIo, SyntaxErrorsGiveLineAndColumn) {
  auto j = parse_json_text("{\n  \"name\": \"x\",\n  \"model\": { \"num_layers\": 4,, }\n}", "bad.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.problems()[0].where, "bad.json:3:30"  /* the second comma */);
  EXPECT_NE(j.problems()[0].message.find("JSON syntax error"), std::string::npos);
  auto huge = parse_json_text("{\"num_gpus\": 1e400}", "huge.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.problems()[0].message.find("1e400"), std::string::npos);
  auto empty = parse_json_text("", "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.problems()[0].message.find("empty"), std::string::npos);
  auto nonobject = scenario_from_json(json::array());
  ASSERT_FALSE(nonobject.ok());
  EXPECT_EQ(nonobject.problems()[0].where, "/");
}

TEST(ScenarioIo, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = "{\"name\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  auto j = parse_json_text(deep, "deep.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.problems()[0].where, "deep.json:1:" + std::to_string(9 + kMaxJsonDepth));
  EXPECT_NE(j.problems()[0].message.find("nested deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_TRUE(parse_json_text("{\"name\": \"" + std::string(1000, '[') + "\\\"\"}", "s.json").ok());
}

TEST(ScenarioIo, EndlessFilesAreRefusedWithoutReadingThemWhole) {
  auto s = read_scenario_file("/dev/zero");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].message.find("larger than"), std::string::npos) << s.problems()[0].to_string();
  s = read_scenario_file("/tmp");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].message.find("directory"), std::string::npos);
}

TEST(ScenarioIo, MissingFileIsAProblemNamingTheFile) {
  auto s = read_scenario_file("/no/such/scenario.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].to_string().find("/no/such/scenario.json"), std::string::npos);
  EXPECT_NE(s.problems()[0].message.find("does not exist"), std::string::npos);
}

TEST(ScenarioIo, AliasesAndMegatronNamesMeanTheSameDegrees) {
  json j = base_scenario();
  j["parallelism"] = {{"tensor_model_parallel_size", 8}, {"pipeline_model_parallel_size", 4},
                      {"context_parallel_size", 2}, {"virtual_pipeline_model_parallel_size", 2}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.tp, 8);
  EXPECT_EQ(*s->parallelism.pp, 4);
  EXPECT_EQ(*s->parallelism.cp, 2);
  EXPECT_EQ(*s->parallelism.dp, 1);  // derived: 64 / (8 x 4 x 2)
  EXPECT_EQ(*s->parallelism.vpp, 2);
}

TEST(ScenarioIo, DataParallelMinusOneIsDerivedAndAbsentDegreesAreSearched) {
  json j = base_scenario();
  j["parallelism"] = {{"tp", 4}, {"pp", 2}, {"cp", 1}, {"dp", -1}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.dp, 8);
  j["parallelism"] = {{"tp", 4}};
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->parallelism.pp.has_value());
  EXPECT_FALSE(s->parallelism.dp.has_value());  // cp and pp are searched, so dp is too
  EXPECT_FALSE(s->parallelism.schedule.has_value());
}

TEST(ScenarioIo, PresetsFillTheModelAndExplicitKeysOverrideThem) {
  json j = base_scenario();
  j["model"] = {{"preset", "llama3-70b"}, {"seq_length", 4096}};
  j["parallelism"] = json::object();
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.architecture, Architecture::kLlama);
  EXPECT_EQ(s->model.num_layers, 80);
  EXPECT_EQ(s->model.num_kv_heads, 8);
  EXPECT_EQ(s->model.seq_length, 4096);
  EXPECT_FALSE(s->model.tie_embeddings);
  EXPECT_EQ(s->model.preset, "llama3-70b");
}

TEST(ScenarioIo, GpuPresetGivesLinkDefaultsWhenTheClusterOmitsThem) {
  json j = base_scenario();
  j["cluster"] = {{"gpu", "h100-sxm"}, {"num_gpus", 64}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->cluster.gpu.name, "H100-SXM");
  EXPECT_EQ(s->cluster.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(s->cluster.intra_node.bandwidth_GBps, 450);  // NVLink 4: 900 GB/s bidirectional
  EXPECT_DOUBLE_EQ(s->cluster.inter_node.bandwidth_GBps, 50);   // NDR 400 Gb/s
  EXPECT_EQ(s->cluster.nics_per_node, 8);
  // An object naming a preset takes its figures and overrides the ones given.
  j["cluster"]["gpu"] = {{"name", "H100-SXM"}, {"memory_gib", 94}};
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_DOUBLE_EQ(s->cluster.gpu.memory_gib, 94);
  EXPECT_DOUBLE_EQ(s->cluster.gpu.peak_tflops.bf16, 989.5);
}

TEST(ScenarioIo, CustomGpuNeedsItsLinksSpelledOut) {
  json j = base_scenario();
  j["cluster"] = {{"gpu", {{"name", "X1"}, {"peak_tflops", {{"bf16", 100}}}, {"memory_gib", 32}, {"memory_bandwidth_GBps", 900}}},
                  {"num_gpus", 16}, {"gpus_per_node", 8}};
  j["parallelism"] = json::object();
  auto s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  std::string all = all_messages(s.problems());
  EXPECT_NE(all.find("/cluster/intra_node"), std::string::npos) << all;
  EXPECT_NE(all.find("/cluster/inter_node"), std::string::npos) << all;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("monarch_io_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(ScenarioIo, HfConfigIsReadRelativeToTheScenarioFile) {
  TempDir dir;
  dir.write("llama.json", R"({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": false})");
  json j = base_scenario();
  j["model"] = {{"hf_config", "llama.json"}, {"seq_length", 8192}};
  j["parallelism"] = {{"tp", 8}};
  std::string path = dir.write("s.json", j.dump());
  auto s = read_scenario_file(path);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.architecture, Architecture::kLlama);
  EXPECT_EQ(s->model.num_kv_heads, 8);
  EXPECT_EQ(s->model.ffn_hidden_size, 14336);
  EXPECT_EQ(s->model.seq_length, 8192);  // explicit key beats max_position_embeddings
  EXPECT_EQ(s->source_path, path);

  dir.write("gpt2.json", R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
      "n_inner": null, "vocab_size": 50257, "n_positions": 1024})");
  j["model"] = {{"hf_config", "gpt2.json"}};
  j["parallelism"] = json::object();
  s = read_scenario_file(dir.write("s2.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.architecture, Architecture::kGpt);
  EXPECT_EQ(s->model.ffn_hidden_size, 4 * 768);
  EXPECT_EQ(s->model.seq_length, 1024);
  EXPECT_TRUE(s->model.tie_embeddings);

  // A Mixtral-style MoE config (mistralai/Mixtral-8x7B-v0.1 config.json fields).
  dir.write("mixtral.json", R"({"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
      "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2})");
  j["model"] = {{"hf_config", "mixtral.json"}, {"seq_length", 4096}};
  s = read_scenario_file(dir.write("s4.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.num_experts, 8);
  EXPECT_EQ(s->model.moe_top_k, 2);
  EXPECT_EQ(s->model.moe_ffn_hidden_size, 14336);
  EXPECT_FALSE(s->model.tie_embeddings);
  EXPECT_FALSE(s->model.qk_layernorm);

  // Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json fields): the head width is its own field,
  // 32 heads of 128 on a 2048-wide residual stream; 128 experts of 768, top-8.
  dir.write("qwen3.json", R"({"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
      "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
      "max_position_embeddings": 40960, "tie_word_embeddings": false})");
  j["model"] = {{"hf_config", "qwen3.json"}, {"seq_length", 4096}};
  s = read_scenario_file(dir.write("s5.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.head_dim, 128);
  EXPECT_EQ(s->model.num_experts, 128);
  EXPECT_EQ(s->model.moe_top_k, 8);
  EXPECT_EQ(s->model.moe_ffn_hidden_size, 768);
  EXPECT_TRUE(s->model.qk_layernorm);  // Qwen3's q_norm and k_norm, which its config does not name
  const ModelShape q3 = model_shape(s->model);
  EXPECT_EQ(q3.heads * q3.head_dim, 4096);  // Q is twice the hidden width
  // Attention weights: QKV 2048 x (4096 + 2 x 512), the projection 4096 x 2048, the input norm
  // (2048) and the query and key norms (128 each).
  EXPECT_EQ(parameter_counts(q3).attention_per_layer - 2048 - 2 * 128, 2048 * (4096 + 1024) + 4096 * 2048);
  // Round trip through the scenario writer keeps the head width.
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(again->model.head_dim, 128);
  EXPECT_TRUE(again->model.qk_layernorm);
  // Dropless routing round-trips without a capacity factor (the reader refuses both).
  s->model.moe_dropless = true;
  const json dropless = scenario_to_json(*s);
  EXPECT_FALSE(dropless["model"].contains("moe_capacity_factor"));
  again = scenario_from_json(dropless);
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_TRUE(again->model.moe_dropless);

  // Qwen2-MoE's shared expert and Qwen3's dense layers are refused, naming the field.
  dir.write("qwen2moe.json", R"({"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4, "vocab_size": 151936})");
  j["model"] = {{"hf_config", "qwen2moe.json"}, {"seq_length", 4096}};
  s = read_scenario_file(dir.write("s6.json", j.dump()));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/shared_expert_intermediate_size"), std::string::npos);
  EXPECT_NE(all_messages(s.problems()).find("shared experts are not modelled"), std::string::npos);
  dir.write("qwen3dense.json", R"({"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
      "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
      "mlp_only_layers": [0, 1]})");
  j["model"] = {{"hf_config", "qwen3dense.json"}, {"seq_length", 4096}};
  s = read_scenario_file(dir.write("s7.json", j.dump()));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("mixes dense and MoE layers"), std::string::npos);

  dir.write("t5.json", R"({"model_type": "t5"})");
  j["model"] = {{"hf_config", "t5.json"}};
  s = read_scenario_file(dir.write("s3.json", j.dump()));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/model/hf_config"), std::string::npos);
  EXPECT_NE(all_messages(s.problems()).find("\"t5\""), std::string::npos);
}

TEST(ScenarioIo, CompileIsTorchtitansAndSurvivesTheRoundTrip) {
  json j = base_scenario();
  j["training"]["framework"] = "torchtitan";
  j["parallelism"].erase("vpp");
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.compile);  // torchtitan's default: eager
  j["training"]["compile"] = true;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_TRUE(s->training.compile);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_TRUE(again->training.compile);
  j["training"]["compile"] = 1;
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/training/compile"), std::string::npos);
}

// The gradients' reduction type: absent it is the framework's default (Megatron-LM: fp32 for
// bf16); stated, it is kept and written back.
TEST(ScenarioIo, GradReduceInFp32IsTheFrameworksDefaultUntilStated) {
  json j = base_scenario();
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.grad_reduce_in_fp32.has_value());
  EXPECT_TRUE(grad_reduce_in_fp32(s->training));
  EXPECT_FALSE(scenario_to_json(*s)["training"].contains("grad_reduce_in_fp32"));
  j["training"]["grad_reduce_in_fp32"] = false;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(grad_reduce_in_fp32(s->training));
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  ASSERT_TRUE(again->training.grad_reduce_in_fp32.has_value());
  EXPECT_FALSE(*again->training.grad_reduce_in_fp32);
}

// The cross entropy's fusion: absent it is fused; stated it is kept and written back; only
// Megatron has the choice.
TEST(ScenarioIo, CrossEntropyLossFusionIsMegatronsChoiceAndSurvivesTheRoundTrip) {
  json j = base_scenario();
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.cross_entropy_loss_fusion.has_value());
  EXPECT_FALSE(scenario_to_json(*s)["training"].contains("cross_entropy_loss_fusion"));
  j["training"]["cross_entropy_loss_fusion"] = false;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  ASSERT_TRUE(again->training.cross_entropy_loss_fusion.has_value());
  EXPECT_FALSE(*again->training.cross_entropy_loss_fusion);
  j["training"]["framework"] = "deepspeed";
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/training/cross_entropy_loss_fusion"), std::string::npos) << all_messages(s.problems());
  j["training"]["framework"] = "megatron";
  j["training"]["cross_entropy_loss_fusion"] = "no";
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/training/cross_entropy_loss_fusion"), std::string::npos);
}

// The fp8 recipe: absent it is the framework's default (Megatron-Core's delayed scaling,
// torchtitan's per-tensor scaling) and not written; stated it survives the round trip.
TEST(ScenarioIo, Fp8RecipeDefaultsToTheFrameworksAndSurvivesTheRoundTrip) {
  json j = base_scenario();
  j["cluster"]["gpu"] = "B200";
  j["training"]["precision"] = "fp8";
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.fp8_recipe.has_value());
  EXPECT_EQ(fp8_recipe(s->training), Fp8Recipe::kDelayed);
  EXPECT_FALSE(scenario_to_json(*s)["training"].contains("fp8_recipe"));
  s->training.framework = Framework::kTorchtitan;
  EXPECT_EQ(fp8_recipe(s->training), Fp8Recipe::kTensorwise);
  for (const char* name : {"delayed", "tensorwise", "mxfp8", "blockwise"}) {
    j["training"]["fp8_recipe"] = name;
    s = scenario_from_json(j);
    ASSERT_TRUE(s.ok()) << name << ": " << all_messages(s.problems());
    auto again = scenario_from_json(scenario_to_json(*s));
    ASSERT_TRUE(again.ok()) << all_messages(again.problems());
    ASSERT_TRUE(again->training.fp8_recipe.has_value());
    EXPECT_STREQ(to_string(*again->training.fp8_recipe), name);
  }
}

// EP communication overlap and the router's forced load balancing on an MoE model: absent they
// are searched / off and not written; given, they survive the round trip.
TEST(ScenarioIo, EpOverlapAndForcedLoadBalancingSurviveTheRoundTrip) {
  json j = base_scenario();
  j["model"]["num_experts"] = 8;
  j["model"]["moe_top_k"] = 2;
  j["model"]["moe_dropless"] = true;
  j["parallelism"]["ep"] = 8;
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->parallelism.ep_comm_overlap.has_value());
  EXPECT_FALSE(s->model.moe_router_force_load_balancing);
  EXPECT_FALSE(scenario_to_json(*s)["parallelism"].contains("ep_comm_overlap"));
  EXPECT_FALSE(scenario_to_json(*s)["model"].contains("moe_router_force_load_balancing"));
  j["parallelism"]["ep_comm_overlap"] = true;
  j["model"]["moe_router_force_load_balancing"] = true;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  ASSERT_TRUE(again->parallelism.ep_comm_overlap.has_value());
  EXPECT_TRUE(*again->parallelism.ep_comm_overlap);
  EXPECT_TRUE(again->model.moe_router_force_load_balancing);
}

// A power cap: a preset brings its TDP, a custom GPU states it; both survive the round trip.
TEST(ScenarioIo, PowerLimitTakesThePresetsTdpAndSurvivesTheRoundTrip) {
  json j = base_scenario();
  j["cluster"]["gpu"] = json::parse(R"({"name": "A100-80GB", "power_limit_W": 300})");
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_DOUBLE_EQ(s->cluster.gpu.tdp_W, 400);
  EXPECT_DOUBLE_EQ(s->cluster.gpu.power_limit_W, 300);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_DOUBLE_EQ(again->cluster.gpu.power_limit_W, 300);
  j["cluster"]["gpu"] = json::parse(R"({"name": "X1", "peak_tflops": {"bf16": 100}, "memory_gib": 40,
                                        "memory_bandwidth_GBps": 1000, "tdp_W": 450, "power_limit_W": 300})");
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_DOUBLE_EQ(again->cluster.gpu.tdp_W, 450);
  EXPECT_DOUBLE_EQ(again->cluster.gpu.power_limit_W, 300);
  s = scenario_from_json(base_scenario());  // a preset by name: its TDP, no cap
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->cluster.gpu.tdp_W, 400);
  EXPECT_DOUBLE_EQ(s->cluster.gpu.power_limit_W, 0);
}

// A cap must leave the board power above its static draw (the part that does not scale with the
// clock, 12.6% of the TDP) and may not exceed the TDP; either error names the key.
TEST(ScenarioIo, PowerLimitOutsideTheBoardsRangeIsRefusedAtItsKey) {
  for (const char* limit : {"50", "401"}) {
    json j = base_scenario();
    j["cluster"]["gpu"] = json::parse(std::string(R"({"name": "A100-80GB", "power_limit_W": )") + limit + "}");
    auto s = scenario_from_json(j);
    ASSERT_FALSE(s.ok()) << limit;
    EXPECT_EQ(s.problems()[0].where, "/cluster/gpu/power_limit_W") << limit;
  }
  json j = base_scenario();
  j["cluster"]["gpu"] = json::parse(R"({"name": "A100-80GB", "power_limit_W": 50})");
  EXPECT_NE(all_messages(scenario_from_json(j).problems()).find("static draw of 50.3 W"), std::string::npos)
      << all_messages(scenario_from_json(j).problems());
}

TEST(ScenarioIo, LaunchBlockingIsReadAndSurvivesTheRoundTrip) {
  json j = base_scenario();
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.cuda_launch_blocking);
  EXPECT_FALSE(scenario_to_json(*s)["training"].contains("cuda_launch_blocking"));
  j["training"]["cuda_launch_blocking"] = true;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_TRUE(s->training.cuda_launch_blocking);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_TRUE(again->training.cuda_launch_blocking);
  j["training"]["cuda_launch_blocking"] = 1;
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems().front().where, "/training/cuda_launch_blocking");
}

TEST(ScenarioIo, CudaGraphsAreMegatronsAndSurviveTheRoundTrip) {
  auto s = scenario_from_json(base_scenario());
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->training.cuda_graphs);
  json j = base_scenario();
  j["training"]["cuda_graphs"] = true;
  j["model"]["attention_dropout"] = 0;  // graphed attention is recomputed (selective) without dropout
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_TRUE(s->training.cuda_graphs);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_TRUE(again->training.cuda_graphs);
  j["training"]["cuda_graphs"] = "yes";
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/training/cuda_graphs"), std::string::npos);
  // Megatron-DeepSpeed and torchtitan train eagerly: the key names the framework it conflicts with.
  j["training"]["cuda_graphs"] = true;
  j["training"]["framework"] = "torchtitan";
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/training/cuda_graphs"), std::string::npos) << all_messages(s.problems());
  EXPECT_NE(all_messages(s.problems()).find("\"torchtitan\""), std::string::npos) << all_messages(s.problems());
}

TEST(ScenarioIo, Format11ModelKeysAndTheirDefaults) {
  auto s = scenario_from_json(base_scenario());
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->model.activation.has_value());
  EXPECT_EQ(s->model.activation_kind(), Activation::kGelu);  // gpt default
  EXPECT_FALSE(s->model.attention_kernel.has_value());
  EXPECT_EQ(s->training.framework, Framework::kMegatron);
  json j = base_scenario();
  j["version"] = 1.1;
  j["model"]["activation"] = "squared-relu";
  j["model"]["attention_kernel"] = "materialized";
  j["model"]["hidden_dropout"] = 0;
  j["training"]["framework"] = "deepspeed";
  j["parallelism"].erase("vpp");  // DeepSpeed's pipeline engine does not interleave
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.activation_kind(), Activation::kSquaredRelu);
  EXPECT_EQ(*s->model.attention_kernel, AttentionKernel::kMaterialized);
  EXPECT_EQ(s->training.framework, Framework::kDeepspeed);
  EXPECT_FALSE(model_shape(s->model).gated_mlp);  // squared ReLU: two FFN matrices
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(again->model.activation, s->model.activation);
  EXPECT_EQ(again->model.attention_kernel, s->model.attention_kernel);
  EXPECT_EQ(again->training.framework, Framework::kDeepspeed);
  j["model"]["attention_kernel"] = "flash1";  // the project's extension: FlashAttention-1 kernels
  auto first = scenario_from_json(j);
  ASSERT_TRUE(first.ok()) << all_messages(first.problems());
  EXPECT_EQ(first->model.attention_kernel, AttentionKernel::kFlash1);
  EXPECT_EQ(scenario_to_json(*first)["model"]["attention_kernel"], "flash1");
  j["model"]["attention_kernel"] = "flash1-triton";  // the project's extension: its Triton port
  auto triton = scenario_from_json(j);
  ASSERT_TRUE(triton.ok()) << all_messages(triton.problems());
  EXPECT_EQ(triton->model.attention_kernel, AttentionKernel::kFlash1Triton);
  EXPECT_EQ(scenario_to_json(*triton)["model"]["attention_kernel"], "flash1-triton");
  j["model"]["attention_kernel"] = "flash2";  // the project's extension: the flash-attn package
  auto package = scenario_from_json(j);
  ASSERT_TRUE(package.ok()) << all_messages(package.problems());
  EXPECT_EQ(package->model.attention_kernel, AttentionKernel::kFlash2);
  EXPECT_EQ(scenario_to_json(*package)["model"]["attention_kernel"], "flash2");
  // A gpt block with SwiGLU has the gate; a llama with GeLU has not.
  j["model"]["activation"] = "swiglu";
  EXPECT_TRUE(model_shape(scenario_from_json(j)->model).gated_mlp);
  ModelConfig llama = find_model_preset("llama3-8b")->config;
  EXPECT_EQ(llama.activation_kind(), Activation::kSwiglu);
  llama.activation = Activation::kGelu;
  EXPECT_FALSE(model_shape(llama).gated_mlp);
}

TEST(ScenarioIo, UnevenPipelineSplitsAreValid) {
  // Llama 3.1 405B's recipe: 126 layers on pp 8 x vpp 8 (no longer a multiple).
  json j = base_scenario();
  j["model"]["num_layers"] = 126;
  j["parallelism"]["vpp"] = 8;
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.vpp, 8);
  EXPECT_FALSE(s->parallelism.layers_per_stage.has_value());
  // Megatron's account-for flags are read.
  j["parallelism"]["account_for_embedding_in_pipeline_split"] = true;
  j["parallelism"]["account_for_loss_in_pipeline_split"] = true;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_TRUE(s->parallelism.account_for_embedding);
  EXPECT_TRUE(s->parallelism.account_for_loss);
  // An explicit split fixes pp (and vpp) from its length when they are absent.
  j = base_scenario();
  j["parallelism"].erase("pp");
  j["parallelism"].erase("vpp");
  j["parallelism"]["dp"] = 1;
  j["parallelism"]["layers_per_stage"] = {11, 12, 13, 12, 12, 13, 12, 11};
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.pp, 8);
  EXPECT_EQ(*s->parallelism.vpp, 1);
  EXPECT_EQ(*s->parallelism.layers_per_stage, (std::vector<int64_t>{11, 12, 13, 12, 12, 13, 12, 11}));
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(again->parallelism.layers_per_stage, s->parallelism.layers_per_stage);
  // With pp given, a list of pp x k entries means k model chunks per stage.
  j["parallelism"]["pp"] = 4;
  j["parallelism"]["dp"] = 2;
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.vpp, 2);
  EXPECT_EQ(*s->parallelism.schedule, Schedule::kInterleaved);
}

TEST(ScenarioIo, TheLastNodeMayBePartlyUsed) {
  // 128 GPUs on GB200 NVL72: one full 72-GPU NVLink domain and 56 GPUs of a second.
  json j = base_scenario();
  j["cluster"] = {{"gpu", "GB200"}, {"num_gpus", 128}, {"gpus_per_node", 72}};
  j["parallelism"] = {{"tp", 8}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->cluster.num_nodes(), 2);
}

TEST(ScenarioIo, HfConfigFillsTheActivationAndReadsNemotron) {
  TempDir dir;
  // nvidia/Nemotron-4-340B-style fields (transformers' NemotronConfig).
  dir.write("nemotron.json", R"({"model_type": "nemotron", "num_hidden_layers": 32, "hidden_size": 6144,
      "num_attention_heads": 48, "num_key_value_heads": 8, "intermediate_size": 24576, "vocab_size": 256000,
      "max_position_embeddings": 4096, "hidden_act": "relu2", "tie_word_embeddings": false})");
  json j = base_scenario();
  j["model"] = {{"hf_config", "nemotron.json"}};
  j["parallelism"] = {{"tp", 8}};
  auto s = read_scenario_file(dir.write("s.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.architecture, Architecture::kGpt);
  EXPECT_EQ(s->model.activation_kind(), Activation::kSquaredRelu);
  EXPECT_FALSE(s->model.tie_embeddings);
  EXPECT_EQ(s->model.num_kv_heads, 8);
  EXPECT_EQ(s->model.ffn_hidden_size, 24576);
  dir.write("llama.json", R"({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": true})");
  j["model"] = {{"hf_config", "llama.json"}, {"seq_length", 8192}};
  s = read_scenario_file(dir.write("s2.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.activation_kind(), Activation::kSwiglu);
  EXPECT_TRUE(s->model.tie_embeddings);
  dir.write("gpt2.json", R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
      "vocab_size": 50257, "n_positions": 1024, "activation_function": "gelu_new"})");
  j["model"] = {{"hf_config", "gpt2.json"}};
  j["parallelism"] = json::object();  // 12 heads: TP 8 would not divide them
  s = read_scenario_file(dir.write("s3.json", j.dump()));
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.activation_kind(), Activation::kGelu);
  // A gated activation the cost model does not carry is named.
  dir.write("geglu.json", R"({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
      "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "gelu"})");
  j["model"] = {{"hf_config", "geglu.json"}, {"seq_length", 8192}};
  s = read_scenario_file(dir.write("s4.json", j.dump()));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("/hidden_act"), std::string::npos) << all_messages(s.problems());
}

TEST(ScenarioIo, OverridesApplyWithTheSameValidation) {
  auto s = scenario_from_json(base_scenario(), ".", {"parallelism.tp=4", "parallelism.dp=2", "training.precision=fp16"});
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.tp, 4);
  EXPECT_EQ(s->training.precision, Precision::kFp16);
  // The override replaces the alias the file used.
  json j = base_scenario();
  j["parallelism"].erase("tp");
  j["parallelism"]["tensor_parallel_degree"] = 8;
  s = scenario_from_json(j, ".", {"parallelism.tp=4", "/parallelism/dp=2"});
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(*s->parallelism.tp, 4);
  // A bad override is named.
  s = scenario_from_json(base_scenario(), ".", {"parallelism.tp=3"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("--set parallelism.tp=3"), std::string::npos) << all_messages(s.problems());
  s = scenario_from_json(base_scenario(), ".", {"parallelism.tp"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems()[0].where, "--set parallelism.tp");
  // A GPU named by its preset takes keys as the object {"name": preset} does.
  s = scenario_from_json(base_scenario(), ".", {"cluster.gpu.power_limit_W=300"});
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->cluster.gpu.name, "A100-80GB");
  EXPECT_DOUBLE_EQ(s->cluster.gpu.power_limit_W, 300);
  s = scenario_from_json(base_scenario(), ".", {"name.first=x"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].message.find("/name is a string"), std::string::npos);
  s = scenario_from_json(base_scenario(), ".", {"cluster.num_gpus=-1e400"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].message.find("overflow"), std::string::npos);
  s = scenario_from_json(base_scenario(), ".", {"name=\xff\xfe"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.problems()[0].message.find("UTF-8"), std::string::npos);
  s = scenario_from_json(base_scenario(), ".", {"model.hidden_sise=5"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(all_messages(s.problems()).find("did you mean \"hidden_size\""), std::string::npos);
}

TEST(ScenarioIo, WhatIfAndMoeKeysAreRead) {
  json j = base_scenario();
  j["whatif"] = json::parse(R"({"stragglers": [{"gpu": 5, "slowdown": 1.5}, {"node": 2, "slowdown": 3}],
                               "degraded_links": [{"node": 7, "bandwidth_factor": 0.25}]})");
  j["model"]["num_experts"] = 8;
  j["model"]["moe_top_k"] = 2;
  j["training"]["moe_capacity_factor"] = 1.25;
  j["parallelism"]["ep"] = 4;
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  ASSERT_EQ(s->whatif.stragglers.size(), 2u);
  EXPECT_EQ(s->whatif.stragglers[0].gpu, 5);
  EXPECT_EQ(s->whatif.stragglers[1].node, 2);
  EXPECT_DOUBLE_EQ(s->whatif.stragglers[1].slowdown, 3);
  EXPECT_DOUBLE_EQ(s->whatif.degraded_links[0].bandwidth_factor, 0.25);
  EXPECT_TRUE(s->model.is_moe());
  EXPECT_EQ(s->model.moe_ffn_hidden_size, s->model.ffn_hidden_size);
  EXPECT_DOUBLE_EQ(s->model.moe_capacity_factor, 1.25);
}

TEST(ScenarioIo, ExpertTensorParallelDegreeUnderEachName) {
  json j = base_scenario();
  j["model"]["num_experts"] = 8;
  j["model"]["moe_top_k"] = 2;
  j["parallelism"]["ep"] = 2;
  for (const char* key : {"expert_tensor_parallel_degree", "etp", "expert_tensor_parallel_size"}) {
    json k = j;
    k["parallelism"][key] = 4;  // stage of 8 ranks (tp 8): etp 4 x ep 2 tiles it
    auto s = scenario_from_json(k);
    ASSERT_TRUE(s.ok()) << key << ": " << all_messages(s.problems());
    ASSERT_TRUE(s->parallelism.etp.has_value()) << key;
    EXPECT_EQ(*s->parallelism.etp, 4) << key;
    // Written under the canonical name, and read back the same.
    const json out = scenario_to_json(*s);
    EXPECT_EQ(out["parallelism"]["expert_tensor_parallel_degree"], 4) << key;
    auto again = scenario_from_json(out);
    ASSERT_TRUE(again.ok()) << all_messages(again.problems());
    EXPECT_EQ(again->parallelism.etp, s->parallelism.etp);
  }
  // Absent: searched, and not written.
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_FALSE(s->parallelism.etp.has_value());
  EXPECT_FALSE(scenario_to_json(*s)["parallelism"].contains("expert_tensor_parallel_degree"));
}

TEST(ScenarioIo, DlrmModelsAreRead) {
  json j = base_scenario();
  j["model"] = json::parse(R"({"architecture": "dlrm", "dense_features": 13,
      "embedding_tables": [{"name": "t0", "rows": 1000000, "dim": 128, "pooling_factor": 20},
                           {"rows": 5000, "dim": 128}],
      "bottom_mlp": [512, 256, 128], "top_mlp": [1024, 1024, 512, 256, 1]})");
  j["parallelism"] = json::object();
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.dlrm.tables.size(), 2u);
  EXPECT_EQ(s->model.dlrm.tables[1].name, "table1");
  EXPECT_EQ(s->model.dlrm.bottom_mlp.back(), 128);
  j["model"]["bottom_mlp"] = {512, 64};
  s = scenario_from_json(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.problems()[0].where, "/model/bottom_mlp/1");
  // Round trip.
  j["model"]["bottom_mlp"] = {512, 128};
  s = scenario_from_json(j);
  ASSERT_TRUE(s.ok());
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(scenario_to_json(*again), scenario_to_json(*s));
}

TEST(ScenarioIo, NormalizedJsonRoundTrips) {
  json j = base_scenario();
  j["backends"] = {"analytical", "simgrid"};
  j["whatif"] = json::parse(R"({"stragglers": [{"gpu": 5, "slowdown": 1.5}]})");
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  json n = scenario_to_json(*s);
  EXPECT_EQ(n["parallelism"]["tensor_parallel_degree"], 8);  // canonical names
  EXPECT_FALSE(n["parallelism"].contains("tp"));
  EXPECT_EQ(n["model"]["ffn_hidden_size"], 49152);           // defaults filled
  EXPECT_EQ(n["cluster"]["gpu"]["peak_tflops"]["bf16"], 312.0);
  auto again = scenario_from_json(n);
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(scenario_to_json(*again), n);
}

// model.dlrm.embedding_dtype: read, written back, absent by default (the training precision),
// and a value that is not a precision is refused at its path.
TEST(ScenarioIo, DlrmEmbeddingDtypeReadsAndRoundTrips) {
  std::ifstream in(std::string(MONARCH_SOURCE_DIR) + "/scenarios/dlrm-dcnv2-8-h100.json");
  ASSERT_TRUE(in);
  json j = json::parse(in);
  auto plain = scenario_from_json(j);
  ASSERT_TRUE(plain.ok()) << all_messages(plain.problems());
  EXPECT_FALSE(plain->model.dlrm.embedding_dtype.has_value());
  EXPECT_FALSE(scenario_to_json(*plain)["model"].contains("embedding_dtype"));
  j["model"]["embedding_dtype"] = "fp32";
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->model.dlrm.embedding_dtype, Precision::kFp32);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(again->model.dlrm.embedding_dtype, Precision::kFp32);
  j["model"]["embedding_dtype"] = "int8";
  auto bad = scenario_from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.problems().front().where, "/model/embedding_dtype") << all_messages(bad.problems());
}

// parallelism.activation_offload_layers offloads transformer layers: on a dlrm model it is
// refused at its path, and 0 (off) is accepted there.
TEST(ScenarioIo, ActivationOffloadOnADlrmModelIsRefused) {
  std::ifstream in(std::string(MONARCH_SOURCE_DIR) + "/scenarios/dlrm-dcnv2-8-h100.json");
  ASSERT_TRUE(in);
  json j = json::parse(in);
  j["parallelism"]["activation_offload_layers"] = 4;
  auto bad = scenario_from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.problems().front().where, "/parallelism/activation_offload_layers") << all_messages(bad.problems());
  EXPECT_NE(bad.problems().front().message.find("no transformer layers"), std::string::npos);
  j["parallelism"]["activation_offload_layers"] = 0;
  EXPECT_TRUE(scenario_from_json(j).ok());
}

// parallelism.embedding_sharding: a dlrm model's given sharding, read and written back; a word
// that is not a placement, a plan for the wrong number of tables, a rank off the cluster and the
// key on a transformer are refused at its path.
TEST(ScenarioIo, EmbeddingShardingIsReadCheckedAndRoundTrips) {
  json j = base_scenario();
  j["model"] = json::parse(R"({"architecture": "dlrm", "dense_features": 13,
      "embedding_tables": [{"name": "big", "rows": 1000000, "dim": 128}, {"name": "small", "rows": 5000, "dim": 128}],
      "bottom_mlp": [512, 256, 128], "top_mlp": [1024, 1024, 512, 256, 1]})");
  j["parallelism"] = {{"embedding_sharding", "t0:cw2@0,1 t1:dp"}};
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  EXPECT_EQ(s->parallelism.embedding_sharding, "t0:cw2@0,1 t1:dp");
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(again->parallelism.embedding_sharding, s->parallelism.embedding_sharding);
  const std::pair<const char*, const char*> bad[] = {
      {"t0:tw@1 t1:zz", "\"t1:zz\""},
      {"t0:tw@1", "the plan places 1 tables, the model has 2"},
      {"t0:tw@64 t1:dp", "table big: rank 64 outside 0..63"},
  };
  for (const auto& [plan, words] : bad) {
    j["parallelism"]["embedding_sharding"] = plan;
    auto r = scenario_from_json(j);
    ASSERT_FALSE(r.ok()) << plan;
    EXPECT_EQ(r.problems().front().where, "/parallelism/embedding_sharding");
    EXPECT_NE(r.problems().front().message.find(words), std::string::npos) << r.problems().front().message;
  }
  json t = base_scenario();
  t["parallelism"]["embedding_sharding"] = "t0:dp";
  auto r = scenario_from_json(t);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems().front().where, "/parallelism/embedding_sharding");
  EXPECT_NE(r.problems().front().message.find("only for architecture dlrm"), std::string::npos);
}

TEST(ScenarioIo, DefaultBackendsIncludeSimgridOnlyWhenBuilt) {
  EXPECT_EQ(default_backends(false), std::vector<Backend>{Backend::kAnalytical});
  EXPECT_EQ(default_backends(true), (std::vector<Backend>{Backend::kAnalytical, Backend::kSimgrid}));
  Backend b;
  EXPECT_TRUE(parse_backend("real-cpu", &b));
  EXPECT_EQ(b, Backend::kRealCpu);
  EXPECT_FALSE(parse_backend("ns3", &b));
}

TEST(ScenarioIo, EveryCalibrationScenarioLoads) {
  std::ifstream in(std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json");
  ASSERT_TRUE(in) << "tests/data/validation/calibration.json";
  json cases = json::parse(in);
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    auto s = scenario_from_json(c["scenario"]);
    EXPECT_TRUE(s.ok()) << c["id"] << ":\n" << (s.ok() ? "" : all_messages(s.problems()));
  }
}

TEST(ScenarioIo, ReliabilityBlockReadsWithDefaultsAndRoundTrips) {
  json j = base_scenario();
  j["training"]["total_tokens"] = 3e11;
  j["search"] = {{"objective", "time_to_train"}};
  j["reliability"] = json::parse(R"({
    "preset": "llama3-405b",
    "failure_rates": [{"name": "psu", "component": "host", "mtbf_hours": 100000, "per": "node"}],
    "checkpoint": {"interval_s": 600, "async": true},
    "storage": {"write_GBps": 100, "read_GBps": 200, "node_write_GBps": 5},
    "reschedule_s": 300, "startup_s": 120, "recovery": "replica",
    "spares": {"nodes": 16, "repair_s": 172800},
    "inject_failure": {"component": "link", "node": 0, "at_s": 2.5}})");
  auto s = scenario_from_json(j);
  ASSERT_TRUE(s.ok()) << all_messages(s.problems());
  ASSERT_TRUE(s->reliability.has_value());
  const ReliabilityConfig& r = *s->reliability;
  EXPECT_EQ(s->search.objective, Objective::kTimeToTrain);
  EXPECT_DOUBLE_EQ(s->training.total_tokens, 3e11);
  EXPECT_EQ(r.preset, "llama3-405b");
  ASSERT_EQ(r.causes.size(), 19u);  // Table 5's 18 and the power supplies
  // 100,000 h per 8-GPU node: 125 nodes per 1k GPUs, 24 / 100,000 interruptions a day each.
  EXPECT_NEAR(r.causes.back().per_day_per_1k_gpus, 125 * 24 / 1e5, 1e-12);
  EXPECT_EQ(r.checkpoint_interval_s, 600);
  EXPECT_TRUE(r.async_checkpoint);
  EXPECT_DOUBLE_EQ(r.node_write_GBps, 5);
  EXPECT_DOUBLE_EQ(r.detection_s, kDefaultDetection_s);
  EXPECT_NEAR(r.host_copy_GBps, 31.5 * 256 / 280, 1e-9);  // A100: PCIe 4.0 x16, TLP payload share
  EXPECT_EQ(r.recovery, RecoveryMode::kReplica);
  EXPECT_EQ(r.trials, kDefaultMonteCarloTrials);
  EXPECT_EQ(r.spare_nodes, 16);
  EXPECT_DOUBLE_EQ(r.repair_s, 172800);
  ASSERT_TRUE(r.inject_failure.has_value());
  EXPECT_EQ(r.inject_failure->component, "link");
  EXPECT_EQ(r.inject_failure->node, 0);
  EXPECT_DOUBLE_EQ(r.inject_failure->at_s, 2.5);
  auto again = scenario_from_json(scenario_to_json(*s));
  ASSERT_TRUE(again.ok()) << all_messages(again.problems());
  EXPECT_EQ(scenario_to_json(*again), scenario_to_json(*s));
  EXPECT_EQ(again->reliability->causes.size(), r.causes.size());
}

}  // namespace
}  // namespace monarch
