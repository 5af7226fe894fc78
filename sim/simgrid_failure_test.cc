// A failure injected during a simulated iteration (SimgridOptions::failure): the failed node's
// ranks stop at the failure, the others stall on their next dependency on them, the timeout
// fires detection_s later, and a failure after the iteration changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "sim/chrome_trace_check.h"
#include "sim/chrome_trace_io.h"
#include "sim/simgrid_backend.h"
#include "sim/simgrid_test_graphs.h"

namespace monarch {
namespace {
using namespace monarch::testing;

constexpr double kDetection_s = 10;

// pp 2 x dp 2 on 2 nodes of 2 GPUs: stage 0 (ranks 0, 1) on node 0, stage 1 (ranks 2, 3) on
// node 1; activations and gradients cross the nodes, the DP all-reduce stays inside each node.
struct Case {
  Scenario scenario = make_scenario(make_cluster(4, 2, 2));
  PlanGraph graph;
  Case() {
    StepShape sh;
    sh.pp = 2;
    sh.dp = 2;
    sh.micro_batches = 4;
    sh.pp_bytes = 32 << 20;
    sh.dp_bytes = 64 << 20;
    graph = training_graph(sh);
  }
};

BackendResult run(const Case& c, std::optional<SimgridFailure> failure) {
  SimgridOptions o;
  o.failure = std::move(failure);
  auto r = run_simgrid(c.scenario, c.graph, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.problems().front().to_string());
  return r.ok() ? *r : BackendResult{};
}

SimgridFailure failure(const std::string& component, int64_t node, double at_s) {
  return SimgridFailure{FailureInjection{component, node, at_s}, kDetection_s};
}

std::map<int32_t, RankStall> by_rank(const FailureReport& f) {
  std::map<int32_t, RankStall> m;
  for (const auto& r : f.ranks) m[r.rank] = r;
  return m;
}

bool same_span(const TimelineSpan& a, const TimelineSpan& b) {
  return a.rank == b.rank && a.stream == b.stream && a.name == b.name && a.category == b.category &&
         std::abs(a.start_s - b.start_s) < 1e-12 && std::abs(a.end_s - b.end_s) < 1e-12;
}

TEST(SimgridFailure, HostFailureStopsItsRanksAndStallsTheOthersUntilTheTimeout) {
  const Case c;
  const BackendResult healthy = run(c, std::nullopt);
  ASSERT_GT(healthy.iteration_time_s, 0);
  const double at = 0.5 * healthy.iteration_time_s;
  const BackendResult r = run(c, failure("host", 1, at));
  ASSERT_TRUE(r.failure);
  const FailureReport& f = *r.failure;
  // The result's figures stay the healthy iteration's.
  EXPECT_DOUBLE_EQ(r.iteration_time_s, healthy.iteration_time_s);
  EXPECT_TRUE(f.affected);
  EXPECT_DOUBLE_EQ(f.timeout_at_s, at + kDetection_s);
  EXPECT_DOUBLE_EQ(f.lost_s, at + kDetection_s);
  EXPECT_GT(f.lost_compute_gpu_s, 0);
  ASSERT_EQ(f.ranks.size(), 4u);
  auto ranks = by_rank(f);
  for (int32_t k : {2, 3}) {  // on the failed node
    EXPECT_EQ(ranks[k].state, "failed") << k;
    EXPECT_EQ(ranks[k].node, 1);
    EXPECT_DOUBLE_EQ(ranks[k].stalled_at_s, at);
  }
  for (int32_t k : {0, 1}) {  // stage 0 waits on stage 1: a pipeline message that never comes
    EXPECT_EQ(ranks[k].state, "stalled") << k;
    EXPECT_NE(ranks[k].blocked_in.find(" pp"), std::string::npos) << ranks[k].blocked_in;
    EXPECT_LE(ranks[k].stalled_at_s, f.timeout_at_s);
  }

  // The timeline: everything the healthy iteration finished before the failure is unchanged;
  // the failed ranks do nothing after it; each live rank shows a stall up to the timeout.
  for (const auto& h : healthy.timeline) {
    if (h.end_s > at) continue;
    bool found = false;
    for (const auto& s : r.timeline) found = found || same_span(h, s);
    EXPECT_TRUE(found) << "rank " << h.rank << " " << h.name << " at " << h.start_s;
  }
  std::map<int32_t, int> stalls, downs;
  for (const auto& s : r.timeline) {
    EXPECT_LE(s.start_s, s.end_s);
    if (s.category == "stall") {
      ++stalls[s.rank];
      EXPECT_DOUBLE_EQ(s.end_s, f.timeout_at_s);
    } else if (s.category == "failure") {
      ++downs[s.rank];
      EXPECT_DOUBLE_EQ(s.start_s, at);
      EXPECT_DOUBLE_EQ(s.end_s, f.timeout_at_s);
    } else if (s.rank >= 2) {
      EXPECT_LE(s.end_s, at + 1e-12) << s.name;
    }
  }
  EXPECT_GE(stalls[0], 1);
  EXPECT_GE(stalls[1], 1);
  EXPECT_EQ(stalls.count(2) + stalls.count(3), 0u);
  EXPECT_EQ(downs[2], 1);
  EXPECT_EQ(downs[3], 1);
  // As a Perfetto trace: the stall spans keep Perfetto's nesting rules.
  const std::string trace = chrome_trace_text(r, {"failure-test", 4});
  EXPECT_EQ(check_chrome_trace_rules(trace), "");
  EXPECT_NE(trace.find("\"cat\":\"stall\""), std::string::npos);
}

TEST(SimgridFailure, MessagesToTheFailedNodeAfterTheFailureStallTheirSenders) {
  const Case c;
  const BackendResult healthy = run(c, std::nullopt);
  // Early: stage 0 still has forward activations to send to the failed stage 1.
  const double at = 0.05 * healthy.iteration_time_s;
  const BackendResult r = run(c, failure("host", 1, at));
  ASSERT_TRUE(r.failure);
  auto ranks = by_rank(*r.failure);
  for (int32_t k : {0, 1}) {
    EXPECT_EQ(ranks[k].state, "stalled") << k;
    EXPECT_EQ(ranks[k].blocked_in, "ncclSend pp") << k;
    EXPECT_GE(ranks[k].blocked_since_s, at) << k;
  }
  for (int32_t k : {2, 3}) EXPECT_EQ(ranks[k].state, "failed") << k;
}

TEST(SimgridFailure, FailureAfterTheIterationChangesNothing) {
  const Case c;
  const BackendResult healthy = run(c, std::nullopt);
  const BackendResult r = run(c, failure("host", 1, 2 * healthy.iteration_time_s));
  ASSERT_TRUE(r.failure);
  EXPECT_FALSE(r.failure->affected);
  EXPECT_EQ(r.failure->timeout_at_s, 0);
  EXPECT_EQ(r.failure->lost_compute_gpu_s, 0);
  for (const auto& k : r.failure->ranks) EXPECT_EQ(k.state, "completed") << k.rank;
  ASSERT_EQ(r.timeline.size(), healthy.timeline.size());
  for (size_t i = 0; i < r.timeline.size(); ++i) EXPECT_TRUE(same_span(r.timeline[i], healthy.timeline[i])) << i;
}

TEST(SimgridFailure, LinkFailureKillsNoRankButStallsThemAll) {
  const Case c;
  const BackendResult healthy = run(c, std::nullopt);
  const double at = 0.25 * healthy.iteration_time_s;
  const BackendResult r = run(c, failure("link", 1, at));
  ASSERT_TRUE(r.failure);
  const FailureReport& f = *r.failure;
  EXPECT_TRUE(f.affected);
  EXPECT_DOUBLE_EQ(f.timeout_at_s, at + kDetection_s);
  // The GPUs live on, but every pipeline message between the nodes fails: both stages stall
  // in pipeline sends or receives; none is marked failed.
  for (const auto& k : f.ranks) {
    EXPECT_EQ(k.state, "stalled") << k.rank;
    EXPECT_NE(k.blocked_in.find(" pp"), std::string::npos) << k.rank << " " << k.blocked_in;
  }
  for (const auto& s : r.timeline) EXPECT_NE(s.category, "failure");
}

TEST(SimgridFailure, ZeroTimeoutEndsTheSimulationAtTheFailure) {
  const Case c;
  const BackendResult healthy = run(c, std::nullopt);
  const double at = 0.5 * healthy.iteration_time_s;
  SimgridFailure fl = failure("host", 0, at);
  fl.detection_s = 0;
  const BackendResult r = run(c, fl);
  ASSERT_TRUE(r.failure);
  EXPECT_DOUBLE_EQ(r.failure->timeout_at_s, at);
  for (const auto& s : r.timeline) EXPECT_LE(s.end_s, at + 1e-12);
}

TEST(SimgridFailure, BadInjectionIsAProblem) {
  const Case c;
  SimgridOptions o;
  o.failure = failure("host", 5, 0.1);
  auto r = run_simgrid(c.scenario, c.graph, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems().front().where, "/reliability/inject_failure/node");
  o.failure = failure("switch", 0, 0.1);
  r = run_simgrid(c.scenario, c.graph, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems().front().where, "/reliability/inject_failure/component");
}

}  // namespace
}  // namespace monarch
