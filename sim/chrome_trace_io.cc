#include "sim/chrome_trace_io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/units.h"

namespace monarch {
namespace {
using nlohmann::json;

// Trace timestamps are microseconds; slices are placed on a nanosecond grid so that spans that
// touch in the simulation touch exactly in the trace.
int64_t to_ns(double s) { return std::llround(s * 1e9); }
double ns_to_us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

int stream_tid(const std::string& stream, std::map<std::string, int>& extra) {
  static const char* kKnown[] = {"compute", "tp", "cp", "ep", "dp", "pp-send", "pp-recv"};
  for (int i = 0; i < 7; ++i)
    if (stream == kKnown[i]) return i;
  auto it = extra.find(stream);
  if (it != extra.end()) return it->second;
  const int tid = 7 + static_cast<int>(extra.size());
  extra[stream] = tid;
  return tid;
}

json plan_json(const Plan& p) {
  return json{{"tp", p.tp}, {"pp", p.pp}, {"dp", p.dp}, {"cp", p.cp}, {"ep", p.ep}, {"vpp", p.vpp},
              {"micro_batch_size", p.micro_batch_size}, {"schedule", to_string(p.schedule)},
              {"sequence_parallel", p.sequence_parallel}, {"recompute", to_string(p.recompute)},
              {"zero_stage", p.zero_stage}};
}

struct Slice {
  int pid, tid;
  int64_t start_ns, end_ns;
  const TimelineSpan* span;
};

}  // namespace

std::string chrome_trace_text(const BackendResult& result, const TraceMetadata& meta) {
  json events = json::array();
  std::map<std::string, int> extra_tids;
  std::set<std::pair<int, int>> tracks;
  std::set<int> pids;

  std::vector<Slice> slices;
  slices.reserve(result.timeline.size());
  for (const auto& s : result.timeline) {
    const int tid = stream_tid(s.stream, extra_tids);
    const int64_t a = to_ns(s.start_s);
    slices.push_back({s.rank, tid, a, std::max(a, to_ns(s.end_s)), &s});
    tracks.insert({s.rank, tid});
    pids.insert(s.rank);
  }
  for (const auto& m : result.memory_timeline) pids.insert(m.rank);

  // Per track: by start, longer first, then force proper nesting. A slice that starts inside
  // the open one but ends after it (only possible through rounding or a malformed timeline) is
  // moved to start where the open one ends.
  std::sort(slices.begin(), slices.end(), [](const Slice& x, const Slice& y) {
    return std::tie(x.pid, x.tid, x.start_ns, y.end_ns) < std::tie(y.pid, y.tid, y.start_ns, x.end_ns);
  });
  std::vector<int64_t> open_ends;  // stack of ends on the current track
  for (size_t i = 0; i < slices.size(); ++i) {
    if (i == 0 || slices[i].pid != slices[i - 1].pid || slices[i].tid != slices[i - 1].tid) open_ends.clear();
    Slice& s = slices[i];
    while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
    if (!open_ends.empty() && s.end_ns > open_ends.back()) {
      s.start_ns = open_ends.back();
      s.end_ns = std::max(s.end_ns, s.start_ns);
      open_ends.pop_back();
      while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
    }
    open_ends.push_back(s.end_ns);
  }

  json timed = json::array();
  std::map<int64_t, std::pair<const Slice*, const Slice*>> flows;  // id -> (send, recv)
  for (const auto& s : slices) {
    json e = {{"ph", "X"}, {"name", s.span->name}, {"cat", s.span->category}, {"pid", s.pid}, {"tid", s.tid},
              {"ts", ns_to_us(s.start_ns)}, {"dur", ns_to_us(s.end_ns - s.start_ns)}};
    if (s.span->peer >= 0) e["args"] = {{"peer", s.span->peer}};
    timed.push_back(std::move(e));
    if (s.span->flow_id >= 0) {
      auto& f = flows[s.span->flow_id];
      (s.span->name.rfind("ncclSend", 0) == 0 ? f.first : f.second) = &s;
    }
  }
  for (const auto& [id, f] : flows) {
    if (!f.first || !f.second) continue;
    timed.push_back({{"ph", "s"}, {"name", "p2p"}, {"cat", "p2p"}, {"id", id}, {"pid", f.first->pid},
                     {"tid", f.first->tid}, {"ts", ns_to_us(f.first->start_ns)}});
    timed.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "p2p"}, {"cat", "p2p"}, {"id", id}, {"pid", f.second->pid},
                     {"tid", f.second->tid}, {"ts", ns_to_us(f.second->start_ns)}});
  }
  for (const auto& m : result.memory_timeline)
    timed.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", m.rank}, {"ts", ns_to_us(to_ns(m.time_s))},
                     {"args", {{"allocated_GiB", bytes_to_gib(m.allocated_bytes)}}}});
  // Times ascend through the file (Perfetto's importer does not need it; readers of the raw
  // file do).
  std::stable_sort(timed.begin(), timed.end(),
                   [](const json& a, const json& b) { return a["ts"].get<double>() < b["ts"].get<double>(); });

  for (int pid : pids) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "rank " + std::to_string(pid)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  }
  static const char* kKnown[] = {"compute", "tp", "cp", "ep", "dp", "pp-send", "pp-recv"};
  for (auto [pid, tid] : tracks) {
    std::string name;
    if (tid < 7) {
      name = kKnown[tid];
    } else {
      for (const auto& [n, t] : extra_tids)
        if (t == tid) name = n;
    }
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }
  for (auto& e : timed) events.push_back(std::move(e));

  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"scenario", meta.scenario},
                {"backend", result.backend},
                {"world_size", meta.world_size},
                {"plan", plan_json(result.plan)},
                {"iteration_time_s", result.iteration_time_s}}}};
  return doc.dump();
}

Problems write_chrome_trace(const std::string& path, const BackendResult& result, const TraceMetadata& meta) {
  const std::string text = chrome_trace_text(result, meta);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return {{"--trace", "cannot write " + path + ": " + std::strerror(errno)}};
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return {{"--trace", "cannot write " + path + ": " + why}};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return {{"--trace", "cannot write " + path + ": " + why}};
  }
  return {};
}

}  // namespace monarch
