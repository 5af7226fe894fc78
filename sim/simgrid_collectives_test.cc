#include "sim/simgrid_collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/collectives.h"
#include "core/cost_model.h"

namespace monarch::simgrid_backend {
namespace {

FabricShape shape8x8() { return FabricShape{8, 8, 2e-6, 5e-6, 300e9, 25e9}; }

double total_bytes(const std::vector<FlowPhase>& phases) {
  double b = 0;
  for (const auto& p : phases)
    for (const auto& f : p.flows) b += f.bytes;
  return b;
}

TEST(SimgridCollectives, SingleNodeRingUsesNvlinkEdges) {
  const std::vector<int64_t> gpus{0, 1, 2, 3, 4, 5, 6, 7};
  auto per_step = decompose_collective(CollectiveKind::kAllReduce, gpus, 8e6, Algorithm::kRing, Fidelity::kPerStep, shape8x8());
  ASSERT_EQ(per_step.size(), 14u);  // 2(n-1) steps
  for (const auto& p : per_step) {
    ASSERT_EQ(p.flows.size(), 8u);
    for (const auto& f : p.flows) {
      EXPECT_EQ(f.src.kind, Endpoint::Kind::kGpu);
      EXPECT_EQ(f.dst.kind, Endpoint::Kind::kGpu);
      EXPECT_DOUBLE_EQ(f.bytes, 1e6);  // size / n
    }
  }
  auto agg = decompose_collective(CollectiveKind::kAllReduce, gpus, 8e6, Algorithm::kRing, Fidelity::kAggregated, shape8x8());
  ASSERT_EQ(agg.size(), 1u);
  EXPECT_DOUBLE_EQ(total_bytes(agg), total_bytes(per_step));
  EXPECT_DOUBLE_EQ(agg[0].extra_latency_s, kNcclCollectiveBaseLatency_s + 13 * 2e-6);  // NCCL's base + the steps
}

TEST(SimgridCollectives, OneGpuPerNodeRingGoesNicToNic) {
  const std::vector<int64_t> gpus{3, 11, 19, 27};  // GPU 3 of nodes 0..3
  auto agg = decompose_collective(CollectiveKind::kAllGather, gpus, 4e6, Algorithm::kRing, Fidelity::kAggregated, shape8x8());
  ASSERT_EQ(agg.size(), 1u);
  ASSERT_EQ(agg[0].flows.size(), 4u);
  for (const auto& f : agg[0].flows) {
    EXPECT_EQ(f.src.kind, Endpoint::Kind::kNic);
    EXPECT_EQ(f.src.index % 8, 3);  // rail 3
    EXPECT_DOUBLE_EQ(f.bytes, 3e6);  // (n-1)/n x size
  }
  EXPECT_DOUBLE_EQ(agg[0].extra_latency_s, kNcclCollectiveBaseLatency_s + 2 * 5e-6);
}

// NCCL runs one flat ring through all members, a channel per NIC: every chunk crosses every
// node boundary, and each GPU sends on NVLink in all channels but the one it leaves its node in.
TEST(SimgridCollectives, MultiNodeRingIsFlatWithAChannelPerNic) {
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < 16; ++g) gpus.push_back(g);  // two full nodes
  auto agg = decompose_collective(CollectiveKind::kAllReduce, gpus, 16e6, Algorithm::kRing, Fidelity::kAggregated, shape8x8());
  ASSERT_EQ(agg.size(), 1u);  // NVLink and NIC hops stream at once
  int nvlink = 0, nic = 0;
  for (const auto& f : agg[0].flows) {
    if (f.src.kind == Endpoint::Kind::kGpu) {
      ++nvlink;
      EXPECT_DOUBLE_EQ(f.bytes, 30 * 1e6 * 7 / 8);  // 2(n-1) steps of size/n, 7/8 of each on NVLink
    } else {
      ++nic;
      EXPECT_EQ(f.src.index % 8, f.dst.index % 8);  // a channel stays on its rail
      EXPECT_DOUBLE_EQ(f.bytes, 30 * 1e6 / 8);       // the channel's eighth of every step
    }
  }
  EXPECT_EQ(nvlink, 2 * 7);
  EXPECT_EQ(nic, 2 * 8);  // 8 channels, each crossing both node boundaries
  // Latency: NCCL's model, here its tree (14 NVLink hops and 2 NIC hops), plus the base.
  const double hops_s = collective_hops_latency_s(CollectiveKind::kAllReduce, 16, 2, 8, 2e-6, 5e-6);
  EXPECT_DOUBLE_EQ(hops_s, 14 * 2e-6 + 2 * 5e-6);
  EXPECT_NEAR(agg[0].extra_latency_s + agg[0].latency_s, kNcclCollectiveBaseLatency_s + hops_s, 1e-12);
  // Per-step fidelity keeps a ring across nodes whole: lockstep steps would pay the NIC's
  // latency at every NVLink hop.
  auto steps = decompose_collective(CollectiveKind::kAllReduce, gpus, 16e6, Algorithm::kRing, Fidelity::kPerStep, shape8x8());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_DOUBLE_EQ(total_bytes(steps), total_bytes(agg));
}

TEST(SimgridCollectives, UnevenMultiNodeRingSplitsCrossingsOverNics) {
  const std::vector<int64_t> gpus{0, 1, 2, 3, 8, 9};  // 4 on node 0, 2 on node 1
  auto agg = decompose_collective(CollectiveKind::kAllGather, gpus, 6e6, Algorithm::kRing, Fidelity::kAggregated, shape8x8());
  ASSERT_EQ(agg.size(), 1u);
  int nvlink = 0, nic = 0;
  for (const auto& f : agg[0].flows) (f.src.kind == Endpoint::Kind::kGpu ? nvlink : nic)++;
  EXPECT_EQ(nvlink, 3 + 1);
  EXPECT_EQ(nic, 2 * 2);  // 2 channels (node 1 reaches 2 NICs) x 2 crossings
}

TEST(SimgridCollectives, TreeOnlyForSmallBuffersOverManyNodes) {
  std::vector<int64_t> gpus;
  for (int64_t n = 0; n < 64; ++n) gpus.push_back(n * 8);
  EXPECT_EQ(choose_algorithm(CollectiveKind::kAllReduce, gpus, 64e3, shape8x8(), true), Algorithm::kTree);
  EXPECT_EQ(choose_algorithm(CollectiveKind::kAllReduce, gpus, 1e9, shape8x8(), true), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(CollectiveKind::kAllReduce, gpus, 64e3, shape8x8(), false), Algorithm::kRing);
  auto tree = decompose_collective(CollectiveKind::kAllReduce, gpus, 1e6, Algorithm::kTree, Fidelity::kAggregated, shape8x8());
  EXPECT_EQ(tree[0].flows.size(), 4u * 63);  // 2 trees x 63 edges x both directions
}

TEST(SimgridCollectives, BytesSentFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bytes_sent_per_rank(CollectiveKind::kAllReduce, 4, 100), 150);
  EXPECT_DOUBLE_EQ(bytes_sent_per_rank(CollectiveKind::kAllGather, 4, 100), 75);
  EXPECT_DOUBLE_EQ(bytes_sent_per_rank(CollectiveKind::kAllReduce, 1, 100), 0);
}


// Bytes leaving (out) and entering (in) every endpoint of a phase.
struct PortLoad {
  std::map<std::pair<int, int64_t>, double> out, in;
};
PortLoad port_load(const FlowPhase& p) {
  PortLoad l;
  for (const auto& f : p.flows) {
    l.out[{static_cast<int>(f.src.kind), f.src.index}] += f.bytes;
    l.in[{static_cast<int>(f.dst.kind), f.dst.index}] += f.bytes;
  }
  return l;
}
double most(const std::map<std::pair<int, int64_t>, double>& m, Endpoint::Kind kind) {
  double v = 0;
  for (const auto& [k, b] : m)
    if (k.first == static_cast<int>(kind)) v = std::max(v, b);
  return v;
}

TEST(SimgridCollectives, AllToAllIsOnePhaseOfConcurrentFlows) {
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < 16; ++g) gpus.push_back(g);  // 2 nodes x 8
  const double S = 16e6;
  auto phases = decompose_collective(CollectiveKind::kAllToAll, gpus, S, Algorithm::kDirect, Fidelity::kPerStep, shape8x8());
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_DOUBLE_EQ(phases[0].extra_latency_s, 0.0);  // one latency: 15 peers in flight at once
  EXPECT_DOUBLE_EQ(phases[0].latency_s, 5e-6);
  EXPECT_DOUBLE_EQ(total_bytes(phases), 16 * 15 * S / 16);
  const PortLoad l = port_load(phases[0]);
  // Fat tree (no PXN): each GPU's own NIC carries its 8 off-node pieces, NVLink its 7 on-node.
  EXPECT_DOUBLE_EQ(most(l.out, Endpoint::Kind::kNic), 8 * S / 16);
  EXPECT_DOUBLE_EQ(most(l.out, Endpoint::Kind::kGpu), 7 * S / 16);
}

TEST(SimgridCollectives, AllToAllWithPxnForwardsOverNvlinkToTheRailGpu) {
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < 64; ++g) gpus.push_back(g);  // 8 nodes x 8
  FabricShape shape = shape8x8();
  shape.pxn = true;
  const double S = 64e6;
  auto phases = decompose_collective(CollectiveKind::kAllToAll, gpus, S, Algorithm::kDirect, Fidelity::kAggregated, shape);
  ASSERT_EQ(phases.size(), 1u);
  for (const auto& f : phases[0].flows)
    if (f.src.kind == Endpoint::Kind::kNic) EXPECT_EQ(f.src.index % 8, f.dst.index % 8) << "NIC traffic stays on its rail";
  const PortLoad l = port_load(phases[0]);
  // NIC: the node's traffic for its rail, 56 pieces; NVLink: on-node 7 + forwarded 49 pieces.
  EXPECT_DOUBLE_EQ(most(l.out, Endpoint::Kind::kNic), 56 * S / 64);
  EXPECT_DOUBLE_EQ(most(l.out, Endpoint::Kind::kGpu), 56 * S / 64);
  EXPECT_DOUBLE_EQ(most(l.in, Endpoint::Kind::kGpu), 56 * S / 64);
  // Merged per endpoint pair: 8 x 7 NVLink pairs per node, 8 x 7 rail pairs per NIC.
  EXPECT_EQ(phases[0].flows.size(), 8u * 56 + 64u * 7);
}

TEST(SimgridCollectives, UnevenAllToAllSendsEachMembersRow) {
  const std::vector<int64_t> gpus{0, 1, 8, 9};  // 2 nodes x 2
  const std::vector<int64_t> heavy{0, 100, 200, 300}, none{};
  std::vector<const std::vector<int64_t>*> rows{&heavy, nullptr, &none, nullptr};
  auto phases = decompose_all_to_all(gpus, 40, rows, shape8x8());
  ASSERT_EQ(phases.size(), 1u);
  // Member 0 sends its row (its own entry stays local); the others 40 / 4 to every peer.
  EXPECT_DOUBLE_EQ(total_bytes(phases), 600 + 3 * 3 * 10);
  double to_gpu1 = 0;
  for (const auto& f : phases[0].flows)
    if (f.src == Endpoint{Endpoint::Kind::kGpu, 0} && f.dst == Endpoint{Endpoint::Kind::kGpu, 1}) to_gpu1 = f.bytes;
  EXPECT_DOUBLE_EQ(to_gpu1, 100);
}

// Replica symmetry: a DP ring over GPU 3 of nodes 0..7 whose member on node 2 is simulated
// keeps the two edges of node 2 and one edge for the five alike; on a fat tree with two nodes
// (16 NICs) per leaf, the edges crossing leaves are a kind of their own.
TEST(SimgridCollectives, RepresentativeFlowsKeepHotEdgesAndOneOfEachKind) {
  const std::vector<int64_t> gpus{3, 11, 19, 27, 35, 43, 51, 59};
  std::vector<char> hot(8, 0);
  hot[2] = 1;
  auto flat = decompose_collective(CollectiveKind::kReduceScatter, gpus, 8e6, Algorithm::kRing, Fidelity::kAggregated, shape8x8());
  ASSERT_EQ(flat.size(), 1u);
  ASSERT_EQ(flat[0].flows.size(), 8u);
  keep_representative_flows(flat, hot, shape8x8());
  ASSERT_EQ(flat[0].flows.size(), 3u);
  EXPECT_EQ(flat[0].flows[0].src.index, 3);   // node 0 -> node 1, the first of the alike
  EXPECT_EQ(flat[0].flows[1].dst.index, 19);  // node 1 -> node 2 (hot)
  EXPECT_EQ(flat[0].flows[2].src.index, 19);  // node 2 (hot) -> node 3

  FabricShape tree = shape8x8();
  tree.nics_per_leaf = 16;
  auto phases = decompose_collective(CollectiveKind::kReduceScatter, gpus, 8e6, Algorithm::kRing, Fidelity::kPerStep, tree);
  ASSERT_EQ(phases.size(), 7u);  // n - 1 steps, each filtered alike
  keep_representative_flows(phases, hot, tree);
  for (const auto& p : phases) {
    ASSERT_EQ(p.flows.size(), 4u);  // node 0 -> 1 (same leaf), 1 -> 2, 2 -> 3, 3 -> 4 (crosses leaves)
    EXPECT_EQ(p.flows[3].src.index, 27);
    EXPECT_DOUBLE_EQ(p.flows[3].bytes, 1e6);
  }
}

// Replica symmetry, an even all-to-all over GPUs 0-3 of nodes 0-3 (4 x 4 members), node 1
// hot: every flow kept has an end on node 1 or crosses leaf switches, and every flow with an
// end on node 1 is kept. A group with 4 members on node 0 and 2 on node 1 is left whole.
TEST(SimgridCollectives, HotAllToAllFlowsKeepTheHotNodesPortsAndTheUplinks) {
  std::vector<int64_t> gpus;
  for (int64_t node = 0; node < 4; ++node)
    for (int64_t local = 0; local < 4; ++local) gpus.push_back(node * 8 + local);
  std::vector<char> hot(8, 0);
  hot[1] = 1;
  FabricShape tree = shape8x8();
  tree.nics_per_leaf = 16;  // nodes 0-1 under one leaf, 2-3 under the next
  auto on_node1 = [&](const Endpoint& e) { return tree.node_of(e) == 1; };
  auto crosses = [&](const Flow& f) {
    return f.src.kind == Endpoint::Kind::kNic && f.dst.kind == Endpoint::Kind::kNic &&
           tree.leaf_of_nic(f.src.index) != tree.leaf_of_nic(f.dst.index);
  };
  const auto all = decompose_all_to_all(gpus, 16e6, {}, tree);
  auto kept = all;
  keep_hot_all_to_all_flows(kept, gpus, hot, tree);
  ASSERT_EQ(kept.size(), 1u);
  size_t hot_flows = 0, crossing = 0;
  for (const Flow& f : all[0].flows) {
    hot_flows += on_node1(f.src) || on_node1(f.dst) ? 1 : 0;
    crossing += !on_node1(f.src) && !on_node1(f.dst) && crosses(f) ? 1 : 0;
  }
  EXPECT_LT(kept[0].flows.size(), all[0].flows.size());
  EXPECT_EQ(kept[0].flows.size(), hot_flows + crossing);
  EXPECT_GT(crossing, 0u);
  for (const Flow& f : kept[0].flows) EXPECT_TRUE(on_node1(f.src) || on_node1(f.dst) || crosses(f));

  const std::vector<int64_t> uneven{0, 1, 2, 3, 8, 9};
  auto whole = decompose_all_to_all(uneven, 6e6, {}, tree);
  const size_t n = whole[0].flows.size();
  keep_hot_all_to_all_flows(whole, uneven, hot, tree);
  EXPECT_EQ(whole[0].flows.size(), n);
}

}  // namespace
}  // namespace monarch::simgrid_backend
