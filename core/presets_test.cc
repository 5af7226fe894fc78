#include "core/presets.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

TEST(GpuPresets, AllRequiredGpusArePresentWithDensePeaks) {
  for (const char* name : {"A100-40GB", "A100-80GB", "A800-80GB", "H100-SXM", "H800-SXM", "H200-SXM", "B200", "GB200"}) {
    const GpuPreset* p = find_gpu_preset(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_GT(p->spec.peak_tflops.bf16, 0) << name;
    EXPECT_GT(p->spec.peak_tflops.fp32, 0) << name;
    EXPECT_GT(p->spec.memory_gib, 0) << name;
    EXPECT_GT(p->spec.memory_bandwidth_GBps, 0) << name;
    EXPECT_GT(p->default_intra_node.bandwidth_GBps, p->default_inter_node.bandwidth_GBps) << name;
    EXPECT_STRNE(p->source, "") << name;
  }
}

TEST(GpuPresets, FiguresMatchTheDatasheets) {
  const GpuPreset* a100 = find_gpu_preset("A100-80GB");
  EXPECT_DOUBLE_EQ(a100->spec.peak_tflops.bf16, 312);
  EXPECT_DOUBLE_EQ(a100->spec.peak_tflops.fp8, 0);  // no FP8 tensor cores on Ampere
  EXPECT_DOUBLE_EQ(a100->spec.memory_bandwidth_GBps, 2039);
  EXPECT_DOUBLE_EQ(a100->default_intra_node.bandwidth_GBps, 300);
  const GpuPreset* h100 = find_gpu_preset("H100-SXM");
  EXPECT_DOUBLE_EQ(h100->spec.peak_tflops.bf16, 989.5);  // 1979 with sparsity
  EXPECT_DOUBLE_EQ(h100->spec.peak_tflops.fp8, 1979);
  EXPECT_DOUBLE_EQ(h100->spec.memory_gib, 80);
  const GpuPreset* h200 = find_gpu_preset("H200-SXM");
  EXPECT_DOUBLE_EQ(h200->spec.peak_tflops.bf16, h100->spec.peak_tflops.bf16);  // same die
  EXPECT_GT(h200->spec.memory_gib, h100->spec.memory_gib);
  EXPECT_EQ(find_gpu_preset("GB200")->default_gpus_per_node, 72);  // NVL72 domain
  // The export variants: the same compute and memory, NVLink at 400 GB/s both ways.
  const GpuPreset* a800 = find_gpu_preset("A800-80GB");
  const GpuPreset* h800 = find_gpu_preset("H800-SXM");
  ASSERT_NE(a800, nullptr);
  ASSERT_NE(h800, nullptr);
  EXPECT_DOUBLE_EQ(a800->spec.peak_tflops.bf16, a100->spec.peak_tflops.bf16);
  EXPECT_DOUBLE_EQ(a800->spec.memory_bandwidth_GBps, a100->spec.memory_bandwidth_GBps);
  EXPECT_DOUBLE_EQ(h800->spec.peak_tflops.fp8, h100->spec.peak_tflops.fp8);
  EXPECT_DOUBLE_EQ(a800->default_intra_node.bandwidth_GBps, 200);
  EXPECT_DOUBLE_EQ(h800->default_intra_node.bandwidth_GBps, 200);
}

TEST(GpuPresets, NamesMatchCaseInsensitively) {
  EXPECT_NE(find_gpu_preset("h100-sxm"), nullptr);
  EXPECT_EQ(find_gpu_preset("H100"), nullptr);
  EXPECT_EQ(closest_name("H100-SMX", gpu_preset_names()), "H100-SXM");
}

TEST(ModelPresets, Gpt3SizesFollowBrownEtAlTable21) {
  const ModelPreset* g = find_model_preset("gpt3-175b");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->config.num_layers, 96);
  EXPECT_EQ(g->config.hidden_size, 12288);
  EXPECT_EQ(g->config.num_attention_heads, 96);
  EXPECT_EQ(g->config.ffn_hidden_size, 4 * 12288);
  EXPECT_EQ(g->config.seq_length, 2048);
  EXPECT_TRUE(g->config.tie_embeddings);
  EXPECT_EQ(find_model_preset("gpt3-125m")->config.hidden_size, 768);
  EXPECT_EQ(find_model_preset("gpt3-13b")->config.hidden_size, 5120);
  EXPECT_EQ(find_model_preset("GPT3-1.3B")->config.num_attention_heads, 16);
}

TEST(ModelPresets, LlamaConfigsMatchTheReleasedConfigs) {
  const ModelConfig& l8 = find_model_preset("llama3-8b")->config;
  EXPECT_EQ(l8.architecture, Architecture::kLlama);
  EXPECT_EQ(l8.num_kv_heads, 8);
  EXPECT_EQ(l8.ffn_hidden_size, 14336);
  EXPECT_EQ(l8.vocab_size, 128256);
  EXPECT_FALSE(l8.tie_embeddings);
  const ModelConfig& l405 = find_model_preset("llama3.1-405b")->config;
  EXPECT_EQ(l405.num_layers, 126);
  EXPECT_EQ(l405.hidden_size, 16384);
  EXPECT_EQ(l405.ffn_hidden_size, 53248);
  EXPECT_EQ(find_model_preset("llama2-70b")->config.num_kv_heads, 8);
  EXPECT_EQ(find_model_preset("llama2-7b")->config.ffn_hidden_size, 11008);
  EXPECT_EQ(find_model_preset("llama2-7b")->config.vocab_size, 32000);
  for (const auto& p : model_presets()) {
    EXPECT_EQ(p.config.preset, p.name);
    EXPECT_EQ(p.config.hidden_size % p.config.num_attention_heads, 0) << p.name;
  }
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  EXPECT_EQ(edit_distance("TP", "tp"), 0);
  EXPECT_EQ(edit_distance("modle", "model"), 1);  // a transposition
  EXPECT_EQ(closest_name("hiden_size", {"hidden_size", "num_layers"}), "hidden_size");
  EXPECT_EQ(closest_name("banana", {"hidden_size", "num_layers"}), "");
}

}  // namespace
}  // namespace monarch
