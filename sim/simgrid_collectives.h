// How the SimGrid backend turns one NCCL collective into network flows.
//
// Pure C++ (no SimGrid): given the GPUs of a group in ring order and the cluster shape, it
// returns phases of flows between endpoints. A phase's flows run concurrently and the next
// phase starts when all of them (plus the phase's extra latency) are done. The executor runs
// the phases on the SimGrid platform, where flows share links with everything else.
//
// Endpoints: a GPU (its NVLink port on the node's NVSwitch) or a NIC (its port on the
// inter-node fabric). Flows between GPUs of one node use NVLink; flows between nodes go NIC to
// NIC (GPUDirect RDMA: the PCIe hop GPU->NIC is not a bottleneck and is not modelled).
//
// Algorithms (NCCL 2.x names; sizes are NCCL's "size", the buffer per rank):
// - ring: all-reduce = reduce-scatter + all-gather, 2(n-1) steps of size/n per ring edge;
//   all-gather and reduce-scatter n-1 steps. One topology-aware ring through all members, as
//   NCCL runs it: NVLink hops inside a node, node-crossing edges split over the NICs the
//   members reach (NCCL channels, one per NIC). With a channel per member, each NVLink hop
//   carries (r-1)/r of a chunk (every member leaves its node in one channel). Latencies are
//   NCCL's hop sums (collective_hops_latency_s); a ring with several members per node on
//   several nodes streams through NVLink and NICs at once and is one phase at both fidelities.
// - tree (all-reduce only, one member per node): NCCL's double binary tree. Each tree reduces
//   half the buffer up and broadcasts it down, pipelined: latency 2 x depth, bandwidth ~2 x size
//   per NIC. Used when its alpha-beta time is lower than the ring's (small buffers, many nodes).
// - broadcast: pipelined ring from the first member, size per edge.
// - all-to-all: every member sends size/n to every other, all at once (NCCL's grouped
//   send/recv rounds run concurrently over its p2p channels): one phase, one latency per wave
//   of 256 peers (core/cost_model.h all_to_all_latency_waves). With `pxn`, a message for a GPU
//   on another rail of another node goes to the member on that rail of the sender's node over
//   NVLink and from its NIC to the destination's, both legs concurrently (pipelined chunks).
//   Uneven all-to-alls (alltoallv) give every member's send sizes per peer.
//
// Fidelities: per-step emits one phase per algorithm step (each step's flows see the contention
// of that moment); aggregated emits one phase with one flow per ring edge carrying the whole
// volume, plus (steps - 1) x the slowest edge latency as extra latency. Uncontended, both give
// steps x (alpha + chunk / B) exactly when one kind of edge is the bottleneck.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan_ir.h"

namespace monarch::simgrid_backend {

struct Endpoint {
  enum class Kind : uint8_t { kGpu, kNic };
  Kind kind = Kind::kGpu;
  int64_t index = 0;  // global GPU index, or global NIC index (node * nics_per_node + nic)
  bool operator==(const Endpoint&) const = default;
};

struct Flow {
  Endpoint src, dst;
  double bytes = 0;
};

struct FlowPhase {
  std::vector<Flow> flows;
  double extra_latency_s = 0;  // waited after the flows finish
  double latency_s = 0;        // alpha of one step (the slowest route's latency)
};

// Cluster shape as the decomposition needs it.
struct FabricShape {
  int64_t gpus_per_node = 1;
  int64_t nics_per_node = 1;
  double intra_latency_s = 0;   // GPU -> GPU through NVSwitch, end to end
  double inter_latency_s = 0;   // NIC -> NIC through the fabric, end to end
  double intra_bandwidth_Bps = 0;  // per GPU per direction (for algorithm choice only)
  double inter_bandwidth_Bps = 0;  // per NIC per direction (for algorithm choice only)
  // Rail-optimized fabric: all-to-all messages to a GPU on another rail go over NVLink to the
  // group member on that rail first, then NIC to NIC on the rail (NCCL PXN; core/cost_model.cc).
  bool pxn = false;
  // Leaf switches: NIC i is under leaf i / nics_per_leaf (fat tree), i % nics_per_node (rail
  // optimized: one leaf per rail), or all under one (nics_per_leaf = 0, not rail).
  int64_t nics_per_leaf = 0;
  bool rails = false;

  int64_t node_of(int64_t gpu) const { return gpu / gpus_per_node; }
  int64_t node_of(const Endpoint& e) const {
    return e.kind == Endpoint::Kind::kGpu ? node_of(e.index) : e.index / nics_per_node;
  }
  int64_t leaf_of_nic(int64_t nic) const {
    return rails ? nic % nics_per_node : nics_per_leaf > 0 ? nic / nics_per_leaf : 0;
  }
  // NIC a GPU uses: GPU i of a node is wired to NIC floor(i * nics / gpus_per_node) (PCIe
  // affinity on DGX/HGX boards: GPU i and NIC i share a PCIe switch when nics == gpus).
  int64_t nic_of(int64_t gpu) const {
    const int64_t local = gpu % gpus_per_node;
    return node_of(gpu) * nics_per_node + local * nics_per_node / gpus_per_node;
  }
};

enum class Fidelity : uint8_t { kPerStep, kAggregated };
enum class Algorithm : uint8_t { kRing, kTree, kDirect, kPipeline };

// The algorithm NCCL-like selection picks for this collective. `allow_tree` lets all-reduce
// over one-member-per-node groups use the double binary tree when faster.
Algorithm choose_algorithm(CollectiveKind kind, const std::vector<int64_t>& gpus, double bytes,
                           const FabricShape& shape, bool allow_tree);

// Flow phases of one collective. `gpus` are the members' GPU indices in the group's order.
std::vector<FlowPhase> decompose_collective(CollectiveKind kind, const std::vector<int64_t>& gpus,
                                            double bytes, Algorithm algorithm, Fidelity fidelity,
                                            const FabricShape& shape);

// Flow phases of an all-to-all where member i sends send_bytes[i][j] to member j (group
// order; a row may be empty: that member sends `bytes` / n to every peer).
std::vector<FlowPhase> decompose_all_to_all(const std::vector<int64_t>& gpus, double bytes,
                                            const std::vector<const std::vector<int64_t>*>& send_bytes,
                                            const FabricShape& shape);

// Under replica symmetry: drops the flows of each phase that stand for others exactly alike.
// A flow is kept when either end is on a node marked in `hot_node` (a simulated rank's node,
// a degraded NIC's node); of the others, the first of each kind (endpoint kinds, whether it
// crosses leaf switches, bytes) is kept. Members of a group are in the same order in every DP
// group of a stage, so the groups of one stage keep flows between the same nodes and still
// share the links those flows share. Exact when the dropped flows' links carry nothing else,
// which holds for rings whose other members are not simulated; not for all-to-alls (use only
// with ring, tree and pipeline phases).
void keep_representative_flows(std::vector<FlowPhase>& phases, const std::vector<char>& hot_node, const FabricShape& shape);

// Under replica symmetry, for an even all-to-all over `gpus` (every member sends bytes / n to
// every peer): when every node of the group holds as many members, keeps the flows with an end
// on a node marked in `hot_node` and every flow that crosses leaf switches, and drops the
// others (else changes nothing). A hot node's ports keep all their flows, so each
// flow kept gets the share those ports give it; the other nodes' ports carry, by symmetry, the
// same load as the hot ones, and their dropped flows end with the kept ones. Flows between
// leaves stay, since an oversubscribed uplink may pace them.
void keep_hot_all_to_all_flows(std::vector<FlowPhase>& phases, const std::vector<int64_t>& gpus,
                               const std::vector<char>& hot_node, const FabricShape& shape);

// The single flow of a point-to-point message between two GPUs.
Flow p2p_flow(int64_t src_gpu, int64_t dst_gpu, double bytes, const FabricShape& shape);

// Bytes one member sends in the collective (nccl-tests algorithm bytes): all-reduce
// 2(n-1)/n x size, all-gather / reduce-scatter / all-to-all (n-1)/n x size, broadcast size.
double bytes_sent_per_rank(CollectiveKind kind, int64_t n, double bytes);

// Number of flows a collective decomposes into at the given fidelity (for the auto fidelity
// choice, without building them).
int64_t count_flows(CollectiveKind kind, int64_t n, Fidelity fidelity);

}  // namespace monarch::simgrid_backend
