#include "sim/simgrid_test_graphs.h"

#include <map>

namespace monarch::testing {

ClusterConfig make_cluster(int64_t num_gpus, int64_t gpus_per_node, int64_t nics_per_node, double intra_GBps,
                           double intra_latency_us, double inter_GBps, double inter_latency_us, Topology topology,
                           double oversubscription) {
  ClusterConfig c;
  c.gpu.name = "test-gpu";
  c.gpu.peak_tflops.bf16 = 300;
  c.gpu.memory_gib = 80;
  c.num_gpus = num_gpus;
  c.gpus_per_node = gpus_per_node;
  c.nics_per_node = nics_per_node;
  c.intra_node = {intra_GBps, intra_latency_us};
  c.inter_node = {inter_GBps, inter_latency_us};
  c.topology = topology;
  c.oversubscription = oversubscription;
  return c;
}

Scenario make_scenario(const ClusterConfig& cluster) {
  Scenario s;
  s.name = "simgrid-test";
  s.cluster = cluster;
  s.model.seq_length = 2048;
  s.training.global_batch_size = 8;
  return s;
}

PlanGraph collective_graph(int32_t world_size, const std::vector<int32_t>& group_ranks, CollectiveKind kind,
                           int64_t bytes, int repeats, GroupKind group_kind) {
  PlanGraph g;
  g.world_size = world_size;
  g.groups.push_back({group_kind, group_ranks});
  g.ranks.resize(static_cast<size_t>(world_size));
  for (int32_t r = 0; r < world_size; ++r) g.ranks[static_cast<size_t>(r)].rank = r;
  for (int32_t r : group_ranks) {
    auto& tasks = g.ranks[static_cast<size_t>(r)].tasks;
    for (int i = 0; i < repeats; ++i) {
      Task t;
      t.kind = TaskKind::kCollective;
      t.stream = group_kind == GroupKind::kTp ? Stream::kTpComm : Stream::kDpComm;
      t.collective = kind;
      t.group = 0;
      t.seq = i;
      t.bytes = bytes;
      tasks.push_back(t);
    }
  }
  return g;
}

namespace {

struct Builder {
  RankProgram& prog;
  int32_t add(Task t) {
    prog.tasks.push_back(std::move(t));
    return static_cast<int32_t>(prog.tasks.size() - 1);
  }
};

}  // namespace

PlanGraph training_graph(const StepShape& sh) {
  PlanGraph g;
  g.plan.tp = sh.tp;
  g.plan.pp = sh.pp;
  g.plan.dp = sh.dp;
  g.plan.schedule = Schedule::kGpipe;
  g.world_size = sh.tp * sh.pp * sh.dp;
  g.num_micro_batches = sh.micro_batches;
  auto rank_of = [&](int32_t t, int32_t d, int32_t p) { return t + sh.tp * (d + sh.dp * p); };
  std::map<std::pair<int, int>, int32_t> tp_group, dp_group;  // (dp, pp) / (tp, pp) -> index
  for (int32_t p = 0; p < sh.pp; ++p)
    for (int32_t d = 0; d < sh.dp; ++d) {
      ProcessGroup grp{GroupKind::kTp, {}};
      for (int32_t t = 0; t < sh.tp; ++t) grp.ranks.push_back(rank_of(t, d, p));
      tp_group[{d, p}] = static_cast<int32_t>(g.groups.size());
      g.groups.push_back(grp);
    }
  for (int32_t p = 0; p < sh.pp; ++p)
    for (int32_t t = 0; t < sh.tp; ++t) {
      ProcessGroup grp{GroupKind::kDp, {}};
      for (int32_t d = 0; d < sh.dp; ++d) grp.ranks.push_back(rank_of(t, d, p));
      dp_group[{t, p}] = static_cast<int32_t>(g.groups.size());
      g.groups.push_back(grp);
    }

  g.ranks.resize(static_cast<size_t>(g.world_size));
  for (int32_t p = 0; p < sh.pp; ++p)
    for (int32_t d = 0; d < sh.dp; ++d)
      for (int32_t t = 0; t < sh.tp; ++t) {
        const int32_t rank = rank_of(t, d, p);
        RankProgram& prog = g.ranks[static_cast<size_t>(rank)];
        prog.rank = rank;
        prog.stage = p;
        Builder b{prog};
        int32_t tp_seq = 0;
        int32_t last = -1;  // the task the next compute must wait for (TP all-reduce)
        auto compute = [&](Phase phase, int32_t mb, double d_s, std::vector<int32_t> deps) {
          Task c;
          c.kind = TaskKind::kCompute;
          c.phase = phase;
          c.op = phase == Phase::kOptimizer ? OpKind::kOptimizerStep : OpKind::kLayer;
          c.layer = phase == Phase::kOptimizer ? -1 : p * 4;
          c.num_layers = phase == Phase::kOptimizer ? 0 : 4;
          c.micro_batch = mb;
          c.duration_s = d_s;
          c.flops = d_s * 100e12;
          if (last >= 0) deps.push_back(last);
          c.deps = std::move(deps);
          return b.add(c);
        };
        auto tp_allreduce = [&](int32_t after) {
          if (sh.tp < 2) return after;
          Task c;
          c.kind = TaskKind::kCollective;
          c.stream = Stream::kTpComm;
          c.collective = CollectiveKind::kAllReduce;
          c.group = tp_group[{d, p}];
          c.seq = tp_seq++;
          c.bytes = sh.tp_bytes;
          c.deps = {after};
          return b.add(c);
        };
        auto p2p = [&](TaskKind kind, int32_t peer, int32_t tag, std::vector<int32_t> deps) {
          Task c;
          c.kind = kind;
          c.stream = kind == TaskKind::kSend ? Stream::kPpSend : Stream::kPpRecv;
          c.peer = peer;
          c.tag = tag;
          c.bytes = sh.pp_bytes;
          c.deps = std::move(deps);
          return b.add(c);
        };
        auto mem = [&](TaskKind kind, MemCategory cat, int32_t buffer, int64_t bytes) {
          Task c;
          c.kind = kind;
          c.category = cat;
          c.buffer = buffer;
          c.bytes = bytes;
          return b.add(c);
        };
        mem(TaskKind::kAlloc, MemCategory::kWeights, 0, sh.weight_bytes);
        for (int32_t m = 0; m < sh.micro_batches; ++m) {
          std::vector<int32_t> deps;
          if (p > 0) deps.push_back(p2p(TaskKind::kRecv, rank_of(t, d, p - 1), m, {}));
          mem(TaskKind::kAlloc, MemCategory::kActivations, 1 + m, sh.activation_bytes);
          const int32_t c = compute(Phase::kForward, m, sh.fwd_s, deps);
          last = tp_allreduce(c);
          if (p + 1 < sh.pp) p2p(TaskKind::kSend, rank_of(t, d, p + 1), m, {last});
        }
        for (int32_t m = 0; m < sh.micro_batches; ++m) {
          std::vector<int32_t> deps;
          if (p + 1 < sh.pp) deps.push_back(p2p(TaskKind::kRecv, rank_of(t, d, p + 1), 1000 + m, {}));
          const int32_t c = compute(Phase::kBackward, m, sh.bwd_s, deps);
          mem(TaskKind::kFree, MemCategory::kActivations, 1 + m, sh.activation_bytes);  // a free names its size (core/graph_check.h)
          last = tp_allreduce(c);
          if (p > 0) p2p(TaskKind::kSend, rank_of(t, d, p - 1), 1000 + m, {last});
        }
        if (sh.dp > 1) {
          Task c;
          c.kind = TaskKind::kCollective;
          c.stream = Stream::kDpComm;
          c.collective = CollectiveKind::kAllReduce;
          c.group = dp_group[{t, p}];
          c.seq = 0;
          c.bytes = sh.dp_bytes;
          c.deps = {last};
          last = b.add(c);
        }
        compute(Phase::kOptimizer, -1, sh.optimizer_s, {});
      }
  return g;
}

}  // namespace monarch::testing
