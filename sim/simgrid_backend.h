// SimGrid backend: runs a plan's per-rank task graph on a simulated cluster (SimGrid 3.32 S4U)
// with the real topology and link sharing, so contention, stragglers and degraded links show.
// See docs/simgrid_backend.md for the platform, the network model and the approximations.
//
//   auto r = run_simgrid(scenario, graph, SimgridOptions{});
//   if (!r) ... r.problems() ...; else r->iteration_time_s, r->timeline ...
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

enum class SimgridFidelity : uint8_t {
  kAuto,        // per-step while the whole iteration stays under per_step_max_flows flows
  kPerStep,     // every ring step is its own set of flows
  kAggregated,  // one flow per ring edge with the whole volume, plus the latency term
};

enum class SimgridSymmetry : uint8_t {
  kAuto,       // data-parallel replica symmetry when the graph has over symmetry_min_tasks tasks
  kOff,        // simulate every rank
  kDpReplica,  // simulate one data-parallel replica (see docs/simgrid_backend.md)
};

// Size of one simulation, deterministic for a given graph and options (unlike its wall time):
// what a regression in the simulator's cost shows up in first.
struct SimgridStats {
  int64_t ranks_simulated = 0;
  int64_t tasks_run = 0;          // tasks of the simulated ranks (compute, messages, memory events)
  int64_t collectives_run = 0;    // collective calls launched (one per call, whatever its members)
  int64_t flows = 0;              // network transfers handed to SimGrid
  int64_t solver_steps = 0;       // times the simulated clock advanced (a max-min share solve each)
  int64_t per_step_jobs = 0;      // jobs run at per-step fidelity (the others aggregated)
  int64_t coarse_collectives = 0; // collective calls inside one node run as one timed activity
};

// Under data-parallel replica symmetry, a DP collective's flows between members that are not
// simulated (and not on a node with a simulated rank or a degraded NIC) are alike: one
// representative per kind of route stands for them (docs/simgrid_backend.md).
enum class SimgridReplicaFlows : uint8_t {
  kRepresentative,  // the flows touching simulated or degraded nodes, one of each other kind
  kAll,             // every member's flows
};

// Collectives whose members all sit on one node (tensor and context parallelism inside the
// NVLink domain; docs/simgrid_backend.md "Collectives inside a node").
enum class SimgridIntraNode : uint8_t {
  kCoarse,  // one timed activity per call: the time its flows take alone on the NVLink ports
  kFlows,   // the flows on the NVLink ports, at the job's fidelity (they share the ports)
};

// A failure injected during the iteration (the scenario's reliability.inject_failure): at
// injection.at_s the node's host (its GPU hosts and NIC hosts) or its links (its NIC ports) are
// switched off; detection_s later the framework's timeout declares the job failed and every
// rank is torn down. docs/reliability.md "A failure during an iteration".
struct SimgridFailure {
  FailureInjection injection;
  double detection_s = kDefaultDetection_s;
};

struct SimgridOptions {
  SimgridFidelity fidelity = SimgridFidelity::kAuto;
  SimgridSymmetry symmetry = SimgridSymmetry::kAuto;
  SimgridReplicaFlows replica_flows = SimgridReplicaFlows::kRepresentative;
  SimgridIntraNode intra_node = SimgridIntraNode::kCoarse;
  // Auto fidelity: per-step when the iteration's per-step flows stay below this many.
  int64_t per_step_max_flows = 200000;
  // Auto symmetry: one DP replica is simulated when the graph has more tasks than this.
  int64_t symmetry_min_tasks = 200000;
  // Let all-reduce over one-GPU-per-node groups use NCCL's double binary tree when faster.
  bool allow_tree = true;
  // NIC ports per leaf switch in the fat-tree topology (downlinks); a leaf has
  // ports x NIC bandwidth / oversubscription of uplink capacity. Default: half of a 64-port
  // switch (NVIDIA Quantum-2 QM9700, 64 x 400 Gb/s), the other half going up.
  int64_t fat_tree_leaf_ports = 32;
  // Record the per-task timeline (needed for traces); off saves memory on huge runs.
  bool record_timeline = true;
  // Run each simulation in a forked child process. SimGrid keeps global state (one engine per
  // process, the clock is never reset), so a process can run only one simulation in-process.
  bool isolate_process = true;
  // Polled every kCancelPollInterval_ms while the forked child simulates (isolate_process only):
  // when it returns true the child is killed and reaped and the run fails with "simulation
  // cancelled". The GUI's Cancel button sets it; the command line relies on Ctrl-C instead.
  std::function<bool()> cancelled;
  // When set, receives the simulation's counts (also from the forked child).
  SimgridStats* stats = nullptr;
  // With a failure, run_simgrid(_jobs) simulates the healthy iteration (every figure of the
  // result) and then the failed one, every rank simulated: the result gains `failure` and its
  // timeline becomes the failed iteration's. Needs every rank's program lowered.
  std::optional<SimgridFailure> failure;
};

// Applies one `--set simgrid.KEY=VALUE` override (KEY without the "simgrid." prefix):
// fidelity=auto|per-step|aggregated, symmetry=auto|off|dp-replica, tree=on|off,
// replica_flows=representative|all, intra_node=coarse|flows,
// per_step_max_flows=N, fat_tree_leaf_ports=N, timeline=on|off.
// The problem names the option "--set simgrid.KEY".
Problems apply_simgrid_option(SimgridOptions& options, const std::string& key, const std::string& value);

// One job of a shared cluster: its scenario (model, training, whatif ignored: the cluster's
// what-if applies), its lowered graph, and the cluster GPUs its ranks run on
// (rank i on gpus[i]; empty = GPUs 0 .. world_size-1).
struct SimgridJob {
  const Scenario* scenario = nullptr;
  const PlanGraph* graph = nullptr;
  std::vector<int64_t> gpus;
};

// Simulates one iteration of `graph` on `scenario.cluster` with `scenario.whatif` applied.
// Returns the result (backend "simgrid") or the problems with the input.
Expected<BackendResult> run_simgrid(const Scenario& scenario, const PlanGraph& graph,
                                    const SimgridOptions& options = {});

// Several jobs on one cluster at once, each on its own GPUs: their traffic shares the links.
// `cluster` and `whatif` describe the shared machine; one result per job, in order.
Expected<std::vector<BackendResult>> run_simgrid_jobs(const ClusterConfig& cluster, const WhatIf& whatif,
                                                      const std::vector<SimgridJob>& jobs,
                                                      const SimgridOptions& options = {});

}  // namespace monarch
