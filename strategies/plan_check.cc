#include "strategies/plan_check.h"

#include <array>

#include "core/framework_rules.h"
#include "core/model_math.h"
#include "core/pipeline_schedule.h"
#include "core/placement.h"

namespace monarch {
namespace {

using std::to_string;

int64_t kv_heads(const ModelConfig& m) { return m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads; }

// The width TP (and expert TP) split: the experts' FFN for a mixture-of-experts model that
// sets one, the dense FFN otherwise.
int64_t split_ffn(const ModelConfig& m) {
  return m.is_moe() && m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size;
}

// Ranks of one pipeline stage: TP x CP x DP.
int64_t stage_ranks(const Plan& p) { return p.tp * p.cp * p.dp; }

// Degrees and the micro-batch are counts: at least 1 (expert TP 0 means "as TP").
std::string positive(int64_t v) { return v >= 1 ? "" : "found " + to_string(v) + ", expected a positive integer"; }
std::string tp_positive(const Scenario&, const Plan& p) { return positive(p.tp); }
std::string cp_positive(const Scenario&, const Plan& p) { return positive(p.cp); }
std::string pp_positive(const Scenario&, const Plan& p) { return positive(p.pp); }
std::string dp_positive(const Scenario&, const Plan& p) { return positive(p.dp); }
std::string ep_positive(const Scenario&, const Plan& p) { return positive(p.ep); }
std::string etp_positive(const Scenario&, const Plan& p) { return p.etp == 0 ? "" : positive(p.etp); }
std::string vpp_positive(const Scenario&, const Plan& p) { return positive(p.vpp); }
std::string mbs_positive(const Scenario&, const Plan& p) { return positive(p.micro_batch_size); }

std::string tp_gpus(const Scenario& s, const Plan& p) {
  const int64_t n = s.cluster.num_gpus;
  if (n % p.tp == 0) return "";
  return "TP " + to_string(p.tp) + " does not divide " + to_string(n) + " GPUs";
}

std::string tp_heads(const Scenario& s, const Plan& p) {
  const int64_t heads = s.model.num_attention_heads;
  if (heads % p.tp == 0) return "";
  return "TP " + to_string(p.tp) + " does not divide " + to_string(heads) + " attention heads";
}

std::string tp_kv_heads(const Scenario& s, const Plan& p) {
  const int64_t kv = kv_heads(s.model);
  if (kv % p.tp == 0) return "";
  return "TP " + to_string(p.tp) + " does not divide " + to_string(kv) + " KV heads";
}

std::string tp_ffn(const Scenario& s, const Plan& p) {
  const int64_t ffn = split_ffn(s.model);
  if (ffn <= 0 || ffn % p.tp == 0) return "";
  return "TP " + to_string(p.tp) + " does not divide the MLP width " + to_string(ffn);
}

std::string cp_gpus(const Scenario& s, const Plan& p) {
  const int64_t left = s.cluster.num_gpus / p.tp;
  if (left % p.cp == 0) return "";
  return "CP " + to_string(p.cp) + " does not divide the " + to_string(left) + " GPUs left by TP";
}

// Context parallelism cuts each sequence into 2 x cp chunks (the load-balanced zigzag).
std::string cp_seq(const Scenario& s, const Plan& p) {
  const int64_t seq = s.model.seq_length;
  if (p.cp <= 1 || seq % (2 * p.cp) == 0) return "";
  return "CP " + to_string(p.cp) + " cannot cut the sequence of " + to_string(seq) + " into " + to_string(2 * p.cp) +
         " equal chunks";
}

std::string pp_gpus(const Scenario& s, const Plan& p) {
  const int64_t left = s.cluster.num_gpus / (p.tp * p.cp);
  if (left % p.pp == 0) return "";
  return "PP " + to_string(p.pp) + " does not divide the " + to_string(left) + " GPUs left by TP x CP";
}

// A stage needs a layer, or (the account-for flags) the embedding or the loss in place of one.
std::string pp_layers(const Scenario& s, const Plan& p) {
  const int64_t layers = s.model.num_layers, units = pipeline_split_units(s);
  if (p.pp <= units) return "";
  return "PP " + to_string(p.pp) + " exceeds the " + to_string(layers) + " layers" +
         (units > layers ? " and the embedding and loss stages" : "");
}

std::string world_size(const Scenario& s, const Plan& p) { return world_size_problem(p, s.cluster.num_gpus); }

std::string batch_dp(const Scenario& s, const Plan& p) {
  const int64_t gbs = s.training.global_batch_size;
  if (gbs > 0 && gbs % p.dp == 0) return "";
  return "the global batch of " + to_string(gbs) + " does not split over DP " + to_string(p.dp);
}

std::string ep_divides(const Scenario& s, const Plan& p) {
  const ModelConfig& m = s.model;
  const int64_t stage = stage_ranks(p);
  if (stage % p.ep == 0 && (p.ep == 1 || (m.is_moe() && m.num_experts % p.ep == 0))) return "";
  return "EP " + to_string(p.ep) +
         (m.is_moe() ? " does not divide both TP x CP x DP = " + to_string(stage) + " and the " + to_string(m.num_experts) + " experts"
                     : " needs a mixture-of-experts model");
}

std::string etp_dense(const Scenario& s, const Plan& p) {
  if (p.expert_tp() == p.tp || s.model.is_moe()) return "";
  return "expert TP " + to_string(p.expert_tp()) + " needs a mixture-of-experts model";
}

std::string etp_stage(const Scenario&, const Plan& p) {
  const int64_t stage = stage_ranks(p);
  if (stage % (p.expert_tp() * p.ep) == 0) return "";
  return "expert TP " + to_string(p.expert_tp()) + " x EP " + to_string(p.ep) + " does not divide the " + to_string(stage) +
         " ranks of a pipeline stage (TP x CP x DP)";
}

std::string etp_ffn(const Scenario& s, const Plan& p) {
  const int64_t ffn = split_ffn(s.model);
  if (ffn <= 0 || ffn % p.expert_tp() == 0) return "";
  return "expert TP " + to_string(p.expert_tp()) + " does not divide the expert FFN width " + to_string(ffn);
}

// Model chunks need a layer each, or (Megatron's account-for flags) the embedding or the loss
// in place of one. An explicit layer split says itself which chunks hold what (chunk_layers
// checks it).
std::string vpp_chunks(const Scenario& s, const Plan& p) {
  if (!p.layers_per_stage.empty()) return "";
  const int64_t layers = s.model.num_layers;
  if (p.vpp * p.pp <= pipeline_split_units(s)) return "";
  return "virtual pipeline degree " + to_string(p.vpp) + " leaves model chunks without layers (" + to_string(layers) +
         " layers, PP " + to_string(p.pp) + ")";
}

std::string batch_micro(const Scenario& s, const Plan& p) {
  const int64_t per_replica = s.training.global_batch_size / p.dp;
  if (per_replica % p.micro_batch_size == 0) return "";
  return "micro-batch " + to_string(p.micro_batch_size) + " does not split the " + to_string(per_replica) +
         " samples per DP replica";
}

std::string schedule(const Scenario& s, const Plan& p) {
  const int64_t micro_batches = s.training.global_batch_size / (p.dp * p.micro_batch_size);
  return schedule_problem(p.schedule, p.pp, micro_batches, p.vpp, s.training.framework);
}

std::string zero_stage(const Scenario&, const Plan& p) {
  if (p.zero_stage >= 0 && p.zero_stage <= 3) return "";
  return "found " + to_string(p.zero_stage) + ", expected 0..3";
}

std::string activation_offload(const Scenario& s, const Plan& p) { return activation_offload_problem(s, p); }

}  // namespace

const std::vector<PlanRule>& plan_rules() {
  using L = PlanLevel;
  static const std::vector<PlanRule> rules = {
      {"degree", L::kTp, "/parallelism/tp", tp_positive},
      {"tp-gpus", L::kTp, "/parallelism/tp", tp_gpus},
      {"tp-heads", L::kTp, "/parallelism/tp", tp_heads},
      {"tp-kv-heads", L::kTp, "/parallelism/tp", tp_kv_heads},
      {"tp-ffn", L::kTp, "/parallelism/tp", tp_ffn},
      {"degree", L::kCp, "/parallelism/cp", cp_positive},
      {"cp-gpus", L::kCp, "/parallelism/cp", cp_gpus},
      {"cp-seq", L::kCp, "/parallelism/cp", cp_seq},
      {"degree", L::kPp, "/parallelism/pp", pp_positive},
      {"pp-gpus", L::kPp, "/parallelism/pp", pp_gpus},
      {"pp-layers", L::kPp, "/parallelism/pp", pp_layers},
      {"degree", L::kDp, "/parallelism/dp", dp_positive},
      {"world-size", L::kDp, "/parallelism", world_size},
      {"batch", L::kDp, "/training/global_batch_size", batch_dp},
      {"degree", L::kExperts, "/parallelism/ep", ep_positive},
      {"degree", L::kExperts, "/parallelism/expert_tensor_parallel_degree", etp_positive},
      {"ep", L::kExperts, "/parallelism/ep", ep_divides},
      {"etp", L::kExperts, "/parallelism/expert_tensor_parallel_degree", etp_dense},
      {"etp", L::kExperts, "/parallelism/expert_tensor_parallel_degree", etp_stage},
      {"etp", L::kExperts, "/parallelism/expert_tensor_parallel_degree", etp_ffn},
      {"degree", L::kVpp, "/parallelism/vpp", vpp_positive},
      {"vpp", L::kVpp, "/parallelism/vpp", vpp_chunks},
      {"degree", L::kMicroBatch, "/training/micro_batch_size", mbs_positive},
      {"batch", L::kMicroBatch, "/training/global_batch_size", batch_micro},
      {"schedule", L::kMicroBatch, "/parallelism/pipeline_schedule", schedule},
      {"zero-stage", L::kSwitches, "/parallelism/zero_stage", zero_stage},
      {"activation-offload", L::kSwitches, "/parallelism/activation_offload_layers", activation_offload},
  };
  return rules;
}

const PlanRule* first_broken_rule(PlanLevel level, const Scenario& scenario, const Plan& plan, std::string* why) {
  // The rules of each level, in table order: the search asks for one level per partial plan.
  static const auto by_level = [] {
    std::array<std::vector<const PlanRule*>, kNumPlanLevels> levels;
    for (const PlanRule& r : plan_rules()) levels[static_cast<size_t>(r.level)].push_back(&r);
    return levels;
  }();
  for (const PlanRule* r : by_level[static_cast<size_t>(level)]) {
    std::string reason = r->broken(scenario, plan);
    if (reason.empty()) continue;
    *why = std::move(reason);
    return r;
  }
  return nullptr;
}

Problems check_plan(const Scenario& scenario, const Plan& plan) {
  for (const PlanRule& r : plan_rules())
    if (std::string why = r.broken(scenario, plan); !why.empty()) return {{r.where, std::move(why)}};
  return {};
}

}  // namespace monarch
