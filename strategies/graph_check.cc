#include "strategies/graph_check.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/graph_time.h"

namespace monarch {

namespace {

std::string at(size_t rank, size_t task) { return "/ranks/" + std::to_string(rank) + "/tasks/" + std::to_string(task); }

}  // namespace

Problems check_graph(const PlanGraph& g, size_t max_problems) {
  Problems out;
  auto add = [&](std::string where, std::string what) {
    if (out.size() < max_problems) out.push_back({std::move(where), std::move(what)});
  };
  const size_t R = g.ranks.size();
  if (static_cast<int64_t>(R) != g.world_size)
    add("/ranks", "has " + std::to_string(R) + " programs, world_size is " + std::to_string(g.world_size));
  for (size_t r = 0; r < R; ++r)
    if (g.ranks[r].rank != static_cast<int32_t>(r)) add("/ranks/" + std::to_string(r) + "/rank", "program out of order");

  // Group membership lookup.
  std::vector<std::unordered_map<int32_t, int32_t>> position(g.groups.size());  // rank -> index in group
  for (size_t gi = 0; gi < g.groups.size(); ++gi) {
    for (size_t i = 0; i < g.groups[gi].ranks.size(); ++i) {
      const int32_t rk = g.groups[gi].ranks[i];
      if (rk < 0 || static_cast<size_t>(rk) >= R) add("/groups/" + std::to_string(gi), "rank " + std::to_string(rk) + " is not a rank");
      if (!position[gi].emplace(rk, static_cast<int32_t>(i)).second)
        add("/groups/" + std::to_string(gi), "rank " + std::to_string(rk) + " appears twice");
    }
  }

  struct CollMember {
    size_t rank, task;
  };
  std::map<std::pair<int32_t, int32_t>, std::vector<CollMember>> collectives;
  struct P2p {
    size_t rank, task;
    int64_t bytes;
  };
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<P2p>> sends, recvs;

  for (size_t r = 0; r < R; ++r) {
    const auto& tasks = g.ranks[r].tasks;
    std::unordered_map<int32_t, std::pair<size_t, int64_t>> live;  // buffer -> (alloc task, bytes)
    std::unordered_map<int32_t, bool> ever;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      for (int32_t d : t.deps)
        if (d < 0 || static_cast<size_t>(d) >= i) add(at(r, i) + "/deps", "dependency " + std::to_string(d) + " is not an earlier task");
      switch (t.kind) {
        case TaskKind::kCollective:
          if (t.group < 0 || static_cast<size_t>(t.group) >= g.groups.size()) {
            add(at(r, i) + "/group", "group " + std::to_string(t.group) + " does not exist");
            break;
          }
          if (!position[static_cast<size_t>(t.group)].count(static_cast<int32_t>(r)))
            add(at(r, i) + "/group", "rank " + std::to_string(r) + " is not a member of group " + std::to_string(t.group));
          collectives[{t.group, t.seq}].push_back({r, i});
          break;
        case TaskKind::kSend:
          sends[{static_cast<int32_t>(r), t.peer, t.tag}].push_back({r, i, t.bytes});
          break;
        case TaskKind::kRecv:
          recvs[{t.peer, static_cast<int32_t>(r), t.tag}].push_back({r, i, t.bytes});
          break;
        case TaskKind::kAlloc:
          if (live.count(t.buffer)) add(at(r, i), "allocates buffer " + std::to_string(t.buffer) + " which is still allocated");
          else if (ever.count(t.buffer)) add(at(r, i), "reuses buffer id " + std::to_string(t.buffer));
          if (t.bytes < 0) add(at(r, i) + "/bytes", "negative size");
          live[t.buffer] = {i, t.bytes};
          ever[t.buffer] = true;
          break;
        case TaskKind::kFree: {
          auto it = live.find(t.buffer);
          if (it == live.end()) {
            add(at(r, i), "frees buffer " + std::to_string(t.buffer) + " which is not allocated");
            break;
          }
          if (it->second.second != t.bytes)
            add(at(r, i) + "/bytes", "frees " + std::to_string(t.bytes) + " bytes of buffer " + std::to_string(t.buffer) +
                                         ", allocated with " + std::to_string(it->second.second));
          live.erase(it);
          break;
        }
        case TaskKind::kCompute:
          if (t.duration_s < 0 || t.flops < 0) add(at(r, i), "negative duration or FLOPs");
          break;
      }
    }
  }

  for (const auto& [key, members] : collectives) {
    const auto& group = g.groups[static_cast<size_t>(key.first)];
    const Task& first = g.ranks[members[0].rank].tasks[members[0].task];
    const std::string name = std::string(to_string(first.collective)) + " on group " + std::to_string(key.first) + " seq " +
                             std::to_string(key.second);
    if (members.size() != group.ranks.size()) {
      std::vector<int32_t> present;
      for (const auto& m : members) present.push_back(static_cast<int32_t>(m.rank));
      std::string missing;
      for (int32_t rk : group.ranks)
        if (std::find(present.begin(), present.end(), rk) == present.end()) missing += (missing.empty() ? "" : ", ") + std::to_string(rk);
      add(at(members[0].rank, members[0].task),
          name + " has " + std::to_string(members.size()) + " of " + std::to_string(group.ranks.size()) + " members" +
              (missing.empty() ? " (a rank joins twice)" : "; missing ranks " + missing));
      continue;
    }
    for (const auto& m : members) {
      const Task& t = g.ranks[m.rank].tasks[m.task];
      if (t.collective != first.collective || t.bytes != first.bytes || t.count != first.count || t.dtype != first.dtype)
        add(at(m.rank, m.task), name + " disagrees with rank " + std::to_string(members[0].rank) + " on kind, size, count or dtype");
    }
  }
  for (const auto& [key, list] : sends) {
    auto it = recvs.find(key);
    const auto& [src, dst, tag] = key;
    if (list.size() > 1) add(at(list[1].rank, list[1].task), "second send to " + std::to_string(dst) + " with tag " + std::to_string(tag));
    if (it == recvs.end()) {
      add(at(list[0].rank, list[0].task), "send to " + std::to_string(dst) + " with tag " + std::to_string(tag) + " has no receive");
      continue;
    }
    if (it->second[0].bytes != list[0].bytes)
      add(at(it->second[0].rank, it->second[0].task), "receives " + std::to_string(it->second[0].bytes) + " bytes, the send has " +
                                                          std::to_string(list[0].bytes));
  }
  for (const auto& [key, list] : recvs) {
    const auto& [src, dst, tag] = key;
    if (list.size() > 1) add(at(list[1].rank, list[1].task), "second receive from " + std::to_string(src) + " with tag " + std::to_string(tag));
    if (!sends.count(key))
      add(at(list[0].rank, list[0].task), "receive from " + std::to_string(src) + " with tag " + std::to_string(tag) + " has no send");
  }

  if (out.empty()) {
    auto timing = evaluate_graph_time(g);
    if (!timing)
      for (const Problem& p : timing.problems()) add(p.where, p.message);
  }
  return out;
}

}  // namespace monarch
