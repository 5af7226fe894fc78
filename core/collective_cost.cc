// Collective and point-to-point times: NCCL ring/tree and all-to-all models over NVLink and the NICs.
#include "core/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/collectives.h"
#include "core/profile.h"
#include "core/units.h"
#include "core/cost_model_internal.h"

namespace monarch {

using namespace cost_detail;

// ============================================================================ communication

namespace {

double intra_bytes_per_s(const ClusterConfig& c) {
  const GpuProfile& prof = gpu_profile(c.gpu);
  return gbps_to_bytes_per_s(c.intra_node.bandwidth_GBps) * prof.nvlink_efficiency;
}

// Inter-node bandwidth available to one GPU: its share of the node's NICs.
double nic_bytes_per_s_per_gpu(const ClusterConfig& c, bool rail_aligned) {
  const double gpn = static_cast<double>(std::max<int64_t>(c.gpus_per_node, 1));
  const double nics = static_cast<double>(c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node);
  double bw = gbps_to_bytes_per_s(c.inter_node.bandwidth_GBps) * kInterNodeEfficiency * std::min(1.0, nics / gpn);
  // Oversubscribed leaf uplinks slow traffic that leaves the leaf. On a rail-optimized
  // network, traffic between GPUs of the same local index stays on its rail switch.
  const bool stays_on_rail = c.topology == Topology::kRailOptimized && rail_aligned;
  if (c.topology != Topology::kStar && !stays_on_rail && c.oversubscription > 1.0) bw /= c.oversubscription;
  return bw;
}

}  // namespace

// All-to-all (NCCL's ncclGroupStart + ncclSend/ncclRecv to every peer, nccl-tests alltoall_perf).
//
// Concurrency: NCCL turns the n - 1 peer exchanges into p2p "rounds" (round d: send to rank + d,
// receive from rank - d) spread over its p2p channels; each channel runs up to
// NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 rounds of one work batch at once, one warp group each
// (src/enqueue.cc addP2pToPlan / ncclP2pChannelBaseForRound, src/include/device.h), and NCCL
// opens up to NCCL_MAX_P2P_NCHANNELS = MAXCHANNELS = 32 p2p channels. So up to 32 x 8 = 256
// peers are in flight together: every link the exchange uses (NVLink port, NIC) streams at
// once and the time is the busiest link's bytes over its bandwidth (max, not a sum), plus one
// end-to-end latency of the slowest path per wave of 256 peers (not n - 1 latencies in series).
// nccl-tests (S. Jeaugey, NVIDIA/nccl-tests#130): "a portion of the traffic will be local ...
// the portion that's going through the network will determine the global time"; busbw = algbw x
// (n-1)/n = N/(N-1) x the network bandwidth per GPU on N nodes.
namespace {
constexpr int64_t kP2pChannels = 32;         // NCCL_MAX_P2P_NCHANNELS default (MAXCHANNELS)
constexpr int64_t kP2pRoundsPerBatch = 8;    // NCCL_MAX_DEV_WORK_P2P_PER_BATCH
}  // namespace

int64_t all_to_all_latency_waves(int64_t n) {
  if (n <= 1) return 0;
  constexpr int64_t in_flight = kP2pChannels * kP2pRoundsPerBatch;
  return (n - 1 + in_flight - 1) / in_flight;
}

bool all_to_all_uses_pxn(const GroupSpan& g, const ClusterConfig& c) {
  return c.topology == Topology::kRailOptimized && g.crosses_nodes() && g.ranks_per_node > 1;
}

// Per-GPU load of the busiest member, as fractions of its send buffer S (group of n, at most r
// members per node, N nodes):
// - NIC: the bytes for members on other nodes, (n - r) / n. Rail-optimized networks: NCCL's
//   PXN (default since NCCL 2.12, NCCL_PXN_DISABLE=0) first moves a message for a remote GPU on
//   another rail over NVLink to the local member on that rail, whose NIC sends it on the rail
//   (NVIDIA "Doubling all2all performance with NCCL 2.12", 2022). Each NIC then carries its
//   node's traffic for its own rail, r x (N - 1) x S / n: the same volume, but it never leaves
//   the rail switch, so leaf uplink oversubscription does not apply. Without PXN (fat tree) the
//   messages cross the leaf uplinks. A NIC shared by several GPUs (nics < gpus per node) is
//   shared in nic_bytes_per_s_per_gpu.
// - NVLink: the on-node members' bytes (r - 1) / n, plus with PXN the forwarded share of the
//   off-node bytes, (n - r) / n x (r - 1) / r (what goes to other rails); sent once and received
//   once by the rail GPU, both ports of the NVSwitch full duplex. N x r = n: (r - 1) / r.
AllToAllLoad all_to_all_load(const GroupSpan& g, const ClusterConfig& c) {
  AllToAllLoad l;
  const double n = static_cast<double>(g.size);
  if (g.size <= 1) return l;
  const double r = static_cast<double>(std::max<int64_t>(1, g.crosses_nodes() ? g.ranks_per_node : g.size));
  l.nvlink_fraction = (r - 1.0) / n;
  if (!g.crosses_nodes()) return l;
  l.nic_fraction = (n - r) / n;
  l.on_rail = g.rail_aligned;
  if (all_to_all_uses_pxn(g, c)) {
    l.nvlink_fraction += (n - r) / n * (r - 1.0) / r;
    l.on_rail = true;
  }
  return l;
}

double all_to_all_latency_s(const GroupSpan& g, const ClusterConfig& c) {
  const double alpha = us_to_s(g.crosses_nodes() ? c.inter_node.latency_us : c.intra_node.latency_us);
  return static_cast<double>(all_to_all_latency_waves(g.size)) * alpha;
}

double collective_wire_bytes(CollectiveKind kind, int64_t bytes, int64_t n) {
  if (n <= 1) return 0;
  return collective_bus_factor(kind, static_cast<double>(n)) * static_cast<double>(bytes);
}

double collective_hops_latency_s(CollectiveKind kind, int64_t n, int64_t nodes, int64_t ranks_per_node,
                                 double intra_latency_s, double inter_latency_s) {
  if (n <= 1) return 0;
  const double passes = kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  const double N = static_cast<double>(std::max<int64_t>(nodes, 1));
  const double ring_inter = passes * (N - 1.0);
  const double ring_intra = passes * (static_cast<double>(n) - N);
  if (kind == CollectiveKind::kAllReduce && nodes > 1) {
    const double tree_inter = 2.0 * std::ceil(std::log2(N));
    const double tree_intra = 2.0 * static_cast<double>(std::max<int64_t>(ranks_per_node, 1) - 1);
    const double ring_s = ring_intra * intra_latency_s + ring_inter * inter_latency_s;
    const double tree_s = tree_intra * intra_latency_s + tree_inter * inter_latency_s;
    return std::min(ring_s, tree_s);
  }
  return ring_intra * intra_latency_s + ring_inter * inter_latency_s;
}

double collective_time_s(CollectiveKind kind, int64_t bytes_per_rank, const GroupSpan& g, const ClusterConfig& c) {
  if (g.size <= 1 || bytes_per_rank <= 0) return 0;
  const double S = static_cast<double>(bytes_per_rank);
  const double n = static_cast<double>(g.size);
  const double lat_intra = us_to_s(c.intra_node.latency_us);
  const double lat_inter = us_to_s(c.inter_node.latency_us);
  const double bw_intra = intra_bytes_per_s(c);
  const CalibrationProfile* cal = profile_of(c.gpu);
  if (!g.crosses_nodes()) {
    if (cal != nullptr) {
      const double t = profile_collective_time_s(*cal, kind, static_cast<int>(g.size), bytes_per_rank);
      if (t > 0) return t;  // measured on this node (nccl-tests style)
    }
    if (kind == CollectiveKind::kAllToAll) return all_to_all_latency_s(g, c) + collective_bus_factor(kind, n) * S / bw_intra;
    return kNcclCollectiveBaseLatency_s + collective_hops_latency_s(kind, g.size, 1, g.size, lat_intra, lat_inter) +
           collective_bus_factor(kind, n) * S / bw_intra;
  }
  if (kind == CollectiveKind::kAllToAll) {
    const AllToAllLoad load = all_to_all_load(g, c);
    return all_to_all_latency_s(g, c) +
           std::max(S * load.nic_fraction / nic_bytes_per_s_per_gpu(c, load.on_rail), S * load.nvlink_fraction / bw_intra);
  }
  // Across nodes: r members per node. Each of NCCL's channels is one ring through all n ranks
  // (r - 1 NVLink hops per node, then one NIC hop), with one channel per NIC: every GPU leaves
  // its node in one channel and sends on NVLink in the r - 1 others. A channel's chunks stream
  // through all its hops at once, so the time is the slower link's bytes over its bandwidth, not
  // the NVLink time plus the NIC time (NCCL's model takes one bus bandwidth per channel, the
  // inter-node one beyond two nodes: src/graph/tuning.cc ncclTopoTuneModel). Every chunk passes
  // every node boundary of the ring, so a GPU's NIC carries bus(n) x S / r: on two nodes twice
  // what a hierarchical scheme would send, about the same on many. NCCL's ranks agree on one
  // channel count, so a node whose members reach fewer NICs (a partly used last node) has fewer
  // channels for all: the NICs carry bus(n) x S over the fewest members' NICs.
  const double r = static_cast<double>(g.ranks_per_node);
  const double r_fewest = static_cast<double>(std::max<int64_t>(g.fewest_ranks_per_node, 1));
  double nvlink_s = r > 1 ? collective_bus_factor(kind, r) * S / bw_intra : 0.0;
  double latency_s = collective_hops_latency_s(kind, g.size, g.nodes, g.ranks_per_node, lat_intra, lat_inter);
  if (cal != nullptr && r > 1) {
    const double t = profile_collective_time_s(*cal, kind, static_cast<int>(r), bytes_per_rank);
    if (t > 0) nvlink_s = t;  // the node's NVLink share, measured on one node (nccl-tests style)
  }
  // The ring's n - 1 steps of S / n, (r - 1) / r of each on a member's NVLink port when the node
  // has a NIC (a channel) per member; with fewer NICs some members never leave the node in any
  // channel and send every chunk on NVLink (SimGrid's ring_edges makes the same split).
  nvlink_s *= (n - 1.0) / n;
  if (r > 1 && c.nics_per_node > 0 && c.nics_per_node < g.ranks_per_node) nvlink_s *= r / (r - 1.0);
  const double nic_s = collective_bus_factor(kind, n) * S / r_fewest / nic_bytes_per_s_per_gpu(c, g.rail_aligned);
  return kNcclCollectiveBaseLatency_s + latency_s + std::max(nvlink_s, nic_s);
}

double p2p_time_s(int64_t bytes, bool crosses_nodes, const ClusterConfig& c) {
  if (bytes <= 0) return 0;
  const double S = static_cast<double>(bytes);
  if (!crosses_nodes) return us_to_s(c.intra_node.latency_us) + S / intra_bytes_per_s(c);
  return us_to_s(c.inter_node.latency_us) + S / nic_bytes_per_s_per_gpu(c, true);
}

}  // namespace monarch
