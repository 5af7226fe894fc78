#include "core/presets.h"

#include <algorithm>
#include <cctype>

namespace monarch {
namespace {

// ---------------------------------------------------------------------------------------------
// Cluster link defaults (used only when a scenario leaves intra_node / inter_node out).
//
// NVLink: NVIDIA quotes total bidirectional NVLink bandwidth per GPU; per direction is half.
//   A100 (NVLink 3, 12 links):        600 GB/s total  -> 300 GB/s per direction
//   H100/H200 (NVLink 4, 18 links):   900 GB/s total  -> 450 GB/s per direction
//   B200/GB200 (NVLink 5, 18 links): 1800 GB/s total  -> 900 GB/s per direction
//   Sources: A100 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
//   nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), H100 datasheet (nvidia.com/en-us/
//   data-center/h100/), H200 page (nvidia.com/en-us/data-center/h200/), HGX B200 / GB200 NVL72
//   pages (nvidia.com/en-us/data-center/hgx/, nvidia.com/en-us/data-center/gb200-nvl72/).
inline constexpr double kNvlink3PerDirection_GBps = 300;
// A800 / H800 (the export variants of A100 / H100): NVLink capped at 400 GB/s in both
// directions together (NVIDIA A800 and H800 product pages).
inline constexpr double kNvlinkExportPerDirection_GBps = 200;
inline constexpr double kNvlink4PerDirection_GBps = 450;
inline constexpr double kNvlink5PerDirection_GBps = 900;
// Network: one NIC per GPU in DGX systems.
//   DGX A100: 8x ConnectX-6 HDR InfiniBand 200 Gb/s -> 25 GB/s per direction (DGX A100 user guide).
//   DGX H100/H200, DGX B200, GB200 NVL72 compute trays: ConnectX-7 NDR 400 Gb/s per GPU
//   -> 50 GB/s per direction (DGX H100 / DGX B200 user guides, GB200 NVL72 reference design).
inline constexpr double kHdr200PerDirection_GBps = 25;
inline constexpr double kNdr400PerDirection_GBps = 50;
// Latencies: one-way small-message figures of the order NCCL's own tuning model uses
// (NVIDIA/nccl src/graph/tuning.cc hwLat: NVLink hops 0.5-3.4 us, network hops ~5 us with the
// LL protocol); the same values as the example in docs/spec/scenario.md.
inline constexpr double kNvlinkLatency_us = 2;
inline constexpr double kNetworkLatency_us = 5;
// GPUs sharing one NVLink domain: 8 in HGX/DGX boards, 72 in a GB200 NVL72 rack.
inline constexpr int64_t kHgxGpusPerNode = 8;
inline constexpr int64_t kNvl72GpusPerDomain = 72;

GpuPreset make_gpu(const char* name, PeakTflops peak, double memory_gib, double hbm_GBps, double tdp_W,
                   double nvlink_GBps, double nic_GBps, int64_t gpus_per_node,
                   const char* source) {
  GpuPreset p;
  p.spec.name = name;
  p.spec.peak_tflops = peak;
  p.spec.tdp_W = tdp_W;
  p.spec.memory_gib = memory_gib;
  p.spec.memory_bandwidth_GBps = hbm_GBps;
  p.default_gpus_per_node = gpus_per_node;
  p.default_intra_node = LinkSpec{nvlink_GBps, kNvlinkLatency_us};
  p.default_inter_node = LinkSpec{nic_GBps, kNetworkLatency_us};
  p.default_nics_per_node = gpus_per_node;  // one NIC per GPU
  p.source = source;
  return p;
}

std::vector<GpuPreset> build_gpu_presets() {
  std::vector<GpuPreset> v;
  // All peaks are DENSE (NVIDIA's datasheets print tensor-core figures "with sparsity"; the
  // dense figure is half of those). Memory: the datasheet's "GB" figure, which for HBM is the
  // binary size of the stacks (e.g. H100: 5 stacks x 16 GiB), so it is stored as GiB.
  //
  // A100 SXM4 40GB — NVIDIA A100 Tensor Core GPU datasheet (2021, r4): FP32 19.5 TFLOPS,
  // TF32 156 (312 sparse), BF16 312 (624 sparse), FP16 312 (624 sparse), no FP8;
  // 40 GB HBM2, 1,555 GB/s; NVLink 600 GB/s; max TDP 400 W.
  v.push_back(make_gpu("A100-40GB", PeakTflops{19.5, 156, 312, 312, 0}, 40, 1555, 400,
                       kNvlink3PerDirection_GBps, kHdr200PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA A100 datasheet (SXM4 40GB)"));
  // A100 SXM4 80GB — same datasheet: same compute, 80 GB HBM2e, 2,039 GB/s; NVLink 600 GB/s;
  // max TDP 400 W.
  v.push_back(make_gpu("A100-80GB", PeakTflops{19.5, 156, 312, 312, 0}, 80, 2039, 400,
                       kNvlink3PerDirection_GBps, kHdr200PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA A100 datasheet (SXM4 80GB)"));
  // A800 SXM4 80GB — NVIDIA A800 product page: the A100 80GB's compute, memory and 2,039 GB/s,
  // NVLink 400 GB/s; 400 W.
  v.push_back(make_gpu("A800-80GB", PeakTflops{19.5, 156, 312, 312, 0}, 80, 2039, 400,
                       kNvlinkExportPerDirection_GBps, kHdr200PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA A800 product page (SXM4 80GB)"));
  // H100 SXM5 — NVIDIA H100 Tensor Core GPU datasheet: FP32 67 TFLOPS, TF32 989 sparse
  // (494.5 dense), BF16/FP16 1,979 sparse (989.5 dense), FP8 3,958 sparse (1,979 dense);
  // 80 GB HBM3, 3.35 TB/s; NVLink 900 GB/s; max TDP up to 700 W (configurable).
  v.push_back(make_gpu("H100-SXM", PeakTflops{67, 494.5, 989.5, 989.5, 1979}, 80, 3350, 700,
                       kNvlink4PerDirection_GBps, kNdr400PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA H100 datasheet (SXM5)"));
  // H800 SXM5 — NVIDIA H800 product page: the H100 SXM's tensor cores (BF16/FP16 1,979
  // sparse, FP8 3,958 sparse), 80 GB HBM3 at 3.35 TB/s, NVLink 400 GB/s; up to 700 W.
  v.push_back(make_gpu("H800-SXM", PeakTflops{67, 494.5, 989.5, 989.5, 1979}, 80, 3350, 700,
                       kNvlinkExportPerDirection_GBps, kNdr400PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA H800 product page (SXM5)"));
  // H200 SXM — NVIDIA H200 Tensor Core GPU datasheet: same tensor cores as H100 SXM (FP32 67,
  // TF32 989 sparse, BF16/FP16 1,979 sparse, FP8 3,958 sparse); 141 GB HBM3e, 4.8 TB/s;
  // NVLink 900 GB/s; max TDP up to 700 W (configurable).
  v.push_back(make_gpu("H200-SXM", PeakTflops{67, 494.5, 989.5, 989.5, 1979}, 141, 4800, 700,
                       kNvlink4PerDirection_GBps, kNdr400PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA H200 datasheet (SXM)"));
  // B200 — NVIDIA HGX B200 datasheet (8 GPUs, sparse tensor figures): FP8 72 PFLOPS,
  // FP16/BF16 36 PFLOPS, TF32 18 PFLOPS, FP32 600 TFLOPS, 1.44 TB HBM3e, 64 TB/s; per GPU
  // dense: FP8 4,500, BF16/FP16 2,250, TF32 1,125, FP32 75 TFLOPS; 180 GB, 8 TB/s;
  // NVLink 5 1.8 TB/s; up to 1,000 W per GPU (DGX B200 user guide: 14.3 kW system, 8 x 1,000 W
  // GPUs).
  v.push_back(make_gpu("B200", PeakTflops{75, 1125, 2250, 2250, 4500}, 180, 8000, 1000,
                       kNvlink5PerDirection_GBps, kNdr400PerDirection_GBps, kHgxGpusPerNode,
                       "NVIDIA HGX B200 datasheet (per GPU = system / 8, dense = sparse / 2)"));
  // GB200 (Blackwell GPU of a GB200 NVL72) — NVIDIA GB200 NVL72 datasheet (72 GPUs, sparse
  // tensor figures): FP8 720 PFLOPS, FP16/BF16 360 PFLOPS, TF32 180 PFLOPS, FP32 5,760 TFLOPS,
  // up to 13.4 TB HBM3e at 576 TB/s; per GPU dense: FP8 5,000, BF16/FP16 2,500, TF32 1,250,
  // FP32 80 TFLOPS; 186 GB, 8 TB/s; NVLink 5 1.8 TB/s inside the 72-GPU NVLink domain; the
  // Blackwell GPU of GB200 runs at up to 1,200 W (NVL72 reference design).
  v.push_back(make_gpu("GB200", PeakTflops{80, 1250, 2500, 2500, 5000}, 186, 8000, 1200,
                       kNvlink5PerDirection_GBps, kNdr400PerDirection_GBps, kNvl72GpusPerDomain,
                       "NVIDIA GB200 NVL72 datasheet (per GPU = rack / 72, dense = sparse / 2)"));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Models.
ModelConfig gpt(int64_t layers, int64_t hidden, int64_t heads) {
  // Brown et al. 2020, "Language Models are Few-Shot Learners" (arXiv:2005.14165), Table 2.1:
  // n_layers, d_model, n_heads; d_ff = 4 d_model; context n_ctx = 2048 for every size;
  // GPT-2 byte-level BPE vocabulary of 50,257 tokens (Radford et al. 2019); tied embeddings.
  ModelConfig m;
  m.architecture = Architecture::kGpt;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = heads;
  m.ffn_hidden_size = 4 * hidden;
  m.vocab_size = 50257;
  m.seq_length = 2048;
  m.tie_embeddings = true;
  return m;
}

ModelConfig llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t ffn,
                  int64_t vocab, int64_t seq) {
  ModelConfig m;
  m.architecture = Architecture::kLlama;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv_heads;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.tie_embeddings = false;
  return m;
}

std::vector<ModelPreset> build_model_presets() {
  const char* gpt3 = "Brown et al. 2020 (arXiv:2005.14165) Table 2.1";
  const char* llama2 = "Touvron et al. 2023 Llama 2 (arXiv:2307.09288) + meta-llama/Llama-2-*-hf config.json";
  const char* llama3 = "Llama 3 Herd of Models (arXiv:2407.21783) Table 3 + meta-llama/Llama-3.1-* config.json";
  std::vector<ModelPreset> v = {
      {"gpt3-125m", gpt(12, 768, 12), gpt3},
      {"gpt3-350m", gpt(24, 1024, 16), gpt3},
      {"gpt3-760m", gpt(24, 1536, 16), gpt3},
      // Table 2.1 gives 1.3B 24 heads of d_head 128, which does not multiply to d_model 2048;
      // 16 heads of 128 (Megatron-LM's GPT-3 1.3B example, EleutherAI GPT-Neo 1.3B) is used.
      {"gpt3-1.3b", gpt(24, 2048, 16), gpt3},
      {"gpt3-2.7b", gpt(32, 2560, 32), gpt3},
      {"gpt3-6.7b", gpt(32, 4096, 32), gpt3},
      // Table 2.1 prints d_model 5140 for 13B, a known typo: 40 heads x d_head 128 = 5120,
      // which is what Megatron-LM and every reproduction use.
      {"gpt3-13b", gpt(40, 5120, 40), gpt3},
      {"gpt3-175b", gpt(96, 12288, 96), gpt3},
      // Llama 2: 32k SentencePiece vocabulary, 4k context, untied embeddings; 70B uses GQA
      // with 8 KV heads (paper Table 1; HF config intermediate_size 11008/13824/28672).
      {"llama2-7b", llama(32, 4096, 32, 32, 11008, 32000, 4096), llama2},
      {"llama2-13b", llama(40, 5120, 40, 40, 13824, 32000, 4096), llama2},
      {"llama2-70b", llama(80, 8192, 64, 8, 28672, 32000, 4096), llama2},
      // Llama 3 / 3.1: 128,256-token vocabulary, GQA with 8 KV heads, pre-training sequence
      // length 8,192 (the paper's Table 3 and section 3.4.1); 405B: 126 layers, 16,384 hidden,
      // 128 heads, FFN 53,248.
      {"llama3-8b", llama(32, 4096, 32, 8, 14336, 128256, 8192), llama3},
      {"llama3-70b", llama(80, 8192, 64, 8, 28672, 128256, 8192), llama3},
      {"llama3-405b", llama(126, 16384, 128, 8, 53248, 128256, 8192), llama3},
  };
  for (auto& p : v) p.config.preset = p.name;
  return v;
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// Accepted alternative spellings of preset names: "llama3.1-8b" = "llama3-8b".
std::string canonical_model_name(std::string_view name) {
  std::string s;
  for (char c : name) s += lower(c);
  if (s.rfind("llama3.1-", 0) == 0) s = "llama3-" + s.substr(9);
  if (s.rfind("llama-3.1-", 0) == 0) s = "llama3-" + s.substr(10);
  if (s.rfind("llama-3-", 0) == 0) s = "llama3-" + s.substr(8);
  if (s.rfind("llama-2-", 0) == 0) s = "llama2-" + s.substr(8);
  if (s.rfind("gpt-3-", 0) == 0) s = "gpt3-" + s.substr(6);
  return s;
}

}  // namespace

const std::vector<GpuPreset>& gpu_presets() {
  static const std::vector<GpuPreset> v = build_gpu_presets();
  return v;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> v = build_model_presets();
  return v;
}

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const auto& p : gpu_presets())
    if (iequals(p.spec.name, name)) return &p;
  return nullptr;
}

const ModelPreset* find_model_preset(std::string_view name) {
  const std::string c = canonical_model_name(name);
  for (const auto& p : model_presets())
    if (p.name == c) return &p;
  return nullptr;
}

int edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent
  // transpositions ("modle" -> "model") each cost 1.
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const int cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  // Close enough: at most a third of the longer name differs (at least 1, at most 4 edits),
  // or one is a prefix of the other ("tensor_parallel" vs "tensor_parallel_degree").
  std::string best;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    int d = edit_distance(name, c);
    const size_t n = std::max(name.size(), c.size());
    const int limit = std::clamp(static_cast<int>(n / 3), 1, 4);
    const bool prefix = name.size() >= 3 && (c.size() > name.size() ? iequals(c.substr(0, name.size()), name)
                                                                      : iequals(name.substr(0, c.size()), c));
    if (d > limit && !prefix) continue;
    if (prefix) d = std::min(d, limit);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> v;
  for (const auto& p : gpu_presets()) v.push_back(p.spec.name);
  return v;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> v;
  for (const auto& p : model_presets()) v.push_back(p.name);
  return v;
}

}  // namespace monarch
