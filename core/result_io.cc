#include "core/result_io.h"

#include "core/sha256.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

namespace monarch {
namespace {

using nlohmann::json;

constexpr int64_t kMaxZeroStage = 3;  // ZeRO stages 0..3 (DeepSpeed / Megatron distributed optimizer)

// A short, safe rendering of a found value for error messages.
std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text + " (" + v.type_name() + ")";
}

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Reads typed fields of one JSON object, collecting problems with their JSON paths.
class Reader {
 public:
  explicit Reader(Problems& problems) : problems_(problems) {}

  void fail(const std::string& path, const std::string& message) {
    problems_.push_back(Problem{path, message});
  }

  // Looks up `key`; reports a missing required key. Returns nullptr when absent.
  const json* find(const json& obj, const std::string& path, const char* key, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(path + "/" + key, "missing, expected a value");
      return nullptr;
    }
    return &*it;
  }

  bool is_object(const json& j, const std::string& path) {
    if (j.is_object()) return true;
    fail(path, "found " + describe(j) + ", expected an object");
    return false;
  }

  bool is_array(const json& j, const std::string& path) {
    if (j.is_array()) return true;
    fail(path, "found " + describe(j) + ", expected an array");
    return false;
  }

  bool to_int(const json& v, const std::string& path, int64_t lo, int64_t hi, int64_t& out) {
    bool ok = false;
    int64_t x = 0;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      x = v.get<int64_t>();
      ok = true;
    } else if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      ok = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      x = static_cast<int64_t>(u);
    } else if (v.is_number_float()) {  // 1e9 written by another tool
      double d = v.get<double>();
      ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18;
      x = ok ? static_cast<int64_t>(d) : 0;
    }
    if (ok && x >= lo && x <= hi) {
      out = x;
      return true;
    }
    std::string expected = "an integer";
    if (lo == 0 && hi == std::numeric_limits<int64_t>::max()) expected = "a non-negative integer";
    else if (lo == 1 && hi == std::numeric_limits<int64_t>::max()) expected = "a positive integer";
    else if (hi != std::numeric_limits<int64_t>::max()) expected = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    else if (lo != std::numeric_limits<int64_t>::min()) expected = "an integer >= " + std::to_string(lo);
    fail(path, "found " + describe(v) + ", expected " + expected);
    return false;
  }

  void get_int(const json& obj, const std::string& path, const char* key, int64_t& out, bool required,
               int64_t lo = std::numeric_limits<int64_t>::min(),
               int64_t hi = std::numeric_limits<int64_t>::max()) {
    if (const json* v = find(obj, path, key, required)) to_int(*v, path + "/" + key, lo, hi, out);
  }

  bool to_double(const json& v, const std::string& path, double& out) {
    if (v.is_number()) {
      out = v.get<double>();
      return true;
    }
    if (v.is_null()) {  // a non-finite number, see result_io.h
      out = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    fail(path, "found " + describe(v) + ", expected a number");
    return false;
  }

  void get_double(const json& obj, const std::string& path, const char* key, double& out, bool required) {
    if (const json* v = find(obj, path, key, required)) to_double(*v, path + "/" + key, out);
  }

  void get_bool(const json& obj, const std::string& path, const char* key, bool& out, bool required) {
    if (const json* v = find(obj, path, key, required)) {
      if (v->is_boolean()) out = v->get<bool>();
      else fail(path + "/" + key, "found " + describe(*v) + ", expected true or false");
    }
  }

  void get_string(const json& obj, const std::string& path, const char* key, std::string& out, bool required) {
    if (const json* v = find(obj, path, key, required)) {
      if (v->is_string()) out = v->get<std::string>();
      else fail(path + "/" + key, "found " + describe(*v) + ", expected a string");
    }
  }

  // An enum spelled as in core/names.cc.
  template <typename E, size_t N>
  void get_enum(const json& obj, const std::string& path, const char* key, E& out, bool required,
                const std::array<E, N>& values) {
    const json* v = find(obj, path, key, required);
    if (!v) return;
    std::string choices;
    for (E e : values) {
      if (v->is_string() && v->get<std::string>() == to_string(e)) {
        out = e;
        return;
      }
      choices += (choices.empty() ? "\"" : ", \"") + std::string(to_string(e)) + "\"";
    }
    fail(path + "/" + key, "found " + describe(*v) + ", expected one of " + choices);
  }

 private:
  Problems& problems_;
};

constexpr std::array<CollectiveKind, 6> kCollectiveKinds = {CollectiveKind::kAllReduce,     CollectiveKind::kAllGather,
                                                             CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                                                             CollectiveKind::kBroadcast,     CollectiveKind::kSendRecv};
constexpr std::array<Schedule, 3> kSchedules = {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved};
constexpr std::array<Recompute, 3> kRecomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

const std::set<std::string>& plan_keys() {
  static const std::set<std::string> keys = {
      "tensor_parallel_degree", "pipeline_parallel_degree", "data_parallel_degree",
      "context_parallel_degree", "expert_parallel_degree", "virtual_pipeline_degree",
      "expert_tensor_parallel_degree", "etp", "micro_batch_size", "pipeline_schedule", "sequence_parallel", "activation_recompute",
      "zero_stage", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "ep_comm_overlap",
      "activation_offload_layers", "layers_per_stage", "embedding_sharding"};
  return keys;
}

void read_plan(Reader& r, const json& j, const std::string& path, Plan& p) {
  if (!r.is_object(j, path)) return;
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  r.get_int(j, path, "tensor_parallel_degree", p.tp, true, 1, kAny);
  r.get_int(j, path, "pipeline_parallel_degree", p.pp, true, 1, kAny);
  r.get_int(j, path, "data_parallel_degree", p.dp, true, 1, kAny);
  r.get_int(j, path, "context_parallel_degree", p.cp, true, 1, kAny);
  r.get_int(j, path, "expert_parallel_degree", p.ep, true, 1, kAny);
  r.get_int(j, path, "virtual_pipeline_degree", p.vpp, true, 1, kAny);
  // Expert tensor parallel degree: written only when it differs from tp (absent = tp), under
  // "expert_tensor_parallel_degree" (the scenario key) or the short "etp".
  for (const char* key : {"expert_tensor_parallel_degree", "etp"})
    if (j.contains(key)) r.get_int(j, path, key, p.etp, false, 1, kAny);
  if (j.contains("expert_tensor_parallel_degree") && j.contains("etp"))
    r.fail(path + "/etp", "gives expert_tensor_parallel_degree a second time");
  if (p.etp == p.tp) p.etp = 0;  // one form for "same as tp"
  r.get_int(j, path, "micro_batch_size", p.micro_batch_size, true, 1, kAny);
  r.get_enum(j, path, "pipeline_schedule", p.schedule, true, kSchedules);
  r.get_bool(j, path, "sequence_parallel", p.sequence_parallel, true);
  r.get_enum(j, path, "activation_recompute", p.recompute, true, kRecomputes);
  r.get_int(j, path, "zero_stage", p.zero_stage, true, 0, kMaxZeroStage);
  r.get_bool(j, path, "overlap_grad_reduce", p.overlap_grad_reduce, false);
  r.get_bool(j, path, "overlap_param_gather", p.overlap_param_gather, false);
  r.get_bool(j, path, "tp_comm_overlap", p.tp_comm_overlap, false);
  r.get_bool(j, path, "ep_comm_overlap", p.ep_comm_overlap, false);
  r.get_int(j, path, "activation_offload_layers", p.activation_offload_layers, false, 0, kAny);
  r.get_string(j, path, "embedding_sharding", p.embedding_sharding, false);
  if (const json* lps = r.find(j, path, "layers_per_stage", false)) {
    std::string lpath = path + "/layers_per_stage";
    if (r.is_array(*lps, lpath)) {
      p.layers_per_stage.clear();
      for (size_t i = 0; i < lps->size(); ++i) {
        int64_t n = 0;
        r.to_int((*lps)[i], lpath + "/" + std::to_string(i), 0, kAny, n);
        p.layers_per_stage.push_back(n);
      }
      const auto n = static_cast<int64_t>(p.layers_per_stage.size());
      if (n > 0 && n != p.pp && n != p.pp * p.vpp)
        r.fail(lpath, "has " + std::to_string(n) + " entries, expected one per pipeline stage (pipeline_parallel_degree = " +
                          std::to_string(p.pp) + ")" +
                          (p.vpp > 1 ? " or one per model chunk (x virtual_pipeline_degree = " + std::to_string(p.pp * p.vpp) + ")"
                                     : std::string()));
    }
  }
  for (const auto& [key, value] : j.items())
    if (!plan_keys().count(key))
      r.fail(path + "/" + key, "unknown plan key; expected one of tensor_parallel_degree, "
                               "pipeline_parallel_degree, ..., layers_per_stage (see spec/cli.md)");
}

}  // namespace

json plan_to_json(const Plan& p) {
  json j = {
      {"tensor_parallel_degree", p.tp},
      {"pipeline_parallel_degree", p.pp},
      {"data_parallel_degree", p.dp},
      {"context_parallel_degree", p.cp},
      {"expert_parallel_degree", p.ep},
      {"virtual_pipeline_degree", p.vpp},
      {"micro_batch_size", p.micro_batch_size},
      {"pipeline_schedule", to_string(p.schedule)},
      {"sequence_parallel", p.sequence_parallel},
      {"activation_recompute", to_string(p.recompute)},
      {"zero_stage", p.zero_stage},
      {"overlap_grad_reduce", p.overlap_grad_reduce},
      {"overlap_param_gather", p.overlap_param_gather},
      {"tp_comm_overlap", p.tp_comm_overlap},
  };
  if (p.ep_comm_overlap) j["ep_comm_overlap"] = true;  // absent = false
  if (p.activation_offload_layers > 0) j["activation_offload_layers"] = p.activation_offload_layers;  // absent = 0
  if (p.expert_tp() != p.tp) j["expert_tensor_parallel_degree"] = p.etp;  // absent = tp
  if (!p.layers_per_stage.empty()) j["layers_per_stage"] = p.layers_per_stage;
  if (!p.embedding_sharding.empty()) j["embedding_sharding"] = p.embedding_sharding;  // absent: a transformer plan
  return j;
}

Expected<Plan> plan_from_json(const json& j, const std::string& json_path) {
  Problems problems;
  Reader r(problems);
  Plan p;
  read_plan(r, j, json_path, p);
  if (!problems.empty()) return problems;
  return p;
}

namespace {

// The "reliability" section of a result (an extension of the result file): goodput, the
// badput breakdown, time to train, the checkpoint figures and, for the chosen plan, the Monte
// Carlo's mean and 90% interval.
using DoubleField = std::pair<const char*, double ReliabilityReport::*>;
const DoubleField kReliabilityFields[] = {
    {"goodput", &ReliabilityReport::goodput},
    {"time_to_train_s", &ReliabilityReport::time_to_train_s},
    {"horizon_s", &ReliabilityReport::horizon_s},
    {"useful_s", &ReliabilityReport::useful_s},
    {"expected_interruptions", &ReliabilityReport::expected_interruptions},
    {"interruptions_per_day", &ReliabilityReport::interruptions_per_day},
    {"mtbf_s", &ReliabilityReport::mtbf_s},
    {"spare_wait_s", &ReliabilityReport::spare_wait_s},
};
using CheckpointField = std::pair<const char*, double*>;
std::vector<CheckpointField> checkpoint_fields(ReliabilityReport& r) {
  return {{"interval_s", &r.interval_s},           {"optimal_interval_s", &r.optimal_interval_s},
          {"young_daly_interval_s", &r.young_daly_interval_s}, {"bytes_per_rank", &r.checkpoint_bytes_per_rank},
          {"bytes_total", &r.checkpoint_bytes_total}, {"blocking_s", &r.checkpoint.blocking_s},
          {"write_s", &r.checkpoint.write_s},       {"restore_s", &r.checkpoint.restore_s},
          {"heal_s", &r.checkpoint.heal_s}};
}
std::vector<CheckpointField> badput_fields(Badput& b) {
  return {{"checkpoint_save", &b.checkpoint_save_s},
          {"checkpoint_restore", &b.checkpoint_restore_s},
          {"wasted_progress", &b.wasted_progress_s},
          {"infrastructure_recovery", &b.infrastructure_recovery_s},
          {"startup", &b.startup_s}};
}
std::vector<std::pair<const char*, Interval90*>> interval_fields(ReliabilityReport& r) {
  return {{"goodput", &r.mc_goodput}, {"wall_time_s", &r.mc_wall_time_s}, {"interruptions", &r.mc_interruptions}};
}

json reliability_to_json(ReliabilityReport r) {
  json j = json::object();
  for (const auto& [key, field] : kReliabilityFields) j[key] = number_or_null(r.*field);
  json ck = json::object(), bp = json::object();
  for (const auto& [key, v] : checkpoint_fields(r)) ck[key] = number_or_null(*v);
  for (const auto& [key, v] : badput_fields(r.badput)) bp[key] = number_or_null(*v);
  j["checkpoint"] = ck;
  j["badput_s"] = bp;
  if (r.trials > 0) {
    json mc = {{"trials", r.trials}};
    for (const auto& [key, v] : interval_fields(r))
      mc[key] = {{"mean", number_or_null(v->mean)}, {"p5", number_or_null(v->p5)}, {"p95", number_or_null(v->p95)}};
    j["monte_carlo"] = mc;
  }
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  return j;
}

// The "failure" section (an extension of the result file): a failure injected during the
// simulated iteration, and every simulated rank's state when the job was declared failed.
}  // namespace

json failure_to_json(const FailureReport& f) {
  json ranks = json::array();
  for (const RankStall& s : f.ranks) {
    json e = {{"rank", s.rank}, {"node", s.node}, {"state", s.state}, {"stalled_at_s", number_or_null(s.stalled_at_s)}};
    if (!s.blocked_in.empty()) {
      e["blocked_in"] = s.blocked_in;
      e["blocked_since_s"] = number_or_null(s.blocked_since_s);
    }
    ranks.push_back(std::move(e));
  }
  return {{"component", f.component},
          {"node", f.node},
          {"at_s", number_or_null(f.at_s)},
          {"detection_s", number_or_null(f.detection_s)},
          {"affected", f.affected},
          {"timeout_at_s", number_or_null(f.timeout_at_s)},
          {"lost_s", number_or_null(f.lost_s)},
          {"lost_compute_gpu_s", number_or_null(f.lost_compute_gpu_s)},
          {"ranks", ranks}};
}

namespace {

void read_failure(Reader& r, const json& fj, const std::string& fpath, FailureReport& f) {
  if (!r.is_object(fj, fpath)) return;
  r.get_string(fj, fpath, "component", f.component, true);
  r.get_int(fj, fpath, "node", f.node, true, 0);
  r.get_double(fj, fpath, "at_s", f.at_s, true);
  r.get_double(fj, fpath, "detection_s", f.detection_s, false);
  r.get_bool(fj, fpath, "affected", f.affected, true);
  r.get_double(fj, fpath, "timeout_at_s", f.timeout_at_s, false);
  r.get_double(fj, fpath, "lost_s", f.lost_s, false);
  r.get_double(fj, fpath, "lost_compute_gpu_s", f.lost_compute_gpu_s, false);
  const json* rk = r.find(fj, fpath, "ranks", false);
  if (!rk || !r.is_array(*rk, fpath + "/ranks")) return;
  for (size_t i = 0; i < rk->size(); ++i) {
    const json& e = (*rk)[i];
    const std::string epath = fpath + "/ranks/" + std::to_string(i);
    if (!r.is_object(e, epath)) continue;
    RankStall s;
    int64_t rank = 0;
    r.get_int(e, epath, "rank", rank, true, 0, std::numeric_limits<int32_t>::max());
    s.rank = static_cast<int32_t>(rank);
    r.get_int(e, epath, "node", s.node, false, 0);
    r.get_string(e, epath, "state", s.state, true);
    r.get_double(e, epath, "stalled_at_s", s.stalled_at_s, false);
    r.get_string(e, epath, "blocked_in", s.blocked_in, false);
    r.get_double(e, epath, "blocked_since_s", s.blocked_since_s, false);
    f.ranks.push_back(std::move(s));
  }
}

}  // namespace

json comm_entry_to_json(const CommEntry& c) {
  json j = {{"kind", to_string(c.kind)}, {"group", group_name(c)}, {"bytes", c.bytes}, {"count", c.count},
            {"time_s", number_or_null(c.time_s)}};
  if (c.group_size > 0) j["group_size"] = c.group_size;
  return j;
}

json result_to_json(const BackendResult& b) {
  json stages = json::array();
  for (const StageMemory& s : b.memory.stages) {
    stages.push_back({{"stage", s.stage},
                      {"layers", s.layers},
                      {"weights_gib", number_or_null(s.weights_gib)},
                      {"gradients_gib", number_or_null(s.gradients_gib)},
                      {"optimizer_gib", number_or_null(s.optimizer_gib)},
                      {"activations_gib", number_or_null(s.activations_gib)},
                      {"buffers_gib", number_or_null(s.buffers_gib)},
                      {"total_gib", number_or_null(s.total_gib)}});
  }
  const TimeBreakdown& t = b.time_breakdown_s;
  json comm = json::array();
  for (const CommEntry& c : b.communication)
    comm.push_back(comm_entry_to_json(c));
  json j = {
      {"backend", b.backend},
      {"plan", plan_to_json(b.plan)},
      {"iteration_time_s", number_or_null(b.iteration_time_s)},
      {"tokens_per_s", number_or_null(b.tokens_per_s)},
      {"model_tflops_per_gpu", number_or_null(b.model_tflops_per_gpu)},
      {"hardware_tflops_per_gpu", number_or_null(b.hardware_tflops_per_gpu)},
      {"mfu", number_or_null(b.mfu)},
      {"hfu", number_or_null(b.hfu)},
      {"model_flops_per_iteration", number_or_null(b.model_flops_per_iteration)},
      {"hardware_flops_per_iteration", number_or_null(b.hardware_flops_per_iteration)},
      {"memory", {{"fits", b.memory.fits},
                  {"peak_gib", number_or_null(b.memory.peak_gib)},
                  {"capacity_gib", number_or_null(b.memory.capacity_gib)},
                  {"stages", stages}}},
      {"time_breakdown_s", {{"compute", number_or_null(t.compute)},
                            {"tp_comm", number_or_null(t.tp_comm)},
                            {"cp_comm", number_or_null(t.cp_comm)},
                            {"pp_comm", number_or_null(t.pp_comm)},
                            {"dp_comm", number_or_null(t.dp_comm)},
                            {"ep_comm", number_or_null(t.ep_comm)},
                            {"bubble", number_or_null(t.bubble)},
                            {"optimizer", number_or_null(t.optimizer)},
                            {"exposed_comm", number_or_null(t.exposed_comm)},
                            {"host", number_or_null(t.host)}}},
      {"communication", comm},
  };
  if (!b.warnings.empty()) j["warnings"] = b.warnings;
  if (b.reliability) j["reliability"] = reliability_to_json(*b.reliability);
  if (b.failure) j["failure"] = failure_to_json(*b.failure);
  if (b.measured) {
    j["measured"] = true;
    json losses = json::array();
    for (double l : b.losses) losses.push_back(number_or_null(l));
    j["losses"] = losses;
  }
  if (!b.timeline.empty()) {
    json spans = json::array();
    for (const TimelineSpan& s : b.timeline) {
      json e = {{"rank", s.rank}, {"stream", s.stream}, {"name", s.name}, {"category", s.category},
                {"start_s", number_or_null(s.start_s)}, {"end_s", number_or_null(s.end_s)}};
      if (s.peer >= 0) e["peer"] = s.peer;  // point-to-point only
      if (s.flow_id >= 0) e["flow_id"] = s.flow_id;
      spans.push_back(std::move(e));
    }
    j["timeline"] = spans;
  }
  return j;
}

Expected<BackendResult> result_from_json(const json& j, const std::string& path) {
  Problems problems;
  Reader r(problems);
  BackendResult b;
  if (!r.is_object(j, path)) return problems;
  r.get_string(j, path, "backend", b.backend, true);
  if (const json* p = r.find(j, path, "plan", true)) read_plan(r, *p, path + "/plan", b.plan);
  r.get_double(j, path, "iteration_time_s", b.iteration_time_s, true);
  r.get_double(j, path, "tokens_per_s", b.tokens_per_s, false);
  r.get_double(j, path, "model_tflops_per_gpu", b.model_tflops_per_gpu, false);
  r.get_double(j, path, "hardware_tflops_per_gpu", b.hardware_tflops_per_gpu, false);
  r.get_double(j, path, "mfu", b.mfu, false);
  r.get_double(j, path, "hfu", b.hfu, false);
  r.get_double(j, path, "model_flops_per_iteration", b.model_flops_per_iteration, false);
  r.get_double(j, path, "hardware_flops_per_iteration", b.hardware_flops_per_iteration, false);

  if (const json* m = r.find(j, path, "memory", false)) {
    std::string mpath = path + "/memory";
    if (r.is_object(*m, mpath)) {
      r.get_bool(*m, mpath, "fits", b.memory.fits, false);
      r.get_double(*m, mpath, "peak_gib", b.memory.peak_gib, false);
      r.get_double(*m, mpath, "capacity_gib", b.memory.capacity_gib, false);
      if (const json* st = r.find(*m, mpath, "stages", false)) {
        std::string spath = mpath + "/stages";
        if (r.is_array(*st, spath)) {
          for (size_t i = 0; i < st->size(); ++i) {
            const json& e = (*st)[i];
            std::string epath = spath + "/" + std::to_string(i);
            if (!r.is_object(e, epath)) continue;
            StageMemory s;
            r.get_int(e, epath, "stage", s.stage, true, 0);
            r.get_int(e, epath, "layers", s.layers, false, 0);
            r.get_double(e, epath, "weights_gib", s.weights_gib, false);
            r.get_double(e, epath, "gradients_gib", s.gradients_gib, false);
            r.get_double(e, epath, "optimizer_gib", s.optimizer_gib, false);
            r.get_double(e, epath, "activations_gib", s.activations_gib, false);
            r.get_double(e, epath, "buffers_gib", s.buffers_gib, false);
            r.get_double(e, epath, "total_gib", s.total_gib, true);
            b.memory.stages.push_back(s);
          }
        }
      }
    }
  }

  if (const json* t = r.find(j, path, "time_breakdown_s", false)) {
    std::string tpath = path + "/time_breakdown_s";
    if (r.is_object(*t, tpath)) {
      TimeBreakdown& tb = b.time_breakdown_s;
      r.get_double(*t, tpath, "compute", tb.compute, false);
      r.get_double(*t, tpath, "tp_comm", tb.tp_comm, false);
      r.get_double(*t, tpath, "cp_comm", tb.cp_comm, false);
      r.get_double(*t, tpath, "pp_comm", tb.pp_comm, false);
      r.get_double(*t, tpath, "dp_comm", tb.dp_comm, false);
      r.get_double(*t, tpath, "ep_comm", tb.ep_comm, false);
      r.get_double(*t, tpath, "bubble", tb.bubble, false);
      r.get_double(*t, tpath, "optimizer", tb.optimizer, false);
      r.get_double(*t, tpath, "exposed_comm", tb.exposed_comm, false);
      r.get_double(*t, tpath, "host", tb.host, false);
    }
  }

  if (const json* c = r.find(j, path, "communication", false)) {
    std::string cpath = path + "/communication";
    if (r.is_array(*c, cpath)) {
      for (size_t i = 0; i < c->size(); ++i) {
        const json& e = (*c)[i];
        std::string epath = cpath + "/" + std::to_string(i);
        if (!r.is_object(e, epath)) continue;
        CommEntry ce;
        r.get_enum(e, epath, "kind", ce.kind, true, kCollectiveKinds);
        std::string group;
        r.get_string(e, epath, "group", group, true);
        ce.group = group_kind_from_string(group);
        if (!ce.group) ce.group_label = group;
        r.get_int(e, epath, "group_size", ce.group_size, false, 0);
        r.get_int(e, epath, "bytes", ce.bytes, true, 0);
        r.get_int(e, epath, "count", ce.count, false, 0);
        r.get_double(e, epath, "time_s", ce.time_s, false);
        b.communication.push_back(ce);
      }
    }
  }

  if (const json* w = r.find(j, path, "warnings", false)) {
    const std::string wpath = path + "/warnings";
    if (r.is_array(*w, wpath))
      for (size_t i = 0; i < w->size(); ++i) {
        if ((*w)[i].is_string()) b.warnings.push_back((*w)[i].get<std::string>());
        else r.fail(wpath + "/" + std::to_string(i), "expected a string");
      }
  }
  if (const json* rel = r.find(j, path, "reliability", false)) {
    const std::string rpath = path + "/reliability";
    if (r.is_object(*rel, rpath)) {
      ReliabilityReport rr;
      for (const auto& [key, field] : kReliabilityFields) r.get_double(*rel, rpath, key, rr.*field, std::string(key) == "goodput");
      auto read_group = [&](const char* key, const std::vector<CheckpointField>& fields) {
        if (const json* g = r.find(*rel, rpath, key, false)) {
          const std::string gpath = rpath + "/" + key;
          if (r.is_object(*g, gpath))
            for (const auto& [k, v] : fields) r.get_double(*g, gpath, k, *v, false);
        }
      };
      read_group("checkpoint", checkpoint_fields(rr));
      read_group("badput_s", badput_fields(rr.badput));
      if (const json* mc = r.find(*rel, rpath, "monte_carlo", false)) {
        const std::string mpath = rpath + "/monte_carlo";
        if (r.is_object(*mc, mpath)) {
          r.get_int(*mc, mpath, "trials", rr.trials, true, 0);
          for (const auto& [key, v] : interval_fields(rr)) {
            Interval90* iv = v;
            if (const json* g = r.find(*mc, mpath, key, false)) {
              const std::string gpath = mpath + "/" + key;
              if (r.is_object(*g, gpath)) {
                r.get_double(*g, gpath, "mean", iv->mean, true);
                r.get_double(*g, gpath, "p5", iv->p5, true);
                r.get_double(*g, gpath, "p95", iv->p95, true);
              }
            }
          }
        }
      }
      if (const json* w = r.find(*rel, rpath, "warnings", false)) {
        const std::string wpath = rpath + "/warnings";
        if (r.is_array(*w, wpath))
          for (size_t i = 0; i < w->size(); ++i) {
            if ((*w)[i].is_string()) rr.warnings.push_back((*w)[i].get<std::string>());
            else r.fail(wpath + "/" + std::to_string(i), "expected a string");
          }
      }
      b.reliability = std::move(rr);
    }
  }
  if (const json* fj = r.find(j, path, "failure", false)) {
    FailureReport f;
    read_failure(r, *fj, path + "/failure", f);
    b.failure = std::move(f);
  }
  r.get_bool(j, path, "measured", b.measured, false);
  if (const json* l = r.find(j, path, "losses", false)) {
    std::string lpath = path + "/losses";
    if (r.is_array(*l, lpath)) {
      for (size_t i = 0; i < l->size(); ++i) {
        double v = 0;
        if (r.to_double((*l)[i], lpath + "/" + std::to_string(i), v)) b.losses.push_back(v);
      }
    }
  }

  if (const json* tl = r.find(j, path, "timeline", false)) {
    std::string tpath = path + "/timeline";
    if (r.is_array(*tl, tpath)) {
      b.timeline.reserve(tl->size());
      for (size_t i = 0; i < tl->size(); ++i) {
        const json& e = (*tl)[i];
        std::string epath = tpath + "/" + std::to_string(i);
        if (!r.is_object(e, epath)) continue;
        TimelineSpan s;
        int64_t rank = 0;
        r.get_int(e, epath, "rank", rank, true, 0, std::numeric_limits<int32_t>::max());
        s.rank = static_cast<int32_t>(rank);
        r.get_string(e, epath, "stream", s.stream, true);
        r.get_string(e, epath, "name", s.name, false);
        r.get_string(e, epath, "category", s.category, false);
        r.get_double(e, epath, "start_s", s.start_s, true);
        r.get_double(e, epath, "end_s", s.end_s, true);
        int64_t peer = -1, flow = -1;
        r.get_int(e, epath, "peer", peer, false, 0, std::numeric_limits<int32_t>::max());
        r.get_int(e, epath, "flow_id", flow, false, 0, std::numeric_limits<int64_t>::max());
        s.peer = static_cast<int32_t>(peer);
        s.flow_id = flow;
        b.timeline.push_back(s);
      }
    }
  }

  if (!problems.empty()) return problems;
  return b;
}

Expected<FailureReport> failure_from_json(const json& j, const std::string& path) {
  Problems problems;
  Reader r(problems);
  FailureReport f;
  read_failure(r, j, path, f);
  if (!problems.empty()) return problems;
  return f;
}

json rejected_to_json(const RejectedPlan& rejected) {
  return {{"plan", plan_to_json(rejected.plan)}, {"reason", rejected.reason}};
}

Expected<RejectedPlan> rejected_from_json(const json& j, const std::string& path) {
  Problems problems;
  Reader r(problems);
  RejectedPlan rp;
  if (!r.is_object(j, path)) return problems;
  if (const json* p = r.find(j, path, "plan", true)) read_plan(r, *p, path + "/plan", rp.plan);
  r.get_string(j, path, "reason", rp.reason, true);
  if (!problems.empty()) return problems;
  return rp;
}

json result_file_to_json(const ResultFile& file) {
  json out;
  out["format"] = "monarch-sim-result/1";
  if (!file.run.is_null()) out["run"] = file.run;
  out["scenario"] = file.scenario;
  if (file.parameters > 0) out["parameters"] = file.parameters;
  out["results"] = json::array();
  for (const ResultFileEntry& e : file.results) {
    assert(e.result);
    json j = result_to_json(*e.result);
    if (e.rank) j["rank"] = *e.rank;
    if (!e.sharding.empty()) j["sharding"] = e.sharding;
    out["results"].push_back(std::move(j));
  }
  if (file.rejected) {
    out["rejected"] = json::array();
    for (const RejectedPlan& r : *file.rejected) out["rejected"].push_back(rejected_to_json(r));
  }
  if (file.baseline) {
    out["baseline"] = result_to_json(*file.baseline);
    out["baseline"]["note"] = file.baseline_note;
  }
  if (file.search)
    out["search"] = {{"plans_in_space", file.search->plans_in_space},
                     {"plans_evaluated", file.search->plans_evaluated},
                     {"plans_fitting", file.search->plans_fitting},
                     {"plans_rejected", file.search->plans_rejected}};
  return out;
}

std::string normalized_dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex_digest();
}

std::string content_hash(const json& j) { return sha256_hex(normalized_dump(j)); }

}  // namespace monarch
