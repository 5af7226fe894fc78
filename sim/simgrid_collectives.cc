#include "sim/simgrid_collectives.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "core/collectives.h"
#include "core/cost_model.h"

namespace monarch::simgrid_backend {
namespace {

Endpoint gpu_ep(int64_t gpu) { return {Endpoint::Kind::kGpu, gpu}; }
Endpoint nic_ep(int64_t nic) { return {Endpoint::Kind::kNic, nic}; }

// One edge of a ring: `share` of every step's chunk travels on it.
struct RingEdge {
  Endpoint src, dst;
  double share = 1.0;
};

// Members grouped by node, nodes in order of first appearance, members in group order.
std::vector<std::vector<int64_t>> by_node(const std::vector<int64_t>& gpus, const FabricShape& shape) {
  std::vector<std::vector<int64_t>> nodes;
  std::vector<int64_t> node_ids;
  for (int64_t g : gpus) {
    const int64_t node = shape.node_of(g);
    auto it = std::find(node_ids.begin(), node_ids.end(), node);
    if (it == node_ids.end()) {
      node_ids.push_back(node);
      nodes.push_back({g});
    } else {
      nodes[static_cast<size_t>(it - node_ids.begin())].push_back(g);
    }
  }
  return nodes;
}

std::vector<int64_t> distinct_nics(const std::vector<int64_t>& members, const FabricShape& shape) {
  std::vector<int64_t> nics;
  for (int64_t g : members) nics.push_back(shape.nic_of(g));
  std::sort(nics.begin(), nics.end());
  nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
  return nics;
}

// The most group members on any one node.
size_t most_per_node(const std::vector<std::vector<int64_t>>& nodes) {
  size_t most = 0;
  for (const auto& nd : nodes) most = std::max(most, nd.size());
  return most;
}

// Channels a multi-node ring uses to cross node boundaries: one per NIC its members reach
// (the fewest over the nodes, so every channel has a NIC on every node).
int64_t crossing_channels(const std::vector<std::vector<int64_t>>& nodes, const FabricShape& shape) {
  int64_t c = shape.nics_per_node;
  for (const auto& members : nodes) c = std::min<int64_t>(c, static_cast<int64_t>(distinct_nics(members, shape).size()));
  return std::max<int64_t>(c, 1);
}

// The ring NCCL would build: within a node along NVLink, across nodes NIC to NIC, one channel
// per NIC for the crossing edges. With a channel per member, each member leaves its node in
// one channel and sends on NVLink in the others: one ring stands for them all, its NVLink hops
// carrying (r - 1) / r of each chunk, the busiest NVLink port's load.
std::vector<RingEdge> ring_edges(const std::vector<int64_t>& gpus, const FabricShape& shape) {
  std::vector<RingEdge> edges;
  const auto nodes = by_node(gpus, shape);
  const size_t m = nodes.size();
  if (m == 1) {
    const auto& g = nodes[0];
    if (g.size() < 2) return edges;
    for (size_t i = 0; i < g.size(); ++i) edges.push_back({gpu_ep(g[i]), gpu_ep(g[(i + 1) % g.size()]), 1.0});
    return edges;
  }
  const int64_t channels = crossing_channels(nodes, shape);
  for (size_t k = 0; k < m; ++k) {
    const auto& here = nodes[k];
    const auto& next = nodes[(k + 1) % m];
    const double r = static_cast<double>(here.size());
    const double nvlink_share = channels >= static_cast<int64_t>(here.size()) ? (r - 1.0) / r : 1.0;
    for (size_t i = 0; i + 1 < here.size(); ++i) edges.push_back({gpu_ep(here[i]), gpu_ep(here[i + 1]), nvlink_share});
    if (channels == 1) {
      edges.push_back({nic_ep(shape.nic_of(here.back())), nic_ep(shape.nic_of(next.front())), 1.0});
    } else {
      const auto a = distinct_nics(here, shape);
      const auto b = distinct_nics(next, shape);
      for (int64_t c = 0; c < channels; ++c)
        edges.push_back({nic_ep(a[static_cast<size_t>(c)]), nic_ep(b[static_cast<size_t>(c)]),
                         1.0 / static_cast<double>(channels)});
    }
  }
  return edges;
}

double group_latency_s(const std::vector<int64_t>& gpus, const FabricShape& shape) {
  for (int64_t g : gpus)
    if (shape.node_of(g) != shape.node_of(gpus.front())) return shape.inter_latency_s;
  return shape.intra_latency_s;
}

Endpoint route_start(int64_t src_gpu, int64_t dst_gpu, const FabricShape& shape, bool src_side) {
  if (shape.node_of(src_gpu) == shape.node_of(dst_gpu)) return gpu_ep(src_side ? src_gpu : dst_gpu);
  return nic_ep(shape.nic_of(src_side ? src_gpu : dst_gpu));
}

// Appends `steps` ring steps of `chunk` bytes per edge over several rings at once (they run
// concurrently): per-step one phase per step, aggregated one phase for all of them.
void append_ring(std::vector<FlowPhase>& phases, const std::vector<std::vector<RingEdge>>& rings, int64_t steps,
                 double chunk, Fidelity fidelity, double alpha) {
  if (steps <= 0) return;
  if (fidelity == Fidelity::kPerStep) {
    for (int64_t s = 0; s < steps; ++s) {
      FlowPhase p;
      for (const auto& ring : rings)
        for (const auto& e : ring) p.flows.push_back({e.src, e.dst, chunk * e.share});
      p.latency_s = alpha;
      phases.push_back(std::move(p));
    }
  } else {
    FlowPhase p;
    for (const auto& ring : rings)
      for (const auto& e : ring) p.flows.push_back({e.src, e.dst, chunk * e.share * static_cast<double>(steps)});
    p.extra_latency_s = static_cast<double>(steps - 1) * alpha;
    p.latency_s = alpha;
    phases.push_back(std::move(p));
  }
}

int64_t ring_steps(CollectiveKind kind, int64_t n) {
  return kind == CollectiveKind::kAllReduce ? 2 * (n - 1) : n - 1;
}

int64_t tree_depth(int64_t n) {
  int64_t depth = 0;
  while ((int64_t{1} << (depth + 1)) <= n) ++depth;  // floor(log2 n)
  return depth;
}

// Alpha-beta bottleneck bandwidth of a ring over these GPUs (for the algorithm choice).
double ring_bandwidth_Bps(const std::vector<int64_t>& gpus, const FabricShape& shape) {
  const auto nodes = by_node(gpus, shape);
  if (nodes.size() == 1) return shape.intra_bandwidth_Bps;
  const size_t most = most_per_node(nodes);
  const double inter = static_cast<double>(crossing_channels(nodes, shape)) * shape.inter_bandwidth_Bps;
  return most == 1 ? inter : std::min(shape.intra_bandwidth_Bps, inter);
}

}  // namespace

Algorithm choose_algorithm(CollectiveKind kind, const std::vector<int64_t>& gpus, double bytes,
                           const FabricShape& shape, bool allow_tree) {
  switch (kind) {
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv: return Algorithm::kDirect;
    case CollectiveKind::kBroadcast: return Algorithm::kPipeline;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: return Algorithm::kRing;
    case CollectiveKind::kAllReduce: break;
  }
  const auto nodes = by_node(gpus, shape);
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (!allow_tree || n < 4 || static_cast<int64_t>(nodes.size()) != n) return Algorithm::kRing;
  const double a = shape.inter_latency_s;
  const double b = ring_bandwidth_Bps(gpus, shape);
  if (b <= 0) return Algorithm::kRing;
  const double ring_s = 2.0 * static_cast<double>(n - 1) * (a + bytes / (static_cast<double>(n) * b));
  const double tree_s = 2.0 * static_cast<double>(tree_depth(n)) * a + 2.0 * bytes / b;
  return tree_s < ring_s ? Algorithm::kTree : Algorithm::kRing;
}

std::vector<FlowPhase> decompose_collective(CollectiveKind kind, const std::vector<int64_t>& gpus,
                                            double bytes, Algorithm algorithm, Fidelity fidelity,
                                            const FabricShape& shape) {
  std::vector<FlowPhase> phases;
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (n < 2) return phases;
  const double alpha = group_latency_s(gpus, shape);

  switch (algorithm) {
    case Algorithm::kRing: {
      assert(kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
             kind == CollectiveKind::kReduceScatter);
      // One flat ring through all members, as NCCL runs it (core/collective_cost.cc): NVLink
      // hops inside a node, one NIC channel per NIC across. Each step pays the mean hop latency
      // of NCCL's model, so the steps add up to collective_hops_latency_s. A ring across nodes
      // with several members per node streams its chunks through NVLink and NIC hops at once,
      // so it is one phase at both fidelities: steps in lockstep would pay the NIC's latency at
      // every NVLink hop.
      const auto nodes = by_node(gpus, shape);
      const size_t most = most_per_node(nodes);
      const double hops_s = collective_hops_latency_s(kind, n, static_cast<int64_t>(nodes.size()), static_cast<int64_t>(most),
                                                      shape.intra_latency_s, shape.inter_latency_s);
      const int64_t steps = ring_steps(kind, n);
      append_ring(phases, {ring_edges(gpus, shape)}, steps, bytes / static_cast<double>(n),
                  nodes.size() > 1 && most > 1 ? Fidelity::kAggregated : fidelity, hops_s / static_cast<double>(steps));
      break;
    }
    case Algorithm::kTree: {
      // Double binary tree over positions 0..n-1 in heap layout; tree 2 mirrors the members so
      // that the leaves of one tree are the inner nodes of the other.
      FlowPhase p;
      for (int tree = 0; tree < 2; ++tree) {
        auto member = [&](int64_t pos) { return gpus[static_cast<size_t>(tree == 0 ? pos : n - 1 - pos)]; };
        for (int64_t pos = 1; pos < n; ++pos) {
          const int64_t child = member(pos);
          const int64_t parent = member((pos - 1) / 2);
          p.flows.push_back(p2p_flow(child, parent, bytes / 2, shape));   // reduce, half the buffer
          p.flows.push_back(p2p_flow(parent, child, bytes / 2, shape));   // broadcast
        }
      }
      p.extra_latency_s = static_cast<double>(2 * tree_depth(n) - 1) * alpha;
      phases.push_back(std::move(p));
      break;
    }
    case Algorithm::kPipeline: {
      // Broadcast from the first member along the ring; the edge back into the root is unused.
      auto edges = ring_edges(gpus, shape);
      FlowPhase p;
      const Endpoint root_gpu = gpu_ep(gpus.front());
      const Endpoint root_nic = nic_ep(shape.nic_of(gpus.front()));
      for (const auto& e : edges) {
        if (e.dst == root_gpu || e.dst == root_nic) continue;
        p.flows.push_back({e.src, e.dst, bytes * e.share});
      }
      p.extra_latency_s = static_cast<double>(n - 2) * alpha;
      phases.push_back(std::move(p));
      break;
    }
    case Algorithm::kDirect:
      // NCCL all-to-all is one group of sends and receives to every peer, all in flight at
      // once: a single round at both fidelities (per-step lockstep would serialize it).
      return decompose_all_to_all(gpus, bytes, {}, shape);
  }
  for (auto& p : phases)
    if (p.latency_s == 0) p.latency_s = alpha;
  if (!phases.empty()) phases.front().extra_latency_s += kNcclCollectiveBaseLatency_s;
  return phases;
}

std::vector<FlowPhase> decompose_all_to_all(const std::vector<int64_t>& gpus, double bytes,
                                            const std::vector<const std::vector<int64_t>*>& send_bytes,
                                            const FabricShape& shape) {
  std::vector<FlowPhase> phases;
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (n < 2) return phases;
  const auto nodes = by_node(gpus, shape);
  const size_t most = most_per_node(nodes);
  const bool pxn = shape.pxn && nodes.size() > 1 && most > 1;  // as core/cost_model.cc
  std::vector<char> member;
  if (pxn) {
    int64_t top = 0;
    for (int64_t g : gpus) top = std::max(top, g);
    member.assign(static_cast<size_t>(top + 1), 0);
    for (int64_t g : gpus) member[static_cast<size_t>(g)] = 1;
  }
  // Flows between the same two endpoints share one NCCL connection: merged.
  std::vector<Flow> flows;
  std::unordered_map<uint64_t, size_t> flow_of;
  auto code = [](Endpoint e) { return static_cast<uint64_t>(e.index) * 2 + (e.kind == Endpoint::Kind::kNic ? 1 : 0); };
  auto add = [&](Endpoint src, Endpoint dst, double b) {
    const auto [it, fresh] = flow_of.emplace((code(src) << 32) | code(dst), flows.size());
    if (fresh)
      flows.push_back({src, dst, b});
    else
      flows[it->second].bytes += b;
  };
  const double uniform = bytes / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t>* row = static_cast<size_t>(i) < send_bytes.size() ? send_bytes[static_cast<size_t>(i)] : nullptr;
    assert(row == nullptr || row->empty() || static_cast<int64_t>(row->size()) == n);
    const bool given = row != nullptr && !row->empty();
    for (int64_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const double b = given ? static_cast<double>((*row)[static_cast<size_t>(j)]) : uniform;
      if (b <= 0) continue;
      const int64_t src = gpus[static_cast<size_t>(i)], dst = gpus[static_cast<size_t>(j)];
      if (pxn && shape.node_of(src) != shape.node_of(dst)) {
        const int64_t proxy = shape.node_of(src) * shape.gpus_per_node + dst % shape.gpus_per_node;
        if (proxy != src && shape.nic_of(proxy) != shape.nic_of(src) && static_cast<size_t>(proxy) < member.size() &&
            member[static_cast<size_t>(proxy)]) {
          add(gpu_ep(src), gpu_ep(proxy), b);
          add(nic_ep(shape.nic_of(proxy)), nic_ep(shape.nic_of(dst)), b);
          continue;
        }
      }
      const Flow f = p2p_flow(src, dst, b, shape);
      add(f.src, f.dst, f.bytes);
    }
  }
  const double alpha = group_latency_s(gpus, shape);
  FlowPhase p;
  p.flows = std::move(flows);
  p.latency_s = alpha;
  p.extra_latency_s = static_cast<double>(all_to_all_latency_waves(n) - 1) * alpha;
  phases.push_back(std::move(p));
  return phases;
}

namespace {

// Whether an endpoint sits on a node marked in `hot_node` (replica symmetry).
bool on_hot_node(const Endpoint& e, const std::vector<char>& hot_node, const FabricShape& shape) {
  const auto node = static_cast<size_t>(shape.node_of(e));
  return node < hot_node.size() && hot_node[node];
}

// Whether a NIC-to-NIC flow goes from one leaf switch to another.
bool crosses_leaves(const Flow& f, const FabricShape& shape) {
  return f.src.kind == Endpoint::Kind::kNic && f.dst.kind == Endpoint::Kind::kNic &&
         shape.leaf_of_nic(f.src.index) != shape.leaf_of_nic(f.dst.index);
}

}  // namespace

void keep_representative_flows(std::vector<FlowPhase>& phases, const std::vector<char>& hot_node, const FabricShape& shape) {
  struct Kind {
    Endpoint::Kind src, dst;
    bool crosses_leaves;
    double bytes;
    bool operator==(const Kind&) const = default;
  };
  for (FlowPhase& p : phases) {
    std::vector<Kind> seen;  // a handful: ring and tree phases have one or two kinds of edge
    std::vector<Flow> kept;
    for (const Flow& f : p.flows) {
      if (on_hot_node(f.src, hot_node, shape) || on_hot_node(f.dst, hot_node, shape)) {
        kept.push_back(f);
        continue;
      }
      const Kind k{f.src.kind, f.dst.kind, crosses_leaves(f, shape), f.bytes};
      if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
      seen.push_back(k);
      kept.push_back(f);
    }
    p.flows = std::move(kept);
  }
}

void keep_hot_all_to_all_flows(std::vector<FlowPhase>& phases, const std::vector<int64_t>& gpus,
                               const std::vector<char>& hot_node, const FabricShape& shape) {
  const auto nodes = by_node(gpus, shape);
  for (const auto& members : nodes)
    if (members.size() != nodes.front().size()) return;
  for (FlowPhase& p : phases)
    std::erase_if(p.flows, [&](const Flow& f) {
      return !on_hot_node(f.src, hot_node, shape) && !on_hot_node(f.dst, hot_node, shape) && !crosses_leaves(f, shape);
    });
}

Flow p2p_flow(int64_t src_gpu, int64_t dst_gpu, double bytes, const FabricShape& shape) {
  return {route_start(src_gpu, dst_gpu, shape, true), route_start(src_gpu, dst_gpu, shape, false), bytes};
}

double bytes_sent_per_rank(CollectiveKind kind, int64_t n, double bytes) {
  return n < 2 ? 0 : collective_bus_factor(kind, static_cast<double>(n)) * bytes;
}

int64_t count_flows(CollectiveKind kind, int64_t n, Fidelity fidelity) {
  if (n < 2) return 0;
  switch (kind) {
    case CollectiveKind::kAllToAll: return n * (n - 1);
    case CollectiveKind::kBroadcast: return n;
    default: return fidelity == Fidelity::kPerStep ? ring_steps(kind, n) * n : n;
  }
}

}  // namespace monarch::simgrid_backend
