#include "core/graph_time.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <vector>

namespace monarch {

namespace {

std::string where(int32_t rank, int64_t task) {
  return "/ranks/" + std::to_string(rank) + "/tasks/" + std::to_string(task);
}

std::string describe(const Task& t) {
  std::string s = to_string(t.kind);
  if (t.kind == TaskKind::kSend || t.kind == TaskKind::kRecv)
    s += std::string(t.kind == TaskKind::kSend ? " to " : " from ") + std::to_string(t.peer) + " tag " + std::to_string(t.tag);
  if (t.kind == TaskKind::kCollective)
    s += std::string(" ") + to_string(t.collective) + " group " + std::to_string(t.group) + " seq " + std::to_string(t.seq);
  return s + " on stream " + to_string(t.stream);
}

// One collective call (group, seq) while its members arrive; members chain through
// next_member (global task ids, -1 ends).
struct Instance {
  int32_t arrived = 0;
  int32_t first_member = -1;
  double ready_s = 0;
  double duration_s = 0;
};

// What the list schedule reads of a task, packed for cache locality.
struct TaskLite {
  double duration_s;
  int32_t group;
  int32_t seq;
  TaskKind kind;
};

}  // namespace

Expected<GraphTiming> evaluate_graph_time(const PlanGraph& g) {
  GraphTiming out;
  const size_t R = g.ranks.size();
  out.rank_offset.resize(R + 1, 0);
  for (size_t r = 0; r < R; ++r) out.rank_offset[r + 1] = out.rank_offset[r] + static_cast<int64_t>(g.ranks[r].tasks.size());
  const int64_t N = out.rank_offset[R];
  out.start_s.assign(static_cast<size_t>(N), 0.0);
  out.end_s.assign(static_cast<size_t>(N), 0.0);
  out.rank_end_s.assign(R, 0.0);

  // Incoming edge counts and successor lists (CSR).
  std::vector<int32_t> wait(static_cast<size_t>(N), 0);
  std::vector<int64_t> succ_count(static_cast<size_t>(N) + 1, 0);
  std::vector<std::pair<int32_t, int32_t>> edges;  // (from, to), global ids
  edges.reserve(static_cast<size_t>(N) * 2);
  std::unordered_map<uint64_t, int32_t> sends;
  sends.reserve(static_cast<size_t>(N / 4 + 16));
  const uint64_t world = std::max<uint64_t>(R, 1);
  auto p2p_key = [&](uint64_t src, uint64_t dst, int32_t tag) {
    return ((src * world + dst) << 32) | static_cast<uint32_t>(tag);
  };
  for (size_t r = 0; r < R; ++r) {
    const auto& tasks = g.ranks[r].tasks;
    std::array<int32_t, 16> last_on_stream;
    last_on_stream.fill(-1);
    for (size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      const auto id = static_cast<int32_t>(out.rank_offset[r] + static_cast<int64_t>(i));
      int32_t& last = last_on_stream[static_cast<size_t>(t.stream) & 15];
      if (last >= 0) edges.emplace_back(last, id);
      last = id;
      for (int32_t d : t.deps) {
        if (d < 0 || d >= static_cast<int32_t>(i))
          return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)) + "/deps",
                                             "dependency " + std::to_string(d) + " is not an earlier task of this rank");
        edges.emplace_back(static_cast<int32_t>(out.rank_offset[r] + d), id);
      }
      if (t.kind == TaskKind::kSend) {
        if (t.peer < 0 || static_cast<size_t>(t.peer) >= R)
          return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)) + "/peer",
                                             "peer " + std::to_string(t.peer) + " is not a rank");
        if (!sends.emplace(p2p_key(r, static_cast<uint64_t>(t.peer), t.tag), id).second)
          return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)),
                                             "second send to " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag));
      }
      if (t.kind == TaskKind::kCollective && (t.group < 0 || static_cast<size_t>(t.group) >= g.groups.size()))
        return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)) + "/group",
                                           "group " + std::to_string(t.group) + " does not exist");
    }
  }
  for (size_t r = 0; r < R; ++r) {
    const auto& tasks = g.ranks[r].tasks;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      if (t.kind != TaskKind::kRecv) continue;
      const auto id = static_cast<int32_t>(out.rank_offset[r] + static_cast<int64_t>(i));
      if (t.peer < 0 || static_cast<size_t>(t.peer) >= R)
        return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)) + "/peer",
                                           "peer " + std::to_string(t.peer) + " is not a rank");
      auto it = sends.find(p2p_key(static_cast<uint64_t>(t.peer), r, t.tag));
      if (it == sends.end())
        return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), static_cast<int64_t>(i)),
                                           "receive from " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag) +
                                               " has no matching send");
      edges.emplace_back(it->second, id);
    }
  }
  for (const auto& [from, to] : edges) {
    ++succ_count[static_cast<size_t>(from) + 1];
    ++wait[static_cast<size_t>(to)];
  }
  for (size_t i = 1; i < succ_count.size(); ++i) succ_count[i] += succ_count[i - 1];
  std::vector<int32_t> succ(edges.size());
  {
    std::vector<int64_t> fill(succ_count.begin(), succ_count.end() - 1);
    for (const auto& [from, to] : edges) succ[static_cast<size_t>(fill[static_cast<size_t>(from)]++)] = to;
  }
  edges.clear();
  edges.shrink_to_fit();

  std::vector<int32_t> rank_of(static_cast<size_t>(N));
  std::vector<TaskLite> lite(static_cast<size_t>(N));
  std::vector<std::vector<Instance>> instances(g.groups.size());
  for (size_t r = 0; r < R; ++r)
    for (int64_t i = out.rank_offset[r]; i < out.rank_offset[r + 1]; ++i) {
      rank_of[static_cast<size_t>(i)] = static_cast<int32_t>(r);
      const Task& t = g.ranks[r].tasks[static_cast<size_t>(i - out.rank_offset[r])];
      lite[static_cast<size_t>(i)] = TaskLite{t.duration_s, t.group, t.seq, t.kind};
      if (t.kind == TaskKind::kCollective) {
        if (t.seq < 0 || t.seq > N)
          return Expected<GraphTiming>::fail(where(static_cast<int32_t>(r), i - out.rank_offset[r]) + "/seq",
                                             "seq " + std::to_string(t.seq) + " is out of range");
        auto& v = instances[static_cast<size_t>(t.group)];
        if (static_cast<size_t>(t.seq) >= v.size()) v.resize(static_cast<size_t>(t.seq) + 1);
      }
    }
  auto task_at = [&](int32_t id) -> const Task& {
    const int32_t r = rank_of[static_cast<size_t>(id)];
    return g.ranks[static_cast<size_t>(r)].tasks[static_cast<size_t>(id - out.rank_offset[static_cast<size_t>(r)])];
  };

  std::vector<double> ready(static_cast<size_t>(N), 0.0);
  std::vector<int32_t> next_member(static_cast<size_t>(N), -1);
  std::vector<int32_t> work;
  for (int64_t i = 0; i < N; ++i)
    if (wait[static_cast<size_t>(i)] == 0) work.push_back(static_cast<int32_t>(i));
  int64_t done = 0;
  std::vector<char> finished(static_cast<size_t>(N), 0);
  auto finish = [&](int32_t id, double start, double end) {
    finished[static_cast<size_t>(id)] = 1;
    out.start_s[static_cast<size_t>(id)] = start;
    out.end_s[static_cast<size_t>(id)] = end;
    ++done;
    for (int64_t e = succ_count[static_cast<size_t>(id)]; e < succ_count[static_cast<size_t>(id) + 1]; ++e) {
      const int32_t s = succ[static_cast<size_t>(e)];
      ready[static_cast<size_t>(s)] = std::max(ready[static_cast<size_t>(s)], end);
      if (--wait[static_cast<size_t>(s)] == 0) work.push_back(s);
    }
  };
  while (!work.empty()) {
    const int32_t id = work.back();
    work.pop_back();
    const TaskLite& t = lite[static_cast<size_t>(id)];
    const double r = ready[static_cast<size_t>(id)];
    if (t.kind == TaskKind::kCollective) {
      const auto group_size = static_cast<int32_t>(g.groups[static_cast<size_t>(t.group)].ranks.size());
      Instance& inst = instances[static_cast<size_t>(t.group)][static_cast<size_t>(t.seq)];
      next_member[static_cast<size_t>(id)] = inst.first_member;
      inst.first_member = id;
      inst.ready_s = std::max(inst.ready_s, r);
      inst.duration_s = std::max(inst.duration_s, t.duration_s);
      if (++inst.arrived == group_size) {
        const double start = inst.ready_s, end = inst.ready_s + inst.duration_s;
        for (int32_t m = inst.first_member; m >= 0; m = next_member[static_cast<size_t>(m)]) finish(m, start, end);
      } else if (inst.arrived > group_size) {
        const int32_t rk = rank_of[static_cast<size_t>(id)];
        return Expected<GraphTiming>::fail(where(rk, id - out.rank_offset[static_cast<size_t>(rk)]),
                                           "more members than group " + std::to_string(t.group) + " has reach seq " +
                                               std::to_string(t.seq));
      }
      continue;
    }
    const double dur = (t.kind == TaskKind::kRecv) ? 0.0 : t.duration_s;  // the send carries the transfer
    finish(id, r, r + dur);
  }
  if (done < N) {
    Problems problems;
    for (size_t rk = 0; rk < R && problems.size() < 5; ++rk) {
      for (int64_t id = out.rank_offset[rk]; id < out.rank_offset[rk + 1]; ++id) {
        if (finished[static_cast<size_t>(id)]) continue;
        if (wait[static_cast<size_t>(id)] == 0) {  // a collective waiting in its instance
          problems.push_back({where(static_cast<int32_t>(rk), id - out.rank_offset[rk]),
                              describe(task_at(static_cast<int32_t>(id))) + " waits for group members that never arrive"});
          break;
        }
        if (wait[static_cast<size_t>(id)] > 0) {
          problems.push_back({where(static_cast<int32_t>(rk), id - out.rank_offset[rk]),
                              describe(task_at(static_cast<int32_t>(id))) + " never becomes ready (deadlock or cycle)"});
          break;
        }
      }
    }
    if (problems.empty()) problems.push_back({"/ranks", "the graph does not run to completion"});
    return problems;
  }
  for (size_t rk = 0; rk < R; ++rk)
    for (int64_t id = out.rank_offset[rk]; id < out.rank_offset[rk + 1]; ++id)
      out.rank_end_s[rk] = std::max(out.rank_end_s[rk], out.end_s[static_cast<size_t>(id)]);
  for (double e : out.rank_end_s) out.makespan_s = std::max(out.makespan_s, e);
  return out;
}

}  // namespace monarch
