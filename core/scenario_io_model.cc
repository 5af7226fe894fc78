// The scenario's `model` section: presets, a Hugging Face config.json, transformer and DLRM
// keys.
#include "core/scenario_io_detail.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/dlrm_model.h"
#include "core/presets.h"
#include "core/units.h"

namespace monarch::scenario_io_detail {
namespace {

const std::vector<std::string> kTransformerKeys = {
    "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size",
    "seq_length", "tie_embeddings", "num_experts", "moe_top_k", "moe_ffn_hidden_size", "moe_capacity_factor",
    "moe_dropless", "moe_router_force_load_balancing", "qk_layernorm", "hidden_dropout", "attention_dropout", "activation", "attention_kernel"};
const std::vector<std::string> kDlrmKeys = {"embedding_tables", "bottom_mlp", "top_mlp", "dense_features",
                                            "interaction", "dcn_rank", "dcn_layers", "embedding_optimizer",
                                            "embedding_dtype", "uvm_cache_hit_rate"};

struct ModelSeen {  // which values were given (by preset, hf_config or the file)
  bool architecture = false, kv_heads = false, ffn = false, tie = false;
};

// Fill a model from a Hugging Face config.json (llama-like and gpt2 model types).
void apply_hf_config(Ctx& ctx, const std::string& file, const std::string& where, ModelConfig& m, ModelSeen& seen) {
  auto text = read_text_file(ctx, file, where, "hf_config file");
  if (!text) return;
  auto parsed = parse_json_text(*text, file);
  if (!parsed) {
    for (const auto& p : parsed.problems()) ctx.add(where, p.to_string());
    return;
  }
  const json& h = *parsed;
  if (!h.is_object()) {
    ctx.add(where, "hf_config file \"" + file + "\" holds " + type_name(h) + ", expected a JSON object");
    return;
  }
  auto field_where = [&](const std::string& k) { return where + " (" + file + " /" + k + ")"; };
  auto int_field = [&](const std::string& k, int64_t hi, int64_t& out, bool required) {
    auto it = h.find(k);
    if (it == h.end() || it->is_null()) {
      if (required) ctx.add(field_where(k), "missing in the Hugging Face config, expected an integer");
      return false;
    }
    auto v = to_int(ctx, *it, field_where(k), 1, hi);
    if (v) out = *v;
    return v.has_value();
  };
  // The MLP activation named by hidden_act (activation_function for gpt2): silu with the
  // gated MLP of llama-like models is SwiGLU, relu2 (Nemotron) is squared ReLU, gelu and its
  // approximations (gelu_new, gelu_pytorch_tanh) are GeLU. `gated` says whether the model
  // type's MLP has the gate projection.
  auto activation_field = [&](const std::string& k, const std::string& fallback, bool gated) {
    auto it = h.find(k);
    const std::string act = it != h.end() && it->is_string() ? it->get<std::string>() : fallback;
    const bool gelu = act.rfind("gelu", 0) == 0;
    if (gated && (act == "silu" || act == "swish")) m.activation = Activation::kSwiglu;
    else if (!gated && act == "relu2") m.activation = Activation::kSquaredRelu;
    else if (!gated && gelu) m.activation = Activation::kGelu;
    else
      ctx.add(field_where(k), "found \"" + act + "\", expected " +
                                  (gated ? std::string("silu (SwiGLU; other gated activations are not modelled)")
                                         : std::string("gelu, gelu_new, gelu_pytorch_tanh or relu2")));
  };
  std::string type = h.value("model_type", std::string());
  static const std::vector<std::string> kLlamaLike = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"};
  static const std::vector<std::string> kGptLike = {"gpt2", "nemotron"};
  if (type == "nemotron") {
    // Nemotron-4: a GPT block (LayerNorm, no gate) with squared-ReLU MLP, grouped-query
    // attention and untied embeddings (transformers' NemotronConfig).
    m.architecture = Architecture::kGpt;
    seen.architecture = true;
    int_field("num_hidden_layers", kMaxNumLayers, m.num_layers, true);
    int_field("hidden_size", kMaxHiddenSize, m.hidden_size, true);
    int_field("num_attention_heads", kMaxAttentionHeads, m.num_attention_heads, true);
    if (int_field("num_key_value_heads", kMaxAttentionHeads, m.num_kv_heads, false)) seen.kv_heads = true;
    int_field("head_dim", kMaxHiddenSize, m.head_dim, false);
    if (int_field("intermediate_size", kMaxFfnHiddenSize, m.ffn_hidden_size, true)) seen.ffn = true;
    int_field("vocab_size", kMaxVocabSize, m.vocab_size, true);
    int_field("max_position_embeddings", kMaxSeqLength, m.seq_length, false);
    m.tie_embeddings = h.value("tie_word_embeddings", false);
    seen.tie = true;
    activation_field("hidden_act", "relu2", false);
  } else if (std::find(kLlamaLike.begin(), kLlamaLike.end(), type) != kLlamaLike.end()) {
    m.architecture = Architecture::kLlama;
    seen.architecture = true;
    int_field("num_hidden_layers", kMaxNumLayers, m.num_layers, true);
    int_field("hidden_size", kMaxHiddenSize, m.hidden_size, true);
    int_field("num_attention_heads", kMaxAttentionHeads, m.num_attention_heads, true);
    if (int_field("num_key_value_heads", kMaxAttentionHeads, m.num_kv_heads, false)) seen.kv_heads = true;
    int_field("head_dim", kMaxHiddenSize, m.head_dim, false);  // Qwen3: 128 with hidden 2048 and 32 heads
    if (int_field("intermediate_size", kMaxFfnHiddenSize, m.ffn_hidden_size, true)) seen.ffn = true;
    int_field("vocab_size", kMaxVocabSize, m.vocab_size, true);
    int_field("max_position_embeddings", kMaxSeqLength, m.seq_length, false);
    m.tie_embeddings = h.value("tie_word_embeddings", false);
    seen.tie = true;
    // Qwen3's attention normalizes every head's query and key (transformers' Qwen3Attention
    // q_norm / k_norm); its config has no key for it.
    m.qk_layernorm = type == "qwen3" || type == "qwen3_moe";
    activation_field("hidden_act", "silu", true);
    if (int_field("num_local_experts", kMaxExperts, m.num_experts, false) ||
        int_field("num_experts", kMaxExperts, m.num_experts, false)) {
      int_field("num_experts_per_tok", kMaxExperts, m.moe_top_k, true);
      m.moe_ffn_hidden_size = m.ffn_hidden_size;
      int_field("moe_intermediate_size", kMaxFfnHiddenSize, m.moe_ffn_hidden_size, false);
    }
    // MoE shapes the cost model does not carry yet (every layer is the same routed-expert MoE
    // layer): refuse them rather than predict a different model.
    auto positive = [&](const char* k) {
      auto it = h.find(k);
      return it != h.end() && it->is_number() && it->get<double>() > 0;
    };
    for (const char* k : {"shared_expert_intermediate_size", "n_shared_experts"})
      if (positive(k)) ctx.add(field_where(k), "shared experts are not modelled yet (routed experts only); expected 0 or absent");
    auto sparse_step = h.find("decoder_sparse_step");
    auto mlp_only = h.find("mlp_only_layers");
    if ((sparse_step != h.end() && sparse_step->is_number() && sparse_step->get<double>() > 1) ||
        (mlp_only != h.end() && mlp_only->is_array() && !mlp_only->empty()) || positive("first_k_dense_replace"))
      ctx.add(where, "hf_config \"" + file + "\" mixes dense and MoE layers (decoder_sparse_step, mlp_only_layers or "
                     "first_k_dense_replace); only models whose every layer is MoE (or none) are modelled yet");
  } else if (std::find(kGptLike.begin(), kGptLike.end(), type) != kGptLike.end()) {
    m.architecture = Architecture::kGpt;
    seen.architecture = true;
    int_field("n_layer", kMaxNumLayers, m.num_layers, true);
    int_field("n_embd", kMaxHiddenSize, m.hidden_size, true);
    int_field("n_head", kMaxAttentionHeads, m.num_attention_heads, true);
    if (int_field("n_inner", kMaxFfnHiddenSize, m.ffn_hidden_size, false)) seen.ffn = true;
    int_field("vocab_size", kMaxVocabSize, m.vocab_size, true);
    int_field("n_positions", kMaxSeqLength, m.seq_length, false);
    m.tie_embeddings = h.value("tie_word_embeddings", true);
    seen.tie = true;
    activation_field("activation_function", "gelu_new", false);
  } else {
    ctx.add(where, "hf_config \"" + file + "\" has model_type " + (type.empty() ? std::string("(none)") : "\"" + type + "\"") +
                       ", expected one of " + join(kLlamaLike) + ", " + join(kGptLike));
  }
}

void read_dlrm(Ctx& ctx, Obj& o, DlrmConfig& d, bool& tables_ok) {
  tables_ok = false;
  if (const json* t = o.get("embedding_tables")) {
    const std::string tp = o.at("embedding_tables");
    if (!t->is_array() || t->empty()) {
      ctx.found(tp, *t, "a non-empty array of tables {name, rows, dim, pooling_factor}");
    } else if (static_cast<int64_t>(t->size()) > kMaxEmbeddingTables) {
      ctx.found(tp, *t, "at most " + fmt_int(kMaxEmbeddingTables) + " tables");
    } else {
      tables_ok = true;
      for (size_t i = 0; i < t->size(); ++i) {
        const std::string ip = tp + "/" + std::to_string(i);
        const json* e = section(ctx, &(*t)[i], ip);
        if (!e) { tables_ok = false; continue; }
        Obj to(ctx, e, ip, {"name", "rows", "dim", "pooling_factor"});
        EmbeddingTable tab;
        tab.name = get_str(ctx, to, "name").value_or("table" + std::to_string(i));
        auto rows = get_int(ctx, to, "rows", 1, kMaxEmbeddingRows);
        auto dim = get_int(ctx, to, "dim", 1, kMaxEmbeddingDim);
        if (!to.has("rows")) ctx.add(to.at("rows"), "missing, expected a positive integer");
        if (!to.has("dim")) ctx.add(to.at("dim"), "missing, expected a positive integer");
        tab.pooling_factor = get_num(ctx, to, "pooling_factor", 0, 1e6, true).value_or(1.0);
        to.finish();
        if (!rows || !dim) { tables_ok = false; continue; }
        tab.rows = *rows;
        tab.dim = *dim;
        d.tables.push_back(tab);
      }
    }
  } else {
    ctx.add(o.at("embedding_tables"), "missing, expected an array of tables {name, rows, dim, pooling_factor}");
  }
  auto mlp = [&](const std::string& key, std::vector<int64_t>& out) {
    const json* v = o.get(key);
    if (!v) { ctx.add(o.at(key), "missing, expected an array of layer widths"); return; }
    if (!v->is_array() || v->empty() || static_cast<int64_t>(v->size()) > kMaxMlpLayers) {
      ctx.found(o.at(key), *v, "a non-empty array of at most " + fmt_int(kMaxMlpLayers) + " layer widths");
      return;
    }
    for (size_t i = 0; i < v->size(); ++i)
      if (auto w = to_int(ctx, (*v)[i], o.at(key) + "/" + std::to_string(i), 1, kMaxFfnHiddenSize)) out.push_back(*w);
  };
  mlp("bottom_mlp", d.bottom_mlp);
  mlp("top_mlp", d.top_mlp);
  if (auto f = get_int(ctx, o, "dense_features", 0, kMaxHiddenSize)) d.dense_features = *f;
  else if (!o.has("dense_features")) ctx.add(o.at("dense_features"), "missing, expected an integer >= 0");
  if (const json* v = o.get("interaction")) {
    auto s = to_str(ctx, *v, o.at("interaction"));
    if (s && *s != "dot" && *s != "dcn") ctx.found(o.at("interaction"), *v, "one of dot, dcn");
    else if (s) d.interaction = *s;
  }
  if (auto r = get_int(ctx, o, "dcn_rank", 1, kMaxHiddenSize)) d.dcn_rank = *r;
  if (auto l = get_int(ctx, o, "dcn_layers", 1, kMaxMlpLayers)) d.dcn_layers = *l;
  if (d.interaction == "dcn" && (d.dcn_layers == 0 || d.dcn_rank == 0) && !o.has("dcn_layers"))
    ctx.add(o.at("dcn_layers"), "missing, expected a positive integer (interaction is dcn)");
  if (d.interaction == "dcn" && d.dcn_rank == 0 && !o.has("dcn_rank"))
    ctx.add(o.at("dcn_rank"), "missing, expected a positive integer (interaction is dcn)");
  if (const json* v = o.get("embedding_optimizer")) {
    auto s = to_str(ctx, *v, o.at("embedding_optimizer"));
    if (s && *s != "rowwise-adagrad" && *s != "adagrad" && *s != "sgd" && *s != "adam")
      ctx.found(o.at("embedding_optimizer"), *v, "one of rowwise-adagrad, adagrad, sgd, adam");
    else if (s) d.embedding_optimizer = *s;
  }
  if (auto t = get_enum(ctx, o, "embedding_dtype", kPrecisions)) d.embedding_dtype = *t;
  if (auto h = get_num(ctx, o, "uvm_cache_hit_rate", 0, 1, false)) d.uvm_cache_hit_rate = *h;
  // The dot interaction takes pairwise dot products of the bottom-MLP output and every
  // embedding vector, so they must share one width (Naumov et al. 2019, DLRM).
  if (tables_ok && d.interaction == "dot") {
    const int64_t dim = d.tables.front().dim;
    for (size_t i = 1; i < d.tables.size(); ++i)
      if (d.tables[i].dim != dim)
        ctx.add(o.at("embedding_tables") + "/" + std::to_string(i) + "/dim",
                "found " + fmt_int(d.tables[i].dim) + ", expected " + fmt_int(dim) +
                    " (the dot interaction needs every table to have the same dim)");
    if (!d.bottom_mlp.empty() && d.bottom_mlp.back() != dim)
      ctx.add(o.at("bottom_mlp") + "/" + std::to_string(d.bottom_mlp.size() - 1),
              "found " + fmt_int(d.bottom_mlp.back()) + ", expected " + fmt_int(dim) +
                  " (the last bottom-MLP width must equal the embedding dim for the dot interaction)");
  }
}

}  // namespace

void read_model(Ctx& ctx, const json* mj, const std::string& base_dir, ModelConfig& m) {
  std::vector<std::string> known = {"preset", "architecture", "hf_config"};
  known.insert(known.end(), kTransformerKeys.begin(), kTransformerKeys.end());
  known.insert(known.end(), kDlrmKeys.begin(), kDlrmKeys.end());
  if (!mj) {
    ctx.add("/model", "missing, expected an object with the model (or {\"preset\": \"...\"})");
    return;
  }
  Obj o(ctx, mj, "/model", known);
  ModelSeen seen;
  const size_t problems_before = ctx.count();
  if (auto p = get_str(ctx, o, "preset")) {
    if (const ModelPreset* mp = find_model_preset(*p)) {
      m = mp->config;
      seen = {true, true, true, true};
    } else {
      std::string near = closest_name(*p, model_preset_names());
      ctx.add(o.at("preset"), "found \"" + *p + "\", expected a model preset: " + join(model_preset_names()) +
                                  (near.empty() ? "" : " (did you mean \"" + near + "\"?)"));
    }
  }
  if (auto f = get_str(ctx, o, "hf_config")) {
    std::filesystem::path p(*f);
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    apply_hf_config(ctx, p.lexically_normal().string(), o.at("hf_config"), m, seen);
  }
  // A preset or hf_config that failed to load: do not also report every key it would have filled.
  const bool source_failed = ctx.count() > problems_before;
  if (auto a = get_enum(ctx, o, "architecture", kArchitectures)) {
    m.architecture = *a;
    seen.architecture = true;
  } else if (!o.has("architecture") && !seen.architecture) {
    if (source_failed) return;
    ctx.add(o.at("architecture"), "missing, expected one of gpt, llama, dlrm (or a model preset)");
    return;
  }
  if (o.has("architecture") && !seen.architecture) return;  // bad value, reported

  if (m.architecture == Architecture::kDlrm) {
    for (const auto& k : kTransformerKeys)
      if (o.has(k)) { ctx.add(o.at(k), "not used by a dlrm model (it is a transformer key)"); }
    bool tables_ok = false;
    read_dlrm(ctx, o, m.dlrm, tables_ok);
    o.finish();
    return;
  }
  for (const auto& k : kDlrmKeys)
    if (o.has(k)) ctx.add(o.at(k), std::string("only for architecture dlrm (this model is ") + to_string(m.architecture) + ")");

  struct IntKey { const char* key; int64_t hi; int64_t* out; bool* seen; };
  IntKey keys[] = {
      {"num_layers", kMaxNumLayers, &m.num_layers, nullptr},
      {"hidden_size", kMaxHiddenSize, &m.hidden_size, nullptr},
      {"num_attention_heads", kMaxAttentionHeads, &m.num_attention_heads, nullptr},
      {"num_kv_heads", kMaxAttentionHeads, &m.num_kv_heads, &seen.kv_heads},
      {"ffn_hidden_size", kMaxFfnHiddenSize, &m.ffn_hidden_size, &seen.ffn},
      {"vocab_size", kMaxVocabSize, &m.vocab_size, nullptr},
      {"seq_length", kMaxSeqLength, &m.seq_length, nullptr},
  };
  bool bad = false;
  for (auto& k : keys) {
    if (!o.has(k.key)) continue;
    if (auto v = get_int(ctx, o, k.key, 1, k.hi)) {
      *k.out = *v;
      if (k.seen) *k.seen = true;
    } else {
      *k.out = -1;  // invalid: reported, skip the checks that use it
      bad = true;
    }
  }
  if (auto d = get_int(ctx, o, "head_dim", 1, kMaxHiddenSize)) m.head_dim = *d;
  if (auto t = get_bool(ctx, o, "tie_embeddings")) {
    m.tie_embeddings = *t;
    seen.tie = true;
  }
  // Mixture of experts.
  if (auto e = get_int(ctx, o, "num_experts", 1, kMaxExperts)) m.num_experts = *e;
  else if (o.has("num_experts")) m.num_experts = -1;
  if (auto k = get_int(ctx, o, "moe_top_k", 1, kMaxExperts)) m.moe_top_k = *k;
  else if (o.has("moe_top_k")) m.moe_top_k = -1;
  if (auto f = get_int(ctx, o, "moe_ffn_hidden_size", 1, kMaxFfnHiddenSize)) m.moe_ffn_hidden_size = *f;
  if (auto c = get_num(ctx, o, "moe_capacity_factor", 0, kMaxCapacityFactor, true)) m.moe_capacity_factor = *c;
  if (auto d = get_bool(ctx, o, "moe_dropless")) m.moe_dropless = *d;
  if (auto d = get_bool(ctx, o, "moe_router_force_load_balancing")) m.moe_router_force_load_balancing = *d;
  if (auto d = get_bool(ctx, o, "qk_layernorm")) m.qk_layernorm = *d;
  if (auto a = get_enum(ctx, o, "activation", kActivations)) m.activation = *a;
  if (auto k = get_enum(ctx, o, "attention_kernel", kAttentionKernels)) m.attention_kernel = *k;
  // Dropout probabilities: 0 <= p < 1 (p = 1 would drop everything and divide by zero).
  for (auto [key, out] : {std::pair<const char*, std::optional<double>*>{"hidden_dropout", &m.hidden_dropout},
                          {"attention_dropout", &m.attention_dropout}}) {
    const json* v = o.get(key);
    if (!v) continue;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0 || v->get<double>() >= 1)
      ctx.add(o.at(key), "found " + show(*v) + (v->is_number() ? "" : " (" + type_name(*v) + ")") +
                             ", expected a probability >= 0 and < 1");
    else
      *out = v->get<double>();
  }
  o.finish();

  // Required values and defaults.
  const char* required[] = {"num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length"};
  int64_t* values[] = {&m.num_layers, &m.hidden_size, &m.num_attention_heads, &m.vocab_size, &m.seq_length};
  for (int i = 0; i < 5 && !source_failed; ++i)
    if (*values[i] == 0) ctx.add(o.at(required[i]), "missing, expected a positive integer (or a model preset)");
  if (!seen.kv_heads && m.num_attention_heads > 0) m.num_kv_heads = m.num_attention_heads;
  if (!seen.ffn) {
    if (m.architecture == Architecture::kGpt) {
      if (m.hidden_size > 0) m.ffn_hidden_size = 4 * m.hidden_size;
    } else if (!source_failed) {
      ctx.add(o.at("ffn_hidden_size"), "missing, expected a positive integer (required for llama: SwiGLU width, e.g. 14336 for Llama-3 8B)");
    }
  }
  if (!seen.tie) m.tie_embeddings = m.architecture == Architecture::kGpt;
  if (bad) return;

  // Shapes.
  if (m.head_dim == 0 && m.hidden_size > 0 && m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads != 0)
    ctx.add(o.at("hidden_size"), "found " + fmt_int(m.hidden_size) + ", expected a multiple of num_attention_heads (" +
                                     fmt_int(m.num_attention_heads) + ")");
  if (m.num_kv_heads > 0 && m.num_attention_heads > 0 && m.num_attention_heads % m.num_kv_heads != 0)
    ctx.add(o.at("num_kv_heads"), "found " + fmt_int(m.num_kv_heads) + ", expected a divisor of num_attention_heads (" +
                                      fmt_int(m.num_attention_heads) + ")");
  if (m.num_experts > 1) {
    if (m.moe_top_k == 0) ctx.add(o.at("moe_top_k"), "missing, expected an integer in 1.." + fmt_int(m.num_experts) + " (experts per token)");
    else if (m.moe_top_k > m.num_experts)
      ctx.add(o.at("moe_top_k"), "found " + fmt_int(m.moe_top_k) + ", expected at most num_experts (" + fmt_int(m.num_experts) + ")");
    if (m.moe_ffn_hidden_size == 0) m.moe_ffn_hidden_size = m.ffn_hidden_size;
    if (m.moe_dropless && o.has("moe_capacity_factor"))
      ctx.add(o.at("moe_dropless"), "true, but moe_capacity_factor is given; dropless routing has no capacity (Megatron: "
                                    "leave --moe-expert-capacity-factor unset), expected one of them");
  } else if (m.num_experts == 1 || m.num_experts == 0) {
    if (m.moe_dropless) ctx.add(o.at("moe_dropless"), "true, but the model is dense; expected num_experts > 1 with it");
    if (m.moe_router_force_load_balancing)
      ctx.add(o.at("moe_router_force_load_balancing"), "true, but the model is dense; expected num_experts > 1 with it");
    if (o.has("moe_top_k") && m.moe_top_k > 0)
      ctx.add(o.at("moe_top_k"), "set, but the model is dense; expected num_experts > 1 with it");
  }
}

}  // namespace monarch::scenario_io_detail
