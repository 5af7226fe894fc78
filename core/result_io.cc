#include "core/result_io.h"

#include <array>
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

constexpr std::array<Schedule, 3> kSchedules = {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved};
constexpr std::array<Recompute, 3> kRecomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

const std::set<std::string>& plan_keys() {
  static const std::set<std::string> keys = {
      "tensor_parallel_degree", "pipeline_parallel_degree", "data_parallel_degree",
      "context_parallel_degree", "expert_parallel_degree", "virtual_pipeline_degree",
      "expert_tensor_parallel_degree", "etp", "micro_batch_size", "pipeline_schedule", "sequence_parallel", "activation_recompute",
      "zero_stage", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap",
      "layers_per_stage"};
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
  if (p.expert_tp() != p.tp) j["expert_tensor_parallel_degree"] = p.etp;  // absent = tp
  if (!p.layers_per_stage.empty()) j["layers_per_stage"] = p.layers_per_stage;
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
    comm.push_back({{"kind", c.kind}, {"group", c.group}, {"bytes", c.bytes}, {"count", c.count},
                    {"time_s", number_or_null(c.time_s)}});
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
                            {"exposed_comm", number_or_null(t.exposed_comm)}}},
      {"communication", comm},
  };
  if (!b.warnings.empty()) j["warnings"] = b.warnings;
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
        r.get_string(e, epath, "kind", ce.kind, true);
        r.get_string(e, epath, "group", ce.group, true);
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

std::string normalized_dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// SHA-256 as specified in FIPS 180-4, section 6.2.
std::string sha256_hex(const std::string& bytes) {
  static constexpr std::array<uint32_t, 64> k = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };

  // Padding: 0x80, zeros, then the message length in bits as a 64-bit big-endian number.
  std::string msg = bytes;
  const uint64_t bit_length = static_cast<uint64_t>(bytes.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back('\0');
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((bit_length >> (8 * i)) & 0xff));

  std::array<uint32_t, 64> w{};
  for (size_t block = 0; block < msg.size(); block += 64) {
    for (int t = 0; t < 16; ++t) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + block + 4 * t);
      w[t] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
    }
    for (int t = 16; t < 64; ++t) {
      uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; ++t) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = hh + s1 + ch + k[t] + w[t];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint32_t v : h)
    for (int i = 28; i >= 0; i -= 4) out.push_back(hex[(v >> i) & 0xf]);
  return out;
}

std::string content_hash(const json& j) { return sha256_hex(normalized_dump(j)); }

}  // namespace monarch
