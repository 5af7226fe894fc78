#include "realrt/gpt.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/model_math.h"
#include "realrt/kernels.h"

namespace monarch::realrt {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a;
  splitmix64(s);
  s ^= b * 0xD1342543DE82EF95ull;
  splitmix64(s);
  s ^= c * 0xAF251AF3B0F025B5ull;
  return splitmix64(s);
}

uint64_t name_hash(const std::string& name) {  // FNV-1a, 64 bit
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

int64_t local_size(const ParamInfo& p, int64_t tp) {
  return p.shard == ShardKind::kReplicated ? p.rows * p.cols : p.rows * p.cols / tp;
}

}  // namespace

Expected<GptConfig> gpt_config_from(const ModelConfig& m) {
  Problems problems;
  if (m.architecture != Architecture::kGpt)
    problems.push_back({"/model/architecture", std::string("the real runtime trains \"gpt\" models, found \"") +
                                                   to_string(m.architecture) + "\""});
  if (!m.tie_embeddings) problems.push_back({"/model/tie_embeddings", "the real runtime ties embeddings"});
  if (m.num_kv_heads != 0 && m.num_kv_heads != m.num_attention_heads)
    problems.push_back({"/model/num_kv_heads", "the real runtime's gpt uses multi-head attention (kv heads = heads)"});
  GptConfig c;
  c.num_layers = m.num_layers;
  c.hidden = m.hidden_size;
  c.heads = m.num_attention_heads;
  c.ffn = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size;
  c.vocab = m.vocab_size;
  c.seq = m.seq_length;
  if (m.is_moe()) {
    c.experts = m.num_experts;
    c.top_k = m.moe_top_k > 0 ? m.moe_top_k : 1;
    c.moe_ffn = m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : c.ffn;
    c.capacity_factor = m.moe_capacity_factor;
    if (c.top_k > c.experts) problems.push_back({"/model/moe_top_k", "must be at most num_experts"});
    if (!(c.capacity_factor > 0)) problems.push_back({"/model/moe_capacity_factor", "must be positive"});
    if (m.moe_dropless)
      problems.push_back({"/model/moe_dropless", "the real runtime routes with a fixed expert capacity (drop and pad); "
                                                 "leave moe_dropless out or false"});
  }
  if (m.head_dim > 0 && m.num_attention_heads > 0 && m.head_dim * m.num_attention_heads != m.hidden_size)
    problems.push_back({"/model/head_dim", "the real runtime's heads are hidden_size / num_attention_heads wide; found head_dim " +
                                               std::to_string(m.head_dim) + " with " + std::to_string(m.num_attention_heads) +
                                               " heads and hidden_size " + std::to_string(m.hidden_size)});
  c.hidden_dropout = m.hidden_dropout_p();
  c.attention_dropout = m.attention_dropout_p();
  c.activation = m.activation_kind();
  if (c.num_layers <= 0 || c.hidden <= 0 || c.heads <= 0 || c.vocab <= 0 || c.seq <= 0)
    problems.push_back({"/model", "num_layers, hidden_size, num_attention_heads, vocab_size and seq_length must be positive"});
  else if (c.hidden % c.heads != 0)
    problems.push_back({"/model/num_attention_heads", "must divide hidden_size"});
  if (!(c.hidden_dropout >= 0 && c.hidden_dropout < 1))
    problems.push_back({"/model/hidden_dropout", "must be >= 0 and < 1"});
  if (!(c.attention_dropout >= 0 && c.attention_dropout < 1))
    problems.push_back({"/model/attention_dropout", "must be >= 0 and < 1"});
  if (!problems.empty()) return problems;
  return c;
}

const ParamInfo* ParamLayout::find(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

ParamLayout make_param_layout(const GptConfig& cfg, const ChunkSpec& spec) {
  const int64_t C = cfg.hidden, F = cfg.ffn;
  const double std_resid = kInitStd / std::sqrt(2.0 * static_cast<double>(cfg.num_layers));
  // A gated MLP's fc holds the gate and up sections, each split over TP like a plain fc.
  const ShardKind fc_shard = cfg.activation == Activation::kSwiglu ? ShardKind::kColumns2 : ShardKind::kColumns;
  ParamLayout out;
  auto add = [&](std::string name, int64_t rows, int64_t cols, ShardKind shard, double std, double value) {
    ParamInfo p{std::move(name), 0, rows, cols, shard, false, std, value, 0};
    p.size = local_size(p, spec.tp_size);
    p.offset = out.total;
    out.total += p.size;
    out.params.push_back(std::move(p));
  };
  // Sharded across the tensor-parallel group.
  if (spec.has_embedding || spec.has_head) add("wte", cfg.vocab, C, ShardKind::kRows, kInitStd, 0);
  for (int64_t l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    const std::string h = "h" + std::to_string(l) + ".";
    add(h + "qkv_w", C, 3 * C, ShardKind::kColumns3, kInitStd, 0);
    add(h + "qkv_b", 1, 3 * C, ShardKind::kColumns3, 0, 0);
    add(h + "proj_w", C, C, ShardKind::kRows, std_resid, 0);
    if (cfg.moe()) continue;  // MoE: router (replicated) and experts (last) below
    add(h + "fc_w", C, fc_width(cfg.activation, F), fc_shard, kInitStd, 0);
    add(h + "fc_b", 1, fc_width(cfg.activation, F), fc_shard, 0, 0);
    add(h + "fcproj_w", F, C, ShardKind::kRows, std_resid, 0);
  }
  out.replicated_offset = out.total;
  // Replicated across the tensor-parallel group.
  if (spec.has_embedding) add("wpe", cfg.seq, C, ShardKind::kReplicated, kInitStd, 0);
  for (int64_t l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    const std::string h = "h" + std::to_string(l) + ".";
    add(h + "ln1_w", 1, C, ShardKind::kReplicated, 0, 1);
    add(h + "ln1_b", 1, C, ShardKind::kReplicated, 0, 0);
    add(h + "proj_b", 1, C, ShardKind::kReplicated, 0, 0);
    add(h + "ln2_w", 1, C, ShardKind::kReplicated, 0, 1);
    add(h + "ln2_b", 1, C, ShardKind::kReplicated, 0, 0);
    if (cfg.moe())
      add(h + "router_w", C, cfg.experts, ShardKind::kReplicated, kInitStd, 0);
    else
      add(h + "fcproj_b", 1, C, ShardKind::kReplicated, 0, 0);
  }
  if (spec.has_head) {
    add("lnf_w", 1, C, ShardKind::kReplicated, 0, 1);
    add("lnf_b", 1, C, ShardKind::kReplicated, 0, 0);
  }
  out.expert_offset = out.total;
  if (cfg.moe()) {  // the rank's experts, each fc_w, fc_b, proj_w, proj_b (MoeParams' order)
    // Sharded over the expert-TP group: fc column-parallel, proj row-parallel, proj_b replicated.
    const int64_t el = cfg.experts / spec.ep_size, Fe = cfg.moe_ffn;
    auto add_expert = [&](std::string name, int64_t rows, int64_t cols, ShardKind shard, double std) {
      ParamInfo p{std::move(name), 0, rows, cols, shard, true, std, 0, 0};
      p.size = local_size(p, spec.etp_size);
      p.offset = out.total;
      out.total += p.size;
      out.params.push_back(std::move(p));
    };
    for (int64_t l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l)
      for (int64_t j = spec.ep_rank * el; j < (spec.ep_rank + 1) * el; ++j) {
        const std::string h = "h" + std::to_string(l) + ".e" + std::to_string(j) + ".";
        add_expert(h + "fc_w", C, fc_width(cfg.activation, Fe), fc_shard, kInitStd);
        add_expert(h + "fc_b", 1, fc_width(cfg.activation, Fe), fc_shard, 0);
        add_expert(h + "proj_w", Fe, C, ShardKind::kRows, std_resid);
        add_expert(h + "proj_b", 1, C, ShardKind::kReplicated, 0);
      }
  }
  return out;
}

template <typename T>
void init_params(T* params, const ParamLayout& layout, const GptConfig&, const ChunkSpec& spec, uint64_t seed) {
  for (const auto& p : layout.params) {
    const int64_t tp = p.expert ? spec.etp_size : spec.tp_size, t = p.expert ? spec.etp_rank : spec.tp_rank;
    std::vector<double> full(static_cast<size_t>(p.rows * p.cols), p.init_value);
    if (p.init_std > 0) {
      uint64_t state = hash3(seed, name_hash(p.name), 0x1217);
      for (size_t i = 0; i < full.size(); i += 2) {  // Box-Muller: two normals per pair of uniforms
        const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
        const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1)) * p.init_std;
        full[i] = r * std::cos(2 * std::numbers::pi * u2);
        if (i + 1 < full.size()) full[i + 1] = r * std::sin(2 * std::numbers::pi * u2);
      }
    }
    T* dst = params + p.offset;
    switch (p.shard) {
      case ShardKind::kReplicated:
        for (int64_t i = 0; i < p.rows * p.cols; ++i) dst[i] = static_cast<T>(full[i]);
        break;
      case ShardKind::kColumns:
      case ShardKind::kColumns2:
      case ShardKind::kColumns3: {  // each of the K sections split by columns, kept in order
        const int64_t K = p.shard == ShardKind::kColumns ? 1 : p.shard == ShardKind::kColumns2 ? 2 : 3;
        const int64_t sec = p.cols / K, ls = sec / tp;
        for (int64_t r = 0; r < p.rows; ++r)
          for (int64_t k = 0; k < K; ++k)
            for (int64_t c = 0; c < ls; ++c)
              dst[r * K * ls + k * ls + c] = static_cast<T>(full[r * p.cols + k * sec + t * ls + c]);
        break;
      }
      case ShardKind::kRows: {
        const int64_t lr = p.rows / tp;
        for (int64_t r = 0; r < lr; ++r)
          for (int64_t c = 0; c < p.cols; ++c) dst[r * p.cols + c] = static_cast<T>(full[(t * lr + r) * p.cols + c]);
        break;
      }
    }
  }
}
template void init_params<float>(float*, const ParamLayout&, const GptConfig&, const ChunkSpec&, uint64_t);
template void init_params<double>(double*, const ParamLayout&, const GptConfig&, const ChunkSpec&, uint64_t);

void synthetic_batch(int32_t* tokens, int32_t* targets, uint64_t seed, int64_t first_sample, int64_t batch,
                     int64_t seq, int64_t vocab) {
  const uint64_t v = static_cast<uint64_t>(vocab);
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t g = static_cast<uint64_t>(first_sample + b);
    uint64_t x = hash3(seed, g, 0) % v;
    for (int64_t k = 0; k < seq; ++k) {
      const uint64_t h = hash3(seed, g, static_cast<uint64_t>(k + 1));
      const uint64_t jump = (h / v) % 4 == 0 ? h % v : 0;
      const uint64_t next = (5 * x + 3 + jump) % v;
      tokens[k * batch + b] = static_cast<int32_t>(x);
      targets[k * batch + b] = static_cast<int32_t>(next);
      x = next;
    }
  }
}

namespace {

// Elements whose 64-bit hash is below p 2^64 are dropped.
uint64_t drop_threshold(double p) { return static_cast<uint64_t>(std::ldexp(p, 64)); }

// Hash of everything that names a row of a mask; the element index is mixed in by keep_bit.
uint64_t mask_row_key(const DropoutKey& key, int64_t sample, int64_t layer, DropoutSite site, int64_t row) {
  const uint64_t a = hash3(key.seed, static_cast<uint64_t>(sample), 0xD0D0);
  return hash3(a, static_cast<uint64_t>(layer) * 8 + static_cast<uint64_t>(site), static_cast<uint64_t>(row));
}

uint8_t keep_bit(uint64_t row_key, int64_t index, uint64_t threshold) {
  uint64_t st = row_key ^ (static_cast<uint64_t>(index) * 0x9FB21C651E98DF25ull);
  return splitmix64(st) >= threshold ? 1 : 0;
}

}  // namespace

void dropout_rows_mask(uint8_t* keep, const DropoutKey& key, int64_t layer, DropoutSite site, int64_t row0,
                       int64_t rows, int64_t width, int64_t batch, double p) {
  const uint64_t thr = drop_threshold(p);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = row0 + r;
    const uint64_t rk = mask_row_key(key, key.first_sample + n % batch, layer, site, n / batch);
    for (int64_t j = 0; j < width; ++j) keep[r * width + j] = keep_bit(rk, j, thr);
  }
}

void dropout_attention_mask(uint8_t* keep, const DropoutKey& key, int64_t layer, int64_t b, int64_t head, int64_t heads,
                            int64_t seq, double p) {
  const uint64_t thr = drop_threshold(p);
  for (int64_t i = 0; i < seq; ++i) {
    const uint64_t rk = mask_row_key(key, key.first_sample + b, layer, DropoutSite::kAttentionProbs, i * heads + head);
    for (int64_t j = 0; j < seq; ++j) keep[i * seq + j] = keep_bit(rk, j, thr);
  }
}

template <typename T>
struct GptChunk<T>::LayerParams {
  const T *qkv_w, *qkv_b, *proj_w, *proj_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b, *ln1_w, *ln1_b, *ln2_w, *ln2_b;
  T *dqkv_w, *dqkv_b, *dproj_w, *dproj_b, *dfc_w, *dfc_b, *dfcproj_w, *dfcproj_b, *dln1_w, *dln1_b, *dln2_w, *dln2_b;
};

template <typename T>
GptChunk<T>::GptChunk(const GptConfig& cfg, const ChunkSpec& spec, TpCollectives<T>* tp, EpCollectives<T>* ep,
                      EtpCollectives<T>* etp)
    : cfg_(cfg), spec_(spec), tp_(tp), layout_(make_param_layout(cfg, spec)) {
  const int64_t t = spec.tp_size;
  assert(t == 1 || tp != nullptr);
  assert(cfg.heads % t == 0 && cfg.ffn % t == 0 && cfg.vocab % t == 0);
  n_ = cfg.seq * spec.micro_batch_size;
  nl_ = spec.sequence_parallel ? n_ / t : n_;
  assert(!spec.sequence_parallel || cfg.seq % t == 0);
  cl_ = cfg.hidden / t;
  fl_ = cfg.ffn / t;
  vl_ = cfg.vocab / t;
  nhl_ = cfg.heads / t;
  hd_ = cfg.hidden / cfg.heads;
  for (const auto& p : layout_.params) offsets_[p.name] = p.offset;
  if (cfg.moe()) {
    // Megatron's MoE with tensor parallelism takes the sequence-parallel hidden states.
    assert(t == 1 || spec.sequence_parallel);
    assert(spec.moe_route_groups >= 1 && nl_ % spec.moe_route_groups == 0);
    MoeDims d;
    d.tokens = nl_ / spec.moe_route_groups;
    d.hidden = cfg.hidden;
    d.experts = cfg.experts;
    d.top_k = cfg.top_k;
    d.ffn = cfg.moe_ffn;
    d.activation = cfg.activation;
    d.capacity = moe_expert_capacity(d.tokens, cfg.experts, cfg.top_k, cfg.capacity_factor);
    d.ep_size = spec.ep_size;
    d.ep_rank = spec.ep_rank;
    d.etp_size = spec.etp_size;
    d.etp_rank = spec.etp_rank;
    moe_ = std::make_unique<MoeBlock<T>>(d, ep, etp);
  }
}

template <typename T>
MoeParams<T> GptChunk<T>::moe_params(int64_t l) {
  const std::string h = "h" + std::to_string(l) + ".";
  const std::string first = h + "e" + std::to_string(spec_.ep_rank * (cfg_.experts / spec_.ep_size)) + ".fc_w";
  MoeParams<T> w;
  w.router_w = p(h + "router_w");
  w.drouter_w = g(h + "router_w");
  w.experts = p(first);
  w.dexperts = g(first);
  return w;
}

template <typename T>
const T* GptChunk<T>::p(const std::string& name) const {
  return params_ + offsets_.at(name);
}
template <typename T>
T* GptChunk<T>::g(const std::string& name) {
  return grads_ + offsets_.at(name);
}

template <typename T>
typename GptChunk<T>::LayerParams GptChunk<T>::layer_params(int64_t l) {
  const std::string h = "h" + std::to_string(l) + ".";
  LayerParams lp{};
  lp.qkv_w = p(h + "qkv_w"); lp.dqkv_w = g(h + "qkv_w");
  lp.qkv_b = p(h + "qkv_b"); lp.dqkv_b = g(h + "qkv_b");
  lp.proj_w = p(h + "proj_w"); lp.dproj_w = g(h + "proj_w");
  lp.proj_b = p(h + "proj_b"); lp.dproj_b = g(h + "proj_b");
  if (!moe_) {
    lp.fc_w = p(h + "fc_w"); lp.dfc_w = g(h + "fc_w");
    lp.fc_b = p(h + "fc_b"); lp.dfc_b = g(h + "fc_b");
    lp.fcproj_w = p(h + "fcproj_w"); lp.dfcproj_w = g(h + "fcproj_w");
    lp.fcproj_b = p(h + "fcproj_b"); lp.dfcproj_b = g(h + "fcproj_b");
  }
  lp.ln1_w = p(h + "ln1_w"); lp.dln1_w = g(h + "ln1_w");
  lp.ln1_b = p(h + "ln1_b"); lp.dln1_b = g(h + "ln1_b");
  lp.ln2_w = p(h + "ln2_w"); lp.dln2_w = g(h + "ln2_w");
  lp.ln2_b = p(h + "ln2_b"); lp.dln2_b = g(h + "ln2_b");
  return lp;
}

template <typename T>
void GptChunk<T>::gather_rows(const T* local, T* full, int64_t width) {
  if (spec_.sequence_parallel && spec_.tp_size > 1)
    tp_->all_gather(local, full, nl_ * width);
  else
    std::memcpy(full, local, sizeof(T) * n_ * width);
}

template <typename T>
Buf<T> GptChunk<T>::gather_buffer() const {
  if (spec_.sequence_parallel && spec_.tp_size > 1) return Buf<T>(n_ * cfg_.hidden, MemCategory::kBuffers);
  return Buf<T>(n_ * cfg_.hidden, kWorkspace);
}

template <typename T>
void GptChunk<T>::reduce_rows(T* partial, T* local, int64_t width) {
  if (spec_.sequence_parallel && spec_.tp_size > 1) {
    tp_->reduce_scatter(partial, local, nl_ * width);
    return;
  }
  if (spec_.tp_size > 1) tp_->all_reduce_sum(partial, n_ * width);
  std::memcpy(local, partial, sizeof(T) * n_ * width);
}

template <typename T>
void GptChunk<T>::all_reduce_if_tp(T* buf, int64_t n) {
  if (spec_.tp_size > 1) tp_->all_reduce_sum(buf, n);
}

template <typename T>
void GptChunk<T>::hidden_mask(Buf<uint8_t>& keep, const DropoutKey& key, int64_t layer, DropoutSite site) {
  const int64_t row0 = spec_.sequence_parallel ? spec_.tp_rank * nl_ : 0;
  keep = Buf<uint8_t>(nl_ * cfg_.hidden, MemCategory::kActivations);
  dropout_rows_mask(keep.data(), key, layer, site, row0, nl_, cfg_.hidden, spec_.micro_batch_size, cfg_.hidden_dropout);
}

template <typename T>
void GptChunk<T>::layer_forward(int64_t l, const T* in, LayerActs& a, const DropoutKey& key) {
  const LayerParams w = layer_params(l);
  const int64_t C = cfg_.hidden, B = spec_.micro_batch_size, S = cfg_.seq;
  const auto act = MemCategory::kActivations;
  const auto buf = kWorkspace;
  const bool hdrop = cfg_.hidden_dropout > 0, adrop = cfg_.attention_dropout > 0;
  const T hscale = static_cast<T>(1.0 / (1.0 - cfg_.hidden_dropout));
  Buf<T> full = gather_buffer();  // [N, C] gathered LayerNorm output / partial sums of row-parallel linears
  // Attention block.
  a.ln1 = Buf<T>(nl_ * C, act);
  a.ln1_mean = Buf<T>(nl_, act);
  a.ln1_rstd = Buf<T>(nl_, act);
  layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), in, w.ln1_w, w.ln1_b, nl_, C);
  gather_rows(a.ln1.data(), full.data(), C);
  a.qkv = Buf<T>(n_ * 3 * cl_, act);
  matmul_forward(a.qkv.data(), full.data(), w.qkv_w, w.qkv_b, n_, C, 3 * cl_);
  a.atty = Buf<T>(n_ * cl_, act);
  Buf<T> scratch, scratch_drop;
  Buf<uint8_t> head_mask;  // [S, S] one head's attention mask when the masks are not kept
  // Selective recompute keeps no attention probabilities; full recompute keeps them while the
  // layer is recomputed for its backward (they are freed with the rest after the forward).
  const bool keep_att = spec_.recompute != Recompute::kSelective;
  if (keep_att) {
    a.att = Buf<T>(B * nhl_ * S * S, act);
    if (adrop) {
      a.att_mask = Buf<uint8_t>(B * nhl_ * S * S, act);
      a.att_drop = Buf<T>(B * nhl_ * S * S, act);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < nhl_; ++h)
          dropout_attention_mask(a.att_mask.data() + (b * nhl_ + h) * S * S, key, l, b, spec_.tp_rank * nhl_ + h,
                                 cfg_.heads, S, cfg_.attention_dropout);
    }
  } else {
    scratch = Buf<T>(S * S, buf);
    if (adrop) {
      scratch_drop = Buf<T>(S * S, buf);
      head_mask = Buf<uint8_t>(S * S, buf);
    }
  }
  HeadMask keep_of;
  if (adrop) keep_of = attention_masks(a, key, l, head_mask);
  attention_forward(a.atty.data(), a.att.empty() ? nullptr : a.att.data(), scratch.data(), a.qkv.data(), B, S, nhl_,
                    hd_, keep_of, a.att_drop.empty() ? nullptr : a.att_drop.data(), scratch_drop.data(),
                    static_cast<T>(1.0 / (1.0 - cfg_.attention_dropout)));
  matmul_forward(full.data(), a.atty.data(), w.proj_w, static_cast<const T*>(nullptr), n_, cl_, C);
  a.res2 = Buf<T>(nl_ * C, act);
  reduce_rows(full.data(), a.res2.data(), C);
  // Megatron's bias-dropout-add: res2 = in + dropout(proj + proj_b).
  if (hdrop) hidden_mask(a.mask1, key, l, DropoutSite::kAttentionOutput);
  for (int64_t i = 0; i < nl_; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const T y = a.res2[i * C + j] + w.proj_b[j];
      a.res2[i * C + j] = in[i * C + j] + (hdrop ? (a.mask1[i * C + j] ? y * hscale : T(0)) : y);
    }
  // MLP block.
  a.ln2 = Buf<T>(nl_ * C, act);
  a.ln2_mean = Buf<T>(nl_, act);
  a.ln2_rstd = Buf<T>(nl_, act);
  layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), w.ln2_w, w.ln2_b, nl_, C);
  if (moe_) {  // routes the local rows (the sequence shard under SP), group by group
    a.out = Buf<T>(nl_ * C, act);
    const int64_t G = spec_.moe_route_groups, ng = moe_->dims().tokens;
    a.moe.resize(static_cast<size_t>(G));
    const MoeParams<T> mw = moe_params(l);
    for (int64_t g = 0; g < G; ++g)
      aux_loss_ += moe_->forward(mw, a.ln2.data() + g * ng * C, a.out.data() + g * ng * C, a.moe[static_cast<size_t>(g)],
                                 loss_scale_ * static_cast<T>(ng));
    if (hdrop) hidden_mask(a.mask2, key, l, DropoutSite::kMlpOutput);
    for (int64_t i = 0; i < nl_ * C; ++i)
      a.out[i] = a.res2[i] + (hdrop ? (a.mask2[i] ? a.out[i] * hscale : T(0)) : a.out[i]);
    return;
  }
  gather_rows(a.ln2.data(), full.data(), C);
  const int64_t fcl = fc_width(cfg_.activation, fl_);  // fc output columns: FL, or 2 FL gated
  a.fch = Buf<T>(n_ * fcl, act);
  matmul_forward(a.fch.data(), full.data(), w.fc_w, w.fc_b, n_, C, fcl);
  a.fch_gelu = Buf<T>(n_ * fl_, act);
  mlp_activation_forward(cfg_.activation, a.fch_gelu.data(), a.fch.data(), n_, fl_);
  matmul_forward(full.data(), a.fch_gelu.data(), w.fcproj_w, static_cast<const T*>(nullptr), n_, fl_, C);
  a.out = Buf<T>(nl_ * C, act);
  reduce_rows(full.data(), a.out.data(), C);
  if (hdrop) hidden_mask(a.mask2, key, l, DropoutSite::kMlpOutput);
  for (int64_t i = 0; i < nl_; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const T y = a.out[i * C + j] + w.fcproj_b[j];
      a.out[i * C + j] = a.res2[i * C + j] + (hdrop ? (a.mask2[i * C + j] ? y * hscale : T(0)) : y);
    }
}

template <typename T>
HeadMask GptChunk<T>::attention_masks(const LayerActs& a, const DropoutKey& key, int64_t l, Buf<uint8_t>& head_mask) {
  const int64_t S = cfg_.seq;
  if (!a.att_mask.empty()) {
    const uint8_t* all = a.att_mask.data();
    const int64_t nh = nhl_;
    return [all, nh, S](int64_t b, int64_t h) { return all + (b * nh + h) * S * S; };
  }
  // Not kept (recompute): regenerated head by head, identical to the forward pass's.
  return [this, &head_mask, key, l, S](int64_t b, int64_t h) -> const uint8_t* {
    dropout_attention_mask(head_mask.data(), key, l, b, spec_.tp_rank * nhl_ + h, cfg_.heads, S, cfg_.attention_dropout);
    return head_mask.data();
  };
}

template <typename T>
void GptChunk<T>::release_layer_internals(LayerActs& a) {
  for (Buf<T>* b : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.att, &a.att_drop, &a.atty, &a.res2, &a.ln2,
                    &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu})
    b->release();
  a.moe.clear();
  for (Buf<uint8_t>* b : {&a.att_mask, &a.mask1, &a.mask2}) b->release();
}

template <typename T>
void GptChunk<T>::layer_backward(int64_t l, const T* in, LayerActs& a, const T* dout, T* din, const DropoutKey& key) {
  const LayerParams w = layer_params(l);
  const int64_t C = cfg_.hidden, B = spec_.micro_batch_size, S = cfg_.seq;
  const auto buf = kWorkspace;
  const bool hdrop = cfg_.hidden_dropout > 0, adrop = cfg_.attention_dropout > 0;
  const T hscale = static_cast<T>(1.0 / (1.0 - cfg_.hidden_dropout));
  Buf<T> full = gather_buffer();  // [N, C] gathered activations / gradients
  Buf<T> dfull(n_ * C, buf);  // [N, C] partial input gradients of column-parallel linears
  Buf<T> dres2(nl_ * C, buf);  // [Nl, C]
  Buf<T> dsmall(nl_ * C, buf);  // [Nl, C]
  // MLP block: out = res2 + dropout(fcproj(gelu(fc(ln2(res2)))) + fcproj_b)
  // (MoE: out = res2 + dropout(moe(ln2(res2)))).
  std::memcpy(dres2.data(), dout, sizeof(T) * nl_ * C);
  if (hdrop)  // d branch = dout * keep / (1 - p), in dsmall
    for (int64_t i = 0; i < nl_ * C; ++i) dsmall[i] = a.mask2[i] ? dout[i] * hscale : T(0);
  else
    std::memcpy(dsmall.data(), dout, sizeof(T) * nl_ * C);
  if (moe_) {
    Buf<T> dbranch(nl_ * C, buf);  // [Nl, C] gradient of the MoE block's output
    std::memcpy(dbranch.data(), dsmall.data(), sizeof(T) * nl_ * C);
    const int64_t ng = moe_->dims().tokens;
    const MoeParams<T> mw = moe_params(l);
    for (size_t g = 0; g < a.moe.size(); ++g) {
      const int64_t off = static_cast<int64_t>(g) * ng * C;
      moe_->backward(mw, a.ln2.data() + off, dbranch.data() + off, dsmall.data() + off, a.moe[g]);
    }
  } else {
  for (int64_t i = 0; i < nl_; ++i)
    for (int64_t j = 0; j < C; ++j) w.dfcproj_b[j] += dsmall[i * C + j];
  gather_rows(dsmall.data(), full.data(), C);
  const int64_t fcl = fc_width(cfg_.activation, fl_);
  Buf<T> dfch(n_ * fcl, buf);  // [N, FL] (gated: [N, 2 FL])
  Buf<T> dgelu(n_ * fl_, buf);
  matmul_backward(dgelu.data(), w.dfcproj_w, static_cast<T*>(nullptr), full.data(), a.fch_gelu.data(), w.fcproj_w, n_,
                  fl_, C);
  mlp_activation_backward(cfg_.activation, dfch.data(), a.fch.data(), dgelu.data(), n_, fl_);
  dgelu.release();
  gather_rows(a.ln2.data(), full.data(), C);
  matmul_backward(dfull.data(), w.dfc_w, w.dfc_b, dfch.data(), full.data(), w.fc_w, n_, C, fcl);
  dfch.release();
  reduce_rows(dfull.data(), dsmall.data(), C);
  }
  layernorm_backward(dres2.data(), w.dln2_w, w.dln2_b, dsmall.data(), a.res2.data(), w.ln2_w, a.ln2_mean.data(),
                     a.ln2_rstd.data(), nl_, C);
  // Attention block: res2 = in + dropout(proj(attention(qkv(ln1(in)))) + proj_b).
  if (hdrop)
    for (int64_t i = 0; i < nl_ * C; ++i) dsmall[i] = a.mask1[i] ? dres2[i] * hscale : T(0);
  else
    std::memcpy(dsmall.data(), dres2.data(), sizeof(T) * nl_ * C);
  for (int64_t i = 0; i < nl_; ++i)
    for (int64_t j = 0; j < C; ++j) w.dproj_b[j] += dsmall[i * C + j];
  gather_rows(dsmall.data(), full.data(), C);
  Buf<T> datty(n_ * cl_, buf);      // [N, CL]
  matmul_backward(datty.data(), w.dproj_w, static_cast<T*>(nullptr), full.data(), a.atty.data(), w.proj_w, n_, cl_, C);
  Buf<T> dqkv(n_ * 3 * cl_, buf);   // [N, 3 CL]
  Buf<T> sp(a.att.empty() ? S * S : 0, buf), sd(S * S, buf);  // [S, S] scratch
  Buf<T> spd(a.att.empty() && adrop ? S * S : 0, buf);          // [S, S] recomputed dropped probabilities
  Buf<uint8_t> head_mask(a.att_mask.empty() && adrop ? S * S : 0, buf);
  HeadMask keep_of;
  if (adrop) keep_of = attention_masks(a, key, l, head_mask);
  attention_backward(dqkv.data(), datty.data(), a.qkv.data(), a.att.empty() ? nullptr : a.att.data(), sp.data(),
                     sd.data(), B, S, nhl_, hd_, keep_of, a.att_drop.empty() ? nullptr : a.att_drop.data(), spd.data(),
                     static_cast<T>(1.0 / (1.0 - cfg_.attention_dropout)));
  datty.release();
  gather_rows(a.ln1.data(), full.data(), C);
  matmul_backward(dfull.data(), w.dqkv_w, w.dqkv_b, dqkv.data(), full.data(), w.qkv_w, n_, C, 3 * cl_);
  dqkv.release();
  reduce_rows(dfull.data(), dsmall.data(), C);
  std::memcpy(din, dres2.data(), sizeof(T) * nl_ * C);
  layernorm_backward(din, w.dln1_w, w.dln1_b, dsmall.data(), in, w.ln1_w, a.ln1_mean.data(), a.ln1_rstd.data(), nl_, C);
}

template <typename T>
double GptChunk<T>::forward(int64_t mb, const int32_t* tokens, const int32_t* targets, const T* input, T loss_scale,
                            const DropoutKey& dropout) {
  assert(params_);
  const bool prepared = acts_.count(mb) > 0;  // input received in place (prepare_input)
  assert(!prepared || (!spec_.has_embedding && input == nullptr));
  MbActs& m = acts_[mb];
  m.key = dropout;
  const int64_t C = cfg_.hidden, B = spec_.micro_batch_size;
  loss_scale_ = loss_scale;
  aux_loss_ = 0;
  const auto act = MemCategory::kActivations;
  if (!prepared) m.in = Buf<T>(nl_ * C, act);
  if (spec_.has_embedding) {
    // Vocabulary-parallel embedding: this rank's rows of wte, zeros for other tokens, summed
    // over the TP group (all-reduce, or reduce-scatter to the sequence shard under SP).
    m.tokens.assign(tokens, tokens + n_);
    const T* wte = p("wte");
    const int64_t v0 = spec_.tp_rank * vl_;
    Buf<T> partial(n_ * C, kWorkspace);  // [N, C] before the reduction
    for (int64_t r = 0; r < n_; ++r) {
      const int64_t tok = tokens[r] - v0;
      if (tok >= 0 && tok < vl_) std::memcpy(partial.data() + r * C, wte + tok * C, sizeof(T) * C);
    }
    reduce_rows(partial.data(), m.in.data(), C);
    const T* wpe = p("wpe");
    const int64_t row0 = spec_.sequence_parallel ? spec_.tp_rank * nl_ : 0;
    for (int64_t r = 0; r < nl_; ++r) {
      const int64_t s = (row0 + r) / B;
      for (int64_t j = 0; j < C; ++j) m.in[r * C + j] += wpe[s * C + j];
    }
    if (cfg_.hidden_dropout > 0) {  // embedding dropout
      hidden_mask(m.emb_mask, dropout, cfg_.num_layers, DropoutSite::kEmbedding);
      const T sc = static_cast<T>(1.0 / (1.0 - cfg_.hidden_dropout));
      for (int64_t i = 0; i < nl_ * C; ++i) m.in[i] = m.emb_mask[i] ? m.in[i] * sc : T(0);
    }
  } else if (!prepared) {
    std::memcpy(m.in.data(), input, sizeof(T) * nl_ * C);
  }
  m.layers.resize(static_cast<size_t>(spec_.num_layers));
  const T* x = m.in.data();
  for (int64_t i = 0; i < spec_.num_layers; ++i) {
    LayerActs& a = m.layers[static_cast<size_t>(i)];
    layer_forward(spec_.first_layer + i, x, a, dropout);
    if (spec_.recompute == Recompute::kFull) release_layer_internals(a);  // keep only the output
    x = a.out.data();
  }
  if (!spec_.has_head) return aux_loss_;
  // Final LayerNorm, output projection (tied to wte, vocabulary-parallel) and cross-entropy.
  m.lnf = Buf<T>(nl_ * C, act);
  m.lnf_mean = Buf<T>(nl_, act);
  m.lnf_rstd = Buf<T>(nl_, act);
  layernorm_forward(m.lnf.data(), m.lnf_mean.data(), m.lnf_rstd.data(), x, p("lnf_w"), p("lnf_b"), nl_, C);
  Buf<T> full = gather_buffer();  // [N, C]
  gather_rows(m.lnf.data(), full.data(), C);
  m.dlogits = Buf<T>(n_ * vl_, act);  // [N, V/T] logits, then d loss / d logits in place
  T* logits = m.dlogits.data();
  gemm(false, true, n_, vl_, C, T(1), full.data(), C, p("wte"), C, T(0), logits, vl_);
  full.release();
  const int64_t v0 = spec_.tp_rank * vl_;
  Buf<T> stats(3 * n_, kWorkspace);  // [3, N]: row max, target logit, sum of exp
  T* mx = stats.data();
  T* pred = mx + n_;
  T* sumexp = pred + n_;
  for (int64_t r = 0; r < n_; ++r) {
    const T* row = logits + r * vl_;
    T m_r = row[0];
    for (int64_t j = 1; j < vl_; ++j) m_r = row[j] > m_r ? row[j] : m_r;
    mx[r] = m_r;
    const int64_t tgt = targets[r] - v0;
    pred[r] = (tgt >= 0 && tgt < vl_) ? row[tgt] : T(0);
  }
  if (spec_.tp_size > 1) tp_->all_reduce_max(mx, n_);
  for (int64_t r = 0; r < n_; ++r) {
    const T* row = logits + r * vl_;
    T s = 0;
    for (int64_t j = 0; j < vl_; ++j) s += std::exp(row[j] - mx[r]);
    sumexp[r] = s;
  }
  all_reduce_if_tp(pred, n_);
  all_reduce_if_tp(sumexp, n_);
  double loss = aux_loss_;
  for (int64_t r = 0; r < n_; ++r) {
    loss += static_cast<double>(std::log(sumexp[r]) + mx[r] - pred[r]) * static_cast<double>(loss_scale);
    T* row = logits + r * vl_;
    const T inv = T(1) / sumexp[r];
    const int64_t tgt = targets[r] - v0;
    for (int64_t j = 0; j < vl_; ++j) {
      const T prob = std::exp(row[j] - mx[r]) * inv;
      row[j] = (prob - (j == tgt ? T(1) : T(0))) * loss_scale;
    }
  }
  return loss;
}

template <typename T>
T* GptChunk<T>::prepare_input(int64_t mb) {
  assert(!spec_.has_embedding && !acts_.count(mb));
  MbActs& m = acts_[mb];
  m.in = Buf<T>(nl_ * cfg_.hidden, MemCategory::kActivations);
  return m.in.data();
}

template <typename T>
Buf<T> GptChunk<T>::take_output(int64_t mb) {
  assert(!spec_.has_head);
  MbActs& m = acts_.at(mb);
  if (m.layers.empty()) return {};
  return std::move(m.layers.back().out);
}

template <typename T>
const T* GptChunk<T>::output(int64_t mb) const {
  const MbActs& m = acts_.at(mb);
  return m.layers.empty() ? m.in.data() : m.layers.back().out.data();
}

template <typename T>
const T* GptChunk<T>::backward(int64_t mb, const T* dout) {
  MbActs& m = acts_.at(mb);
  const int64_t C = cfg_.hidden;
  if (dbuf_a_.empty()) {
    dbuf_a_ = Buf<T>(nl_ * C, kWorkspace);
    dbuf_b_ = Buf<T>(nl_ * C, kWorkspace);
  }
  T* d = dbuf_a_.data();   // gradient w.r.t. the current layer's output
  T* dn = dbuf_b_.data();  // gradient w.r.t. its input
  const T* last = m.layers.empty() ? m.in.data() : m.layers.back().out.data();
  if (spec_.has_head) {
    Buf<T> full = gather_buffer();  // [N, C] gathered final LayerNorm output
    Buf<T> dfull(n_ * C, kWorkspace);  // [N, C] partial d lnf
    gather_rows(m.lnf.data(), full.data(), C);
    gemm(false, false, n_, C, vl_, T(1), m.dlogits.data(), vl_, p("wte"), C, T(0), dfull.data(), C);
    gemm(true, false, vl_, C, n_, T(1), m.dlogits.data(), vl_, full.data(), C, T(1), g("wte"), C);
    m.dlogits.release();
    Buf<T> dlnf(nl_ * C, kWorkspace);
    reduce_rows(dfull.data(), dlnf.data(), C);
    std::memset(d, 0, sizeof(T) * nl_ * C);
    layernorm_backward(d, g("lnf_w"), g("lnf_b"), dlnf.data(), last, p("lnf_w"), m.lnf_mean.data(),
                       m.lnf_rstd.data(), nl_, C);
    m.lnf.release();
  } else {
    std::memcpy(d, dout, sizeof(T) * nl_ * C);
  }
  for (int64_t i = spec_.num_layers - 1; i >= 0; --i) {
    LayerActs& a = m.layers[static_cast<size_t>(i)];
    const T* in = i == 0 ? m.in.data() : m.layers[static_cast<size_t>(i - 1)].out.data();
    if (spec_.recompute == Recompute::kFull) {
      a.out.release();  // recomputed below; the backward does not need the old one
      layer_forward(spec_.first_layer + i, in, a, m.key);
    }
    layer_backward(spec_.first_layer + i, in, a, d, dn, m.key);
    release_layer_internals(a);
    a.out.release();
    std::swap(d, dn);
  }
  if (spec_.has_embedding) {
    const int64_t B = spec_.micro_batch_size;
    if (!m.emb_mask.empty()) {
      const T sc = static_cast<T>(1.0 / (1.0 - cfg_.hidden_dropout));
      for (int64_t i = 0; i < nl_ * C; ++i) d[i] = m.emb_mask[i] ? d[i] * sc : T(0);
    }
    T* dwpe = g("wpe");
    const int64_t row0 = spec_.sequence_parallel ? spec_.tp_rank * nl_ : 0;
    for (int64_t r = 0; r < nl_; ++r) {
      const int64_t s = (row0 + r) / B;
      for (int64_t j = 0; j < C; ++j) dwpe[s * C + j] += d[r * C + j];
    }
    Buf<T> full = gather_buffer();  // [N, C]
    gather_rows(d, full.data(), C);
    T* dwte = g("wte");
    const int64_t v0 = spec_.tp_rank * vl_;
    for (int64_t r = 0; r < n_; ++r) {
      const int64_t tok = m.tokens[static_cast<size_t>(r)] - v0;
      if (tok >= 0 && tok < vl_)
        for (int64_t j = 0; j < C; ++j) dwte[tok * C + j] += full[r * C + j];
    }
    acts_.erase(mb);
    return nullptr;
  }
  acts_.erase(mb);
  return d;
}

template class GptChunk<float>;
template class GptChunk<double>;

}  // namespace monarch::realrt
