// The SimGrid simulation: platform from the cluster, one actor per (rank, stream), collectives
// and point-to-point messages as flows, then the result. See docs/simgrid_backend.md.
#include "sim/simgrid_engine.h"

#include <simgrid/s4u.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include "core/cost_model.h"
#include "core/graph_replica.h"
#include "core/model_math.h"
#include "core/profile.h"
#include "core/units.h"
#include "sim/simgrid_collectives.h"
#include "sim/simgrid_symmetry.h"

namespace monarch::simgrid_backend {
namespace sg = simgrid::s4u;
using Direction = sg::LinkInRoute::Direction;

namespace {

// Host speed of a GPU host. A compute task of the cost model's duration d runs as an execution
// of d x this speed on its rank's GPU host, so alone it takes d; the value only has to be
// positive. Beside a collective that holds SMs it gets the rest of the host (`SmHold`).
constexpr double kGpuHostSpeedFlops = 1e9;
// Stack of one SimGrid actor (KiB). Actors here are shallow loops; SimGrid's default (8 MiB)
// would reserve 40 GiB of address space for 5000 actors.
constexpr int kActorStackKiB = 256;
// Progress is printed (on a terminal only) at most this often, in seconds of wall time.
constexpr double kProgressPeriodS = 1.0;

constexpr int kNumMemCategories = 5;

// ----------------------------------------------------------------------------------- platform

struct Platform {
  std::vector<sg::Host*> gpu;  // by global GPU index
  std::vector<sg::Host*> nic;  // by global NIC index
  std::vector<sg::Link*> nic_port;  // by global NIC index
  sg::Host* injector = nullptr;  // runs the failure injection (no links: it never communicates)
  FabricShape shape;
  // The GPU's calibration profile (cluster.gpu.profile), or nullptr: collectives inside one
  // node that it measured take their measured time, as in the analytical model.
  const CalibrationProfile* profile = nullptr;

  sg::Host* host(const Endpoint& e) const {
    return e.kind == Endpoint::Kind::kGpu ? gpu[static_cast<size_t>(e.index)] : nic[static_cast<size_t>(e.index)];
  }
};

void add_star_member(sg::NetZone* zone, sg::Host* host, sg::Link* link) {
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, {sg::LinkInRoute(link, Direction::UP)}, true);
}

Platform build_platform(const ClusterConfig& c, const WhatIf& whatif, const SimgridOptions& o) {
  Platform p;
  const int64_t gpn = c.gpus_per_node;
  const int64_t nics = c.nics_per_node;
  const int64_t nodes = c.num_nodes();
  // Capacities are NCCL's achievable bus bandwidth, with the cost model's efficiencies (sources
  // in core/cost_model.cc), so that an uncontended transfer takes the same time in both models.
  const double intra_Bps = gbps_to_bytes_per_s(c.intra_node.bandwidth_GBps) * gpu_profile(c.gpu).nvlink_efficiency;
  const double inter_Bps = gbps_to_bytes_per_s(c.inter_node.bandwidth_GBps) * kInterNodeEfficiency;
  const double intra_lat_s = us_to_s(c.intra_node.latency_us);
  const double inter_lat_s = us_to_s(c.inter_node.latency_us);
  p.shape = FabricShape{gpn, nics, intra_lat_s, inter_lat_s, intra_Bps, inter_Bps};
  p.shape.pxn = c.topology == Topology::kRailOptimized;
  p.shape.rails = c.topology == Topology::kRailOptimized;
  p.shape.nics_per_leaf = c.topology == Topology::kFatTree ? std::max<int64_t>(o.fat_tree_leaf_ports, 1) : 0;

  std::vector<double> nic_factor(static_cast<size_t>(nodes), 1.0);
  for (const auto& d : whatif.degraded_links) nic_factor[static_cast<size_t>(d.node)] *= d.bandwidth_factor;

  auto* world = sg::create_full_zone("world");
  p.gpu.resize(static_cast<size_t>(c.num_gpus));
  // NVSwitch: every GPU has its own full-duplex port on its node's switch; the latency is split
  // over the two hops so that GPU -> GPU costs intra_node.latency_us. All GPUs sit in one star
  // zone (SimGrid looks names up zone by zone, so one zone per node would make building a
  // 16384-GPU platform quadratic); the backend only routes GPU -> GPU inside a node, traffic
  // between nodes goes NIC -> NIC.
  auto* nvswitch = sg::create_star_zone("nvswitch");
  nvswitch->set_parent(world);
  for (int64_t g = 0; g < c.num_gpus; ++g) {
    auto* host = nvswitch->create_host("gpu" + std::to_string(g), kGpuHostSpeedFlops);
    auto* link = nvswitch->create_split_duplex_link("nvl" + std::to_string(g), intra_Bps)->set_latency(intra_lat_s / 2);
    add_star_member(nvswitch, host, link);
    p.gpu[static_cast<size_t>(g)] = host;
  }
  if (o.failure) p.injector = nvswitch->create_host("failure-injector", kGpuHostSpeedFlops);
  nvswitch->seal();

  // The inter-node fabric: one port per NIC (full duplex, inter_node bandwidth x the node's
  // degradation factor, half the NIC-to-NIC latency each side), grouped under leaf switches
  // whose uplink carries ports x bandwidth / oversubscription.
  const int64_t num_nics = nodes * nics;
  p.nic.resize(static_cast<size_t>(num_nics));
  p.nic_port.resize(static_cast<size_t>(num_nics));
  auto* fabric = sg::create_star_zone("fabric");
  fabric->set_parent(world);
  auto add_nic = [&](sg::NetZone* zone, int64_t idx) {
    auto* host = zone->create_host("nic" + std::to_string(idx), 1.0);
    const double bw = inter_Bps * nic_factor[static_cast<size_t>(idx / nics)];
    auto* link = zone->create_split_duplex_link("nicport" + std::to_string(idx), bw)->set_latency(inter_lat_s / 2);
    add_star_member(zone, host, link);
    p.nic[static_cast<size_t>(idx)] = host;
    p.nic_port[static_cast<size_t>(idx)] = link;
  };

  std::vector<std::vector<int64_t>> leaves;
  if (c.topology == Topology::kFatTree) {
    const int64_t ports = std::max<int64_t>(o.fat_tree_leaf_ports, 1);
    for (int64_t i = 0; i < num_nics; ++i) {
      if (i % ports == 0) leaves.emplace_back();
      leaves.back().push_back(i);
    }
  } else if (c.topology == Topology::kRailOptimized) {
    leaves.resize(static_cast<size_t>(nics));
    for (int64_t i = 0; i < num_nics; ++i) leaves[static_cast<size_t>(i % nics)].push_back(i);
  }
  if (leaves.size() <= 1) {  // star, or everything under one switch: no uplinks in the way
    for (int64_t i = 0; i < num_nics; ++i) add_nic(fabric, i);
  } else {
    for (size_t l = 0; l < leaves.size(); ++l) {
      auto* leaf = sg::create_star_zone("leaf" + std::to_string(l));
      leaf->set_parent(fabric);
      auto* gateway = leaf->create_router("switch" + std::to_string(l));
      for (int64_t i : leaves[l]) add_nic(leaf, i);
      leaf->seal();
      const double up_Bps = static_cast<double>(leaves[l].size()) * inter_Bps / c.oversubscription;
      auto* uplink = fabric->create_split_duplex_link("uplink" + std::to_string(l), up_Bps)->set_latency(0);
      fabric->add_route(leaf->get_netpoint(), nullptr, gateway, nullptr, {sg::LinkInRoute(uplink, Direction::UP)}, true);
    }
  }
  fabric->seal();
  world->seal();
  return p;
}

// ------------------------------------------------------------------------------ run-time state

struct CollInstance {
  int expected = 0;
  int arrived = 0;
  std::vector<const std::vector<int64_t>*> send_bytes;  // uneven all-to-all: each member's row
  sg::SemaphorePtr sem = sg::Semaphore::create(0);
  double start_s = 0;
};

struct P2pInstance {
  bool has_send = false, has_recv = false;
  bool recv_waiting = false;
  bool transferred = false;
  sg::SemaphorePtr sem = sg::Semaphore::create(0);
  double start_s = 0;  // transfer start
  int64_t flow_id = -1;
};

struct P2pKey {
  int32_t job, src, dst, tag;
  bool operator==(const P2pKey&) const = default;
};
struct P2pKeyHash {
  size_t operator()(const P2pKey& k) const {
    uint64_t h = static_cast<uint32_t>(k.job);
    h = h * 1000003u ^ static_cast<uint32_t>(k.src);
    h = h * 1000003u ^ static_cast<uint32_t>(k.dst);
    h = h * 1000003u ^ static_cast<uint32_t>(k.tag);
    return std::hash<uint64_t>{}(h);
  }
};

struct RankRt {
  int32_t job = 0;
  int32_t rank = 0;
  int64_t gpu = 0;
  double slowdown = 1.0;
  const RankProgram* prog = nullptr;
  std::vector<uint8_t> done;
  std::vector<double> start_s, end_s;
  std::vector<int64_t> flow_id;  // p2p tasks, when recording the timeline
  std::vector<double> entered_s;  // with an injected failure: when each task began (-1: not yet)
  sg::MutexPtr mutex = sg::Mutex::create();
  sg::ConditionVariablePtr cv = sg::ConditionVariable::create();
  int waiters = 0;
  // memory
  std::array<double, kNumMemCategories> current{};
  std::array<double, kNumMemCategories> at_peak{};
  double peak_total = 0;
  std::unordered_map<int32_t, std::pair<int, double>> buffers;  // id -> (category, bytes)
  std::vector<MemorySample> samples;
};

struct JobRt {
  const Scenario* scenario = nullptr;
  const PlanGraph* graph = nullptr;
  std::vector<int64_t> gpus;             // rank -> GPU
  std::vector<int32_t> rank_index;       // rank -> index into Sim::ranks, -1 when not simulated
  std::vector<std::vector<int64_t>> group_gpus;
  std::vector<int> group_expected;       // simulated members per group
  Fidelity fidelity = Fidelity::kPerStep;
  int64_t replicas = 1;                  // ranks each simulated rank stands for
};

struct Sim {
  Platform platform;
  SimgridOptions options;
  std::vector<JobRt> jobs;
  std::vector<RankRt> ranks;
  std::unordered_map<uint64_t, std::shared_ptr<CollInstance>> collectives;
  std::unordered_map<P2pKey, std::deque<std::shared_ptr<P2pInstance>>, P2pKeyHash> p2p;
  int64_t next_flow_id = 0;
  int64_t tasks_total = 0;
  int64_t tasks_done = 0;
  SimgridStats stats;
  std::vector<char> hot_node;  // nodes with a simulated rank or a degraded NIC (replica symmetry)
  bool show_progress = false;
  std::chrono::steady_clock::time_point last_progress = std::chrono::steady_clock::now();
  // Injected failure: whether it happened (the iteration may end first), and whether the
  // timeout tore the job down.
  bool failure_fired = false;
  bool timeout_fired = false;
};

uint64_t coll_key(int32_t job, int32_t group, int32_t seq) {
  return (static_cast<uint64_t>(job) << 56) ^ (static_cast<uint64_t>(static_cast<uint32_t>(group)) << 32) ^
         static_cast<uint32_t>(seq);
}

// A flow to or from a host the injected failure switched off: SimGrid refuses to start it, and
// NCCL's transfer would never complete either.
struct FailedEndpoint {};

void run_phases(Sim& sim, const std::vector<FlowPhase>& phases) {
  std::vector<sg::CommPtr> comms;
  for (const auto& ph : phases) {
    comms.clear();
    if (sim.failure_fired)
      for (const auto& f : ph.flows)
        if (!sim.platform.host(f.src)->is_on() || !sim.platform.host(f.dst)->is_on()) throw FailedEndpoint{};
    for (const auto& f : ph.flows) {
      // GPU -> GPU routes exist only inside a node (see build_platform).
      assert(f.src.kind != f.dst.kind || f.src.kind == Endpoint::Kind::kNic ||
             sim.platform.shape.node_of(f.src.index) == sim.platform.shape.node_of(f.dst.index));
      comms.push_back(sg::Comm::sendto_async(sim.platform.host(f.src), sim.platform.host(f.dst),
                                             static_cast<uint64_t>(std::llround(std::max(0.0, f.bytes)))));
    }
    sim.stats.flows += static_cast<int64_t>(comms.size());
    if (!comms.empty()) sg::Comm::wait_all(comms);
    if (ph.extra_latency_s > 0) sg::this_actor::sleep_for(ph.extra_latency_s);
  }
}

// `count` back-to-back calls: per-step repeats the steps; aggregated scales each flow and adds
// the latency of the extra steps (the first flow already pays one latency).
std::vector<FlowPhase> repeat_phases(std::vector<FlowPhase> one, int32_t count, Fidelity fidelity) {
  if (count == 1 || one.empty()) return one;
  if (fidelity == Fidelity::kPerStep || one.size() > 1) {
    std::vector<FlowPhase> out;
    out.reserve(one.size() * static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) out.insert(out.end(), one.begin(), one.end());
    return out;
  }
  FlowPhase& p = one.front();
  const double steps_latency = p.extra_latency_s;  // (steps - 1) x alpha of one call
  for (auto& f : p.flows) f.bytes *= count;
  // count calls pay count x steps latencies; the flow pays one, each call's extra pays steps-1.
  p.extra_latency_s = static_cast<double>(count) * steps_latency + static_cast<double>(count - 1) * p.latency_s;
  return one;
}

bool on_one_node(const std::vector<int64_t>& gpus, const FabricShape& shape) {
  for (int64_t g : gpus)
    if (shape.node_of(g) != shape.node_of(gpus.front())) return false;
  return true;
}

// Time the phases take with nothing else on the links, every port of capacity `port_Bps` per
// direction (NVLink inside a node): per phase, its latency plus the busiest port's bytes
// (flows out of a port share it, as do flows into one), plus the phase's extra latency.
double alone_time_s(const std::vector<FlowPhase>& phases, double port_Bps) {
  double total = 0;
  std::unordered_map<int64_t, double> out_bytes, in_bytes;
  for (const FlowPhase& p : phases) {
    out_bytes.clear();
    in_bytes.clear();
    double busiest = 0;
    for (const Flow& f : p.flows) {
      busiest = std::max(busiest, out_bytes[f.src.index] += f.bytes);
      busiest = std::max(busiest, in_bytes[f.dst.index] += f.bytes);
    }
    if (!p.flows.empty()) total += p.latency_s + busiest / port_Bps;
    total += p.extra_latency_s;
  }
  return total;
}

// Blocks until every member has reached the collective; the last one to arrive runs the flows.
// Returns the instant the collective started (all members present).
double run_collective(Sim& sim, RankRt& r, const Task& t) {
  JobRt& job = sim.jobs[static_cast<size_t>(r.job)];
  const uint64_t key = coll_key(r.job, t.group, t.seq);
  auto& slot = sim.collectives[key];
  if (!slot) {
    slot = std::make_shared<CollInstance>();
    slot->expected = job.group_expected[static_cast<size_t>(t.group)];
  }
  std::shared_ptr<CollInstance> inst = slot;
  if (t.collective == CollectiveKind::kAllToAll && !t.send_bytes.empty()) {
    const auto& members = job.graph->groups[static_cast<size_t>(t.group)].ranks;
    inst->send_bytes.resize(members.size(), nullptr);
    const auto at = std::find(members.begin(), members.end(), r.rank);
    if (at != members.end()) inst->send_bytes[static_cast<size_t>(at - members.begin())] = &t.send_bytes;
  }
  if (++inst->arrived < inst->expected) {
    inst->sem->acquire();
    return inst->start_s;
  }
  sim.collectives.erase(key);
  ++sim.stats.collectives_run;
  inst->start_s = sg::Engine::get_clock();
  const auto& gpus = job.group_gpus[static_cast<size_t>(t.group)];
  const double bytes = static_cast<double>(t.bytes);
  const Algorithm algo = choose_algorithm(t.collective, gpus, bytes, sim.platform.shape, sim.options.allow_tree);
  // Uneven all-to-all: the rows of the members simulated (the others send bytes / n each).
  auto phases = algo == Algorithm::kDirect && !inst->send_bytes.empty()
                    ? decompose_all_to_all(gpus, bytes, inst->send_bytes, sim.platform.shape)
                    : decompose_collective(t.collective, gpus, bytes, algo, job.fidelity, sim.platform.shape);
  // Members not simulated (replica symmetry): their flows alike are carried by representatives.
  if (sim.options.replica_flows == SimgridReplicaFlows::kRepresentative && inst->expected < static_cast<int>(gpus.size())) {
    if (algo != Algorithm::kDirect)
      keep_representative_flows(phases, sim.hot_node, sim.platform.shape);
    else if (inst->send_bytes.empty())
      keep_hot_all_to_all_flows(phases, gpus, sim.hot_node, sim.platform.shape);
  }
  const int32_t calls = std::max<int32_t>(t.count, 1);
  const bool one_node = on_one_node(gpus, sim.platform.shape);
  // Measured on this node (the calibration profile, nccl-tests style): the measured time, which
  // already holds the NVLink contention of the collective's own flows.
  const double measured_s =
      one_node && sim.platform.profile != nullptr && gpus.size() > 1 && algo != Algorithm::kDirect
          ? profile_collective_time_s(*sim.platform.profile, t.collective, static_cast<int>(gpus.size()), t.bytes)
          : 0.0;
  if (measured_s > 0 || (sim.options.intra_node == SimgridIntraNode::kCoarse && one_node)) {
    // Inside the NVLink domain: one timed activity, the measured time or the time the flows
    // take alone on the ports.
    const double one_s = measured_s > 0 ? measured_s : alone_time_s(phases, sim.platform.shape.intra_bandwidth_Bps);
    const double d = static_cast<double>(calls) * one_s;
    if (d > 0) sg::this_actor::sleep_for(d);
    // A member's GPU switched off by the injected failure during the call: it never completes.
    if (sim.failure_fired)
      for (int64_t gpu : gpus)
        if (!sim.platform.gpu[static_cast<size_t>(gpu)]->is_on()) throw FailedEndpoint{};
    ++sim.stats.coarse_collectives;
  } else {
    run_phases(sim, repeat_phases(std::move(phases), calls, job.fidelity));
  }
  for (int i = 1; i < inst->expected; ++i) inst->sem->release();
  return inst->start_s;
}

// Point-to-point message, eager as the lowering defines it: the send transfers as soon as it
// is ready and completes when the data has arrived; the receive completes when the matching
// send (same src, dst, tag, in order) has. Returns the span start (transfer start, or the
// receive's own start if it came later); sets the flow id.
double run_p2p(Sim& sim, RankRt& r, const Task& t, int64_t* flow_id) {
  const bool is_send = t.kind == TaskKind::kSend;
  const P2pKey key{r.job, is_send ? r.rank : t.peer, is_send ? t.peer : r.rank, t.tag};
  auto& queue = sim.p2p[key];
  std::shared_ptr<P2pInstance> inst;
  for (auto& q : queue)
    if (is_send ? !q->has_send : !q->has_recv) {
      inst = q;
      break;
    }
  if (!inst) {
    inst = std::make_shared<P2pInstance>();
    queue.push_back(inst);
  }
  (is_send ? inst->has_send : inst->has_recv) = true;
  auto retire = [&] {  // both sides seen and the data moved: forget the pairing
    auto& q = sim.p2p[key];
    q.erase(std::find(q.begin(), q.end(), inst));
    if (q.empty()) sim.p2p.erase(key);
  };
  const double now = sg::Engine::get_clock();
  if (is_send) {
    inst->start_s = now;
    inst->flow_id = sim.next_flow_id++;
    const JobRt& job = sim.jobs[static_cast<size_t>(r.job)];
    const int64_t src = job.gpus[static_cast<size_t>(key.src)];
    const int64_t dst = job.gpus[static_cast<size_t>(key.dst)];
    run_phases(sim, {FlowPhase{{p2p_flow(src, dst, static_cast<double>(t.bytes), sim.platform.shape)}, 0}});
    inst->transferred = true;
    if (inst->recv_waiting) {  // the receive is parked on the semaphore: wake it, forget the pair
      inst->sem->release();
      retire();
    }
    *flow_id = inst->flow_id;
    return now;
  }
  if (inst->transferred) {
    retire();
  } else {
    inst->recv_waiting = true;
    inst->sem->acquire();  // the send retires the pair when it wakes us
  }
  *flow_id = inst->flow_id;
  return std::max(now, inst->start_s);
}

void memory_event(Sim& sim, RankRt& r, const Task& t) {
  if (t.kind == TaskKind::kAlloc) {
    const int cat = static_cast<int>(t.category);
    r.buffers[t.buffer] = {cat, static_cast<double>(t.bytes)};
    r.current[static_cast<size_t>(cat)] += static_cast<double>(t.bytes);
  } else {
    auto it = r.buffers.find(t.buffer);
    if (it == r.buffers.end()) return;  // validated: frees name allocated buffers
    r.current[static_cast<size_t>(it->second.first)] -= it->second.second;
    r.buffers.erase(it);
  }
  double total = 0;
  for (double v : r.current) total += v;
  if (total > r.peak_total) {
    r.peak_total = total;
    r.at_peak = r.current;
  }
  if (sim.options.record_timeline) {
    const double now = sg::Engine::get_clock();
    if (!r.samples.empty() && r.samples.back().time_s == now)
      r.samples.back().allocated_bytes = total;
    else
      r.samples.push_back({r.rank, now, total});
  }
}

void progress(Sim& sim) {
  ++sim.tasks_done;
  if (!sim.show_progress || (sim.tasks_done & 1023) != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - sim.last_progress).count() < kProgressPeriodS) return;
  sim.last_progress = now;
  std::fprintf(stderr, "\rsimgrid: %lld / %lld tasks, simulated %.3f s   ", static_cast<long long>(sim.tasks_done),
               static_cast<long long>(sim.tasks_total), sg::Engine::get_clock());
}

// A data-parallel collective or an EP all-to-all (in a DLRM graph every collective: the
// embedding exchanges and the all-reduce share that stream) holds SMs beside the compute it
// hides behind (nccl_overlap_sm_share, core/cost_model.h, as the analytical model's
// overlapped_comm_cost_s and the DLRM model's compute_end_beside_s):
// while it is in flight on a rank, an execution bounded at that share of the GPU host's speed
// runs on the rank's GPU host, and the rank's compute gets the rest. TP and CP collectives are
// priced without it, as in the analytical model. The execution ends with the collective, or
// with the exception that stops it.
class SmHold {
 public:
  SmHold(const Sim& sim, const RankRt& r, const Task& t) {
    if (t.stream != Stream::kDpComm && t.stream != Stream::kEpComm) return;
    const double share = nccl_overlap_sm_share(sim.jobs[static_cast<size_t>(r.job)].scenario->cluster.gpu);
    if (!(share > 0)) return;
    // Work it never finishes: it is cancelled when the collective ends.
    held_ = sg::this_actor::exec_init(std::numeric_limits<double>::max() / 4);
    held_->set_bound(share * kGpuHostSpeedFlops);
    held_->start();
  }
  void release() {
    if (held_) held_->cancel();
    held_ = nullptr;
  }

 private:
  sg::ExecPtr held_;
};

double run_held_collective(Sim& sim, RankRt& r, const Task& t) {
  SmHold hold(sim, r, t);
  double start = 0;
  try {
    start = run_collective(sim, r, t);
  } catch (const simgrid::Exception&) {
    hold.release();
    throw;
  } catch (const FailedEndpoint&) {
    hold.release();
    throw;
  }
  hold.release();
  return start;
}

// Runs one task whose dependencies are done; returns its span start.
double run_task(Sim& sim, RankRt& r, const Task& t, int32_t id, double start) {
  switch (t.kind) {
    case TaskKind::kCompute: {
      const double d = t.duration_s * r.slowdown;
      if (d > 0) sg::this_actor::execute(d * kGpuHostSpeedFlops);
      break;
    }
    case TaskKind::kCollective: return run_held_collective(sim, r, t);
    case TaskKind::kSend:
    case TaskKind::kRecv: {
      int64_t fid = -1;
      start = run_p2p(sim, r, t, &fid);
      if (!r.flow_id.empty()) r.flow_id[static_cast<size_t>(id)] = fid;
      break;
    }
    case TaskKind::kAlloc:
    case TaskKind::kFree: memory_event(sim, r, t); break;
  }
  return start;
}

// The injected failure: at at_s the node's GPU and NIC hosts (their actors die, flows to and
// from them fail) or its NIC ports (flows through them fail) are switched off; detection_s
// later the framework's timeout declares the job failed and every rank is torn down. A daemon:
// when the iteration ends first, SimGrid ends it and nothing happens.
void inject_failure(Sim* sim, int64_t gpus_per_node, int64_t nics_per_node) {
  const SimgridFailure& f = *sim->options.failure;
  const FailureInjection& in = f.injection;
  if (in.at_s > 0) sg::this_actor::sleep_for(in.at_s);
  sim->failure_fired = true;
  const auto node = static_cast<size_t>(in.node);
  const auto gpn = static_cast<size_t>(gpus_per_node), nics = static_cast<size_t>(nics_per_node);
  if (in.component == "host") {
    for (size_t g = node * gpn; g < std::min((node + 1) * gpn, sim->platform.gpu.size()); ++g) sim->platform.gpu[g]->turn_off();
    for (size_t i = node * nics; i < (node + 1) * nics; ++i) sim->platform.nic[i]->turn_off();
  } else {
    for (size_t i = node * nics; i < (node + 1) * nics; ++i) sim->platform.nic_port[i]->turn_off();
  }
  if (f.detection_s > 0) sg::this_actor::sleep_for(f.detection_s);
  sim->timeout_fired = true;
  sg::Actor::kill_all();
}

// One actor per (rank, stream): runs the stream's tasks in order, each after its dependencies.
void run_stream(Sim* sim, RankRt* r, std::vector<int32_t> task_ids) {
  const auto& tasks = r->prog->tasks;
  for (int32_t id : task_ids) {
    const Task& t = tasks[static_cast<size_t>(id)];
    auto ready = [&] {
      for (int32_t d : t.deps)
        if (!r->done[static_cast<size_t>(d)]) return false;
      return true;
    };
    if (!ready()) {
      std::unique_lock lock(*r->mutex);
      ++r->waiters;
      while (!ready()) r->cv->wait(lock);
      --r->waiters;
    }
    double start = sg::Engine::get_clock();
    if (!r->entered_s.empty()) r->entered_s[static_cast<size_t>(id)] = start;
    try {
      start = run_task(*sim, *r, t, id, start);
    } catch (const simgrid::Exception&) {
      // A flow of this task crossed a host or link switched off by the injected failure
      // (SimGrid's NetworkFailureException): the operation can never complete (NCCL hangs), so
      // the stream stops here; its peers and the tasks that depend on it stall until the
      // timeout tears the job down.
      return;
    } catch (const FailedEndpoint&) {  // the same, for a flow that could not even start
      return;
    }
    r->start_s[static_cast<size_t>(id)] = start;
    r->end_s[static_cast<size_t>(id)] = sg::Engine::get_clock();
    r->done[static_cast<size_t>(id)] = 1;
    if (r->waiters > 0) r->cv->notify_all();
    progress(*sim);
  }
}

// ----------------------------------------------------------------------------------- results

double union_length(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, cur_s = 0, cur_e = -1;
  bool open = false;
  for (auto [s, e] : v) {
    if (!open || s > cur_e) {
      if (open) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
      open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_s;
  return total;
}

std::string compute_name(const Task& t) {
  std::string phase;
  switch (t.phase) {
    case Phase::kForward: phase = "fwd"; break;
    case Phase::kBackward: phase = "bwd"; break;
    case Phase::kRecompute: phase = "recompute"; break;
    case Phase::kOptimizer: return "optimizer step";
    case Phase::kOther: phase = to_string(t.op); break;
  }
  std::string what;
  switch (t.op) {
    case OpKind::kEmbedding: what = " embedding"; break;
    case OpKind::kOutputLoss: what = " loss"; break;
    case OpKind::kOptimizerStep: return "optimizer step";
    default:
      if (t.layer >= 0) {
        what = " L" + std::to_string(t.layer);
        if (t.num_layers > 1) what += "-" + std::to_string(t.layer + t.num_layers - 1);
      }
      if (t.op == OpKind::kAttention) what += " attn";
      if (t.op == OpKind::kMlp) what += " mlp";
  }
  if (t.micro_batch >= 0) what += " mb" + std::to_string(t.micro_batch);
  return phase + what;
}

// A task's span name (compute "fwd L0-11 mb3", collectives "ncclAllReduce tp", p2p "ncclSend pp").
std::string span_name(const PlanGraph& g, const Task& t) {
  if (t.kind == TaskKind::kCompute) return compute_name(t);
  if (t.kind == TaskKind::kCollective)
    return std::string(nccl_name(t.collective)) + " " + to_string(g.groups[static_cast<size_t>(t.group)].kind);
  return std::string(t.kind == TaskKind::kSend ? "ncclSend" : "ncclRecv") + " pp";
}

bool on_failed_host(const Sim& sim, const RankRt& r) {
  const FailureInjection& in = sim.options.failure->injection;
  return sim.failure_fired && in.component == "host" && sim.platform.shape.node_of(r.gpu) == in.node;
}

// Each simulated rank of the job after the injected failure: failed with its host, stalled in
// an operation that waits on a failed peer (or crosses a failed link), still running when the
// timeout fired, or done with the iteration.
FailureReport failure_report(const Sim& sim, size_t job_index) {
  const SimgridFailure& f = *sim.options.failure;
  const PlanGraph& g = *sim.jobs[job_index].graph;
  FailureReport rep;
  rep.component = f.injection.component;
  rep.node = f.injection.node;
  rep.at_s = f.injection.at_s;
  rep.detection_s = f.detection_s;
  const double teardown_s = f.injection.at_s + f.detection_s;
  for (const auto& r : sim.ranks) {
    if (r.job != static_cast<int32_t>(job_index)) continue;
    RankStall st;
    st.rank = r.rank;
    st.node = sim.platform.shape.node_of(r.gpu);
    const bool failed = on_failed_host(sim, r);
    const double stop_s = failed ? f.injection.at_s : teardown_s;  // where an unfinished task was cut
    bool complete = true, computing = false;
    double last_end = 0, blocked_since = -1;
    for (size_t i = 0; i < r.prog->tasks.size(); ++i) {
      const Task& t = r.prog->tasks[i];
      if (r.done[i]) {
        last_end = std::max(last_end, r.end_s[i]);
        if (t.kind == TaskKind::kCompute) rep.lost_compute_gpu_s += r.end_s[i] - r.start_s[i];
        continue;
      }
      complete = false;
      if (r.entered_s[i] < 0) continue;  // never started: waits on an unfinished dependency
      if (t.kind == TaskKind::kCompute) {
        computing = true;
        rep.lost_compute_gpu_s += std::max(0.0, stop_s - r.entered_s[i]);
      } else if (t.kind != TaskKind::kAlloc && t.kind != TaskKind::kFree && blocked_since < 0) {
        // The first operation in program order that began and cannot finish: the one the
        // rank's progress waits on (a receive its stream posted early may come later in it).
        blocked_since = r.entered_s[i];
        st.blocked_in = span_name(g, t);
      }
    }
    if (complete) {
      st.state = "completed";
      st.stalled_at_s = last_end;
      st.blocked_in.clear();
    } else if (failed) {
      st.state = "failed";
      st.stalled_at_s = f.injection.at_s;
      st.blocked_in.clear();
    } else if (!st.blocked_in.empty()) {
      st.state = "stalled";
      st.stalled_at_s = last_end;
      st.blocked_since_s = blocked_since;
    } else {
      st.state = computing ? "running" : "stalled";
      st.stalled_at_s = computing ? teardown_s : last_end;
    }
    rep.affected = rep.affected || !complete;
    rep.ranks.push_back(std::move(st));
  }
  if (rep.affected) {
    rep.timeout_at_s = teardown_s;
    rep.lost_s = teardown_s;
  } else {
    rep.lost_compute_gpu_s = 0;  // the iteration completed: nothing is lost
  }
  rep.lost_compute_gpu_s *= static_cast<double>(sim.jobs[job_index].replicas);
  std::sort(rep.ranks.begin(), rep.ranks.end(), [](const RankStall& a, const RankStall& b) { return a.rank < b.rank; });
  return rep;
}

// The unfinished tasks on the timeline: on the failed host, cut at the failure, then one
// "failure" span per rank up to the timeout; elsewhere an operation that cannot complete is a
// "stall" span from its start to the timeout, and a compute still running is cut there.
void add_failure_spans(const Sim& sim, size_t job_index, const FailureReport& rep, std::vector<TimelineSpan>& out) {
  if (!rep.affected) return;
  const PlanGraph& g = *sim.jobs[job_index].graph;
  for (const auto& r : sim.ranks) {
    if (r.job != static_cast<int32_t>(job_index)) continue;
    const bool failed = on_failed_host(sim, r);
    bool any = false;
    for (size_t i = 0; i < r.prog->tasks.size(); ++i) {
      const Task& t = r.prog->tasks[i];
      if (r.done[i] || r.entered_s[i] < 0 || t.kind == TaskKind::kAlloc || t.kind == TaskKind::kFree) continue;
      any = true;
      TimelineSpan s;
      s.rank = r.rank;
      s.stream = to_string(t.stream);
      s.start_s = r.entered_s[i];
      s.name = span_name(g, t);
      if (failed || t.kind == TaskKind::kCompute) {
        s.end_s = failed ? rep.at_s : rep.timeout_at_s;
        s.category = t.kind == TaskKind::kCompute ? "compute" : t.kind == TaskKind::kCollective ? "collective" : "p2p";
      } else {
        s.end_s = rep.timeout_at_s;
        s.name = "stalled: " + s.name;
        s.category = "stall";
      }
      out.push_back(std::move(s));
    }
    if (failed && (any || std::find(r.done.begin(), r.done.end(), 0) != r.done.end())) {
      TimelineSpan s;
      s.rank = r.rank;
      s.stream = to_string(Stream::kCompute);
      s.name = "host down (node " + std::to_string(rep.node) + ")";
      s.category = "failure";
      s.start_s = rep.at_s;
      s.end_s = rep.timeout_at_s;
      out.push_back(std::move(s));
    }
  }
}

BackendResult assemble(const Sim& sim, size_t job_index) {
  const JobRt& job = sim.jobs[job_index];
  const PlanGraph& g = *job.graph;
  const Scenario& sc = *job.scenario;
  BackendResult res;
  res.backend = "simgrid";
  res.plan = g.plan;

  // The critical rank: the one that finishes last.
  const RankRt* crit = nullptr;
  // A recommendation model's FLOPs are its compute tasks' (summed here); a transformer's below.
  const bool dlrm = sc.model.architecture == Architecture::kDlrm;
  double hw_flops = 0, model_flops = 0;
  for (const auto& r : sim.ranks) {
    if (r.job != static_cast<int32_t>(job_index)) continue;
    double end = 0;
    for (double e : r.end_s) end = std::max(end, e);
    if (!crit || end > res.iteration_time_s) {
      crit = &r;
      res.iteration_time_s = end;
    }
    if (!dlrm) continue;
    for (const auto& t : r.prog->tasks) {
      if (t.kind != TaskKind::kCompute) continue;
      hw_flops += t.flops;
      if (t.phase != Phase::kRecompute) model_flops += t.flops;
    }
  }
  if (dlrm) {
    res.hardware_flops_per_iteration = hw_flops * static_cast<double>(job.replicas);
    res.model_flops_per_iteration = model_flops * static_cast<double>(job.replicas);
  } else {
    // A transformer's MFU counts the FLOPs of its definition (core's flops_per_iteration, the
    // full attention matrix as Megatron-LM counts it), as the analytical model reports them, not
    // the work the tasks do (causal attention skips half its tiles): one plan, one MFU.
    const FlopsPerIteration f = flops_per_iteration(model_shape(sc.model), sc.training, g.plan.recompute);
    res.model_flops_per_iteration = f.model;
    res.hardware_flops_per_iteration = f.hardware;
  }
  const double iter = res.iteration_time_s;
  const double world = static_cast<double>(g.world_size);
  if (iter > 0) {
    res.tokens_per_s = static_cast<double>(sc.training.global_batch_size) * static_cast<double>(sc.model.seq_length) / iter;
    res.model_tflops_per_gpu = res.model_flops_per_iteration / (iter * world) / kTera;
    res.hardware_tflops_per_gpu = res.hardware_flops_per_iteration / (iter * world) / kTera;
    const double peak = peak_tflops(sc.cluster.gpu, sc.training.precision);
    if (peak > 0) {
      res.mfu = res.model_tflops_per_gpu / peak;
      res.hfu = res.hardware_tflops_per_gpu / peak;
    }
  }

  // Breakdown and communication of the critical rank.
  if (crit) {
    auto& b = res.time_breakdown_s;
    std::vector<std::pair<double, double>> comp, comm;
    // Keyed by the names, so that entries come out in the order of their names.
    std::map<std::pair<std::string, std::string>, CommEntry> entries;
    for (size_t i = 0; i < crit->prog->tasks.size(); ++i) {
      const Task& t = crit->prog->tasks[i];
      const double s = crit->start_s[i], e = crit->end_s[i], d = e - s;
      if (t.kind == TaskKind::kCompute) {
        (t.phase == Phase::kOptimizer || t.op == OpKind::kOptimizerStep ? b.optimizer : b.compute) += d;
        if (d > 0) comp.emplace_back(s, e);
      } else if (t.kind == TaskKind::kCollective) {
        const auto& grp = g.groups[static_cast<size_t>(t.group)];
        b.*comm_time_term(grp.kind) += d;
        if (d > 0) comm.emplace_back(s, e);
        auto& ce = entries[{to_string(t.collective), to_string(grp.kind)}];
        ce.kind = t.collective;
        ce.group = grp.kind;
        ce.group_size = static_cast<int64_t>(grp.ranks.size());
        // The task stands for `count` back-to-back calls of `bytes` each.
        const int32_t calls = std::max<int32_t>(t.count, 1);
        double sent = bytes_sent_per_rank(t.collective, static_cast<int64_t>(grp.ranks.size()), static_cast<double>(t.bytes));
        if (!t.send_bytes.empty()) {  // uneven all-to-all: what this rank really sends
          sent = 0;
          for (size_t k = 0; k < t.send_bytes.size() && k < grp.ranks.size(); ++k)
            if (grp.ranks[k] != crit->rank) sent += static_cast<double>(t.send_bytes[k]);
        }
        ce.bytes += static_cast<int64_t>(std::llround(calls * sent));
        ce.count += calls;
        ce.time_s += d;
      } else if (t.kind == TaskKind::kSend || t.kind == TaskKind::kRecv) {
        b.pp_comm += d;
        if (d > 0) comm.emplace_back(s, e);
        auto& ce = entries[{to_string(CollectiveKind::kSendRecv), to_string(GroupKind::kPp)}];
        ce.kind = CollectiveKind::kSendRecv;
        ce.group = GroupKind::kPp;
        ce.group_size = g.plan.pp;
        if (t.kind == TaskKind::kSend) ce.bytes += t.bytes;
        ce.count += 1;
        ce.time_s += d;
      }
    }
    const double busy_compute = union_length(comp);
    auto all = comp;
    all.insert(all.end(), comm.begin(), comm.end());
    const double busy = union_length(all);
    b.exposed_comm = busy - busy_compute;
    b.bubble = std::max(0.0, iter - busy);
    for (auto& [k, v] : entries) res.communication.push_back(v);
  }

  // Memory from the alloc/free events: per stage, the rank with the highest peak.
  res.memory.capacity_gib = sc.cluster.gpu.memory_gib;
  std::map<int64_t, StageMemory> stages;
  bool any_alloc = false;
  for (const auto& r : sim.ranks) {
    if (r.job != static_cast<int32_t>(job_index)) continue;
    if (r.peak_total <= 0) continue;
    any_alloc = true;
    auto& st = stages[r.prog->stage];
    const double total_gib = bytes_to_gib(r.peak_total);
    if (total_gib <= st.total_gib) continue;
    st.stage = r.prog->stage;
    st.weights_gib = bytes_to_gib(r.at_peak[static_cast<size_t>(MemCategory::kWeights)]);
    st.gradients_gib = bytes_to_gib(r.at_peak[static_cast<size_t>(MemCategory::kGradients)]);
    st.optimizer_gib = bytes_to_gib(r.at_peak[static_cast<size_t>(MemCategory::kOptimizer)]);
    st.activations_gib = bytes_to_gib(r.at_peak[static_cast<size_t>(MemCategory::kActivations)]);
    st.buffers_gib = bytes_to_gib(r.at_peak[static_cast<size_t>(MemCategory::kBuffers)]);
    st.total_gib = total_gib;
  }
  const std::vector<int64_t> layers = g.plan.pp >= 1 ? stage_layers(model_shape(sc.model), g.plan) : std::vector<int64_t>{};
  for (auto& [k, v] : stages) {
    if (v.stage >= 0 && v.stage < static_cast<int64_t>(layers.size())) v.layers = layers[static_cast<size_t>(v.stage)];
    res.memory.stages.push_back(v);
    res.memory.peak_gib = std::max(res.memory.peak_gib, v.total_gib);
  }
  res.memory.fits = !any_alloc || res.memory.capacity_gib <= 0 || res.memory.peak_gib <= res.memory.capacity_gib;
  if (sim.options.failure) res.failure = failure_report(sim, job_index);

  if (sim.options.record_timeline) {
    for (const auto& r : sim.ranks) {
      if (r.job != static_cast<int32_t>(job_index)) continue;
      for (size_t i = 0; i < r.prog->tasks.size(); ++i) {
        const Task& t = r.prog->tasks[i];
        if (t.kind == TaskKind::kAlloc || t.kind == TaskKind::kFree) continue;
        if (!r.done[i]) continue;  // after an injected failure: failure_spans
        TimelineSpan s;
        s.rank = r.rank;
        s.stream = to_string(t.stream);
        s.start_s = r.start_s[i];
        s.end_s = r.end_s[i];
        s.name = span_name(g, t);
        if (t.kind == TaskKind::kCompute) {
          s.category = t.phase == Phase::kOptimizer || t.op == OpKind::kOptimizerStep ? "optimizer" : "compute";
        } else if (t.kind == TaskKind::kCollective) {
          s.category = "collective";
        } else {
          s.category = "p2p";
          s.peer = t.peer;
          s.flow_id = r.flow_id.empty() ? -1 : r.flow_id[i];
        }
        res.timeline.push_back(std::move(s));
      }
      res.memory_timeline.insert(res.memory_timeline.end(), r.samples.begin(), r.samples.end());
    }
    if (res.failure) add_failure_spans(sim, job_index, *res.failure, res.timeline);
    std::stable_sort(res.timeline.begin(), res.timeline.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.start_s < b.start_s; });
  }
  return res;
}

}  // namespace

std::vector<std::string> simgrid_config_args() {
  return {
      // SimGrid's own logging off except critical errors (no stdout spam in tests and the CLI).
      "--log=root.thres:critical",
      // CM02: plain max-min sharing of link bandwidth, latency = sum of link latencies; with the
      // factors at 1 and no TCP window bound, one flow alone on a route takes
      // latency + bytes / bandwidth exactly (the alpha-beta model).
      "--cfg=network/model:CM02",
      "--cfg=network/latency-factor:1",
      "--cfg=network/bandwidth-factor:1",
      "--cfg=network/TCP-gamma:0",
      // Acknowledgements do not load the reverse direction (NCCL over NVLink / RDMA).
      "--cfg=network/crosstraffic:0",
      "--cfg=contexts/stack-size:" + std::to_string(kActorStackKiB),
  };
}

Expected<std::vector<BackendResult>> simulate(const ClusterConfig& cluster, const WhatIf& whatif,
                                              const std::vector<SimgridJob>& jobs, const SimgridOptions& options) {
  std::vector<std::string> args = {"monarch-simgrid"};
  for (auto& a : simgrid_config_args()) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  sg::Engine engine(&argc, argv.data());

  auto sim = std::make_unique<Sim>();
  sim->options = options;
  sim->platform = build_platform(cluster, whatif, options);
  if (!cluster.gpu.profile.empty())
    if (auto prof = calibration_profile(cluster.gpu.profile); prof.ok()) sim->platform.profile = *prof;
  sim->show_progress = isatty(STDERR_FILENO) != 0;

  // Straggler slowdown per GPU.
  std::vector<double> gpu_slowdown(static_cast<size_t>(cluster.num_gpus), 1.0);
  for (const auto& s : whatif.stragglers) {
    if (s.gpu >= 0) gpu_slowdown[static_cast<size_t>(s.gpu)] *= s.slowdown;
    if (s.node >= 0)
      for (int64_t g = s.node * cluster.gpus_per_node; g < std::min((s.node + 1) * cluster.gpus_per_node, cluster.num_gpus); ++g)
        gpu_slowdown[static_cast<size_t>(g)] *= s.slowdown;
  }

  for (size_t j = 0; j < jobs.size(); ++j) {
    const PlanGraph& g = *jobs[j].graph;
    JobRt job;
    job.scenario = jobs[j].scenario;
    job.graph = &g;
    job.gpus = jobs[j].gpus;
    if (job.gpus.empty())
      for (int64_t r = 0; r < g.world_size; ++r) job.gpus.push_back(r);

    int64_t total_tasks = 0;
    for (const auto& prog : g.ranks) total_tasks += static_cast<int64_t>(prog.tasks.size());
    const bool replica_only = !lowered_replica(g).empty();  // the other replicas' programs are empty
    std::vector<char> simulated(static_cast<size_t>(g.world_size), 1);
    const bool want_symmetry = replica_only || options.symmetry == SimgridSymmetry::kDpReplica ||
                               (options.symmetry == SimgridSymmetry::kAuto && total_tasks > options.symmetry_min_tasks);
    if (replica_only && options.symmetry == SimgridSymmetry::kOff)
      return Expected<std::vector<BackendResult>>::fail(
          "--set simgrid.symmetry", "off needs every rank's program; the graph of job " + std::to_string(j) +
                                        " was lowered for one data-parallel replica");
    if (want_symmetry) {
      if (auto c = dp_replica(g, rank_weights(cluster, whatif, g.world_size, job.gpus))) {
        simulated = c->simulated;
        job.replicas = c->replicas;
      } else if (options.symmetry == SimgridSymmetry::kDpReplica || replica_only) {
        return Expected<std::vector<BackendResult>>::fail(
            "--set simgrid.symmetry", std::string(replica_only ? "the ranks lowered are not one data-parallel replica"
                                                               : "dp-replica needs data-parallel groups that partition the ranks") +
                                          " with no other collective or message between replicas (job " + std::to_string(j) + ")");
      }
    }

    job.group_gpus.resize(g.groups.size());
    job.group_expected.resize(g.groups.size());
    for (size_t k = 0; k < g.groups.size(); ++k) {
      for (int32_t m : g.groups[k].ranks) {
        job.group_gpus[k].push_back(job.gpus[static_cast<size_t>(m)]);
        job.group_expected[k] += simulated[static_cast<size_t>(m)] ? 1 : 0;
      }
    }

    // Fidelity: per-step while the simulated collectives stay under the flow budget.
    if (options.fidelity == SimgridFidelity::kAuto) {
      int64_t flows = 0;
      std::vector<std::map<int32_t, char>> seen(g.groups.size());
      for (const auto& prog : g.ranks) {
        if (!simulated[static_cast<size_t>(prog.rank)]) continue;
        for (const auto& t : prog.tasks)
          if (t.kind == TaskKind::kCollective && seen[static_cast<size_t>(t.group)].emplace(t.seq, 1).second)
            flows += std::max<int32_t>(t.count, 1) *
                     count_flows(t.collective, static_cast<int64_t>(g.groups[static_cast<size_t>(t.group)].ranks.size()),
                                 Fidelity::kPerStep);
      }
      job.fidelity = flows <= options.per_step_max_flows ? Fidelity::kPerStep : Fidelity::kAggregated;
    } else {
      job.fidelity = options.fidelity == SimgridFidelity::kPerStep ? Fidelity::kPerStep : Fidelity::kAggregated;
    }

    job.rank_index.assign(static_cast<size_t>(g.world_size), -1);
    for (const auto& prog : g.ranks) {
      if (!simulated[static_cast<size_t>(prog.rank)]) continue;
      job.rank_index[static_cast<size_t>(prog.rank)] = static_cast<int32_t>(sim->ranks.size());
      RankRt& r = sim->ranks.emplace_back();
      r.job = static_cast<int32_t>(j);
      r.rank = prog.rank;
      r.gpu = job.gpus[static_cast<size_t>(prog.rank)];
      r.slowdown = gpu_slowdown[static_cast<size_t>(r.gpu)];
      r.prog = &prog;
      r.done.assign(prog.tasks.size(), 0);
      r.start_s.assign(prog.tasks.size(), 0.0);
      r.end_s.assign(prog.tasks.size(), 0.0);
      if (options.record_timeline) r.flow_id.assign(prog.tasks.size(), -1);
      if (options.failure) r.entered_s.assign(prog.tasks.size(), -1.0);
      sim->tasks_total += static_cast<int64_t>(prog.tasks.size());
    }
    sim->jobs.push_back(std::move(job));
  }

  sim->hot_node.assign(static_cast<size_t>(cluster.num_nodes()), 0);
  for (const auto& r : sim->ranks) sim->hot_node[static_cast<size_t>(r.gpu / cluster.gpus_per_node)] = 1;
  for (const auto& d : whatif.degraded_links) sim->hot_node[static_cast<size_t>(d.node)] = 1;

  // Actors: one per (rank, stream with tasks), on the rank's GPU host.
  for (auto& r : sim->ranks) {
    std::map<Stream, std::vector<int32_t>> streams;
    for (size_t i = 0; i < r.prog->tasks.size(); ++i) streams[r.prog->tasks[i].stream].push_back(static_cast<int32_t>(i));
    for (auto& [stream, ids] : streams) {
      const std::string name = "j" + std::to_string(r.job) + "r" + std::to_string(r.rank) + "-" + to_string(stream);
      sg::Actor::create(name, sim->platform.gpu[static_cast<size_t>(r.gpu)], run_stream, sim.get(), &r, std::move(ids));
    }
  }

  if (options.failure)
    sg::Actor::create("failure-injector", sim->platform.injector, inject_failure, sim.get(), cluster.gpus_per_node,
                      cluster.nics_per_node)
        ->daemonize();
  sg::Engine::on_time_advance_cb([s = sim.get()](double) { ++s->stats.solver_steps; });
  engine.run();
  sim->stats.tasks_run = sim->tasks_done;
  sim->stats.ranks_simulated = static_cast<int64_t>(sim->ranks.size());
  for (const auto& job : sim->jobs) sim->stats.per_step_jobs += job.fidelity == Fidelity::kPerStep ? 1 : 0;
  if (options.stats) *options.stats = sim->stats;
  if (sim->show_progress) std::fprintf(stderr, "\r%70s\r", "");

  // Every task must have run; otherwise the graph deadlocks (mismatched collectives or messages).
  // After an injected failure unfinished tasks are what the failure report describes.
  for (const auto& r : sim->ranks) {
    if (sim->failure_fired) break;
    for (size_t i = 0; i < r.done.size(); ++i) {
      if (r.done[i]) continue;
      const Task& t = r.prog->tasks[i];
      std::string what = std::string(to_string(t.kind));
      if (t.kind == TaskKind::kCollective) what += " group " + std::to_string(t.group) + " seq " + std::to_string(t.seq);
      if (t.kind == TaskKind::kSend || t.kind == TaskKind::kRecv)
        what += " peer " + std::to_string(t.peer) + " tag " + std::to_string(t.tag);
      return Expected<std::vector<BackendResult>>::fail(
          "plan/ranks/" + std::to_string(r.rank) + "/tasks/" + std::to_string(i),
          "the task graph deadlocks in simulation (job " + std::to_string(r.job) + "): this " + what +
              " never completes; its partners never reach it");
    }
  }

  std::vector<BackendResult> out;
  for (size_t j = 0; j < sim->jobs.size(); ++j) out.push_back(assemble(*sim, j));
  return out;
}

}  // namespace monarch::simgrid_backend
