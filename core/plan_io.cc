#include "core/plan_io.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/result_io.h"
#include "core/scenario_io.h"
#include "core/text_file.h"

namespace monarch {
namespace {

using nlohmann::json;

// Value counts of the IR enums (the last enumerator + 1).
constexpr int kTaskKinds = static_cast<int>(TaskKind::kFree) + 1;
constexpr int kStreams = static_cast<int>(Stream::kPpRecv) + 1;
constexpr int kPhases = static_cast<int>(Phase::kOther) + 1;
constexpr int kCollectiveKinds = static_cast<int>(CollectiveKind::kBroadcast) + 1;
constexpr int kGroupKinds = static_cast<int>(GroupKind::kExpertTp) + 1;
constexpr int kDTypes = static_cast<int>(DType::kFp8) + 1;
constexpr int kMemCategories = static_cast<int>(MemCategory::kBuffers) + 1;
constexpr int kOpKinds = static_cast<int>(OpKind::kOther) + 1;

// Largest task count per rank we accept, so a corrupt file cannot ask for a giant allocation
// before its tasks are read (we never reserve from a count anyway; this bounds indices).
constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text + " (" + v.type_name() + ")";
}

template <typename E>
std::string names_of(int count) {
  std::string s;
  for (int i = 0; i < count; ++i) s += std::string(i ? ", " : "") + "\"" + to_string(static_cast<E>(i)) + "\"";
  return s;
}

class Reader {
 public:
  explicit Reader(Problems& p) : problems_(p) {}
  void fail(const std::string& where, const std::string& what) {
    if (problems_.size() < kMaxProblems) problems_.push_back({where, what});
  }
  bool full() const { return problems_.size() >= kMaxProblems; }

  bool object(const json& j, const std::string& path) {
    if (j.is_object()) return true;
    fail(path, "found " + describe(j) + ", expected an object");
    return false;
  }
  bool array(const json& j, const std::string& path) {
    if (j.is_array()) return true;
    fail(path, "found " + describe(j) + ", expected an array");
    return false;
  }
  void only(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) fail(path + "/" + it.key(), "unknown key");
    }
  }
  bool integer(const json& v, const std::string& path, int64_t lo, int64_t hi, int64_t& out) {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))) {
      const int64_t x = v.get<int64_t>();
      if (x >= lo && x <= hi) {
        out = x;
        return true;
      }
    }
    fail(path, "found " + describe(v) + ", expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    return false;
  }
  template <typename T>
  void field_int(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi, T& out, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(path + "/" + key, "missing, expected an integer");
      return;
    }
    int64_t x = 0;
    if (integer(*it, path + "/" + key, lo, hi, x)) out = static_cast<T>(x);
  }
  void field_number(const json& obj, const std::string& path, const char* key, double& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return;
    if (it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0) {
      out = it->get<double>();
      return;
    }
    fail(path + "/" + key, "found " + describe(*it) + ", expected a non-negative number");
  }
  template <typename E>
  void field_enum(const json& obj, const std::string& path, const char* key, int count, E& out, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(path + "/" + key, "missing, expected one of " + names_of<E>(count));
      return;
    }
    if (it->is_string()) {
      const std::string& s = it->get_ref<const std::string&>();
      for (int i = 0; i < count; ++i)
        if (s == to_string(static_cast<E>(i))) {
          out = static_cast<E>(i);
          return;
        }
    }
    fail(path + "/" + key, "found " + describe(*it) + ", expected one of " + names_of<E>(count));
  }

 private:
  static constexpr size_t kMaxProblems = 20;
  Problems& problems_;
};

json task_to_json(const Task& t) {
  json j = {{"kind", to_string(t.kind)}, {"stream", to_string(t.stream)}};
  if (t.phase != Phase::kOther) j["phase"] = to_string(t.phase);
  if (t.chunk != 0) j["chunk"] = t.chunk;
  if (t.micro_batch >= 0) j["micro_batch"] = t.micro_batch;
  if (t.layer >= 0) j["layer"] = t.layer;
  if (t.num_layers != 0) j["num_layers"] = t.num_layers;
  switch (t.kind) {
    case TaskKind::kCompute:
      j["op"] = to_string(t.op);
      j["flops"] = t.flops;
      j["mem_bytes"] = t.mem_bytes;
      j["duration_s"] = t.duration_s;
      break;
    case TaskKind::kCollective:
      j["collective"] = to_string(t.collective);
      j["group"] = t.group;
      j["seq"] = t.seq;
      j["dtype"] = to_string(t.dtype);
      j["bytes"] = t.bytes;
      j["count"] = t.count;
      j["duration_s"] = t.duration_s;
      if (!t.send_bytes.empty()) j["send_bytes"] = t.send_bytes;
      break;
    case TaskKind::kSend:
    case TaskKind::kRecv:
      j["peer"] = t.peer;
      j["tag"] = t.tag;
      j["bytes"] = t.bytes;
      j["duration_s"] = t.duration_s;
      break;
    case TaskKind::kAlloc:
    case TaskKind::kFree:
      j["category"] = to_string(t.category);
      j["buffer"] = t.buffer;
      j["bytes"] = t.bytes;
      break;
  }
  if (!t.deps.empty()) j["deps"] = t.deps;
  return j;
}

void read_task(Reader& r, const json& j, const std::string& path, int64_t index, int64_t world, int64_t num_groups,
               bool uneven_ok, Task& t) {
  if (!r.object(j, path)) return;
  r.field_enum(j, path, "kind", kTaskKinds, t.kind, true);
  r.field_enum(j, path, "stream", kStreams, t.stream, true);
  r.field_enum(j, path, "phase", kPhases, t.phase, false);
  r.field_int(j, path, "chunk", 0, kMaxIndex, t.chunk, false);
  r.field_int(j, path, "micro_batch", 0, kMaxIndex, t.micro_batch, false);
  r.field_int(j, path, "layer", 0, kMaxIndex, t.layer, false);
  r.field_int(j, path, "num_layers", 0, kMaxIndex, t.num_layers, false);
  r.field_number(j, path, "duration_s", t.duration_s);
  switch (t.kind) {
    case TaskKind::kCompute:
      r.only(j, path, {"kind", "stream", "phase", "chunk", "micro_batch", "layer", "num_layers", "op", "flops", "mem_bytes",
                       "duration_s", "deps"});
      r.field_enum(j, path, "op", kOpKinds, t.op, true);
      r.field_number(j, path, "flops", t.flops);
      r.field_number(j, path, "mem_bytes", t.mem_bytes);
      break;
    case TaskKind::kCollective:
      if (uneven_ok)
        r.only(j, path, {"kind", "stream", "phase", "chunk", "micro_batch", "layer", "num_layers", "collective", "group",
                         "seq", "dtype", "bytes", "count", "duration_s", "deps", "send_bytes"});
      else
        r.only(j, path, {"kind", "stream", "phase", "chunk", "micro_batch", "layer", "num_layers", "collective", "group",
                         "seq", "dtype", "bytes", "count", "duration_s", "deps"});
      r.field_enum(j, path, "collective", kCollectiveKinds, t.collective, true);
      r.field_int(j, path, "group", 0, num_groups - 1, t.group, true);
      r.field_int(j, path, "seq", 0, kMaxIndex, t.seq, true);
      r.field_enum(j, path, "dtype", kDTypes, t.dtype, false);
      r.field_int(j, path, "bytes", 0, std::numeric_limits<int64_t>::max(), t.bytes, true);
      r.field_int(j, path, "count", 1, kMaxIndex, t.count, false);
      if (auto it = j.find("send_bytes"); uneven_ok && it != j.end()) {
        if (t.collective != CollectiveKind::kAllToAll) r.fail(path + "/send_bytes", "only an all-to-all has per-peer sizes");
        else if (r.array(*it, path + "/send_bytes")) {
          // One entry per group member (checked against the group in graph_check); bounded by
          // the world size so that a bad file cannot ask for a giant allocation.
          if (it->size() > static_cast<size_t>(world)) {
            r.fail(path + "/send_bytes", "has " + std::to_string(it->size()) + " entries, more than the " +
                                             std::to_string(world) + " ranks");
          } else {
            t.send_bytes.resize(it->size());
            for (size_t k = 0; k < it->size(); ++k)
              r.integer((*it)[k], path + "/send_bytes/" + std::to_string(k), 0, std::numeric_limits<int64_t>::max(),
                        t.send_bytes[k]);
          }
        }
      }
      break;
    case TaskKind::kSend:
    case TaskKind::kRecv:
      r.only(j, path, {"kind", "stream", "phase", "chunk", "micro_batch", "layer", "num_layers", "peer", "tag", "bytes",
                       "duration_s", "deps"});
      r.field_int(j, path, "peer", 0, world - 1, t.peer, true);
      r.field_int(j, path, "tag", 0, kMaxIndex, t.tag, true);
      r.field_int(j, path, "bytes", 0, std::numeric_limits<int64_t>::max(), t.bytes, true);
      break;
    case TaskKind::kAlloc:
    case TaskKind::kFree:
      r.only(j, path, {"kind", "stream", "phase", "chunk", "micro_batch", "layer", "num_layers", "category", "buffer", "bytes",
                       "deps"});
      r.field_enum(j, path, "category", kMemCategories, t.category, true);
      r.field_int(j, path, "buffer", 0, kMaxIndex, t.buffer, true);
      r.field_int(j, path, "bytes", 0, std::numeric_limits<int64_t>::max(), t.bytes, true);
      break;
  }
  if (auto it = j.find("deps"); it != j.end() && r.array(*it, path + "/deps")) {
    t.deps.reserve(std::min<size_t>(it->size(), 64));
    for (size_t i = 0; i < it->size(); ++i) {
      int64_t d = 0;
      if (r.integer((*it)[i], path + "/deps/" + std::to_string(i), 0, index - 1, d)) t.deps.push_back(static_cast<int32_t>(d));
    }
  }
}

}  // namespace

json plan_graph_to_json(const PlanGraph& g, const Scenario* scenario) {
  json groups = json::array();
  for (const ProcessGroup& pg : g.groups) groups.push_back({{"kind", to_string(pg.kind)}, {"ranks", pg.ranks}});
  json ranks = json::array();
  for (const RankProgram& rp : g.ranks) {
    json tasks = json::array();
    for (const Task& t : rp.tasks) {
      tasks.push_back(task_to_json(t));
      if (!scenario) tasks.back().erase("send_bytes");  // version 1 has no per-peer sizes
    }
    ranks.push_back({{"rank", rp.rank}, {"stage", rp.stage}, {"tasks", std::move(tasks)}});
  }
  bool uneven = false;
  for (const RankProgram& rp : g.ranks)
    for (const Task& t : rp.tasks) uneven = uneven || !t.send_bytes.empty();
  // Per-peer sizes need version 3, which carries the scenario; without one they are left out
  // (version 1: every member's call uses `bytes`, the padded size).
  json j{{"format", scenario ? (uneven ? PlanGraph::kFormatV3 : PlanGraph::kFormat) : PlanGraph::kFormatV1},
         {"plan", plan_to_json(g.plan)},
         {"world_size", g.world_size},
         {"num_micro_batches", g.num_micro_batches},
         {"groups", std::move(groups)},
         {"ranks", std::move(ranks)}};
  if (scenario) j["scenario"] = scenario_to_json(*scenario);
  return j;
}

Expected<PlanFile> plan_file_from_json(const json& j, const std::string& base_dir) {
  Problems problems;
  Reader r(problems);
  if (!r.object(j, "")) return problems;
  const std::string versions = std::string("\"") + PlanGraph::kFormatV3 + "\", \"" + PlanGraph::kFormat + "\" or \"" +
                               PlanGraph::kFormatV1 + "\"";
  auto fmt = j.find("format");
  if (fmt == j.end()) return Expected<PlanFile>::fail("/format", "missing, expected " + versions);
  const bool v2 = fmt->is_string() && fmt->get<std::string>() == PlanGraph::kFormat;
  const bool v1 = fmt->is_string() && fmt->get<std::string>() == PlanGraph::kFormatV1;
  const bool v3 = fmt->is_string() && fmt->get<std::string>() == PlanGraph::kFormatV3;
  if (!v1 && !v2 && !v3)
    return Expected<PlanFile>::fail("/format", "found " + describe(*fmt) + ", this build reads " + versions);
  PlanFile file;
  file.format = fmt->get<std::string>();
  if (v2 || v3) {
    r.only(j, "", {"format", "scenario", "plan", "world_size", "num_micro_batches", "groups", "ranks"});
    auto sj = j.find("scenario");
    if (sj == j.end()) {
      r.fail("/scenario", std::string("missing: a \"") + fmt->get<std::string>() + "\" file carries the scenario it was planned for");
    } else {
      auto s = scenario_from_json(*sj, base_dir);
      if (s) file.scenario = std::move(s).value();
      else
        for (const Problem& p : s.problems()) r.fail("/scenario" + (p.where.rfind('/', 0) == 0 ? p.where : "/" + p.where), p.message);
    }
  } else {
    r.only(j, "", {"format", "plan", "world_size", "num_micro_batches", "groups", "ranks"});
  }
  PlanGraph& g = file.graph;
  if (auto it = j.find("plan"); it == j.end()) {
    r.fail("/plan", "missing, expected an object");
  } else {
    auto plan = plan_from_json(*it, "/plan");
    if (plan) g.plan = *plan;
    else
      for (const Problem& p : plan.problems()) r.fail(p.where, p.message);
  }
  r.field_int(j, "", "world_size", 1, std::numeric_limits<int32_t>::max(), g.world_size, true);
  r.field_int(j, "", "num_micro_batches", 1, kMaxIndex, g.num_micro_batches, true);
  if (!problems.empty()) return problems;
  if (g.plan.world_size() != g.world_size)
    r.fail("/world_size", std::to_string(g.world_size) + " does not match the plan's tp x pp x dp x cp = " +
                              std::to_string(g.plan.world_size()));

  auto groups = j.find("groups");
  if (groups == j.end()) r.fail("/groups", "missing, expected an array");
  else if (r.array(*groups, "/groups")) {
    for (size_t i = 0; i < groups->size() && !r.full(); ++i) {
      const json& gj = (*groups)[i];
      const std::string path = "/groups/" + std::to_string(i);
      if (!r.object(gj, path)) continue;
      r.only(gj, path, {"kind", "ranks"});
      ProcessGroup pg;
      r.field_enum(gj, path, "kind", kGroupKinds, pg.kind, true);
      auto rk = gj.find("ranks");
      if (rk == gj.end()) r.fail(path + "/ranks", "missing, expected an array of ranks");
      else if (r.array(*rk, path + "/ranks")) {
        if (rk->size() < 2) r.fail(path + "/ranks", "a group needs at least 2 ranks");
        for (size_t k = 0; k < rk->size() && k <= static_cast<size_t>(g.world_size); ++k) {
          int64_t x = 0;
          if (r.integer((*rk)[k], path + "/ranks/" + std::to_string(k), 0, g.world_size - 1, x)) pg.ranks.push_back(static_cast<int32_t>(x));
        }
        if (rk->size() > static_cast<size_t>(g.world_size)) r.fail(path + "/ranks", "more ranks than world_size");
      }
      g.groups.push_back(std::move(pg));
    }
  }
  auto ranks = j.find("ranks");
  if (ranks == j.end()) r.fail("/ranks", "missing, expected an array with one program per rank");
  else if (r.array(*ranks, "/ranks")) {
    if (ranks->size() != static_cast<size_t>(g.world_size))
      r.fail("/ranks", "has " + std::to_string(ranks->size()) + " programs, world_size is " + std::to_string(g.world_size));
    if (problems.empty()) {
      g.ranks.resize(ranks->size());
      for (size_t i = 0; i < ranks->size() && !r.full(); ++i) {
        const json& rj = (*ranks)[i];
        const std::string path = "/ranks/" + std::to_string(i);
        if (!r.object(rj, path)) continue;
        r.only(rj, path, {"rank", "stage", "tasks"});
        RankProgram& rp = g.ranks[i];
        r.field_int(rj, path, "rank", static_cast<int64_t>(i), static_cast<int64_t>(i), rp.rank, true);
        r.field_int(rj, path, "stage", 0, g.plan.pp - 1, rp.stage, true);
        auto tasks = rj.find("tasks");
        if (tasks == rj.end()) {
          r.fail(path + "/tasks", "missing, expected an array");
          continue;
        }
        if (!r.array(*tasks, path + "/tasks")) continue;
        rp.tasks.resize(tasks->size());
        for (size_t k = 0; k < tasks->size() && !r.full(); ++k)
          read_task(r, (*tasks)[k], path + "/tasks/" + std::to_string(k), static_cast<int64_t>(k), g.world_size,
                    static_cast<int64_t>(g.groups.size()), v3, rp.tasks[k]);
      }
    }
  }
  if (!problems.empty()) return problems;
  return file;
}

Expected<PlanGraph> plan_graph_from_json(const json& j) {
  auto f = plan_file_from_json(j);
  if (!f) return f.problems();
  return std::move(f->graph);
}

Problems write_plan_file(const std::string& path, const PlanGraph& graph, const Scenario* scenario) {
  if (std::string why = write_text_file_atomically(path, plan_graph_to_json(graph, scenario).dump() + "\n"); !why.empty())
    return {Problem{path, why}};
  return {};
}

Expected<PlanFile> read_plan_file_full(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<PlanFile>::fail(path, "cannot open the plan file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    return Expected<PlanFile>::fail(path, std::string("is not valid JSON: ") + e.what());
  }
  const std::filesystem::path p(path);
  auto f = plan_file_from_json(j, p.has_parent_path() ? p.parent_path().string() : ".");
  if (f) return f;
  Problems problems = f.problems();
  for (Problem& q : problems) q.where = path + ":" + q.where;
  return problems;
}

Expected<PlanGraph> read_plan_file(const std::string& path) {
  auto f = read_plan_file_full(path);
  if (!f) return f.problems();
  return std::move(f->graph);
}

}  // namespace monarch
