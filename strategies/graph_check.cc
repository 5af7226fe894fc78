#include "strategies/graph_check.h"

#include <algorithm>
#include <unordered_map>

#include "core/graph_replica.h"
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

  // A graph lowered for one data-parallel replica (strategies/lowering.h `only`): the other
  // ranks have no program and do not join its collectives.
  std::vector<char> lowered = lowered_replica(g);
  const bool partial = !lowered.empty();
  if (!partial) lowered.assign(R, 1);

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

  // Collective calls by (group, seq): how many members arrived, and the first one.
  struct Call {
    int32_t members = 0;
    int32_t first_rank = -1;
    int32_t first_task = -1;
  };
  std::vector<std::vector<Call>> calls(g.groups.size());
  // Point-to-point pairs by (src, dst, tag).
  struct Pair {
    int32_t sends = 0, recvs = 0;
    int32_t send_rank = -1, send_task = -1, recv_rank = -1, recv_task = -1;
    int64_t send_bytes = 0, recv_bytes = 0;
  };
  std::unordered_map<uint64_t, Pair> pairs;
  const uint64_t world = std::max<uint64_t>(R, 1);
  auto pair_key = [&](int64_t src, int64_t dst, int32_t tag) {
    return ((static_cast<uint64_t>(src) * world + static_cast<uint64_t>(dst)) << 32) | static_cast<uint32_t>(tag);
  };

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
          // NCCL / MPI all-to-all sends bytes / n to every member: the buffer must split evenly.
          if (t.collective == CollectiveKind::kAllToAll &&
              t.bytes % static_cast<int64_t>(std::max<size_t>(g.groups[static_cast<size_t>(t.group)].ranks.size(), 1)) != 0)
            add(at(r, i) + "/bytes", "all-to-all of " + std::to_string(t.bytes) + " bytes does not split evenly over the " +
                                         std::to_string(g.groups[static_cast<size_t>(t.group)].ranks.size()) + " members of group " +
                                         std::to_string(t.group));
          if (!t.send_bytes.empty() &&
              (t.collective != CollectiveKind::kAllToAll ||
               t.send_bytes.size() != g.groups[static_cast<size_t>(t.group)].ranks.size()))
            add(at(r, i) + "/send_bytes", "has " + std::to_string(t.send_bytes.size()) +
                                              " per-peer sizes, expected one per member of group " + std::to_string(t.group) +
                                              " on an all-to-all");
          if (t.seq < 0 || static_cast<size_t>(t.seq) > tasks.size() * 4 + 64) {
            add(at(r, i) + "/seq", "seq " + std::to_string(t.seq) + " is out of range");
            break;
          } else {
            auto& v = calls[static_cast<size_t>(t.group)];
            if (static_cast<size_t>(t.seq) >= v.size()) v.resize(static_cast<size_t>(t.seq) + 1);
            Call& c = v[static_cast<size_t>(t.seq)];
            if (c.members++ == 0) {
              c.first_rank = static_cast<int32_t>(r);
              c.first_task = static_cast<int32_t>(i);
            } else {
              const Task& f = g.ranks[static_cast<size_t>(c.first_rank)].tasks[static_cast<size_t>(c.first_task)];
              if (t.collective != f.collective || t.bytes != f.bytes || t.count != f.count || t.dtype != f.dtype)
                add(at(r, i), std::string(to_string(f.collective)) + " on group " + std::to_string(t.group) + " seq " +
                                  std::to_string(t.seq) + " disagrees with rank " + std::to_string(c.first_rank) +
                                  " on kind, size, count or dtype");
            }
          }
          break;
        case TaskKind::kSend:
        case TaskKind::kRecv: {
          if (t.peer < 0 || static_cast<size_t>(t.peer) >= R) {
            add(at(r, i) + "/peer", "peer " + std::to_string(t.peer) + " is not a rank");
            break;
          }
          const bool send = t.kind == TaskKind::kSend;
          Pair& pr = pairs[send ? pair_key(static_cast<int64_t>(r), t.peer, t.tag) : pair_key(t.peer, static_cast<int64_t>(r), t.tag)];
          if (send) {
            if (pr.sends++ == 0) pr.send_rank = static_cast<int32_t>(r), pr.send_task = static_cast<int32_t>(i), pr.send_bytes = t.bytes;
            else add(at(r, i), "second send to " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag));
          } else {
            if (pr.recvs++ == 0) pr.recv_rank = static_cast<int32_t>(r), pr.recv_task = static_cast<int32_t>(i), pr.recv_bytes = t.bytes;
            else add(at(r, i), "second receive from " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag));
          }
          break;
        }
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

  for (size_t gi = 0; gi < calls.size(); ++gi) {
    const auto& group = g.groups[gi];
    for (size_t seq = 0; seq < calls[gi].size(); ++seq) {
      const Call& c = calls[gi][seq];
      int32_t expected = 0;  // members with a program
      for (int32_t rk : group.ranks) expected += rk >= 0 && static_cast<size_t>(rk) < R && lowered[static_cast<size_t>(rk)] ? 1 : 0;
      if (c.members == 0 || c.members == expected) continue;
      // Error path: list the members that are missing.
      std::string missing;
      for (int32_t rk : group.ranks) {
        bool present = false;
        if (rk >= 0 && static_cast<size_t>(rk) < R)
          for (const Task& t : g.ranks[static_cast<size_t>(rk)].tasks)
            if (t.kind == TaskKind::kCollective && t.group == static_cast<int32_t>(gi) && t.seq == static_cast<int32_t>(seq)) present = true;
        if (!present) missing += (missing.empty() ? "" : ", ") + std::to_string(rk);
      }
      const Task& first = g.ranks[static_cast<size_t>(c.first_rank)].tasks[static_cast<size_t>(c.first_task)];
      add(at(static_cast<size_t>(c.first_rank), static_cast<size_t>(c.first_task)),
          std::string(to_string(first.collective)) + " on group " + std::to_string(gi) + " seq " + std::to_string(seq) + " has " +
              std::to_string(c.members) + " of " + std::to_string(group.ranks.size()) + " members" +
              (missing.empty() ? " (a rank joins twice)" : "; missing ranks " + missing));
    }
  }
  for (const auto& [key, pr] : pairs) {
    if (pr.recvs == 0)
      add(at(static_cast<size_t>(pr.send_rank), static_cast<size_t>(pr.send_task)),
          "send to " + std::to_string(g.ranks[static_cast<size_t>(pr.send_rank)].tasks[static_cast<size_t>(pr.send_task)].peer) +
              " with tag " + std::to_string(static_cast<uint32_t>(key)) + " has no receive");
    else if (pr.sends == 0)
      add(at(static_cast<size_t>(pr.recv_rank), static_cast<size_t>(pr.recv_task)),
          "receive from " + std::to_string(g.ranks[static_cast<size_t>(pr.recv_rank)].tasks[static_cast<size_t>(pr.recv_task)].peer) +
              " with tag " + std::to_string(static_cast<uint32_t>(key)) + " has no send");
    else if (pr.send_bytes != pr.recv_bytes)
      add(at(static_cast<size_t>(pr.recv_rank), static_cast<size_t>(pr.recv_task)),
          "receives " + std::to_string(pr.recv_bytes) + " bytes, the send has " + std::to_string(pr.send_bytes));
  }

  // The completion check needs every rank; a partial graph's collectives wait for members that
  // are not lowered (the SimGrid backend, which runs such graphs, reports a deadlock itself).
  if (out.empty() && !partial) {
    auto timing = evaluate_graph_time(g);
    if (!timing)
      for (const Problem& p : timing.problems()) add(p.where, p.message);
  }
  return out;
}

}  // namespace monarch
