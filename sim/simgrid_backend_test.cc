#include "sim/simgrid_backend.h"

#include <gtest/gtest.h>

#include "core/collectives.h"

#include <sys/wait.h>

#include <cerrno>
#include <cmath>

#include "sim/chrome_trace_check.h"
#include "sim/chrome_trace_io.h"
#include "sim/simgrid_test_graphs.h"
#include "core/cost_model.h"
#include "core/placement.h"

namespace monarch {
namespace {
using namespace monarch::testing;

constexpr double kMiB = 1024.0 * 1024.0;

BackendResult run_ok(const Scenario& sc, const PlanGraph& g, const SimgridOptions& o = {}) {
  auto r = run_simgrid(sc, g, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.problems().front().to_string());
  return r.ok() ? *r : BackendResult{};
}

SimgridOptions fidelity(SimgridFidelity f) {
  SimgridOptions o;
  o.fidelity = f;
  return o;
}

// Textbook ring all-reduce (alpha-beta): 2(n-1) steps of alpha + size/(n B).
double ring_allreduce_s(int n, double bytes, double alpha_s, double Bps) {
  return 2.0 * (n - 1) * (alpha_s + bytes / (n * Bps));
}

// The analytical cost model's time for a collective on the strided group base + i * stride.
double analytical_s(CollectiveKind kind, double bytes, int64_t base, int64_t size, int64_t stride,
                    const ClusterConfig& c) {
  return collective_time_s(kind, static_cast<int64_t>(bytes), strided_span(base, size, stride, c.gpus_per_node), c);
}

// Link payload bandwidths the platform uses (line rate x the cost model's NCCL efficiencies).
double nvlink_Bps(const ClusterConfig& c) { return c.intra_node.bandwidth_GBps * 1e9 * gpu_profile(c.gpu).nvlink_efficiency; }
double nic_Bps(const ClusterConfig& c) { return c.inter_node.bandwidth_GBps * 1e9 * kInterNodeEfficiency; }

std::vector<int32_t> iota(int32_t first, int32_t count, int32_t stride = 1) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < count; ++i) v.push_back(first + i * stride);
  return v;
}

// ------------------------------------------------------------------ uncontended agreement

TEST(SimgridAgreement, SingleNodeTpAllReduceBothFidelities) {
  auto sc = make_scenario(make_cluster(8, 8, 8, 300, 2, 25, 5));
  const double bytes = 64 * kMiB;
  auto g = collective_graph(8, iota(0, 8), CollectiveKind::kAllReduce, static_cast<int64_t>(bytes), 3, GroupKind::kTp);
  const double expect = 3 * analytical_s(CollectiveKind::kAllReduce, bytes, 0, 8, 1, sc.cluster);
  EXPECT_NEAR(expect, 3 * (kNcclCollectiveBaseLatency_s + ring_allreduce_s(8, bytes, 2e-6, nvlink_Bps(sc.cluster))), 1e-9);
  const auto per_step = run_ok(sc, g, fidelity(SimgridFidelity::kPerStep));
  const auto aggregated = run_ok(sc, g, fidelity(SimgridFidelity::kAggregated));
  EXPECT_NEAR(per_step.iteration_time_s, expect, 0.03 * expect);
  EXPECT_NEAR(aggregated.iteration_time_s, expect, 0.03 * expect);
  EXPECT_NEAR(aggregated.iteration_time_s, per_step.iteration_time_s, 0.02 * per_step.iteration_time_s);
}

TEST(SimgridAgreement, DataParallelAcrossNodesThroughNics) {
  // DP over 4 nodes, one GPU per node (GPU 0 of each): a ring through the NICs.
  auto sc = make_scenario(make_cluster(32, 8, 8, 300, 2, 25, 5));
  const double bytes = 256 * kMiB;
  auto g = collective_graph(32, iota(0, 4, 8), CollectiveKind::kAllReduce, static_cast<int64_t>(bytes));
  const double expect = analytical_s(CollectiveKind::kAllReduce, bytes, 0, 4, 8, sc.cluster);
  for (auto f : {SimgridFidelity::kPerStep, SimgridFidelity::kAggregated}) {
    const auto r = run_ok(sc, g, fidelity(f));
    EXPECT_NEAR(r.iteration_time_s, expect, 0.03 * expect);
    EXPECT_NEAR(r.time_breakdown_s.dp_comm, expect, 0.03 * expect);
    ASSERT_EQ(r.communication.size(), 1u);
    EXPECT_EQ(r.communication[0].kind, CollectiveKind::kAllReduce);
    EXPECT_EQ(r.communication[0].group, GroupKind::kDp);
    EXPECT_EQ(r.communication[0].bytes, static_cast<int64_t>(2.0 * 3 / 4 * bytes));
  }
}

TEST(SimgridAgreement, FidelitiesAgreeForMultiNodeRingsAndSmallMessages) {
  // 16 GPUs on 2 nodes in one group: NVLink edges plus 8 NIC channels; and a latency-bound size.
  auto sc = make_scenario(make_cluster(16, 8, 8, 300, 2, 25, 5));
  for (double bytes : {512 * kMiB, 64e3}) {
    for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                      CollectiveKind::kAllToAll}) {
      auto g = collective_graph(16, iota(0, 16), kind, static_cast<int64_t>(bytes), 2);
      SimgridOptions o;
      o.allow_tree = false;
      o.fidelity = SimgridFidelity::kPerStep;
      const double a = run_ok(sc, g, o).iteration_time_s;
      o.fidelity = SimgridFidelity::kAggregated;
      const double b = run_ok(sc, g, o).iteration_time_s;
      EXPECT_NEAR(a, b, 0.02 * a) << to_string(kind) << " " << bytes;
    }
  }
}

TEST(SimgridAgreement, MultiNodeAllReduceIsOneFlatRing) {
  // 2 nodes x 8 GPUs: one ring through all 16, a channel per NIC. The NICs pace it: each
  // carries 2(n-1)/n of an eighth of the buffer, NVLink 7/8 of 2(n-1)/n; the hops' latencies add.
  auto sc = make_scenario(make_cluster(16, 8, 8, 300, 2, 25, 5));
  const double bytes = 1024 * kMiB;
  auto g = collective_graph(16, iota(0, 16), CollectiveKind::kAllReduce, static_cast<int64_t>(bytes));
  const double expect = analytical_s(CollectiveKind::kAllReduce, bytes, 0, 16, 1, sc.cluster);
  const double nic_s = 2.0 * 15 / 16 * bytes / 8 / nic_Bps(sc.cluster);
  EXPECT_GT(nic_s, 2.0 * 15 / 16 * 7 / 8 * bytes / nvlink_Bps(sc.cluster));
  EXPECT_NEAR(expect, kNcclCollectiveBaseLatency_s + 14 * 2e-6 + 2 * 5e-6 + nic_s, 1e-9);
  for (auto f : {SimgridFidelity::kPerStep, SimgridFidelity::kAggregated})
    EXPECT_NEAR(run_ok(sc, g, fidelity(f)).iteration_time_s, expect, 0.03 * expect);
}

TEST(SimgridAgreement, PipelineOnlyMatchesGpipeFormula) {
  // 4 stages on 4 nodes (GPU 0 each would be rank 0..3 -> put one rank per node via 1 GPU/node).
  auto sc = make_scenario(make_cluster(4, 1, 1, 300, 2, 25, 5));
  StepShape sh;
  sh.pp = 4;
  sh.micro_batches = 8;
  sh.fwd_s = 1e-3;
  sh.bwd_s = 2e-3;
  sh.optimizer_s = 0;
  sh.pp_bytes = 16 * 1024 * 1024;
  const auto g = training_graph(sh);
  const double t = p2p_time_s(sh.pp_bytes, true, sc.cluster);  // one hop
  const int P = 4, M = 8;
  const double expect = (P - 1) * (sh.fwd_s + sh.bwd_s + 2 * t) + M * (sh.fwd_s + sh.bwd_s);
  const auto r = run_ok(sc, g);
  EXPECT_NEAR(r.iteration_time_s, expect, 0.03 * expect);
  EXPECT_GT(r.time_breakdown_s.bubble, 0);
  EXPECT_NEAR(r.time_breakdown_s.compute, M * (sh.fwd_s + sh.bwd_s), 1e-9);
}

TEST(SimgridAgreement, TensorParallelTrainingStepSerializesComputeAndAllReduce) {
  auto sc = make_scenario(make_cluster(8, 8, 8, 300, 2, 25, 5));
  StepShape sh;
  sh.tp = 8;
  sh.micro_batches = 4;
  sh.tp_bytes = 32 * 1024 * 1024;
  const auto g = training_graph(sh);
  const double ar = analytical_s(CollectiveKind::kAllReduce, sh.tp_bytes, 0, 8, 1, sc.cluster);
  const double expect = sh.micro_batches * (sh.fwd_s + sh.bwd_s + 2 * ar) + sh.optimizer_s;
  const auto r = run_ok(sc, g);
  EXPECT_NEAR(r.iteration_time_s, expect, 0.03 * expect);
  EXPECT_NEAR(r.time_breakdown_s.tp_comm, 2 * sh.micro_batches * ar, 0.03 * 2 * sh.micro_batches * ar);
  EXPECT_NEAR(r.time_breakdown_s.exposed_comm, r.time_breakdown_s.tp_comm, 1e-9);
}

// A data-parallel collective holds NCCL's SMs while it runs: compute beside it on the same rank
// gets the rest of the GPU and ends late by the held share of the collective's time; a TP
// collective beside the same compute costs it nothing (the analytical model's rule).
TEST(SimgridAgreement, ComputeBesideADataParallelCollectiveLosesTheSmsItHolds) {
  auto sc = make_scenario(make_cluster(8, 8, 8, 300, 2, 25, 5));
  const int64_t bytes = 256 << 20;
  const double collective_s = run_ok(sc, collective_graph(8, iota(0, 8), CollectiveKind::kAllReduce, bytes)).iteration_time_s;
  ASSERT_GT(collective_s, 0);
  const double compute_s = 3.0 * collective_s;
  auto beside = [&](GroupKind kind) {
    PlanGraph g = collective_graph(8, iota(0, 8), CollectiveKind::kAllReduce, bytes, 1, kind);
    for (auto& prog : g.ranks) {
      Task c;
      c.kind = TaskKind::kCompute;
      c.stream = Stream::kCompute;
      c.duration_s = compute_s;
      prog.tasks.push_back(c);
    }
    return run_ok(sc, g).iteration_time_s;
  };
  const double share = nccl_overlap_sm_share(sc.cluster.gpu);
  EXPECT_NEAR(beside(GroupKind::kDp), compute_s + share * collective_s, 1e-6 * compute_s);
  EXPECT_NEAR(beside(GroupKind::kTp), compute_s, 1e-6 * compute_s);
}

TEST(SimgridAgreement, CountStandsForBackToBackCalls) {
  auto sc = make_scenario(make_cluster(8, 8, 8, 300, 2, 25, 5));
  auto g = collective_graph(8, iota(0, 8), CollectiveKind::kAllReduce, 8 << 20, 1, GroupKind::kTp);
  for (auto& prog : g.ranks)
    for (auto& t : prog.tasks) t.count = 5;
  const double expect = 5 * analytical_s(CollectiveKind::kAllReduce, 8 << 20, 0, 8, 1, sc.cluster);
  for (auto f : {SimgridFidelity::kPerStep, SimgridFidelity::kAggregated})
    EXPECT_NEAR(run_ok(sc, g, fidelity(f)).iteration_time_s, expect, 0.02 * expect);
}

// ------------------------------------------------------------------------------ contention

// All-to-all as concurrent flows agrees with the analytical formula (max of the NIC and NVLink
// shares plus one latency) uncontended: 8 ranks in a node, 16 and 64 across nodes, fat tree
// (oversubscribed uplinks: one leaf per node) and rail-optimized (PXN keeps NIC traffic on
// the rails, so oversubscription does not matter).
TEST(SimgridAgreement, AllToAllMatchesTheAnalyticalFormula) {
  struct Case {
    int64_t ranks;
    Topology topo;
    double over;
  };
  SimgridOptions o;
  o.fat_tree_leaf_ports = 8;
  for (const Case& k : {Case{8, Topology::kFatTree, 1}, Case{16, Topology::kFatTree, 1}, Case{64, Topology::kFatTree, 1},
                        Case{64, Topology::kFatTree, 2}, Case{16, Topology::kRailOptimized, 2},
                        Case{64, Topology::kRailOptimized, 2}}) {
    const ClusterConfig c = make_cluster(k.ranks, 8, 8, 450, 2, 50, 5, k.topo, k.over);
    for (double bytes : {64 * kMiB, 1.0 * kMiB, 64.0 * 1024}) {
      const auto g = collective_graph(static_cast<int32_t>(k.ranks), iota(0, static_cast<int32_t>(k.ranks)),
                                      CollectiveKind::kAllToAll, static_cast<int64_t>(bytes), 1, GroupKind::kEp);
      const double expect = analytical_s(CollectiveKind::kAllToAll, bytes, 0, k.ranks, 1, c);
      EXPECT_NEAR(run_ok(make_scenario(c), g, o).iteration_time_s, expect, 0.03 * expect)
          << k.ranks << " ranks, " << to_string(k.topo) << " x" << k.over << ", " << bytes << " bytes";
    }
  }
}

// An all-to-all whose members send unequal sizes (DLRM table-wise sharding): SimGrid sends
// each member's row. Against every member sending the busiest one's size (the uniform,
// padded form), the real matrix is faster when one sender is busy, and a receiver that gets
// more than anyone sends is slower than the busiest sender's size alone would say.
TEST(SimgridAllToAll, PerPeerSizesChangeTheTimeInTheExpectedDirection) {
  // 2 NICs per node: 4 GPUs share each, so the busy rank's neighbours load its NIC too.
  const ClusterConfig c = make_cluster(16, 8, 2, 450, 2, 50, 5);
  const auto sc = make_scenario(c);
  const int64_t n = 16, piece = 4 << 20;
  auto graph_with = [&](const std::vector<std::vector<int64_t>>& m, int64_t bytes) {
    auto g = collective_graph(16, iota(0, 16), CollectiveKind::kAllToAll, bytes, 1, GroupKind::kEp);
    if (!m.empty())
      for (int32_t r = 0; r < 16; ++r) g.ranks[static_cast<size_t>(r)].tasks[0].send_bytes = m[static_cast<size_t>(r)];
    return g;
  };
  // Rank 0 owns the big table: it sends 8 pieces to everyone, the others 1 piece each.
  std::vector<std::vector<int64_t>> busy_sender(n, std::vector<int64_t>(n, piece));
  for (auto& v : busy_sender[0]) v = 8 * piece;
  const double padded = run_ok(sc, graph_with({}, n * 8 * piece)).iteration_time_s;
  const double real = run_ok(sc, graph_with(busy_sender, n * 8 * piece)).iteration_time_s;
  const double even = run_ok(sc, graph_with({}, n * piece)).iteration_time_s;
  EXPECT_LT(real, padded);
  EXPECT_GT(real, even);
  // The transpose (every rank sends rank 0 8 pieces): rank 0's NIC receives what it sent
  // above, the same time, although no send buffer is larger than 8 + 15 pieces.
  std::vector<std::vector<int64_t>> busy_receiver(n, std::vector<int64_t>(n, piece));
  for (auto& row : busy_receiver) row[0] = 8 * piece;
  const double transposed = run_ok(sc, graph_with(busy_receiver, n * piece + 7 * piece)).iteration_time_s;
  EXPECT_NEAR(transposed, real, 0.02 * real);
  EXPECT_GT(transposed, run_ok(sc, graph_with({}, n * piece + 7 * piece)).iteration_time_s);
}

TEST(SimgridContention, TwoDpGroupsSharingOneNicTakeTwiceAsLong) {
  // One NIC per node: DP groups of GPU 0 and of GPU 1 both leave the node through NIC 0.
  auto sc = make_scenario(make_cluster(16, 8, 1, 300, 2, 25, 5));
  const double bytes = 256 * kMiB;
  PlanGraph one = collective_graph(16, {0, 8}, CollectiveKind::kAllReduce, static_cast<int64_t>(bytes));
  PlanGraph two = one;
  two.groups.push_back({GroupKind::kDp, {1, 9}});
  for (int32_t r : {1, 9}) {
    Task t = one.ranks[0].tasks[0];
    t.group = 1;
    two.ranks[static_cast<size_t>(r)].tasks.push_back(t);
  }
  const double alone = run_ok(sc, one).iteration_time_s;
  const double shared = run_ok(sc, two).iteration_time_s;
  EXPECT_NEAR(alone, ring_allreduce_s(2, bytes, 5e-6, nic_Bps(sc.cluster)), 0.03 * alone);
  // The analytical model gives each GPU a fixed 1/8 share of the node's one NIC whether or not
  // the others talk at the same time; the simulation sees who actually shares it.
  EXPECT_GT(analytical_s(CollectiveKind::kAllReduce, bytes, 0, 2, 8, sc.cluster), 3 * shared);
  EXPECT_NEAR(shared / alone, 2.0, 0.05);
}

TEST(SimgridContention, OversubscribedFatTreeSlowsDpAllReduceByTheRatio) {
  // 4 nodes x 8 GPUs, one leaf switch per node (8 ports): TP 8 inside nodes, 8 DP rings across
  // nodes, every ring edge leaves its leaf. Uplinks carry 8 x 25 GB/s / oversubscription.
  const double bytes = 512 * kMiB;
  StepShape sh;
  sh.tp = 8;
  sh.dp = 4;
  sh.micro_batches = 1;
  sh.fwd_s = sh.bwd_s = sh.optimizer_s = 0;
  sh.dp_bytes = static_cast<int64_t>(bytes);
  const auto g = training_graph(sh);
  SimgridOptions o;
  o.fat_tree_leaf_ports = 8;
  o.allow_tree = false;
  double t[2];
  int i = 0;
  for (double over : {1.0, 3.0}) {
    auto sc = make_scenario(make_cluster(32, 8, 8, 300, 2, 25, 5, Topology::kFatTree, over));
    t[i++] = run_ok(sc, g, o).time_breakdown_s.dp_comm;
  }
  EXPECT_NEAR(t[0], analytical_s(CollectiveKind::kAllReduce, bytes, 0, 4, 8, make_cluster(32, 8, 8, 300, 2, 25, 5)),
              0.03 * t[0]);
  EXPECT_NEAR(t[1] / t[0], 3.0, 0.1);
  // Rail-optimized: DP rings stay on their rail, oversubscription does not matter.
  auto rail = make_scenario(make_cluster(32, 8, 8, 300, 2, 25, 5, Topology::kRailOptimized, 3.0));
  EXPECT_NEAR(run_ok(rail, g, o).time_breakdown_s.dp_comm, t[0], 0.02 * t[0]);
}

// ---------------------------------------------------------------------------------- what-if

TEST(SimgridWhatIf, StragglerDelaysTheWholeDataParallelStep) {
  auto sc = make_scenario(make_cluster(32, 8, 8, 300, 2, 25, 5));
  StepShape sh;
  sh.dp = 4;
  sh.tp = 8;
  sh.micro_batches = 2;
  sh.dp_bytes = 64 << 20;
  const auto g = training_graph(sh);
  const double base = run_ok(sc, g).iteration_time_s;
  sc.whatif.stragglers.push_back({.gpu = 13, .node = -1, .slowdown = 1.5});
  const double slow = run_ok(sc, g).iteration_time_s;
  // GPU 13 computes 1.5x longer; its TP group waits for it, and the DP all-reduce for them.
  const double compute = sh.micro_batches * (sh.fwd_s + sh.bwd_s);
  EXPECT_NEAR(slow - base, 0.5 * (compute + sh.optimizer_s), 1e-6);
  // A whole slow node (node 0) does the same to every group on it.
  sc.whatif.stragglers = {{.gpu = -1, .node = 0, .slowdown = 2.0}};
  EXPECT_NEAR(run_ok(sc, g).iteration_time_s - base, compute + sh.optimizer_s, 1e-6);
}

TEST(SimgridWhatIf, DegradedNicSlowsRingAcrossIt) {
  auto sc = make_scenario(make_cluster(32, 8, 8, 300, 2, 25, 5));
  const double bytes = 256 * kMiB;
  auto g = collective_graph(32, iota(0, 4, 8), CollectiveKind::kAllReduce, static_cast<int64_t>(bytes));
  const double base = run_ok(sc, g).iteration_time_s;
  sc.whatif.degraded_links.push_back({.node = 2, .bandwidth_factor = 0.5});
  const double degraded = run_ok(sc, g).iteration_time_s;
  EXPECT_NEAR(degraded, ring_allreduce_s(4, bytes, 5e-6, 0.5 * nic_Bps(sc.cluster)), 0.03 * degraded);
  EXPECT_GT(degraded / base, 1.9);
}

TEST(SimgridWhatIf, JobsSharingNicsSlowEachOther) {
  // Two 2-node DP jobs on one cluster with one NIC per node: job A on GPUs 0 and 8, job B on
  // GPUs 1 and 9. Alone each takes T; together they share both NICs.
  const auto cluster = make_cluster(16, 8, 1, 300, 2, 25, 5);
  auto sc = make_scenario(cluster);
  const double bytes = 256 * kMiB;
  auto g = collective_graph(2, {0, 1}, CollectiveKind::kAllReduce, static_cast<int64_t>(bytes));
  auto alone = run_simgrid_jobs(cluster, {}, {SimgridJob{&sc, &g, {0, 8}}});
  ASSERT_TRUE(alone.ok());
  auto both = run_simgrid_jobs(cluster, {}, {SimgridJob{&sc, &g, {0, 8}}, SimgridJob{&sc, &g, {1, 9}}});
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->size(), 2u);
  const double t = alone->front().iteration_time_s;
  EXPECT_NEAR((*both)[0].iteration_time_s / t, 2.0, 0.05);
  EXPECT_NEAR((*both)[1].iteration_time_s / t, 2.0, 0.05);
  // On separate NICs (two NICs per node, GPUs 0 and 4 use NICs 0 and 1) they do not interfere.
  const auto wide = make_cluster(16, 8, 2, 300, 2, 25, 5);
  auto apart = run_simgrid_jobs(wide, {}, {SimgridJob{&sc, &g, {0, 8}}, SimgridJob{&sc, &g, {4, 12}}});
  ASSERT_TRUE(apart.ok());
  EXPECT_NEAR((*apart)[0].iteration_time_s, t, 0.02 * t);
  // Overlapping GPU sets are refused.
  auto clash = run_simgrid_jobs(cluster, {}, {SimgridJob{&sc, &g, {0, 8}}, SimgridJob{&sc, &g, {8, 9}}});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.problems().front().where, "jobs/1/gpus/0");
}

// ------------------------------------------------------------------- symmetry, memory, misc

TEST(SimgridBackend, DpReplicaSymmetryMatchesFullSimulation) {
  auto sc = make_scenario(make_cluster(64, 8, 8, 300, 2, 25, 5));
  StepShape sh;
  sh.tp = 4;
  sh.pp = 2;
  sh.dp = 8;
  sh.micro_batches = 4;
  sh.tp_bytes = 8 << 20;
  sh.pp_bytes = 8 << 20;
  sh.dp_bytes = 128 << 20;
  const auto g = training_graph(sh);
  SimgridOptions full, sym;
  full.symmetry = SimgridSymmetry::kOff;
  sym.symmetry = SimgridSymmetry::kDpReplica;
  const auto a = run_ok(sc, g, full);
  const auto b = run_ok(sc, g, sym);
  EXPECT_NEAR(a.iteration_time_s, b.iteration_time_s, 0.01 * a.iteration_time_s);
  EXPECT_NEAR(a.time_breakdown_s.dp_comm, b.time_breakdown_s.dp_comm, 0.01 * a.time_breakdown_s.dp_comm);
  EXPECT_DOUBLE_EQ(a.hardware_flops_per_iteration, b.hardware_flops_per_iteration);
  // Only one replica's spans are in the symmetric timeline.
  EXPECT_EQ(b.timeline.size() * 8, a.timeline.size());
}

TEST(SimgridBackend, MemoryPeakFromAllocAndFree) {
  auto sc = make_scenario(make_cluster(8, 8, 8));
  StepShape sh;
  sh.pp = 2;
  sh.micro_batches = 4;
  sh.weight_bytes = int64_t{1} << 30;
  sh.activation_bytes = int64_t{1} << 28;
  const auto r = run_ok(sc, training_graph(sh));
  // GPipe stashes all 4 micro-batches: 1 GiB weights + 4 x 0.25 GiB.
  EXPECT_NEAR(r.memory.peak_gib, 2.0, 1e-9);
  ASSERT_EQ(r.memory.stages.size(), 2u);
  EXPECT_NEAR(r.memory.stages[0].weights_gib, 1.0, 1e-9);
  EXPECT_NEAR(r.memory.stages[0].activations_gib, 1.0, 1e-9);
  EXPECT_TRUE(r.memory.fits);
  EXPECT_FALSE(r.memory_timeline.empty());
}

TEST(SimgridBackend, TimelineNamesAndP2pPairs) {
  auto sc = make_scenario(make_cluster(16, 8, 8));
  StepShape sh;
  sh.tp = 2;
  sh.pp = 2;
  sh.micro_batches = 2;
  sh.tp_bytes = 1 << 20;
  sh.pp_bytes = 1 << 20;
  const auto r = run_ok(sc, training_graph(sh));
  int allreduce = 0, sends = 0, recvs = 0;
  std::map<int64_t, int> flows;
  for (const auto& s : r.timeline) {
    EXPECT_LE(s.start_s, s.end_s);
    EXPECT_LE(s.end_s, r.iteration_time_s + 1e-12);
    if (s.name == "ncclAllReduce tp") ++allreduce;
    if (s.name == "ncclSend pp") ++sends;
    if (s.name == "ncclRecv pp") ++recvs;
    if (s.flow_id >= 0) ++flows[s.flow_id];
  }
  EXPECT_EQ(allreduce, 4 * 2 * 2);  // ranks x micro-batches x (fwd + bwd)
  EXPECT_EQ(sends, recvs);
  EXPECT_EQ(sends, 2 * 2 * 2);  // tp ranks x micro-batches x directions
  for (auto [id, n] : flows) EXPECT_EQ(n, 2) << "flow " << id;
  // The simulated iteration as a Perfetto trace keeps Perfetto's rules.
  const std::string trace = chrome_trace_text(r, {"timeline-test", 4});
  EXPECT_EQ(check_chrome_trace_rules(trace), "");
  EXPECT_NE(trace.find("\"ncclAllReduce tp\""), std::string::npos);
  EXPECT_NE(trace.find("\"ph\":\"s\""), std::string::npos);
  EXPECT_NE(trace.find("\"ph\":\"C\""), std::string::npos);
}

TEST(SimgridBackend, BadInputIsAProblemNotACrash) {
  auto sc = make_scenario(make_cluster(8, 8, 8));
  auto g = collective_graph(8, iota(0, 8), CollectiveKind::kAllReduce, 1 << 20);
  {
    auto bad = g;
    bad.ranks[3].tasks[0].seq = 7;  // members disagree
    auto r = run_simgrid(sc, bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.problems().front().where, "plan/groups/0");
  }
  {
    auto big = collective_graph(16, iota(0, 16), CollectiveKind::kAllReduce, 1 << 20);
    auto r = run_simgrid(sc, big);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.problems().front().message.find("the cluster has 8"), std::string::npos);
  }
  {
    auto bad = g;
    bad.ranks[2].tasks[0].deps = {5};
    auto r = run_simgrid(sc, bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.problems().front().where, "plan/ranks/2/tasks/0/deps");
  }
  {
    auto s2 = sc;
    s2.whatif.stragglers.push_back({.gpu = 99, .node = -1, .slowdown = 2});
    auto r = run_simgrid(s2, g);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.problems().front().where, "/whatif/stragglers/0/gpu");
  }
  {
    auto s2 = sc;
    s2.cluster.inter_node.bandwidth_GBps = 0;
    auto r = run_simgrid(s2, g);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.problems().front().where, "/cluster/inter_node/bandwidth_GBps");
  }
}

TEST(SimgridBackend, CrossRankDeadlockIsReported) {
  // Ranks 0 and 1 call two collectives of two groups in opposite orders on one stream.
  auto sc = make_scenario(make_cluster(8, 8, 8));
  PlanGraph g;
  g.world_size = 2;
  g.groups = {{GroupKind::kTp, {0, 1}}, {GroupKind::kDp, {0, 1}}};
  g.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    g.ranks[r].rank = r;
    for (int k = 0; k < 2; ++k) {
      Task t;
      t.kind = TaskKind::kCollective;
      t.stream = Stream::kTpComm;
      t.group = r == 0 ? k : 1 - k;
      t.bytes = 1024;
      g.ranks[r].tasks.push_back(t);
    }
  }
  auto r = run_simgrid(sc, g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems().front().message.find("deadlock"), std::string::npos);
}

TEST(SimgridBackend, OptionsFromSetOverrides) {
  SimgridOptions o;
  EXPECT_TRUE(apply_simgrid_option(o, "fidelity", "per-step").empty());
  EXPECT_EQ(o.fidelity, SimgridFidelity::kPerStep);
  EXPECT_TRUE(apply_simgrid_option(o, "fidelity", "aggregated").empty());
  EXPECT_EQ(o.fidelity, SimgridFidelity::kAggregated);
  EXPECT_TRUE(apply_simgrid_option(o, "symmetry", "off").empty());
  EXPECT_EQ(o.symmetry, SimgridSymmetry::kOff);
  EXPECT_TRUE(apply_simgrid_option(o, "tree", "off").empty());
  EXPECT_FALSE(o.allow_tree);
  auto p = apply_simgrid_option(o, "fidelity", "exact");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].where, "--set simgrid.fidelity");
  EXPECT_FALSE(apply_simgrid_option(o, "fat_tree_leaf_ports", "-3").empty());
  EXPECT_FALSE(apply_simgrid_option(o, "colour", "red").empty());
}


// The GUI's Cancel: the parent polls options.cancelled while the forked child simulates and
// kills it; the child is reaped (no zombie left) and the run says it was cancelled.
TEST(SimgridBackend, CancelKillsTheSimulationChild) {
  // Per-step ring all-reduces over 512 ranks, one per node: seconds of simulation, far longer
  // than one poll.
  auto sc = make_scenario(make_cluster(512, 1, 1));
  std::vector<int32_t> all(512);
  for (int32_t i = 0; i < 512; ++i) all[static_cast<size_t>(i)] = i;
  const auto g = collective_graph(512, all, CollectiveKind::kAllReduce, 64 << 20, 20);
  SimgridOptions o;
  o.fidelity = SimgridFidelity::kPerStep;
  int polls = 0;
  o.cancelled = [&polls] { return ++polls >= 2; };
  const auto r = run_simgrid(sc, g, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems().front().message.find("cancelled"), std::string::npos) << r.problems().front().message;
  EXPECT_EQ(polls, 2);
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(SimgridBackend, UncancelledRunWithACancelHookMatchesAPlainRun) {
  auto sc = make_scenario(make_cluster(8, 8, 8));
  StepShape sh;
  sh.tp = 2;
  sh.dp = 4;
  sh.tp_bytes = 4 << 20;
  sh.dp_bytes = 64 << 20;
  const auto g = training_graph(sh);
  SimgridOptions hooked;
  hooked.cancelled = [] { return false; };
  EXPECT_DOUBLE_EQ(run_ok(sc, g).iteration_time_s, run_ok(sc, g, hooked).iteration_time_s);
}
}  // namespace
}  // namespace monarch
