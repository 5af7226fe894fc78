#include "core/graph_time.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

Task compute(double s, std::vector<int32_t> deps = {}) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.duration_s = s;
  t.deps = std::move(deps);
  return t;
}
Task coll(int32_t group, int32_t seq, double s, std::vector<int32_t> deps = {}) {
  Task t;
  t.kind = TaskKind::kCollective;
  t.stream = Stream::kDpComm;
  t.group = group;
  t.seq = seq;
  t.duration_s = s;
  t.bytes = 1;
  t.deps = std::move(deps);
  return t;
}
Task p2p(TaskKind k, int32_t peer, double s, std::vector<int32_t> deps = {}) {
  Task t;
  t.kind = k;
  t.stream = k == TaskKind::kSend ? Stream::kPpSend : Stream::kPpRecv;
  t.peer = peer;
  t.tag = 1;
  t.duration_s = s;
  t.deps = std::move(deps);
  return t;
}

PlanGraph two_ranks() {
  PlanGraph g;
  g.world_size = 2;
  g.ranks.resize(2);
  g.ranks[0].rank = 0;
  g.ranks[1].rank = 1;
  g.groups.push_back({GroupKind::kDp, {0, 1}});
  return g;
}

TEST(GraphTime, CollectiveStartsWhenTheLastMemberIsReady) {
  PlanGraph g = two_ranks();
  g.ranks[0].tasks = {compute(1.0), coll(0, 0, 0.5, {0}), compute(2.0)};  // compute overlaps the collective
  g.ranks[1].tasks = {compute(3.0), coll(0, 0, 0.5, {0}), compute(1.0, {1})};
  auto t = evaluate_graph_time(g);
  ASSERT_TRUE(t.ok()) << t.problems()[0].to_string();
  EXPECT_DOUBLE_EQ(t->task_start_s(0, 1), 3.0);
  EXPECT_DOUBLE_EQ(t->task_end_s(0, 1), 3.5);
  EXPECT_DOUBLE_EQ(t->task_start_s(0, 2), 1.0);  // same stream as task 0, no dependency on the collective
  EXPECT_DOUBLE_EQ(t->task_end_s(1, 2), 4.5);
  EXPECT_DOUBLE_EQ(t->makespan_s, 4.5);
  EXPECT_DOUBLE_EQ(t->rank_end_s[0], 3.5);
}

TEST(GraphTime, ReceiveCompletesWithItsEagerSend) {
  PlanGraph g = two_ranks();
  g.ranks[0].tasks = {compute(1.0), p2p(TaskKind::kSend, 1, 0.25, {0}), compute(1.0)};
  g.ranks[1].tasks = {p2p(TaskKind::kRecv, 0, 0.25), compute(1.0, {0})};
  auto t = evaluate_graph_time(g);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->task_end_s(1, 0), 1.25);
  EXPECT_DOUBLE_EQ(t->task_end_s(1, 1), 2.25);
  EXPECT_DOUBLE_EQ(t->task_end_s(0, 2), 2.0);  // the sender did not wait for the receiver
}

TEST(GraphTime, ReportsMissingSendsMembersAndCycles) {
  PlanGraph g = two_ranks();
  g.ranks[1].tasks = {p2p(TaskKind::kRecv, 0, 0.1)};
  auto t = evaluate_graph_time(g);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problems()[0].where, "/ranks/1/tasks/0");
  EXPECT_NE(t.problems()[0].message.find("no matching send"), std::string::npos);

  g = two_ranks();
  g.ranks[0].tasks = {coll(0, 0, 1.0)};
  t = evaluate_graph_time(g);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.problems()[0].message.find("never arrive"), std::string::npos);

  // Each rank receives before it sends: a cycle across ranks.
  g = two_ranks();
  g.ranks[0].tasks = {p2p(TaskKind::kRecv, 1, 0.1), p2p(TaskKind::kSend, 1, 0.1, {0})};
  g.ranks[1].tasks = {p2p(TaskKind::kRecv, 0, 0.1), p2p(TaskKind::kSend, 0, 0.1, {0})};
  t = evaluate_graph_time(g);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.problems()[0].message.find("never becomes ready"), std::string::npos);
}

}  // namespace
}  // namespace monarch
