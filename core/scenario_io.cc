#include "core/scenario_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "core/dlrm_model.h"
#include "core/framework_rules.h"
#include "core/presets.h"
#include "core/units.h"

namespace monarch {
namespace {

using nlohmann::json;

// ----------------------------------------------------------------------------- helpers

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

// The value as the user wrote it, short enough for one line.
std::string show(const json& v) {
  std::string s;
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string fmt_int(int64_t v) { return std::to_string(v); }

std::string fmt_num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

class Ctx {
 public:
  void add(const std::string& where, const std::string& message) { problems_.push_back({where, message}); }
  void found(const std::string& where, const json& v, const std::string& expected) {
    add(where, "found " + show(v) + ", expected " + expected);
  }
  Problems& problems() { return problems_; }
  size_t count() const { return problems_.size(); }

 private:
  Problems problems_;
};

// Reads the keys of one JSON object; finish() reports the keys nobody asked for.
class Obj {
 public:
  Obj(Ctx& ctx, const json* j, std::string path, std::vector<std::string> known)
      : ctx_(ctx), j_(j), path_(std::move(path)), known_(std::move(known)) {}

  bool present() const { return j_ != nullptr; }
  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return path_ + "/" + key; }
  const json* get(const std::string& key) {
    if (!j_) return nullptr;
    auto it = j_->find(key);
    if (it == j_->end()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) const { return j_ && j_->contains(key); }

  void finish() {
    if (!j_) return;
    for (auto it = j_->begin(); it != j_->end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
      std::string msg = "unknown key";
      std::string near = closest_name(it.key(), known_);
      if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
      else msg += "; expected one of: " + join(known_);
      ctx_.add(at(it.key()), msg);
    }
  }

 private:
  Ctx& ctx_;
  const json* j_;
  std::string path_;
  std::vector<std::string> known_;
};

// A section that must be an object when present.
const json* section(Ctx& ctx, const json* v, const std::string& path) {
  if (!v) return nullptr;
  if (!v->is_object()) {
    ctx.found(path, *v, "an object");
    return nullptr;
  }
  return v;
}

std::string int_range(int64_t lo, int64_t hi) {
  if (lo == 1) return "a positive integer <= " + fmt_int(hi);
  if (lo == 0) return "an integer in 0.." + fmt_int(hi);
  return "an integer in " + fmt_int(lo) + ".." + fmt_int(hi);
}

// Integers: JSON integers, or numbers with no fraction (1e3). Range checked on the double
// first, so 1e30 never reaches an int64.
std::optional<int64_t> to_int(Ctx& ctx, const json& v, const std::string& where, int64_t lo, int64_t hi,
                              const std::string& what = "") {
  const std::string expected = what.empty() ? int_range(lo, hi) : what;
  if (!v.is_number()) {
    if (v.is_string()) ctx.add(where, "found " + show(v) + " (a string), expected " + expected + " (write it without quotes)");
    else ctx.add(where, "found " + show(v) + " (" + type_name(v) + "), expected " + expected);
    return std::nullopt;
  }
  double d = v.get<double>();
  if (v.is_number_float() && (!std::isfinite(d) || d != std::floor(d))) {
    ctx.found(where, v, expected + " (not a fraction)");
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<double>(u) < static_cast<double>(lo)) {
      ctx.found(where, v, expected);
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  int64_t i = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
  if (i < lo || i > hi) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  return i;
}

std::optional<int64_t> get_int(Ctx& ctx, Obj& o, const std::string& key, int64_t lo, int64_t hi,
                               const std::string& what = "") {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_int(ctx, *v, o.at(key), lo, hi, what);
}

// Numbers: lo_open means the value must be strictly greater than lo.
std::optional<double> to_num(Ctx& ctx, const json& v, const std::string& where, double lo, double hi,
                             bool lo_open) {
  std::string expected = std::string("a number ") + (lo_open ? "> " : ">= ") + fmt_num(lo) + " and <= " + fmt_num(hi);
  if (!v.is_number()) {
    ctx.add(where, "found " + show(v) + " (" + type_name(v) + "), expected " + expected);
    return std::nullopt;
  }
  double d = v.get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  return d;
}

std::optional<double> get_num(Ctx& ctx, Obj& o, const std::string& key, double lo, double hi, bool lo_open) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_num(ctx, *v, o.at(key), lo, hi, lo_open);
}

std::optional<bool> get_bool(Ctx& ctx, Obj& o, const std::string& key) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    ctx.found(o.at(key), *v, "true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> to_str(Ctx& ctx, const json& v, const std::string& where) {
  if (!v.is_string()) {
    ctx.found(where, v, "a string");
    return std::nullopt;
  }
  return v.get<std::string>();
}

std::optional<std::string> get_str(Ctx& ctx, Obj& o, const std::string& key) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_str(ctx, *v, o.at(key));
}

template <typename E>
std::optional<E> to_enum(Ctx& ctx, const json& v, const std::string& where, const std::vector<E>& values) {
  std::vector<std::string> names;
  for (E e : values) names.push_back(to_string(e));
  std::string expected = "one of " + join(names);
  if (!v.is_string()) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  const std::string s = v.get<std::string>();
  for (E e : values)
    if (s == to_string(e)) return e;
  std::string near = closest_name(s, names);
  ctx.add(where, "found " + show(v) + ", expected " + expected + (near.empty() ? "" : " (did you mean \"" + near + "\"?)"));
  return std::nullopt;
}

template <typename E>
std::optional<E> get_enum(Ctx& ctx, Obj& o, const std::string& key, const std::vector<E>& values) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_enum(ctx, *v, o.at(key), values);
}

const std::vector<Architecture> kArchitectures = {Architecture::kGpt, Architecture::kLlama, Architecture::kDlrm};
const std::vector<Precision> kPrecisions = {Precision::kFp32, Precision::kBf16, Precision::kFp16, Precision::kFp8};
const std::vector<Optimizer> kOptimizers = {Optimizer::kAdam, Optimizer::kSgd};
const std::vector<Topology> kTopologies = {Topology::kFatTree, Topology::kRailOptimized, Topology::kStar};
const std::vector<Schedule> kSchedules = {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved};
const std::vector<Recompute> kRecomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
const std::vector<Objective> kObjectives = {Objective::kIterationTime, Objective::kMemory, Objective::kTimeToTrain};
const std::vector<RecoveryMode> kRecoveryModes = {RecoveryMode::kFullRestart, RecoveryMode::kReplica};
const std::vector<Backend> kBackends = {Backend::kAnalytical, Backend::kSimgrid, Backend::kRealCpu, Backend::kRealGpu};
const std::vector<Activation> kActivations = {Activation::kGelu, Activation::kSwiglu, Activation::kSquaredRelu};
const std::vector<AttentionKernel> kAttentionKernels = {AttentionKernel::kFlash, AttentionKernel::kMaterialized};
const std::vector<Framework> kFrameworks = {Framework::kMegatron, Framework::kDeepspeed, Framework::kTorchtitan};

std::optional<std::string> read_text_file(Ctx& ctx, const std::string& path, const std::string& where,
                                          const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    ctx.add(where, what + " \"" + path + "\" does not exist");
    return std::nullopt;
  }
  if (std::filesystem::is_directory(path, ec)) {
    ctx.add(where, what + " \"" + path + "\" is a directory, expected a JSON file");
    return std::nullopt;
  }
  // Bounded read: works for pipes (<(jq ...)) and refuses endless devices (/dev/zero).
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.add(where, what + " \"" + path + "\" cannot be read");
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxScenarioFileBytes) {
      ctx.add(where, what + " \"" + path + "\" is larger than " + std::to_string(kMaxScenarioFileBytes) +
                         " bytes, expected a JSON file of a few kB");
      return std::nullopt;
    }
  }
  return text;
}

// ----------------------------------------------------------------------------- model

const std::vector<std::string> kTransformerKeys = {
    "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size",
    "seq_length", "tie_embeddings", "num_experts", "moe_top_k", "moe_ffn_hidden_size", "moe_capacity_factor",
    "moe_dropless", "hidden_dropout", "attention_dropout", "activation", "attention_kernel"};
const std::vector<std::string> kDlrmKeys = {"embedding_tables", "bottom_mlp", "top_mlp", "dense_features",
                                            "interaction", "dcn_rank", "dcn_layers", "embedding_optimizer",
                                            "uvm_cache_hit_rate"};

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
    if (o.has("moe_top_k") && m.moe_top_k > 0)
      ctx.add(o.at("moe_top_k"), "set, but the model is dense; expected num_experts > 1 with it");
  }
}

// ----------------------------------------------------------------------------- cluster

void read_gpu(Ctx& ctx, const json* g, const std::string& where, GpuSpec& gpu, const GpuPreset** preset) {
  *preset = nullptr;
  if (!g) {
    ctx.add(where, "missing, expected a GPU preset (" + join(gpu_preset_names()) + ") or an object");
    return;
  }
  if (g->is_string()) {
    const std::string name = g->get<std::string>();
    if (const GpuPreset* p = find_gpu_preset(name)) {
      gpu = p->spec;
      *preset = p;
    } else {
      std::string near = closest_name(name, gpu_preset_names());
      ctx.add(where, "found \"" + name + "\", expected a GPU preset: " + join(gpu_preset_names()) +
                         (near.empty() ? " or an object {name, peak_tflops, memory_gib, memory_bandwidth_GBps}"
                                       : " (did you mean \"" + near + "\"?)"));
    }
    return;
  }
  if (!g->is_object()) {
    ctx.found(where, *g, "a GPU preset name or an object {name, peak_tflops, memory_gib, memory_bandwidth_GBps}");
    return;
  }
  Obj o(ctx, g, where, {"name", "peak_tflops", "memory_gib", "memory_bandwidth_GBps", "profile"});
  auto name = get_str(ctx, o, "name");
  if (!name) {
    if (!o.has("name")) ctx.add(o.at("name"), "missing, expected a string");
  } else if (const GpuPreset* p = find_gpu_preset(*name)) {
    gpu = p->spec;  // explicit keys below override the preset's figures
    *preset = p;
  } else {
    gpu.name = *name;
  }
  const bool custom = *preset == nullptr;
  if (const json* pt = section(ctx, o.get("peak_tflops"), o.at("peak_tflops"))) {
    Obj po(ctx, pt, o.at("peak_tflops"), {"fp32", "tf32", "bf16", "fp16", "fp8"});
    double* fields[] = {&gpu.peak_tflops.fp32, &gpu.peak_tflops.tf32, &gpu.peak_tflops.bf16, &gpu.peak_tflops.fp16,
                        &gpu.peak_tflops.fp8};
    const char* names[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
    for (int i = 0; i < 5; ++i)
      if (auto v = get_num(ctx, po, names[i], 0, kMaxPeakTflops, false)) *fields[i] = *v;
    po.finish();
  } else if (custom && !o.has("peak_tflops")) {
    ctx.add(o.at("peak_tflops"), "missing, expected an object {fp32, tf32, bf16, fp16, fp8} in TFLOP/s (dense)");
  }
  if (auto v = get_num(ctx, o, "memory_gib", 0, kMaxMemoryGib, true)) gpu.memory_gib = *v;
  else if (custom && !o.has("memory_gib")) ctx.add(o.at("memory_gib"), "missing, expected a number > 0 (HBM capacity, GiB)");
  if (auto v = get_num(ctx, o, "memory_bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) gpu.memory_bandwidth_GBps = *v;
  else if (custom && !o.has("memory_bandwidth_GBps"))
    ctx.add(o.at("memory_bandwidth_GBps"), "missing, expected a number > 0 (HBM bandwidth, GB/s)");
  if (auto v = get_str(ctx, o, "profile")) gpu.profile = *v;
  o.finish();
}

void read_cluster(Ctx& ctx, const json* cj, ClusterConfig& c, bool& nodes_ok) {
  nodes_ok = false;
  if (!cj) {
    ctx.add("/cluster", "missing, expected an object {gpu, num_gpus, gpus_per_node, intra_node, inter_node}");
    return;
  }
  Obj o(ctx, cj, "/cluster", {"gpu", "num_gpus", "gpus_per_node", "intra_node", "inter_node"});
  const GpuPreset* preset = nullptr;
  read_gpu(ctx, o.get("gpu"), o.at("gpu"), c.gpu, &preset);
  const bool gpu_ok = preset != nullptr || (o.get("gpu") && o.get("gpu")->is_object());
  auto n = get_int(ctx, o, "num_gpus", 1, kMaxNumGpus);
  if (n) c.num_gpus = *n;
  else if (!o.has("num_gpus")) ctx.add(o.at("num_gpus"), "missing, expected a positive integer <= " + fmt_int(kMaxNumGpus));
  auto per = get_int(ctx, o, "gpus_per_node", 1, kMaxGpusPerNode);
  if (per) c.gpus_per_node = *per;
  else if (!o.has("gpus_per_node")) {
    if (preset) c.gpus_per_node = preset->default_gpus_per_node;
    else if (gpu_ok) ctx.add(o.at("gpus_per_node"), "missing, expected a positive integer (no default for a custom GPU)");
  }
  // num_gpus need not fill the last node (a 128-GPU job on GB200 NVL72 takes one 72-GPU
  // NVLink domain and 56 GPUs of a second).
  if (c.num_gpus > 0 && c.gpus_per_node > 0) nodes_ok = true;
  // Links: presets give defaults; a custom GPU needs them written out.
  const bool multi_node = c.num_gpus > c.gpus_per_node && c.gpus_per_node > 0;
  if (preset) {
    c.intra_node = preset->default_intra_node;
    c.inter_node = preset->default_inter_node;
    c.nics_per_node = std::min(preset->default_nics_per_node, std::max<int64_t>(c.gpus_per_node, 1));
  } else {
    c.nics_per_node = std::max<int64_t>(c.gpus_per_node, 0);
  }
  if (const json* ij = section(ctx, o.get("intra_node"), o.at("intra_node"))) {
    Obj io(ctx, ij, o.at("intra_node"), {"bandwidth_GBps", "latency_us"});
    if (auto v = get_num(ctx, io, "bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) c.intra_node.bandwidth_GBps = *v;
    else if (!io.has("bandwidth_GBps") && !preset && gpu_ok)
      ctx.add(io.at("bandwidth_GBps"), "missing, expected a number > 0 (per GPU, per direction; no default for a custom GPU)");
    if (auto v = get_num(ctx, io, "latency_us", 0, kMaxLatency_us, false)) c.intra_node.latency_us = *v;
    io.finish();
  } else if (!o.has("intra_node") && !preset && gpu_ok && c.gpus_per_node > 1) {
    ctx.add(o.at("intra_node"), "missing, expected {bandwidth_GBps, latency_us} (no default for a custom GPU)");
  }
  if (const json* ej = section(ctx, o.get("inter_node"), o.at("inter_node"))) {
    Obj eo(ctx, ej, o.at("inter_node"), {"bandwidth_GBps", "nics_per_node", "latency_us", "topology", "oversubscription"});
    if (auto v = get_num(ctx, eo, "bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) c.inter_node.bandwidth_GBps = *v;
    else if (!eo.has("bandwidth_GBps") && !preset && gpu_ok && multi_node)
      ctx.add(eo.at("bandwidth_GBps"), "missing, expected a number > 0 (per NIC, per direction; no default for a custom GPU)");
    if (auto v = get_int(ctx, eo, "nics_per_node", 1, kMaxGpusPerNode)) c.nics_per_node = *v;
    if (auto v = get_num(ctx, eo, "latency_us", 0, kMaxLatency_us, false)) c.inter_node.latency_us = *v;
    if (auto v = get_enum(ctx, eo, "topology", kTopologies)) c.topology = *v;
    if (auto v = get_num(ctx, eo, "oversubscription", 1, kMaxOversubscription, false)) c.oversubscription = *v;
    eo.finish();
  } else if (!o.has("inter_node") && !preset && gpu_ok && multi_node) {
    ctx.add(o.at("inter_node"), "missing, expected {bandwidth_GBps, nics_per_node, latency_us, topology} (no default for a custom GPU)");
  }
  o.finish();
}

// ----------------------------------------------------------------------------- parallelism

struct DegreeKey {
  const char* canonical;
  std::vector<const char*> aliases;
};
const std::vector<DegreeKey> kDegreeKeys = {
    {"tensor_parallel_degree", {"tp", "tensor_model_parallel_size"}},
    {"pipeline_parallel_degree", {"pp", "pipeline_model_parallel_size"}},
    {"data_parallel_degree", {"dp", "data_parallel_size"}},
    {"context_parallel_degree", {"cp", "context_parallel_size"}},
    {"expert_parallel_degree", {"ep", "expert_model_parallel_size"}},
    {"virtual_pipeline_degree", {"vpp", "virtual_pipeline_model_parallel_size"}},
    // torchtitan's name; Megatron's expert_tensor_parallel_size (docs/scenario_extensions.md).
    {"expert_tensor_parallel_degree", {"etp", "expert_tensor_parallel_size"}},
};
const std::vector<std::string> kParallelismOtherKeys = {
    "pipeline_schedule", "sequence_parallel", "activation_recompute", "zero_stage",
    "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "layers_per_stage",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"};

std::vector<std::string> parallelism_keys() {
  std::vector<std::string> k;
  for (const auto& d : kDegreeKeys) {
    k.push_back(d.canonical);
    for (const char* a : d.aliases) k.push_back(a);
  }
  k.insert(k.end(), kParallelismOtherKeys.begin(), kParallelismOtherKeys.end());
  return k;
}

// Keys of `parallelism` that name the same thing as `key` (itself excluded).
std::vector<std::string> alias_siblings(const std::string& key) {
  for (const auto& d : kDegreeKeys) {
    std::vector<std::string> group = {d.canonical};
    for (const char* a : d.aliases) group.push_back(a);
    if (std::find(group.begin(), group.end(), key) == group.end()) continue;
    group.erase(std::find(group.begin(), group.end(), key));
    return group;
  }
  return {};
}

void read_parallelism(Ctx& ctx, const json* pj, ParallelismConstraints& p) {
  if (!pj) return;
  Obj o(ctx, pj, "/parallelism", parallelism_keys());
  std::optional<int64_t>* outs[] = {&p.tp, &p.pp, &p.dp, &p.cp, &p.ep, &p.vpp, &p.etp};
  static_assert(std::size(outs) == 7, "one output per kDegreeKeys entry");
  for (size_t i = 0; i < kDegreeKeys.size(); ++i) {
    const auto& d = kDegreeKeys[i];
    std::vector<std::string> given;
    for (const std::string& k : {std::string(d.canonical), std::string(d.aliases[0]), std::string(d.aliases[1])})
      if (o.has(k)) given.push_back(k);
    if (given.empty()) continue;
    if (given.size() > 1) {
      ctx.add(o.at(given[1]), "gives " + std::string(d.canonical) + " a second time (also set as \"" + given[0] +
                                  "\"); expected one of " + d.canonical + ", " + d.aliases[0] + ", " + d.aliases[1]);
      for (const auto& g : given) (void)o.get(g);
      continue;
    }
    const bool is_dp = std::string(d.canonical) == "data_parallel_degree";
    const json* v = o.get(given[0]);
    if (is_dp && v->is_number() && v->get<double>() == -1) continue;  // -1 = derived
    const bool is_vpp = std::string(d.canonical) == "virtual_pipeline_degree";
    auto x = to_int(ctx, *v, o.at(given[0]), 1, is_vpp ? kMaxNumLayers : kMaxNumGpus,
                    is_dp ? "a positive integer <= " + fmt_int(kMaxNumGpus) + " or -1 (derived)" : "");
    if (x) *outs[i] = *x;
    else *outs[i] = -1;  // invalid, reported; the cross checks skip it
  }
  if (auto v = get_enum(ctx, o, "pipeline_schedule", kSchedules)) p.schedule = *v;
  if (auto v = get_bool(ctx, o, "sequence_parallel")) p.sequence_parallel = *v;
  if (auto v = get_enum(ctx, o, "activation_recompute", kRecomputes)) p.recompute = *v;
  if (auto v = get_int(ctx, o, "zero_stage", 0, 3, "an integer in 0..3 (ZeRO stage)")) p.zero_stage = *v;
  if (auto v = get_bool(ctx, o, "overlap_grad_reduce")) p.overlap_grad_reduce = *v;
  if (auto v = get_bool(ctx, o, "overlap_param_gather")) p.overlap_param_gather = *v;
  if (auto v = get_bool(ctx, o, "tp_comm_overlap")) p.tp_comm_overlap = *v;
  if (auto v = get_bool(ctx, o, "account_for_embedding_in_pipeline_split")) p.account_for_embedding = *v;
  if (auto v = get_bool(ctx, o, "account_for_loss_in_pipeline_split")) p.account_for_loss = *v;
  if (const json* v = o.get("layers_per_stage")) {
    const std::string where = o.at("layers_per_stage");
    if (!v->is_array() || v->empty() || static_cast<int64_t>(v->size()) > kMaxNumLayers) {
      ctx.found(where, *v, "a non-empty array of layer counts, one per pipeline stage (with virtual stages: per model chunk)");
    } else {
      std::vector<int64_t> split;
      bool good = true;
      for (size_t i = 0; i < v->size(); ++i) {
        auto n = to_int(ctx, (*v)[i], where + "/" + std::to_string(i), 1, kMaxNumLayers,
                        "a positive integer (transformer layers of the stage)");
        if (n) split.push_back(*n);
        else good = false;
      }
      if (good) p.layers_per_stage = std::move(split);
    }
  }
  o.finish();
}

// ----------------------------------------------------------------------------- the rest

void read_training(Ctx& ctx, const json* tj, TrainingConfig& t, std::optional<double>& capacity_factor) {
  if (!tj) {
    ctx.add("/training", "missing, expected an object {global_batch_size, micro_batch_size, precision}");
    return;
  }
  Obj o(ctx, tj, "/training",
        {"global_batch_size", "micro_batch_size", "precision", "optimizer", "steps", "seed", "moe_capacity_factor", "framework",
         "total_tokens"});
  if (auto v = get_int(ctx, o, "global_batch_size", 1, kMaxGlobalBatchSize)) t.global_batch_size = *v;
  else if (!o.has("global_batch_size")) ctx.add(o.at("global_batch_size"), "missing, expected a positive integer (samples per optimizer step)");
  else t.global_batch_size = -1;
  if (auto v = get_int(ctx, o, "micro_batch_size", 1, kMaxGlobalBatchSize)) t.micro_batch_size = *v;
  else if (o.has("micro_batch_size")) t.micro_batch_size = -1;
  if (auto v = get_enum(ctx, o, "precision", kPrecisions)) t.precision = *v;
  if (auto v = get_enum(ctx, o, "optimizer", kOptimizers)) t.optimizer = *v;
  if (auto v = get_enum(ctx, o, "framework", kFrameworks)) t.framework = *v;
  if (auto v = get_int(ctx, o, "steps", 1, kMaxSteps)) t.steps = *v;
  if (auto v = get_int(ctx, o, "seed", 0, std::numeric_limits<int64_t>::max(), "an integer >= 0")) t.seed = *v;
  capacity_factor = get_num(ctx, o, "moe_capacity_factor", 0, kMaxCapacityFactor, true);
  if (auto v = get_num(ctx, o, "total_tokens", 0, kMaxTotalTokens, true)) t.total_tokens = *v;
  o.finish();
  if (t.micro_batch_size && *t.micro_batch_size > 0 && t.global_batch_size > 0 && *t.micro_batch_size > t.global_batch_size)
    ctx.add(o.at("micro_batch_size"), "found " + fmt_int(*t.micro_batch_size) + ", expected at most global_batch_size (" +
                                          fmt_int(t.global_batch_size) + ")");
}

void read_search(Ctx& ctx, const json* sj, SearchConfig& s) {
  if (!sj) return;
  Obj o(ctx, sj, "/search", {"top_k", "objective"});
  if (auto v = get_int(ctx, o, "top_k", 1, kMaxTopK)) s.top_k = *v;
  if (auto v = get_enum(ctx, o, "objective", kObjectives)) s.objective = *v;
  o.finish();
}

void read_backends(Ctx& ctx, const json* bj, std::vector<Backend>& out) {
  if (!bj) return;
  if (!bj->is_array() || bj->empty()) {
    ctx.found("/backends", *bj, "a non-empty array of analytical, simgrid, real-cpu, real-gpu");
    return;
  }
  for (size_t i = 0; i < bj->size(); ++i) {
    const std::string where = "/backends/" + std::to_string(i);
    if (auto b = to_enum(ctx, (*bj)[i], where, kBackends)) {
      if (std::find(out.begin(), out.end(), *b) != out.end())
        ctx.add(where, std::string("found \"") + to_string(*b) + "\" twice, expected each backend once");
      else
        out.push_back(*b);
    }
  }
}

void read_whatif(Ctx& ctx, const json* wj, const ClusterConfig& c, bool nodes_ok, WhatIf& w) {
  if (!wj) return;
  Obj o(ctx, wj, "/whatif", {"stragglers", "degraded_links"});
  auto list = [&](const char* key) -> const json* {
    const json* v = o.get(key);
    if (!v) return nullptr;
    if (!v->is_array() || static_cast<int64_t>(v->size()) > kMaxWhatIfEntries) {
      ctx.found(o.at(key), *v, "an array of at most " + fmt_int(kMaxWhatIfEntries) + " objects");
      return nullptr;
    }
    return v;
  };
  const int64_t nodes = nodes_ok ? c.num_nodes() : 0;
  if (const json* s = list("stragglers")) {
    for (size_t i = 0; i < s->size(); ++i) {
      const std::string ip = o.at("stragglers") + "/" + std::to_string(i);
      const json* e = section(ctx, &(*s)[i], ip);
      if (!e) continue;
      Obj so(ctx, e, ip, {"gpu", "node", "slowdown"});
      WhatIf::Straggler st;
      if (so.has("gpu") == so.has("node")) {
        ctx.add(ip, "expected exactly one of \"gpu\" (a GPU index) or \"node\" (a node index)");
      } else if (so.has("gpu")) {
        if (auto g = get_int(ctx, so, "gpu", 0, c.num_gpus > 0 ? c.num_gpus - 1 : kMaxNumGpus,
                             c.num_gpus > 0 ? "a GPU index in 0.." + fmt_int(c.num_gpus - 1) : ""))
          st.gpu = *g;
      } else {
        if (auto n = get_int(ctx, so, "node", 0, nodes > 0 ? nodes - 1 : kMaxNumGpus,
                             nodes > 0 ? "a node index in 0.." + fmt_int(nodes - 1) : ""))
          st.node = *n;
      }
      if (auto f = get_num(ctx, so, "slowdown", 1, kMaxSlowdown, false)) st.slowdown = *f;
      else if (!so.has("slowdown")) ctx.add(so.at("slowdown"), "missing, expected a number >= 1 (2 = twice as slow)");
      so.finish();
      w.stragglers.push_back(st);
    }
  }
  if (const json* d = list("degraded_links")) {
    for (size_t i = 0; i < d->size(); ++i) {
      const std::string ip = o.at("degraded_links") + "/" + std::to_string(i);
      const json* e = section(ctx, &(*d)[i], ip);
      if (!e) continue;
      Obj lo(ctx, e, ip, {"node", "bandwidth_factor"});
      WhatIf::DegradedLink dl;
      if (auto n = get_int(ctx, lo, "node", 0, nodes > 0 ? nodes - 1 : kMaxNumGpus,
                           nodes > 0 ? "a node index in 0.." + fmt_int(nodes - 1) : ""))
        dl.node = *n;
      else if (!lo.has("node")) ctx.add(lo.at("node"), "missing, expected a node index");
      if (auto f = get_num(ctx, lo, "bandwidth_factor", 0, 1, true)) dl.bandwidth_factor = *f;
      else if (!lo.has("bandwidth_factor")) ctx.add(lo.at("bandwidth_factor"), "missing, expected a number in (0, 1] (0.5 = half bandwidth)");
      lo.finish();
      w.degraded_links.push_back(dl);
    }
  }
  o.finish();
}

// ----------------------------------------------------------------------------- reliability

void read_failure_rates(Ctx& ctx, Obj& o, int64_t gpus_per_node, ReliabilityConfig& r) {
  const json* v = o.get("failure_rates");
  if (!v) return;
  const std::string at = o.at("failure_rates");
  if (!v->is_array() || static_cast<int64_t>(v->size()) > kMaxWhatIfEntries) {
    ctx.found(at, *v, "an array of {name, component, per_day_per_1k_gpus | mtbf_hours with per}");
    return;
  }
  static const std::vector<std::string> kComponents = {"gpu", "hbm", "host", "nic", "switch", "software", "storage", "other"};
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string ip = at + "/" + std::to_string(i);
    const json* e = section(ctx, &(*v)[i], ip);
    if (!e) continue;
    Obj co(ctx, e, ip, {"name", "component", "per_day_per_1k_gpus", "mtbf_hours", "per"});
    FailureCause c;
    if (auto n = get_str(ctx, co, "name")) c.name = *n;
    else if (!co.has("name")) ctx.add(co.at("name"), "missing, expected a name for the cause (\"faulty-gpu\")");
    if (auto comp = get_str(ctx, co, "component")) {
      if (std::find(kComponents.begin(), kComponents.end(), *comp) == kComponents.end())
        ctx.add(co.at("component"), "found \"" + *comp + "\", expected one of " + join(kComponents));
      c.component = *comp;
    } else if (!co.has("component")) {
      c.component = "other";
    }
    const bool rate = co.has("per_day_per_1k_gpus"), mtbf = co.has("mtbf_hours");
    if (rate == mtbf) {
      ctx.add(ip, "expected exactly one of \"per_day_per_1k_gpus\" (interruptions per day per 1,000 GPUs) or \"mtbf_hours\" (with \"per\": \"gpu\" or \"node\")");
    } else if (rate) {
      if (auto x = get_num(ctx, co, "per_day_per_1k_gpus", 0, kMaxFailureRate, false)) c.per_day_per_1k_gpus = *x;
      if (co.has("per")) ctx.add(co.at("per"), "\"per\" goes with \"mtbf_hours\", not with \"per_day_per_1k_gpus\"");
    } else {
      const std::optional<double> hours = get_num(ctx, co, "mtbf_hours", 0, kMaxMtbfHours, true);
      const std::optional<std::string> per = get_str(ctx, co, "per");
      if (!co.has("per"))
        ctx.add(co.at("per"), "missing, expected \"gpu\" or \"node\" (the unit whose mean time between failures is mtbf_hours)");
      else if (per && *per != "gpu" && *per != "node")
        ctx.add(co.at("per"), "found \"" + *per + "\", expected \"gpu\" or \"node\"");
      else if (hours && per)
        c.per_day_per_1k_gpus = rate_from_mtbf_per_day_per_1k_gpus(*hours, *per == "gpu" ? 1 : gpus_per_node);
    }
    co.finish();
    r.causes.push_back(std::move(c));
  }
}

void read_reliability(Ctx& ctx, const json* rj, Scenario& s) {
  if (!rj) return;
  Obj o(ctx, rj, "/reliability",
        {"preset", "failure_rates", "checkpoint", "storage", "detection_s", "reschedule_s", "startup_s", "recovery", "monte_carlo"});
  ReliabilityConfig r;
  if (auto p = get_str(ctx, o, "preset")) {
    if (const FailurePreset* fp = find_failure_preset(*p)) {
      r.preset = fp->name;
      r.causes = fp->causes;
    } else {
      std::vector<std::string> names;
      for (const auto& x : failure_presets()) names.push_back(x.name);
      ctx.add(o.at("preset"), "found \"" + *p + "\", expected one of " + join(names));
    }
  }
  read_failure_rates(ctx, o, std::max<int64_t>(s.cluster.gpus_per_node, 1), r);
  if (!o.has("preset") && !o.has("failure_rates"))
    ctx.add("/reliability", "expected \"preset\" (a published fleet) or \"failure_rates\" (causes with their rates), or both");

  const json* cj = section(ctx, o.get("checkpoint"), o.at("checkpoint"));
  Obj co(ctx, cj, o.at("checkpoint"), {"interval_s", "async", "host_copy_GBps"});
  if (const json* iv = co.get("interval_s")) {
    if (iv->is_string() && iv->get<std::string>() != "optimal")
      ctx.found(co.at("interval_s"), *iv, "useful seconds between checkpoints (a number > 0) or \"optimal\"");
    else if (!iv->is_string())
      if (auto x = to_num(ctx, *iv, co.at("interval_s"), 0, kMaxIntervalS, true)) r.checkpoint_interval_s = *x;
  }
  if (auto a = get_bool(ctx, co, "async")) r.async_checkpoint = *a;
  if (auto h = get_num(ctx, co, "host_copy_GBps", 0, kMaxBandwidth_GBps, true)) r.host_copy_GBps = *h;
  else if (!co.has("host_copy_GBps")) r.host_copy_GBps = dlrm_host_link_bytes_per_s(s.cluster.gpu) / kGB;
  co.finish();

  const json* sj = section(ctx, o.get("storage"), o.at("storage"));
  Obj so(ctx, sj, o.at("storage"), {"write_GBps", "read_GBps", "node_write_GBps", "node_read_GBps"});
  if (!sj && !o.has("storage")) ctx.add(o.at("storage"), "missing, expected {write_GBps, read_GBps} (aggregate checkpoint storage bandwidth)");
  for (auto [key, out, required] : {std::tuple{"write_GBps", &r.storage_write_GBps, true}, std::tuple{"read_GBps", &r.storage_read_GBps, true},
                                    std::tuple{"node_write_GBps", &r.node_write_GBps, false},
                                    std::tuple{"node_read_GBps", &r.node_read_GBps, false}}) {
    if (auto x = get_num(ctx, so, key, 0, kMaxBandwidth_GBps, true)) *out = *x;
    else if (sj && required && !so.has(key)) ctx.add(so.at(key), "missing, expected GB/s (1e9 bytes/s) over the whole job");
  }
  so.finish();

  if (auto x = get_num(ctx, o, "detection_s", 0, kMaxIntervalS, false)) r.detection_s = *x;
  else if (!o.has("detection_s")) r.detection_s = kDefaultDetection_s;
  for (auto [key, out, what] : {std::tuple{"reschedule_s", &r.reschedule_s, "seconds from detection to replacement nodes allocated"},
                                std::tuple{"startup_s", &r.startup_s, "seconds from program start to the first step"}}) {
    if (auto x = get_num(ctx, o, key, 0, kMaxIntervalS, false)) *out = *x;
    else if (!o.has(key)) ctx.add(o.at(key), std::string("missing, expected ") + what);
  }
  if (const json* v = o.get("recovery")) {
    if (auto m = to_enum(ctx, *v, o.at("recovery"), kRecoveryModes)) r.recovery = *m;
  }
  const json* mj = section(ctx, o.get("monte_carlo"), o.at("monte_carlo"));
  Obj mo(ctx, mj, o.at("monte_carlo"), {"trials", "seed"});
  r.trials = kDefaultMonteCarloTrials;
  r.seed = static_cast<uint64_t>(s.training.seed);
  if (auto t = get_int(ctx, mo, "trials", 1, kMaxMonteCarloTrials)) r.trials = *t;
  if (auto sd = get_int(ctx, mo, "seed", 0, std::numeric_limits<int64_t>::max(), "an integer >= 0")) r.seed = static_cast<uint64_t>(*sd);
  mo.finish();
  o.finish();
  if (s.model.architecture == Architecture::kDlrm)
    ctx.add("/reliability", "not modelled for dlrm models yet (checkpoint state of sharded embedding tables); expected no reliability block");
  s.reliability = std::move(r);
}

// Where the parallelism key was written (canonical name or the alias the user used).
std::string degree_path(const json* pj, const char* canonical) {
  if (pj) {
    for (const auto& d : kDegreeKeys) {
      if (std::string(d.canonical) != canonical) continue;
      if (pj->contains(d.canonical)) return std::string("/parallelism/") + d.canonical;
      for (const char* a : d.aliases)
        if (pj->contains(a)) return std::string("/parallelism/") + a;
    }
  }
  return std::string("/parallelism/") + canonical;
}

// An explicit layers_per_stage: its sum, its length against pp x vpp (a missing degree is
// derived from the length), and no account-for flag beside it (the list already decides
// where the embedding and the loss sit).
void check_layers_per_stage(Ctx& ctx, const json* pj, Scenario& s) {
  ParallelismConstraints& p = s.parallelism;
  const std::string where = "/parallelism/layers_per_stage";
  for (auto [flag, key] : {std::pair<bool, const char*>{p.account_for_embedding, "account_for_embedding_in_pipeline_split"},
                           {p.account_for_loss, "account_for_loss_in_pipeline_split"}})
    if (flag && p.layers_per_stage)
      ctx.add(std::string("/parallelism/") + key, "true, but layers_per_stage fixes the split; expected one of them");
  if (!p.layers_per_stage) return;
  const std::vector<int64_t>& split = *p.layers_per_stage;
  const auto entries = static_cast<int64_t>(split.size());
  int64_t sum = 0;
  for (int64_t n : split) sum += n;
  if (s.model.num_layers > 0 && sum != s.model.num_layers)
    ctx.add(where, "sums to " + fmt_int(sum) + " layers, expected num_layers (" + fmt_int(s.model.num_layers) + ")");
  const bool pp_ok = p.pp && *p.pp > 0, vpp_ok = p.vpp && *p.vpp > 0;
  if ((p.pp && !pp_ok) || (p.vpp && !vpp_ok)) return;  // a bad degree, reported
  if (pp_ok && vpp_ok) {
    if (entries != *p.pp * *p.vpp)
      ctx.add(where, "has " + fmt_int(entries) + " entries, expected " +
                         (*p.vpp > 1 ? "pipeline_parallel_degree x virtual_pipeline_degree (" + fmt_int(*p.pp) + " x " +
                                           fmt_int(*p.vpp) + " = " + fmt_int(*p.pp * *p.vpp) + "), one per model chunk"
                                     : "pipeline_parallel_degree (" + fmt_int(*p.pp) + "), one per stage"));
  } else if (pp_ok) {
    if (entries % *p.pp != 0)
      ctx.add(where, "has " + fmt_int(entries) + " entries, expected a multiple of " + degree_path(pj, "pipeline_parallel_degree") +
                         " (" + fmt_int(*p.pp) + "): one per stage, or one per model chunk with virtual stages");
    else
      p.vpp = entries / *p.pp;
  } else if (vpp_ok) {
    if (entries % *p.vpp != 0)
      ctx.add(where, "has " + fmt_int(entries) + " entries, expected a multiple of " + degree_path(pj, "virtual_pipeline_degree") +
                         " (" + fmt_int(*p.vpp) + "), one per model chunk");
    else
      p.pp = entries / *p.vpp;
  } else {
    p.pp = entries;  // one entry per stage
    p.vpp = 1;
  }
}

// A pinned choice the training stack cannot carry out contradicts the scenario itself and is
// reported at its key; a searched one only leaves the stack's plan space (framework_problem is
// the one rule for both). Unpinned choices take the value that asks least of the stack.
void check_framework_pins(Ctx& ctx, const json* pj, const Scenario& s) {
  const ParallelismConstraints& p = s.parallelism;
  auto pinned_plan = [&](bool vpp, bool schedule, bool zero, bool pp, bool dp) {
    Plan q;
    q.vpp = vpp && p.vpp && *p.vpp > 0 ? *p.vpp : 1;
    q.pp = pp && p.pp && *p.pp > 0 ? *p.pp : (q.vpp > 1 ? 2 : 1);  // virtual stages need a pipeline
    q.schedule = schedule && p.schedule ? *p.schedule : (q.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB);
    if (!vpp && q.schedule == Schedule::kInterleaved) q.schedule = Schedule::kOneFOneB;  // derived from the vpp pin
    q.zero_stage = zero && p.zero_stage ? *p.zero_stage : 0;
    q.dp = dp && p.dp && *p.dp > 0 ? *p.dp : 1;
    q.cp = dp && p.cp && *p.cp > 0 ? *p.cp : 1;
    return q;
  };
  const Framework f = s.training.framework;
  const std::string why = framework_problem(f, pinned_plan(true, true, true, true, true));
  if (why.empty()) return;
  // The key: the first whose release lifts the problem.
  struct Key { const char* name; bool degree, vpp, schedule, zero, pp, dp; };  // degree: has aliases
  const Key keys[] = {{"virtual_pipeline_degree", true, false, true, true, true, true},
                      {"pipeline_schedule", false, true, false, true, true, true},
                      {"zero_stage", false, true, true, false, true, true},
                      {"pipeline_parallel_degree", true, true, true, true, false, true},
                      {"data_parallel_degree", true, true, true, true, true, false}};
  std::string where = "/parallelism";
  for (const Key& k : keys)
    if (framework_problem(f, pinned_plan(k.vpp, k.schedule, k.zero, k.pp, k.dp)).empty()) {
      where = k.degree ? degree_path(pj, k.name) : "/parallelism/" + std::string(k.name);
      break;
    }
  ctx.add(where, why + " (training.framework is \"" + to_string(f) + "\")");
}

void cross_check(Ctx& ctx, const json* pj, Scenario& s) {
  const ModelConfig& m = s.model;
  const ClusterConfig& c = s.cluster;
  ParallelismConstraints& p = s.parallelism;
  auto ok = [](const std::optional<int64_t>& v) { return v && *v > 0; };
  auto path = [&](const char* k) { return degree_path(pj, k); };
  const bool transformer = m.architecture != Architecture::kDlrm;
  const int64_t n = c.num_gpus;

  if (transformer && ok(p.tp)) {
    const int64_t tp = *p.tp;
    if (m.num_attention_heads > 0 && m.num_attention_heads % tp != 0)
      ctx.add(path("tensor_parallel_degree"), "found " + fmt_int(tp) + ", expected a divisor of num_attention_heads (" +
                                                  fmt_int(m.num_attention_heads) + ") so each TP rank holds whole heads");
    else if (m.num_kv_heads > 0 && m.num_kv_heads % tp != 0)
      ctx.add(path("tensor_parallel_degree"), "found " + fmt_int(tp) + ", expected a divisor of num_kv_heads (" +
                                                  fmt_int(m.num_kv_heads) + ") so each TP rank holds whole KV heads");
    if (m.ffn_hidden_size > 0 && m.ffn_hidden_size % tp != 0)
      ctx.add(path("tensor_parallel_degree"), "found " + fmt_int(tp) + ", expected a divisor of ffn_hidden_size (" +
                                                  fmt_int(m.ffn_hidden_size) + ")");
  }
  if (transformer) check_layers_per_stage(ctx, pj, s);
  if (transformer && ok(p.pp) && m.num_layers > 0 && *p.pp > m.num_layers)
    ctx.add(path("pipeline_parallel_degree"), "found " + fmt_int(*p.pp) + ", expected at most num_layers (" +
                                                  fmt_int(m.num_layers) + ") pipeline stages");
  if (ok(p.vpp) && *p.vpp > 1) {
    if (ok(p.pp) && *p.pp < 2)
      ctx.add(path("virtual_pipeline_degree"), "found " + fmt_int(*p.vpp) + ", expected 1 when pipeline_parallel_degree is 1");
    else if (transformer && ok(p.pp) && m.num_layers > 0 && !p.layers_per_stage &&
             *p.pp * *p.vpp > m.num_layers + (p.account_for_embedding ? 1 : 0) + (p.account_for_loss ? 1 : 0))
      ctx.add(path("virtual_pipeline_degree"),
              "found " + fmt_int(*p.vpp) + ", expected pipeline_parallel_degree x virtual_pipeline_degree (" + fmt_int(*p.pp * *p.vpp) +
                  ") to be at most num_layers (" + fmt_int(m.num_layers) +
                  ") plus the embedding and the loss where the account_for flags count them, so that every model chunk holds a layer "
                  "or one of them");
    if (p.schedule && *p.schedule != Schedule::kInterleaved)
      ctx.add("/parallelism/pipeline_schedule", std::string("found \"") + to_string(*p.schedule) +
                                                    "\", expected \"interleaved-1f1b\" when virtual_pipeline_degree > 1");
    if (!p.schedule) p.schedule = Schedule::kInterleaved;
  } else if (ok(p.vpp) && *p.vpp == 1) {
    if (p.schedule && *p.schedule == Schedule::kInterleaved)
      ctx.add("/parallelism/pipeline_schedule", "found \"interleaved-1f1b\", expected virtual_pipeline_degree > 1 with it");
    if (!p.schedule) p.schedule = Schedule::kOneFOneB;
  }
  if (transformer && ok(p.cp) && *p.cp > 1 && m.seq_length > 0 && m.seq_length % (2 * *p.cp) != 0)
    ctx.add(path("context_parallel_degree"), "found " + fmt_int(*p.cp) + ", expected seq_length (" + fmt_int(m.seq_length) +
                                                 ") to be a multiple of 2 x context_parallel_degree (load-balanced chunks)");
  if (ok(p.ep) && *p.ep > 1) {
    if (!m.is_moe())
      ctx.add(path("expert_parallel_degree"), "found " + fmt_int(*p.ep) + ", expected 1 for a dense model (num_experts absent)");
    else if (m.num_experts % *p.ep != 0)
      ctx.add(path("expert_parallel_degree"), "found " + fmt_int(*p.ep) + ", expected a divisor of num_experts (" +
                                                  fmt_int(m.num_experts) + ")");
  }
  if (ok(p.etp) && *p.etp > 1) {
    const int64_t etp = *p.etp;
    const int64_t expert_ffn = m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size;
    if (!m.is_moe())
      ctx.add(path("expert_tensor_parallel_degree"), "found " + fmt_int(etp) + ", expected 1 for a dense model (num_experts absent)");
    else if (expert_ffn > 0 && expert_ffn % etp != 0)
      ctx.add(path("expert_tensor_parallel_degree"), "found " + fmt_int(etp) + ", expected a divisor of the expert FFN size (" +
                                                         std::string(m.moe_ffn_hidden_size > 0 ? "moe_ffn_hidden_size" : "ffn_hidden_size") +
                                                         " = " + fmt_int(expert_ffn) + ") so each expert-TP rank holds whole columns");
    else if (n > 0 && etp > n)
      ctx.add(path("expert_tensor_parallel_degree"), "found " + fmt_int(etp) + ", expected at most cluster.num_gpus (" + fmt_int(n) + ")");
  }
  // Degrees against the GPU count.
  if (n > 0) {
    int64_t fixed = 1;
    std::vector<std::string> names;
    bool any_bad = false;
    const std::pair<const char*, std::optional<int64_t>*> world[] = {
        {"tensor_parallel_degree", &p.tp}, {"pipeline_parallel_degree", &p.pp},
        {"context_parallel_degree", &p.cp}, {"data_parallel_degree", &p.dp}};
    for (const auto& [name, v] : world) {
      if (!*v) continue;
      if (**v <= 0) { any_bad = true; continue; }
      fixed *= **v;
      names.push_back(path(name).substr(std::string("/parallelism/").size()) + "=" + fmt_int(**v));
      if (fixed > n) break;
    }
    const bool all = p.tp && p.pp && p.cp && p.dp;
    if (!any_bad && !names.empty()) {
      if (all && fixed != n)
        ctx.add("/parallelism", "found " + join(names, " x ") + " = " + fmt_int(fixed) + ", expected the product to equal cluster.num_gpus (" +
                                    fmt_int(n) + ")");
      else if (!all && (fixed > n || n % fixed != 0))
        ctx.add("/parallelism", "found " + join(names, " x ") + " = " + fmt_int(fixed) + ", expected a divisor of cluster.num_gpus (" +
                                    fmt_int(n) + ")");
      else if (!p.dp && ok(p.tp) && ok(p.pp) && ok(p.cp))
        p.dp = n / fixed;  // data_parallel_degree absent or -1: derived
    }
    if (ok(p.ep) && *p.ep > n)
      ctx.add(path("expert_parallel_degree"), "found " + fmt_int(*p.ep) + ", expected at most cluster.num_gpus (" + fmt_int(n) + ")");
  }
  // Expert layout: etp x ep ranks must tile one pipeline stage (tp x cp x dp ranks). Checked
  // here when etp is given (a plan with etp = tp that does not tile is rejected by the search).
  if (transformer && m.is_moe() && ok(p.tp) && ok(p.cp) && ok(p.dp) && ok(p.etp)) {
    const int64_t etp = *p.etp;
    const int64_t ep = ok(p.ep) ? *p.ep : 1;
    const int64_t stage = *p.tp * *p.cp * *p.dp;
    if (stage % (etp * ep) != 0)
      ctx.add(path("expert_tensor_parallel_degree"),
              "found expert_tensor_parallel_degree x expert_parallel_degree = " + fmt_int(etp) + " x " + fmt_int(ep) + " = " +
                  fmt_int(etp * ep) + ", expected a divisor of the ranks of one pipeline stage (tp x cp x dp = " + fmt_int(stage) + ")");
  }
  if (transformer) check_framework_pins(ctx, pj, s);
  // Batch.
  const TrainingConfig& t = s.training;
  const bool micro_bad = t.micro_batch_size && *t.micro_batch_size <= 0;
  if (t.global_batch_size > 0 && ok(p.dp) && !micro_bad) {
    const int64_t mb = t.micro_batch_size && *t.micro_batch_size > 0 ? *t.micro_batch_size : 1;
    if (t.global_batch_size % (mb * *p.dp) != 0)
      ctx.add("/training/global_batch_size", "found " + fmt_int(t.global_batch_size) + ", expected a multiple of micro_batch_size x data_parallel_degree (" +
                                                 fmt_int(mb) + " x " + fmt_int(*p.dp) + " = " + fmt_int(mb * *p.dp) + ")");
  }
  // Precision against the GPU.
  if (t.precision == Precision::kFp8 && !c.gpu.name.empty() && c.gpu.peak_tflops.fp8 <= 0)
    ctx.add("/training/precision", "found \"fp8\", but " + c.gpu.name + " has no FP8 tensor cores (peak_tflops.fp8 is 0); expected bf16, fp16 or fp32");
  else if (!c.gpu.name.empty() && peak_tflops(c.gpu, t.precision) <= 0)
    ctx.add("/cluster/gpu/peak_tflops/" + std::string(to_string(t.precision)),
            "missing or 0, expected the GPU's dense peak for the training precision " + std::string(to_string(t.precision)));
}

// ----------------------------------------------------------------------------- overrides

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  const char sep = !path.empty() && path[0] == '/' ? '/' : '.';
  for (size_t i = (sep == '/' ? 1 : 0); i <= path.size(); ++i) {
    if (i == path.size() || path[i] == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += path[i];
    }
  }
  return parts;
}

// Applies one override; returns the JSON pointer it set, or "" (problem recorded).
std::string apply_override(Ctx& ctx, json& root, const std::string& ov) {
  const std::string where = "--set " + ov;
  const auto eq = ov.find('=');
  if (eq == std::string::npos || eq == 0) {
    ctx.add(where, "expected PATH=VALUE, e.g. parallelism.tp=4");
    return "";
  }
  const std::string path = ov.substr(0, eq), text = ov.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // not JSON: a plain string (e.g. --set cluster.gpu=H100-SXM)
    try {
      (void)value.dump();
    } catch (const json::type_error&) {
      ctx.add(where, "the value is not valid UTF-8, expected JSON or a UTF-8 string");
      return "";
    }
  } catch (const json::exception& e) {  // e.g. out_of_range 406: number overflow parsing '1e400'
    std::string what = e.what();
    auto pos = what.find("] ");
    ctx.add(where, "found \"" + text + "\": " + (pos == std::string::npos ? what : what.substr(pos + 2)) +
                       ", expected a number within the double range");
    return "";
  }
  std::vector<std::string> parts = split_path(path);
  for (const auto& p : parts)
    if (p.empty()) {
      ctx.add(where, "found an empty key in \"" + path + "\", expected a path like parallelism.tp");
      return "";
    }
  if (!root.is_object()) {
    ctx.add(where, "the scenario is not a JSON object");
    return "";
  }
  json* node = &root;
  std::string pointer;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& k = parts[i];
    const bool last = i + 1 == parts.size();
    if (node->is_array()) {
      char* end = nullptr;
      long idx = std::strtol(k.c_str(), &end, 10);
      if (*end != 0 || idx < 0 || static_cast<size_t>(idx) >= node->size()) {
        ctx.add(where, pointer + " is an array of " + std::to_string(node->size()) + ", expected an index below that, found \"" + k + "\"");
        return "";
      }
      pointer += "/" + k;
      if (last) { (*node)[idx] = value; return pointer; }
      node = &(*node)[idx];
      continue;
    }
    if (!node->is_object()) {
      ctx.add(where, (pointer.empty() ? std::string("/") : pointer) + " is " + type_name(*node) + ", cannot set \"" + k + "\" inside it");
      return "";
    }
    pointer += "/" + k;
    if (last) {
      if (parts.size() == 2 && parts[0] == "parallelism")
        for (const auto& sib : alias_siblings(k)) node->erase(sib);  // --set tp=4 replaces tensor_parallel_degree
      (*node)[k] = value;
      return pointer;
    }
    if (!node->contains(k)) (*node)[k] = json::object();
    node = &(*node)[k];
  }
  return "";
}

}  // namespace

// ============================================================================= public

Expected<nlohmann::json> parse_json_text(std::string_view text, const std::string& source_name) {
  // Nesting depth first (outside strings), so a hostile file cannot exhaust the stack.
  {
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t line = 1, column = 0;
    for (char ch : text) {
      ++column;
      if (ch == '\n') { ++line; column = 0; }
      if (in_string) {
        if (escaped) escaped = false;
        else if (ch == '\\') escaped = true;
        else if (ch == '"') in_string = false;
        continue;
      }
      if (ch == '"') in_string = true;
      else if (ch == '[' || ch == '{') {
        if (++depth > kMaxJsonDepth)
          return Expected<json>::fail(source_name + ":" + std::to_string(line) + ":" + std::to_string(column),
                                      "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels; expected a scenario (4 levels)");
      } else if (ch == ']' || ch == '}') {
        --depth;
      }
    }
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the character that stopped the parser.
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    if (byte > text.size()) byte = text.size();
    size_t line = 1, column = 1;
    for (size_t i = 0; i < byte; ++i) {
      if (text[i] == '\n') { ++line; column = 1; }
      else ++column;
    }
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while
    // parsing object - unexpected '}'; expected string literal" -> keep what follows ": ".
    auto colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) what = "the file is empty, expected a JSON object";
    return Expected<json>::fail(source_name + ":" + std::to_string(line) + ":" + std::to_string(column),
                                "JSON syntax error: " + what);
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond the double range
    std::string what = e.what();
    auto pos = what.find("] ");
    return Expected<json>::fail(source_name, "JSON number out of range: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

Expected<Scenario> read_scenario_file(const std::string& path, const std::vector<std::string>& overrides) {
  Ctx ctx;
  // "-": the scenario on standard input (`monarch-sim import cfg.toml --num-gpus 64 | monarch-sim -`);
  // its relative paths resolve from the working directory.
  const bool from_stdin = path == "-";
  auto text = read_text_file(ctx, from_stdin ? "/dev/stdin" : path, from_stdin ? "<stdin>" : path, "scenario file");
  if (!text) return ctx.problems();
  auto parsed = parse_json_text(*text, from_stdin ? "<stdin>" : path);
  if (!parsed) return parsed.problems();
  std::filesystem::path p(from_stdin ? "stdin" : path);
  std::string base = p.has_parent_path() ? p.parent_path().string() : ".";
  auto s = scenario_from_json(*parsed, base, overrides);
  if (!s) {
    // Name the file in front of JSON paths, so that messages read "a.json: /model/x: ...".
    Problems probs = s.problems();
    for (auto& pr : probs)
      if (!pr.where.empty() && pr.where[0] == '/') pr.where = path + ": " + pr.where;
    return probs;
  }
  Scenario out = std::move(s).value();
  out.source_path = path;
  if (out.name.empty()) out.name = p.stem().string();
  return out;
}

Expected<Scenario> scenario_from_json(const nlohmann::json& j_in, const std::string& base_dir,
                                      const std::vector<std::string>& overrides) {
  Ctx ctx;
  json j = j_in;
  std::vector<std::pair<std::string, std::string>> overridden;  // pointer, option text
  if (!j.is_object()) {
    ctx.found("/", j, "a JSON object {name, model, cluster, training, parallelism}");
    return ctx.problems();
  }
  for (const auto& ov : overrides) {
    std::string ptr = apply_override(ctx, j, ov);
    if (!ptr.empty()) overridden.emplace_back(ptr, ov);
  }
  if (ctx.count() > 0) return ctx.problems();

  Scenario s;
  Obj top(ctx, &j, "", {"name", "description", "version", "model", "cluster", "training", "parallelism", "search",
                        "backends", "whatif", "reliability"});
  if (auto n = get_str(ctx, top, "name")) s.name = *n;
  (void)get_str(ctx, top, "description");
  if (const json* v = top.get("version")) {
    // Format 1.1 only adds keys: both versions read the same way.
    if (!v->is_number() || (v->get<double>() != 1 && v->get<double>() != 1.1))
      ctx.found("/version", *v, "1 or 1.1 (scenario format version)");
  }
  read_model(ctx, section(ctx, top.get("model"), "/model"), base_dir, s.model);
  bool nodes_ok = false;
  read_cluster(ctx, section(ctx, top.get("cluster"), "/cluster"), s.cluster, nodes_ok);
  std::optional<double> training_capacity;
  read_training(ctx, section(ctx, top.get("training"), "/training"), s.training, training_capacity);
  if (training_capacity) {
    const json* mj = top.get("model");
    if (mj && mj->is_object() && mj->contains("moe_capacity_factor") && s.model.moe_capacity_factor != *training_capacity)
      ctx.add("/training/moe_capacity_factor", "found " + fmt_num(*training_capacity) + ", but /model/moe_capacity_factor is " +
                                                   fmt_num(s.model.moe_capacity_factor) + "; expected one of them, or equal values");
    if (s.model.moe_dropless)
      ctx.add("/training/moe_capacity_factor", "found " + fmt_num(*training_capacity) +
                                                   ", but /model/moe_dropless is true (dropless routing has no capacity); expected one of them");
    s.model.moe_capacity_factor = *training_capacity;
  }
  const json* pj = section(ctx, top.get("parallelism"), "/parallelism");
  read_parallelism(ctx, pj, s.parallelism);
  read_search(ctx, section(ctx, top.get("search"), "/search"), s.search);
  read_backends(ctx, top.get("backends"), s.backends);
  read_whatif(ctx, section(ctx, top.get("whatif"), "/whatif"), s.cluster, nodes_ok, s.whatif);
  read_reliability(ctx, section(ctx, top.get("reliability"), "/reliability"), s);
  if (s.search.objective == Objective::kTimeToTrain) {
    if (!s.reliability)
      ctx.add("/search/objective", "\"time_to_train\" needs a reliability block (failure rates, checkpoint storage, restart times)");
    if (s.training.total_tokens <= 0)
      ctx.add("/search/objective", "\"time_to_train\" needs /training/total_tokens (the tokens the run trains on)");
  }
  top.finish();
  cross_check(ctx, pj, s);

  if (ctx.count() > 0) {
    Problems probs = std::move(ctx.problems());
    for (auto& pr : probs)
      for (const auto& [ptr, text] : overridden)
        if (pr.where == ptr || pr.where.rfind(ptr + "/", 0) == 0 ||
            (pr.where == "/parallelism" && ptr.rfind("/parallelism/", 0) == 0)) {
          pr.message += " (set by --set " + text + ")";
          break;
        }
    return probs;
  }
  return s;
}

namespace {
// The causes written one by one (the preset's with their source names), so that the block
// reads back the same whatever the preset list of a later version holds.
json reliability_to_json(const ReliabilityConfig& r) {
  json causes = json::array();
  for (const auto& c : r.causes)
    causes.push_back({{"name", c.name}, {"component", c.component}, {"per_day_per_1k_gpus", c.per_day_per_1k_gpus}});
  json ck = {{"async", r.async_checkpoint}, {"host_copy_GBps", r.host_copy_GBps}};
  ck["interval_s"] = r.checkpoint_interval_s ? json(*r.checkpoint_interval_s) : json("optimal");
  json st = {{"write_GBps", r.storage_write_GBps}, {"read_GBps", r.storage_read_GBps}};
  if (r.node_write_GBps > 0) st["node_write_GBps"] = r.node_write_GBps;
  if (r.node_read_GBps > 0) st["node_read_GBps"] = r.node_read_GBps;
  return {{"failure_rates", causes},
          {"checkpoint", ck},
          {"storage", st},
          {"detection_s", r.detection_s},
          {"reschedule_s", r.reschedule_s},
          {"startup_s", r.startup_s},
          {"recovery", to_string(r.recovery)},
          {"monte_carlo", {{"trials", r.trials}, {"seed", r.seed}}}};
}
}  // namespace

nlohmann::json scenario_to_json(const Scenario& s) {
  json j;
  j["name"] = s.name;
  const ModelConfig& m = s.model;
  json mj;
  if (!m.preset.empty()) mj["preset"] = m.preset;
  mj["architecture"] = to_string(m.architecture);
  if (m.architecture == Architecture::kDlrm) {
    json tables = json::array();
    for (const auto& t : m.dlrm.tables)
      tables.push_back({{"name", t.name}, {"rows", t.rows}, {"dim", t.dim}, {"pooling_factor", t.pooling_factor}});
    mj["embedding_tables"] = tables;
    mj["bottom_mlp"] = m.dlrm.bottom_mlp;
    mj["top_mlp"] = m.dlrm.top_mlp;
    mj["dense_features"] = m.dlrm.dense_features;
    mj["interaction"] = m.dlrm.interaction;
    if (m.dlrm.interaction == "dcn") {
      mj["dcn_rank"] = m.dlrm.dcn_rank;
      mj["dcn_layers"] = m.dlrm.dcn_layers;
    }
    mj["embedding_optimizer"] = m.dlrm.embedding_optimizer;
    if (m.dlrm.uvm_cache_hit_rate >= 0) mj["uvm_cache_hit_rate"] = m.dlrm.uvm_cache_hit_rate;
  } else {
    mj["num_layers"] = m.num_layers;
    mj["hidden_size"] = m.hidden_size;
    mj["num_attention_heads"] = m.num_attention_heads;
    mj["num_kv_heads"] = m.num_kv_heads;
    if (m.head_dim > 0) mj["head_dim"] = m.head_dim;
    mj["ffn_hidden_size"] = m.ffn_hidden_size;
    mj["vocab_size"] = m.vocab_size;
    mj["seq_length"] = m.seq_length;
    mj["tie_embeddings"] = m.tie_embeddings;
    if (m.hidden_dropout) mj["hidden_dropout"] = *m.hidden_dropout;
    if (m.attention_dropout) mj["attention_dropout"] = *m.attention_dropout;
    if (m.activation) mj["activation"] = to_string(*m.activation);
    if (m.attention_kernel) mj["attention_kernel"] = to_string(*m.attention_kernel);
    if (m.is_moe()) {
      mj["num_experts"] = m.num_experts;
      mj["moe_top_k"] = m.moe_top_k;
      mj["moe_ffn_hidden_size"] = m.moe_ffn_hidden_size;
      if (m.moe_dropless) mj["moe_dropless"] = true;
      else mj["moe_capacity_factor"] = m.moe_capacity_factor;
    }
  }
  j["model"] = mj;

  const ClusterConfig& c = s.cluster;
  json gpu = {{"name", c.gpu.name},
              {"peak_tflops",
               {{"fp32", c.gpu.peak_tflops.fp32},
                {"tf32", c.gpu.peak_tflops.tf32},
                {"bf16", c.gpu.peak_tflops.bf16},
                {"fp16", c.gpu.peak_tflops.fp16},
                {"fp8", c.gpu.peak_tflops.fp8}}},
              {"memory_gib", c.gpu.memory_gib},
              {"memory_bandwidth_GBps", c.gpu.memory_bandwidth_GBps}};
  if (!c.gpu.profile.empty()) gpu["profile"] = c.gpu.profile;
  json cj = {{"gpu", gpu}, {"num_gpus", c.num_gpus}, {"gpus_per_node", c.gpus_per_node}};
  json intra = json::object(), inter = json::object();
  if (c.intra_node.bandwidth_GBps > 0) intra["bandwidth_GBps"] = c.intra_node.bandwidth_GBps;
  intra["latency_us"] = c.intra_node.latency_us;
  if (c.inter_node.bandwidth_GBps > 0) inter["bandwidth_GBps"] = c.inter_node.bandwidth_GBps;
  if (c.nics_per_node > 0) inter["nics_per_node"] = c.nics_per_node;
  inter["latency_us"] = c.inter_node.latency_us;
  inter["topology"] = to_string(c.topology);
  inter["oversubscription"] = c.oversubscription;
  cj["intra_node"] = intra;
  cj["inter_node"] = inter;
  j["cluster"] = cj;

  const TrainingConfig& t = s.training;
  json tj = {{"global_batch_size", t.global_batch_size},
             {"precision", to_string(t.precision)},
             {"optimizer", to_string(t.optimizer)},
             {"steps", t.steps},
             {"seed", t.seed},
             {"framework", to_string(t.framework)}};
  if (t.micro_batch_size) tj["micro_batch_size"] = *t.micro_batch_size;
  if (t.total_tokens > 0) tj["total_tokens"] = t.total_tokens;
  j["training"] = tj;

  const ParallelismConstraints& p = s.parallelism;
  json pj = json::object();
  auto put = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) pj[k] = *v;
  };
  put("tensor_parallel_degree", p.tp);
  put("pipeline_parallel_degree", p.pp);
  put("data_parallel_degree", p.dp);
  put("context_parallel_degree", p.cp);
  put("expert_parallel_degree", p.ep);
  put("virtual_pipeline_degree", p.vpp);
  put("expert_tensor_parallel_degree", p.etp);
  if (p.schedule) pj["pipeline_schedule"] = to_string(*p.schedule);
  if (p.sequence_parallel) pj["sequence_parallel"] = *p.sequence_parallel;
  if (p.recompute) pj["activation_recompute"] = to_string(*p.recompute);
  if (p.zero_stage) pj["zero_stage"] = *p.zero_stage;
  if (p.overlap_grad_reduce) pj["overlap_grad_reduce"] = *p.overlap_grad_reduce;
  if (p.overlap_param_gather) pj["overlap_param_gather"] = *p.overlap_param_gather;
  if (p.tp_comm_overlap) pj["tp_comm_overlap"] = *p.tp_comm_overlap;
  if (p.layers_per_stage) pj["layers_per_stage"] = *p.layers_per_stage;
  if (p.account_for_embedding) pj["account_for_embedding_in_pipeline_split"] = true;
  if (p.account_for_loss) pj["account_for_loss_in_pipeline_split"] = true;
  j["parallelism"] = pj;

  j["search"] = {{"top_k", s.search.top_k}, {"objective", to_string(s.search.objective)}};
  if (!s.backends.empty()) {
    json b = json::array();
    for (Backend x : s.backends) b.push_back(to_string(x));
    j["backends"] = b;
  }
  if (!s.whatif.stragglers.empty() || !s.whatif.degraded_links.empty()) {
    json w = json::object();
    json st = json::array();
    for (const auto& x : s.whatif.stragglers) {
      json e = {{"slowdown", x.slowdown}};
      if (x.gpu >= 0) e["gpu"] = x.gpu;
      else e["node"] = x.node;
      st.push_back(e);
    }
    json dl = json::array();
    for (const auto& x : s.whatif.degraded_links) dl.push_back({{"node", x.node}, {"bandwidth_factor", x.bandwidth_factor}});
    if (!st.empty()) w["stragglers"] = st;
    if (!dl.empty()) w["degraded_links"] = dl;
    j["whatif"] = w;
  }
  if (s.reliability) j["reliability"] = reliability_to_json(*s.reliability);
  return j;
}

std::vector<Backend> default_backends(bool simgrid_built) {
  std::vector<Backend> v = {Backend::kAnalytical};
  if (simgrid_built) v.push_back(Backend::kSimgrid);
  return v;
}

bool parse_backend(std::string_view name, Backend* out) {
  for (Backend b : kBackends)
    if (name == to_string(b)) {
      *out = b;
      return true;
    }
  return false;
}

}  // namespace monarch
