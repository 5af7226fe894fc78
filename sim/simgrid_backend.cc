// Public entry points of the SimGrid backend: input checks, options, and the forked child that
// runs the simulation (SimGrid allows one engine per process).
#include "sim/simgrid_backend.h"

#include "core/graph_check.h"
#include "core/graph_replica.h"
#include "core/plan_warnings.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "sim/simgrid_engine.h"
#include "sim/simgrid_wire_io.h"

namespace monarch {
namespace {

using Results = Expected<std::vector<BackendResult>>;

void check_cluster(const ClusterConfig& c, Problems& ps) {
  auto need = [&](bool ok, const char* where, const std::string& what) {
    if (!ok) ps.push_back({where, what});
  };
  need(c.num_gpus > 0, "/cluster/num_gpus", "found " + std::to_string(c.num_gpus) + ", expected a positive integer");
  need(c.gpus_per_node > 0, "/cluster/gpus_per_node",
       "found " + std::to_string(c.gpus_per_node) + ", expected a positive integer");
  need(c.nics_per_node > 0, "/cluster/inter_node/nics_per_node",
       "found " + std::to_string(c.nics_per_node) + ", expected a positive integer");
  need(c.intra_node.bandwidth_GBps > 0 && std::isfinite(c.intra_node.bandwidth_GBps), "/cluster/intra_node/bandwidth_GBps",
       "expected a positive number");
  need(c.inter_node.bandwidth_GBps > 0 && std::isfinite(c.inter_node.bandwidth_GBps), "/cluster/inter_node/bandwidth_GBps",
       "expected a positive number");
  need(c.intra_node.latency_us >= 0 && std::isfinite(c.intra_node.latency_us), "/cluster/intra_node/latency_us",
       "expected a number >= 0");
  need(c.inter_node.latency_us >= 0 && std::isfinite(c.inter_node.latency_us), "/cluster/inter_node/latency_us",
       "expected a number >= 0");
  need(c.oversubscription >= 1 && std::isfinite(c.oversubscription), "/cluster/inter_node/oversubscription",
       "expected a number >= 1");
}

void check_whatif(const ClusterConfig& c, const WhatIf& w, Problems& ps) {
  for (size_t i = 0; i < w.stragglers.size(); ++i) {
    const auto& s = w.stragglers[i];
    const std::string at = "/whatif/stragglers/" + std::to_string(i);
    if ((s.gpu < 0) == (s.node < 0)) ps.push_back({at, "expected exactly one of \"gpu\" and \"node\""});
    if (s.gpu >= c.num_gpus) ps.push_back({at + "/gpu", "GPU " + std::to_string(s.gpu) + " is not in the cluster (" + std::to_string(c.num_gpus) + " GPUs)"});
    if (s.node >= c.num_nodes()) ps.push_back({at + "/node", "node " + std::to_string(s.node) + " is not in the cluster (" + std::to_string(c.num_nodes()) + " nodes)"});
    if (!(s.slowdown > 0) || !std::isfinite(s.slowdown)) ps.push_back({at + "/slowdown", "expected a positive number"});
  }
  for (size_t i = 0; i < w.degraded_links.size(); ++i) {
    const auto& d = w.degraded_links[i];
    const std::string at = "/whatif/degraded_links/" + std::to_string(i);
    if (d.node < 0 || d.node >= c.num_nodes())
      ps.push_back({at + "/node", "node " + std::to_string(d.node) + " is not in the cluster (" + std::to_string(c.num_nodes()) + " nodes)"});
    if (!(d.bandwidth_factor > 0) || !std::isfinite(d.bandwidth_factor))
      ps.push_back({at + "/bandwidth_factor", "expected a positive number"});
  }
}

// The injected failure names a node of the cluster, and its run needs every rank's program.
void check_failure(const ClusterConfig& c, const std::vector<SimgridJob>& jobs, const SimgridFailure& f, Problems& ps) {
  const std::string at = "/reliability/inject_failure";
  const FailureInjection& in = f.injection;
  if (in.component != "host" && in.component != "link")
    ps.push_back({at + "/component", "found \"" + in.component + "\", expected \"host\" or \"link\""});
  if (in.node < 0 || in.node >= c.num_nodes())
    ps.push_back({at + "/node", "node " + std::to_string(in.node) + " is not in the cluster (" + std::to_string(c.num_nodes()) + " nodes)"});
  if (!(in.at_s >= 0) || !std::isfinite(in.at_s)) ps.push_back({at + "/at_s", "expected a finite number >= 0"});
  if (!(f.detection_s >= 0) || !std::isfinite(f.detection_s)) ps.push_back({"/reliability/detection_s", "expected a finite number >= 0"});
  for (const SimgridJob& j : jobs)
    if (j.graph && !lowered_replica(*j.graph).empty())
      ps.push_back({at, "the failed iteration simulates every rank; the graph was lowered for one data-parallel replica"});
}

// How often the parent asks options.cancelled while the child simulates: short enough that
// Cancel feels immediate in the GUI, long enough to cost nothing.
constexpr int kCancelPollInterval_ms = 100;

Results run_child(const ClusterConfig& cluster, const WhatIf& whatif, const std::vector<SimgridJob>& jobs,
                  const SimgridOptions& options) {
  if (!options.isolate_process) return simgrid_backend::simulate(cluster, whatif, jobs, options);
  int fds[2];
  if (pipe(fds) != 0) return Results::fail("simgrid", std::string("cannot create a pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Results::fail("simgrid", std::string("cannot fork the simulation process: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    // Ctrl-C ends the simulation whatever handler the caller installed; the caller then gets
    // a problem saying it was interrupted.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    std::string text;
    try {
      SimgridStats stats;
      SimgridOptions child = options;
      child.stats = &stats;
      auto results = simgrid_backend::simulate(cluster, whatif, jobs, child);
      text = simgrid_backend::encode_results(results, stats);
    } catch (const std::exception& e) {
      text = simgrid_backend::encode_results(Results::fail("simgrid", std::string("simulation failed: ") + e.what()));
    }
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(1);
      p += n;
      left -= static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[1 << 16];
  bool cancelled = false;
  for (;;) {
    if (options.cancelled) {
      // Wait for output at most one poll interval, then ask whether the caller gave up.
      pollfd pfd{fds[0], POLLIN, 0};
      const int ready = poll(&pfd, 1, kCancelPollInterval_ms);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) {
        if (options.cancelled()) {
          cancelled = true;
          kill(pid, SIGKILL);
          break;
        }
        continue;
      }
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (cancelled) return Results::fail("simgrid", "simulation cancelled");
  if (WIFSIGNALED(status))
    return Results::fail("simgrid", "the simulation process was killed by signal " + std::to_string(WTERMSIG(status)) +
                                        (WTERMSIG(status) == SIGINT ? " (interrupted)" : ""));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty())
    return Results::fail("simgrid", "the simulation process failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
  return simgrid_backend::decode_results(text, options.stats);
}

}  // namespace

Problems apply_simgrid_option(SimgridOptions& o, const std::string& key, const std::string& value) {
  const std::string where = "--set simgrid." + key;
  auto on_off = [&](bool& field) -> Problems {
    if (value == "on" || value == "true" || value == "1") field = true;
    else if (value == "off" || value == "false" || value == "0") field = false;
    else return {{where, "found \"" + value + "\", expected on or off"}};
    return {};
  };
  auto positive = [&](int64_t& field) -> Problems {
    try {
      size_t used = 0;
      const long long v = std::stoll(value, &used);
      if (used == value.size() && v > 0) {
        field = v;
        return {};
      }
    } catch (const std::exception&) {
    }
    return {{where, "found \"" + value + "\", expected a positive integer"}};
  };
  if (key == "fidelity") {
    if (value == "auto") o.fidelity = SimgridFidelity::kAuto;
    else if (value == "per-step") o.fidelity = SimgridFidelity::kPerStep;
    else if (value == "aggregated") o.fidelity = SimgridFidelity::kAggregated;
    else return {{where, "found \"" + value + "\", expected auto, per-step or aggregated"}};
    return {};
  }
  if (key == "symmetry") {
    if (value == "auto") o.symmetry = SimgridSymmetry::kAuto;
    else if (value == "off") o.symmetry = SimgridSymmetry::kOff;
    else if (value == "dp-replica") o.symmetry = SimgridSymmetry::kDpReplica;
    else return {{where, "found \"" + value + "\", expected auto, off or dp-replica"}};
    return {};
  }
  if (key == "replica_flows") {
    if (value == "representative") o.replica_flows = SimgridReplicaFlows::kRepresentative;
    else if (value == "all") o.replica_flows = SimgridReplicaFlows::kAll;
    else return {{where, "found \"" + value + "\", expected representative or all"}};
    return {};
  }
  if (key == "intra_node") {
    if (value == "coarse") o.intra_node = SimgridIntraNode::kCoarse;
    else if (value == "flows") o.intra_node = SimgridIntraNode::kFlows;
    else return {{where, "found \"" + value + "\", expected coarse or flows"}};
    return {};
  }
  if (key == "tree") return on_off(o.allow_tree);
  if (key == "timeline") return on_off(o.record_timeline);
  if (key == "per_step_max_flows") return positive(o.per_step_max_flows);
  if (key == "fat_tree_leaf_ports") return positive(o.fat_tree_leaf_ports);
  return {{where, "unknown SimGrid option; known: fidelity, symmetry, replica_flows, intra_node, tree, timeline, "
                  "per_step_max_flows, fat_tree_leaf_ports"}};
}

Expected<std::vector<BackendResult>> run_simgrid_jobs(const ClusterConfig& cluster, const WhatIf& whatif,
                                                      const std::vector<SimgridJob>& jobs,
                                                      const SimgridOptions& options) {
  Problems ps;
  check_cluster(cluster, ps);
  if (!ps.empty()) return ps;
  check_whatif(cluster, whatif, ps);
  if (jobs.empty()) ps.push_back({"jobs", "no job to simulate"});
  if (jobs.size() > 200) ps.push_back({"jobs", "at most 200 jobs share one simulation"});
  std::vector<char> used(static_cast<size_t>(cluster.num_gpus), 0);
  for (size_t j = 0; j < jobs.size() && ps.empty(); ++j) {
    const std::string at = jobs.size() == 1 ? "plan" : "jobs/" + std::to_string(j);
    if (!jobs[j].scenario || !jobs[j].graph) {
      ps.push_back({at, "missing scenario or plan graph"});
      continue;
    }
    const PlanGraph& g = *jobs[j].graph;
    // The structural checks only: the simulation itself reports a graph that cannot complete
    // (a deadlock), so the replay of every rank is not paid twice.
    for (Problem& p : check_graph(g, GraphCheckOptions{.completion = false})) ps.push_back({at + p.where, std::move(p.message)});
    if (!ps.empty()) break;
    if (jobs[j].gpus.empty()) {
      if (g.world_size > cluster.num_gpus)
        ps.push_back({at + "/world_size", "the plan needs " + std::to_string(g.world_size) + " GPUs, the cluster has " +
                                              std::to_string(cluster.num_gpus)});
    } else if (static_cast<int64_t>(jobs[j].gpus.size()) != g.world_size) {
      ps.push_back({at + "/gpus", "lists " + std::to_string(jobs[j].gpus.size()) + " GPUs for " +
                                      std::to_string(g.world_size) + " ranks"});
    }
    if (!ps.empty()) break;
    for (int64_t r = 0; r < g.world_size; ++r) {
      const int64_t gpu = jobs[j].gpus.empty() ? r : jobs[j].gpus[static_cast<size_t>(r)];
      if (gpu < 0 || gpu >= cluster.num_gpus) {
        ps.push_back({at + "/gpus/" + std::to_string(r), "GPU " + std::to_string(gpu) + " is not in the cluster"});
        break;
      }
      if (used[static_cast<size_t>(gpu)]++) {
        ps.push_back({at + "/gpus/" + std::to_string(r), "GPU " + std::to_string(gpu) + " is already used by another rank or job"});
        break;
      }
    }
  }
  if (options.failure) check_failure(cluster, jobs, *options.failure, ps);
  if (options.failure && !options.isolate_process)  // SimGrid runs one engine per process
    ps.push_back({"/reliability/inject_failure", "the failed iteration is a second simulation: it needs isolate_process"});
  if (!ps.empty()) return ps;
  SimgridOptions healthy = options;
  healthy.failure.reset();
  auto results = run_child(cluster, whatif, jobs, healthy);
  if (!results || results->size() != jobs.size()) return results;
  for (size_t i = 0; i < jobs.size(); ++i) (*results)[i].warnings = plan_warnings(*jobs[i].scenario, (*results)[i].plan);
  if (!options.failure) return results;
  // The failed iteration: every rank simulated (the failure breaks the replicas' symmetry).
  SimgridOptions failing = options;
  failing.symmetry = SimgridSymmetry::kOff;
  failing.stats = nullptr;
  auto failed = run_child(cluster, whatif, jobs, failing);
  if (!failed) return failed.problems();
  for (size_t i = 0; i < jobs.size() && i < failed->size(); ++i) {
    BackendResult& r = (*results)[i];
    r.failure = std::move((*failed)[i].failure);
    r.timeline = std::move((*failed)[i].timeline);
    r.memory_timeline = std::move((*failed)[i].memory_timeline);
  }
  return results;
}

Expected<BackendResult> run_simgrid(const Scenario& scenario, const PlanGraph& graph, const SimgridOptions& options) {
  auto r = run_simgrid_jobs(scenario.cluster, scenario.whatif, {SimgridJob{&scenario, &graph, {}}}, options);
  if (!r) return r.problems();
  return std::move(r->front());
}

}  // namespace monarch
