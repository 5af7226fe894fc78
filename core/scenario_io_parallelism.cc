// The scenario's `parallelism` section (degrees and their aliases, schedule, ZeRO, layer
// splits) and the checks that span sections once all are read.
#include "core/scenario_io_detail.h"
#include "core/model_math.h"

#include <algorithm>

#include "core/cost_model.h"
#include "core/dlrm_model.h"
#include "core/framework_rules.h"
#include "core/units.h"

namespace monarch::scenario_io_detail {
namespace {

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
    "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "ep_comm_overlap", "activation_offload_layers",
    "layers_per_stage",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "embedding_sharding"};

std::vector<std::string> parallelism_keys() {
  std::vector<std::string> k;
  for (const auto& d : kDegreeKeys) {
    k.push_back(d.canonical);
    for (const char* a : d.aliases) k.push_back(a);
  }
  k.insert(k.end(), kParallelismOtherKeys.begin(), kParallelismOtherKeys.end());
  return k;
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

}  // namespace

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
  if (auto v = get_bool(ctx, o, "ep_comm_overlap")) p.ep_comm_overlap = *v;
  if (auto v = get_int(ctx, o, "activation_offload_layers", 0, kMaxNumLayers,
                       "an integer >= 0 (transformer layers whose activations are offloaded to host memory)"))
    p.activation_offload_layers = *v;
  if (auto v = get_bool(ctx, o, "account_for_embedding_in_pipeline_split")) p.account_for_embedding = *v;
  if (auto v = get_bool(ctx, o, "account_for_loss_in_pipeline_split")) p.account_for_loss = *v;
  if (auto v = get_str(ctx, o, "embedding_sharding")) p.embedding_sharding = *v;
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

namespace {

// A given embedding sharding: a recommendation model's, one placement per table, ranks on the
// cluster (check_dlrm_plan). Whether it fits is the run's question, as for any plan.
void check_embedding_sharding(Ctx& ctx, const Scenario& s) {
  if (!s.parallelism.embedding_sharding) return;
  const std::string where = "/parallelism/embedding_sharding";
  if (s.model.architecture != Architecture::kDlrm) {
    ctx.add(where, std::string("only for architecture dlrm (this model is ") + to_string(s.model.architecture) + ")");
    return;
  }
  Expected<DlrmShardingPlan> plan = parse_dlrm_plan(*s.parallelism.embedding_sharding);
  if (!plan) {
    ctx.add(where, plan.problems().front().message);
    return;
  }
  if (s.model.dlrm.tables.empty()) return;  // the tables' own problem is reported at the model
  if (const std::string why = check_dlrm_plan(s, *plan); !why.empty()) ctx.add(where, why);
}

}  // namespace

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
  check_embedding_sharding(ctx, s);
  const int64_t split_units = pipeline_split_units(s);
  if (transformer && ok(p.pp) && m.num_layers > 0 && *p.pp > split_units)
    ctx.add(path("pipeline_parallel_degree"),
            "found " + fmt_int(*p.pp) + ", expected at most num_layers (" + fmt_int(m.num_layers) + ") pipeline stages" +
                (split_units > m.num_layers ? " plus the embedding and the loss where the account_for flags count them (" +
                                                  fmt_int(split_units) + ")"
                                            : std::string()));
  if (ok(p.vpp) && *p.vpp > 1) {
    if (ok(p.pp) && *p.pp < 2)
      ctx.add(path("virtual_pipeline_degree"), "found " + fmt_int(*p.vpp) + ", expected 1 when pipeline_parallel_degree is 1");
    else if (transformer && ok(p.pp) && m.num_layers > 0 && !p.layers_per_stage &&
             *p.pp * *p.vpp > split_units)
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
  if (p.tp_comm_overlap)
    if (const std::string why = async_tp_problem(s.training.framework, s.training.compile, *p.tp_comm_overlap); !why.empty())
      ctx.add("/parallelism/tp_comm_overlap", why);
  if (transformer && p.ep_comm_overlap && *p.ep_comm_overlap) {
    // The pinned degrees against the overlap's rule; what is searched takes a value it allows.
    Plan probe;
    probe.ep_comm_overlap = true;
    probe.ep = ok(p.ep) ? *p.ep : 2;
    probe.pp = ok(p.pp) ? *p.pp : 1;
    probe.vpp = ok(p.vpp) ? *p.vpp : (probe.pp > 1 ? 2 : 1);
    probe.schedule = p.schedule.value_or(probe.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB);
    probe.recompute = p.recompute.value_or(Recompute::kNone);
    if (const std::string why = ep_overlap_problem(s.training, m, probe); !why.empty())
      ctx.add("/parallelism/ep_comm_overlap", why);
  }
  if (!transformer && p.activation_offload_layers && *p.activation_offload_layers > 0)
    ctx.add("/parallelism/activation_offload_layers", "found " + fmt_int(*p.activation_offload_layers) +
                                                          ", expected 0: a dlrm model has no transformer layers to offload");
  if (transformer && p.activation_offload_layers && *p.activation_offload_layers > 0) {
    // The pinned pipeline degree and recompute against the offloading's rule; a searched
    // pipeline takes pp 1 and a searched recompute none.
    Plan probe;
    probe.activation_offload_layers = *p.activation_offload_layers;
    probe.pp = ok(p.pp) ? *p.pp : 1;
    probe.recompute = p.recompute.value_or(Recompute::kNone);
    if (const std::string why = activation_offload_problem(s, probe); !why.empty())
      ctx.add("/parallelism/activation_offload_layers", why);
  }
  if (transformer && s.training.cuda_graphs && p.recompute)
    if (const std::string why = cuda_graph_problem(s.model, *p.recompute); !why.empty())
      ctx.add("/parallelism/activation_recompute", why);
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
  else if (t.precision == Precision::kFp8 && t.fp8_recipe == Fp8Recipe::kMxfp8 && !c.gpu.name.empty() &&
           !gpu_runs_mxfp8(c.gpu))
    ctx.add("/training/fp8_recipe", "found \"mxfp8\", but " + c.gpu.name +
                                        " has no MXFP8 tensor cores (Blackwell's block-scaled MMA); expected delayed, tensorwise or blockwise");
  else if (!c.gpu.name.empty() && peak_tflops(c.gpu, t.precision) <= 0)
    ctx.add("/cluster/gpu/peak_tflops/" + std::string(to_string(t.precision)),
            "missing or 0, expected the GPU's dense peak for the training precision " + std::string(to_string(t.precision)));
}

}  // namespace monarch::scenario_io_detail
