#include "core/graph_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace monarch {
namespace {

Task all_reduce(int32_t group, int32_t seq) {
  Task t;
  t.kind = TaskKind::kCollective;
  t.stream = Stream::kDpComm;
  t.group = group;
  t.seq = seq;
  t.bytes = 1024;
  return t;
}
Task p2p(TaskKind k, int32_t peer) {
  Task t;
  t.kind = k;
  t.stream = k == TaskKind::kSend ? Stream::kPpSend : Stream::kPpRecv;
  t.peer = peer;
  t.tag = 3;
  t.bytes = 64;
  return t;
}

// Two ranks: an all-reduce over both, then rank 0 sends to rank 1.
PlanGraph pair_graph() {
  PlanGraph g;
  g.world_size = 2;
  g.groups = {{GroupKind::kDp, {0, 1}}};
  g.ranks.resize(2);
  for (int32_t r = 0; r < 2; ++r) {
    g.ranks[static_cast<size_t>(r)].rank = r;
    g.ranks[static_cast<size_t>(r)].tasks.push_back(all_reduce(0, 0));
  }
  g.ranks[0].tasks.push_back(p2p(TaskKind::kSend, 1));
  g.ranks[1].tasks.push_back(p2p(TaskKind::kRecv, 0));
  return g;
}

std::string first(const Problems& ps) { return ps.empty() ? "no problem" : ps.front().to_string(); }

TEST(GraphCheck, AWellFormedGraphPasses) { EXPECT_TRUE(check_graph(pair_graph()).empty()) << first(check_graph(pair_graph())); }

TEST(GraphCheck, ACollectiveAMemberCallsAtAnotherSeqIsReportedOnItsGroup) {
  PlanGraph g = pair_graph();
  g.ranks[1].tasks[0].seq = 7;
  const Problems ps = check_graph(g);
  ASSERT_FALSE(ps.empty());
  EXPECT_EQ(ps.front().where, "/groups/0");
  EXPECT_NE(ps.front().message.find("first called at /ranks/0/tasks/0"), std::string::npos) << first(ps);
  EXPECT_NE(ps.front().message.find("missing ranks 1"), std::string::npos) << first(ps);
}

TEST(GraphCheck, NoRankOrAProgramShortIsReportedBeforeAnythingElse) {
  PlanGraph none;
  EXPECT_EQ(first(check_graph(none)), "/world_size: found 0, expected at least one rank");
  PlanGraph g = pair_graph();
  g.ranks.pop_back();
  EXPECT_EQ(first(check_graph(g)), "/ranks: has 1 programs, world_size is 2");
}

TEST(GraphCheck, AMessageToItselfIsNotAPeer) {
  PlanGraph g = pair_graph();
  g.ranks[0].tasks[1].peer = 0;
  EXPECT_EQ(check_graph(g).front().where, "/ranks/0/tasks/1/peer");
}

TEST(GraphCheck, NegativeSizesAndNonFiniteDurationsAreReportedWhereTheyAre) {
  PlanGraph g = pair_graph();
  g.ranks[1].tasks[0].bytes = -1;
  g.ranks[0].tasks[0].bytes = -1;
  EXPECT_EQ(check_graph(g).front().where, "/ranks/0/tasks/0/bytes");
  PlanGraph h = pair_graph();
  Task c;
  c.duration_s = std::numeric_limits<double>::quiet_NaN();
  h.ranks[1].tasks.push_back(c);
  EXPECT_EQ(first(check_graph(h)), "/ranks/1/tasks/2: duration or FLOPs negative or not finite");
}

TEST(GraphCheck, TheCompletionReplayCanBeLeftToTheCaller) {
  // Two collectives of two groups called in opposite orders on one stream: a deadlock only the
  // replay finds.
  PlanGraph g = pair_graph();
  g.groups.push_back({GroupKind::kTp, {0, 1}});
  g.ranks[0].tasks.insert(g.ranks[0].tasks.begin(), all_reduce(1, 0));
  g.ranks[1].tasks.insert(g.ranks[1].tasks.begin() + 1, all_reduce(1, 0));
  EXPECT_FALSE(check_graph(g).empty());
  EXPECT_TRUE(check_graph(g, GraphCheckOptions{.completion = false}).empty());
}

}  // namespace
}  // namespace monarch
