#include "core/graph_check.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph_replica.h"
#include "core/graph_time.h"

namespace monarch {

namespace {

std::string at(size_t rank, size_t task) { return "/ranks/" + std::to_string(rank) + "/tasks/" + std::to_string(task); }

// One pass over the graph: the per-task checks while reading each rank, then the checks that
// need every rank (collective calls complete, sends paired).
class GraphChecker {
 public:
  GraphChecker(const PlanGraph& g, const GraphCheckOptions& options) : g_(g), options_(options), R_(g.ranks.size()) {}

  Problems run() {
    if (!check_ranks()) return std::move(out_);
    lowered_ = lowered_replica(g_);
    partial_ = !lowered_.empty();
    if (!partial_) lowered_.assign(R_, 1);
    check_groups();
    calls_.resize(g_.groups.size());
    for (size_t r = 0; r < R_; ++r) check_rank(r);
    check_calls();
    check_pairs();
    // The completion check needs every rank; a partial graph's collectives wait for members
    // that are not lowered (the SimGrid backend, which runs such graphs, reports a deadlock).
    if (out_.empty() && !partial_ && options_.completion) {
      auto timing = evaluate_graph_time(g_);
      if (!timing)
        for (const Problem& p : timing.problems()) add(p.where, p.message);
    }
    return std::move(out_);
  }

 private:
  // Collective calls by (group, seq): how many members arrived, and the first one.
  struct Call {
    int32_t members = 0;
    int32_t first_rank = -1;
    int32_t first_task = -1;
  };
  // Point-to-point pairs by (src, dst, tag).
  struct Pair {
    int32_t sends = 0, recvs = 0;
    int32_t send_rank = -1, send_task = -1, recv_rank = -1, recv_task = -1;
    int64_t send_bytes = 0, recv_bytes = 0;
  };
  struct Buffers {
    std::unordered_map<int32_t, int64_t> live;  // buffer -> bytes
    std::unordered_map<int32_t, bool> ever;
  };

  void add(std::string where, std::string what) {
    if (out_.size() < options_.max_problems) out_.push_back({std::move(where), std::move(what)});
  }

  // One program per rank, in order. False when the rest cannot be read rank by rank.
  bool check_ranks() {
    if (g_.world_size < 1) {
      add("/world_size", "found " + std::to_string(g_.world_size) + ", expected at least one rank");
      return false;
    }
    if (static_cast<int64_t>(R_) != g_.world_size) {
      add("/ranks", "has " + std::to_string(R_) + " programs, world_size is " + std::to_string(g_.world_size));
      return false;
    }
    for (size_t r = 0; r < R_; ++r)
      if (g_.ranks[r].rank != static_cast<int32_t>(r)) add("/ranks/" + std::to_string(r) + "/rank", "program out of order");
    return true;
  }

  void check_groups() {
    position_.resize(g_.groups.size());
    for (size_t gi = 0; gi < g_.groups.size(); ++gi)
      for (size_t i = 0; i < g_.groups[gi].ranks.size(); ++i) {
        const int32_t rk = g_.groups[gi].ranks[i];
        if (rk < 0 || static_cast<size_t>(rk) >= R_) add("/groups/" + std::to_string(gi), "rank " + std::to_string(rk) + " is not a rank");
        if (!position_[gi].emplace(rk, static_cast<int32_t>(i)).second)
          add("/groups/" + std::to_string(gi), "rank " + std::to_string(rk) + " appears twice");
      }
  }

  void check_rank(size_t r) {
    const auto& tasks = g_.ranks[r].tasks;
    Buffers buffers;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      for (int32_t d : t.deps)
        if (d < 0 || static_cast<size_t>(d) >= i) add(at(r, i) + "/deps", "dependency " + std::to_string(d) + " is not an earlier task");
      switch (t.kind) {
        case TaskKind::kCollective: check_collective(r, i, t); break;
        case TaskKind::kSend:
        case TaskKind::kRecv: check_p2p(r, i, t); break;
        case TaskKind::kAlloc:
        case TaskKind::kFree: check_memory(r, i, t, buffers); break;
        case TaskKind::kCompute:
          if (!(t.duration_s >= 0) || !std::isfinite(t.duration_s) || !(t.flops >= 0) || !std::isfinite(t.flops))
            add(at(r, i), "duration or FLOPs negative or not finite");
          break;
      }
    }
  }

  void check_collective(size_t r, size_t i, const Task& t) {
    if (t.group < 0 || static_cast<size_t>(t.group) >= g_.groups.size()) {
      add(at(r, i) + "/group", "group " + std::to_string(t.group) + " does not exist");
      return;
    }
    const size_t gi = static_cast<size_t>(t.group);
    const size_t n = g_.groups[gi].ranks.size();
    if (!position_[gi].count(static_cast<int32_t>(r)))
      add(at(r, i) + "/group", "rank " + std::to_string(r) + " is not a member of group " + std::to_string(t.group));
    if (t.bytes < 0) add(at(r, i) + "/bytes", "negative size");
    // NCCL / MPI all-to-all sends bytes / n to every member: the buffer must split evenly,
    // unless the task gives each member's size (an uneven exchange, sent pair by pair).
    if (t.collective == CollectiveKind::kAllToAll && t.send_bytes.empty() &&
        t.bytes % static_cast<int64_t>(std::max<size_t>(n, 1)) != 0)
      add(at(r, i) + "/bytes", "all-to-all of " + std::to_string(t.bytes) + " bytes does not split evenly over the " +
                                   std::to_string(n) + " members of group " + std::to_string(t.group));
    if (!t.send_bytes.empty() && (t.collective != CollectiveKind::kAllToAll || t.send_bytes.size() != n))
      add(at(r, i) + "/send_bytes", "has " + std::to_string(t.send_bytes.size()) + " per-peer sizes, expected one per member of group " +
                                        std::to_string(t.group) + " on an all-to-all");
    if (t.seq < 0 || static_cast<size_t>(t.seq) > g_.ranks[r].tasks.size() * 4 + 64) {
      add(at(r, i) + "/seq", "seq " + std::to_string(t.seq) + " is out of range");
      return;
    }
    auto& v = calls_[gi];
    if (static_cast<size_t>(t.seq) >= v.size()) v.resize(static_cast<size_t>(t.seq) + 1);
    Call& c = v[static_cast<size_t>(t.seq)];
    if (c.members++ == 0) {
      c.first_rank = static_cast<int32_t>(r);
      c.first_task = static_cast<int32_t>(i);
      return;
    }
    const Task& f = first_task(c);
    if (t.collective != f.collective || t.bytes != f.bytes || t.count != f.count || t.dtype != f.dtype)
      add(at(r, i), std::string(to_string(f.collective)) + " on group " + std::to_string(t.group) + " seq " + std::to_string(t.seq) +
                        " disagrees with rank " + std::to_string(c.first_rank) + " on kind, size, count or dtype");
  }

  void check_p2p(size_t r, size_t i, const Task& t) {
    if (t.peer < 0 || static_cast<size_t>(t.peer) >= R_ || static_cast<size_t>(t.peer) == r) {
      add(at(r, i) + "/peer", "peer " + std::to_string(t.peer) + " is not another rank");
      return;
    }
    if (t.bytes < 0) add(at(r, i) + "/bytes", "negative size");
    const bool send = t.kind == TaskKind::kSend;
    const auto me = static_cast<int64_t>(r);
    Pair& pr = pairs_[send ? pair_key(me, t.peer, t.tag) : pair_key(t.peer, me, t.tag)];
    if (send) {
      if (pr.sends++ == 0) pr.send_rank = static_cast<int32_t>(r), pr.send_task = static_cast<int32_t>(i), pr.send_bytes = t.bytes;
      else add(at(r, i), "second send to " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag));
    } else {
      if (pr.recvs++ == 0) pr.recv_rank = static_cast<int32_t>(r), pr.recv_task = static_cast<int32_t>(i), pr.recv_bytes = t.bytes;
      else add(at(r, i), "second receive from " + std::to_string(t.peer) + " with tag " + std::to_string(t.tag));
    }
  }

  void check_memory(size_t r, size_t i, const Task& t, Buffers& b) {
    if (t.kind == TaskKind::kAlloc) {
      if (b.live.count(t.buffer)) add(at(r, i), "allocates buffer " + std::to_string(t.buffer) + " which is still allocated");
      else if (b.ever.count(t.buffer)) add(at(r, i), "reuses buffer id " + std::to_string(t.buffer));
      if (t.bytes < 0) add(at(r, i) + "/bytes", "negative size");
      b.live[t.buffer] = t.bytes;
      b.ever[t.buffer] = true;
      return;
    }
    auto it = b.live.find(t.buffer);
    if (it == b.live.end()) {
      add(at(r, i), "frees buffer " + std::to_string(t.buffer) + " which is not allocated");
      return;
    }
    if (it->second != t.bytes)
      add(at(r, i) + "/bytes", "frees " + std::to_string(t.bytes) + " bytes of buffer " + std::to_string(t.buffer) +
                                   ", allocated with " + std::to_string(it->second));
    b.live.erase(it);
  }

  // Every member with a program calls each (group, seq) once.
  void check_calls() {
    for (size_t gi = 0; gi < calls_.size(); ++gi) {
      const auto& group = g_.groups[gi];
      int32_t expected = 0;  // members with a program
      for (int32_t rk : group.ranks) expected += rk >= 0 && static_cast<size_t>(rk) < R_ && lowered_[static_cast<size_t>(rk)] ? 1 : 0;
      for (size_t seq = 0; seq < calls_[gi].size(); ++seq) {
        const Call& c = calls_[gi][seq];
        if (c.members == 0 || c.members == expected) continue;
        const std::string missing = missing_members(gi, seq);
        add("/groups/" + std::to_string(gi),
            std::string(to_string(first_task(c).collective)) + " seq " + std::to_string(seq) + " (first called at " +
                at(static_cast<size_t>(c.first_rank), static_cast<size_t>(c.first_task)) + ") has " + std::to_string(c.members) +
                " of " + std::to_string(group.ranks.size()) + " members" +
                (missing.empty() ? " (a rank joins twice)" : "; missing ranks " + missing));
      }
    }
  }

  // Error path only: the members that do not call (group gi, seq).
  std::string missing_members(size_t gi, size_t seq) const {
    std::string missing;
    for (int32_t rk : g_.groups[gi].ranks) {
      bool present = false;
      if (rk >= 0 && static_cast<size_t>(rk) < R_)
        for (const Task& t : g_.ranks[static_cast<size_t>(rk)].tasks)
          if (t.kind == TaskKind::kCollective && t.group == static_cast<int32_t>(gi) && t.seq == static_cast<int32_t>(seq)) present = true;
      if (!present) missing += (missing.empty() ? "" : ", ") + std::to_string(rk);
    }
    return missing;
  }

  void check_pairs() {
    for (const auto& [key, pr] : pairs_) {
      const auto tag = std::to_string(static_cast<uint32_t>(key));
      if (pr.recvs == 0)
        add(at(static_cast<size_t>(pr.send_rank), static_cast<size_t>(pr.send_task)),
            "send to " + std::to_string(task(pr.send_rank, pr.send_task).peer) + " with tag " + tag + " has no receive");
      else if (pr.sends == 0)
        add(at(static_cast<size_t>(pr.recv_rank), static_cast<size_t>(pr.recv_task)),
            "receive from " + std::to_string(task(pr.recv_rank, pr.recv_task).peer) + " with tag " + tag + " has no send");
      else if (pr.send_bytes != pr.recv_bytes)
        add(at(static_cast<size_t>(pr.recv_rank), static_cast<size_t>(pr.recv_task)),
            "receives " + std::to_string(pr.recv_bytes) + " bytes, the send has " + std::to_string(pr.send_bytes));
    }
  }

  uint64_t pair_key(int64_t src, int64_t dst, int32_t tag) const {
    const uint64_t world = std::max<uint64_t>(R_, 1);
    return ((static_cast<uint64_t>(src) * world + static_cast<uint64_t>(dst)) << 32) | static_cast<uint32_t>(tag);
  }
  const Task& task(int32_t rank, int32_t index) const {
    return g_.ranks[static_cast<size_t>(rank)].tasks[static_cast<size_t>(index)];
  }
  const Task& first_task(const Call& c) const { return task(c.first_rank, c.first_task); }

  const PlanGraph& g_;
  const GraphCheckOptions& options_;
  const size_t R_;
  Problems out_;
  std::vector<char> lowered_;  // ranks with a program
  bool partial_ = false;       // one data-parallel replica's graph
  std::vector<std::unordered_map<int32_t, int32_t>> position_;  // per group: rank -> index in group
  std::vector<std::vector<Call>> calls_;                        // per group, by seq
  std::unordered_map<uint64_t, Pair> pairs_;
};

}  // namespace

Problems check_graph(const PlanGraph& graph, const GraphCheckOptions& options) { return GraphChecker(graph, options).run(); }

}  // namespace monarch
