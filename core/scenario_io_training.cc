// The scenario's `training`, `search`, `backends` and `whatif` sections.
#include "core/scenario_io_detail.h"

#include <algorithm>
#include <limits>

#include "core/presets.h"
#include "core/units.h"

namespace monarch::scenario_io_detail {

namespace {

// Why training.fp8_recipe cannot run with the rest of the training settings, or "".
std::string fp8_recipe_problem(const TrainingConfig& t) {
  if (t.precision != Precision::kFp8)
    return std::string("found \"") + to_string(*t.fp8_recipe) + "\" with training.precision \"" + to_string(t.precision) +
           "\"; an fp8 recipe needs precision \"fp8\"";
  switch (t.framework) {
    case Framework::kMegatron: return "";
    case Framework::kDeepspeed: return "training.framework \"deepspeed\" (Megatron-DeepSpeed) has no fp8 recipes";
    case Framework::kTorchtitan:
      // torchtitan's Float8Linear converter (torchao) scales per tensor at every cast; its
      // delayed scaling was removed and block scaling is not among its recipes.
      if (*t.fp8_recipe == Fp8Recipe::kTensorwise) return "";
      return std::string("found \"") + to_string(*t.fp8_recipe) +
             "\"; torchtitan's float8 converter scales per tensor (expected \"tensorwise\")";
  }
  return "";
}

}  // namespace

void read_training(Ctx& ctx, const json* tj, TrainingConfig& t, std::optional<double>& capacity_factor) {
  if (!tj) {
    ctx.add("/training", "missing, expected an object {global_batch_size, micro_batch_size, precision}");
    return;
  }
  Obj o(ctx, tj, "/training",
        {"global_batch_size", "micro_batch_size", "precision", "optimizer", "steps", "seed", "moe_capacity_factor", "framework",
         "total_tokens", "cuda_graphs", "compile", "cuda_launch_blocking", "grad_reduce_in_fp32",
         "cross_entropy_loss_fusion", "fp8_recipe"});
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
  if (auto v = get_bool(ctx, o, "cuda_graphs")) {
    t.cuda_graphs = *v;
    // Graph capture of training layers is Megatron-Core's (Transformer Engine's
    // make_graphed_callables per layer); Megatron-DeepSpeed and torchtitan train eagerly.
    if (t.cuda_graphs && t.framework != Framework::kMegatron)
      ctx.add(o.at("cuda_graphs"), std::string("CUDA-graph training is Megatron-Core's (--cuda-graph-impl); training.framework \"") +
                                       to_string(t.framework) + "\" has none");
  }
  if (auto v = get_bool(ctx, o, "compile")) {
    t.compile = *v;
    // Whole-block torch.compile is torchtitan's option; Megatron-LM and Megatron-DeepSpeed run
    // their own fused kernels (apex, Transformer Engine, jit-scripted bias-GeLU).
    if (t.compile && t.framework != Framework::kTorchtitan)
      ctx.add(o.at("compile"), std::string("torch.compile of the model is torchtitan's ([compile] enable); training.framework \"") +
                                   to_string(t.framework) + "\" has none");
  }
  if (auto v = get_bool(ctx, o, "cuda_launch_blocking")) t.cuda_launch_blocking = *v;
  if (auto v = get_bool(ctx, o, "grad_reduce_in_fp32")) {
    t.grad_reduce_in_fp32 = *v;
    if (!*v && t.precision == Precision::kFp32)
      ctx.add(o.at("grad_reduce_in_fp32"), "found false with training.precision \"fp32\", whose gradients are fp32; expected true or no value");
  }
  if (auto v = get_bool(ctx, o, "cross_entropy_loss_fusion")) {
    t.cross_entropy_loss_fusion = *v;
    if (t.framework != Framework::kMegatron)
      ctx.add(o.at("cross_entropy_loss_fusion"),
              std::string("the choice of a fused cross entropy is Megatron-Core's (--cross-entropy-loss-fusion); "
                          "training.framework \"") + to_string(t.framework) + "\" has no such option");
  }
  if (auto v = get_enum(ctx, o, "fp8_recipe", kFp8Recipes)) {
    t.fp8_recipe = *v;
    if (const std::string problem = fp8_recipe_problem(t); !problem.empty()) ctx.add(o.at("fp8_recipe"), problem);
  }
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

}  // namespace monarch::scenario_io_detail
