#include "core/collectives.h"

#include "core/result.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

TEST(Collectives, NamedKindsGiveTheFactorOfTheirKind) {
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kSendRecv})
    EXPECT_EQ(collective_kind_from_string(to_string(k)), k) << to_string(k);
  EXPECT_FALSE(collective_kind_from_string("gossip").has_value());
  EXPECT_FALSE(collective_kind_from_string("").has_value());
}

TEST(Collectives, BusFactorsAreThoseOfNcclTests) {
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllReduce, 8), 2.0 * 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllGather, 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kReduceScatter, 4), 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kSendRecv, 2), 1.0);  // the buffer moves once
}

TEST(Collectives, GroupNamesRoundTrip) {
  for (GroupKind k : {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp, GroupKind::kDp, GroupKind::kPp, GroupKind::kExpertDp,
                      GroupKind::kWorld, GroupKind::kDpCp, GroupKind::kEmbedding, GroupKind::kExpertTp})
    EXPECT_EQ(group_kind_from_string(to_string(k)), k) << to_string(k);
  EXPECT_FALSE(group_kind_from_string("[0, 1]").has_value());
  EXPECT_FALSE(group_kind_from_string("TP").has_value());
}

TEST(CommEntries, GroupSizeFromTheEntryElseFromThePlan) {
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 16;
  p.cp = 2;
  p.ep = 4;
  auto size = [&](std::optional<GroupKind> g, int64_t given = 0) {
    CommEntry e{CollectiveKind::kAllReduce, g};
    e.group_size = given;
    return comm_group_size(e, p);
  };
  EXPECT_EQ(size(GroupKind::kTp), 8);
  EXPECT_EQ(size(GroupKind::kDp), 16);
  EXPECT_EQ(size(GroupKind::kPp), 4);
  EXPECT_EQ(size(GroupKind::kDpCp), 32);
  EXPECT_EQ(size(GroupKind::kExpertDp), 8 * 16 * 2 / (8 * 4));
  EXPECT_EQ(size(GroupKind::kWorld), 8 * 4 * 16 * 2);
  EXPECT_EQ(size(GroupKind::kEmbedding), 2);  // first and last stage share the tied embedding
  EXPECT_EQ(size(GroupKind::kExpertTp), 8);   // expert TP = TP when not set
  EXPECT_EQ(size(GroupKind::kTp, 3), 3);      // what the entry says wins
  EXPECT_EQ(size(std::nullopt), 0);           // a measured group the plan does not have
  p.etp = 2;
  EXPECT_EQ(size(GroupKind::kExpertTp), 2);
}

TEST(CommEntries, NamesAndKeys) {
  CommEntry a{CollectiveKind::kAllGather, GroupKind::kDpCp};
  CommEntry b{CollectiveKind::kAllGather, std::nullopt};
  b.group_label = "[0, 4]";
  CommEntry c = b;
  c.group_label = "[1, 5]";
  EXPECT_EQ(group_name(a), "dp-cp");
  EXPECT_EQ(group_name(b), "[0, 4]");
  EXPECT_TRUE(same_key(a, a));
  EXPECT_FALSE(same_key(a, b));
  EXPECT_FALSE(same_key(b, c));
  CommEntry d = a;
  d.kind = CollectiveKind::kReduceScatter;
  EXPECT_FALSE(same_key(a, d));
}

TEST(CommEntries, FindByKindAndPlanGroup) {
  std::vector<CommEntry> v = {{CollectiveKind::kAllReduce, GroupKind::kTp, 10},
                              {CollectiveKind::kAllGather, GroupKind::kDp, 20},
                              {CollectiveKind::kAllGather, std::nullopt, 30, 0, 0, 0, "dp"}};
  ASSERT_NE(find_comm(v, CollectiveKind::kAllGather, GroupKind::kDp), nullptr);
  EXPECT_EQ(find_comm(v, CollectiveKind::kAllGather, GroupKind::kDp)->bytes, 20);
  EXPECT_EQ(find_comm(v, CollectiveKind::kAllReduce, GroupKind::kDp), nullptr);
}

TEST(CommEntries, EachGroupCountsInOneTimeTerm) {
  EXPECT_EQ(comm_time_term(GroupKind::kTp), &TimeBreakdown::tp_comm);
  EXPECT_EQ(comm_time_term(GroupKind::kCp), &TimeBreakdown::cp_comm);
  EXPECT_EQ(comm_time_term(GroupKind::kPp), &TimeBreakdown::pp_comm);
  for (GroupKind g : {GroupKind::kEp, GroupKind::kExpertTp, GroupKind::kWorld})
    EXPECT_EQ(comm_time_term(g), &TimeBreakdown::ep_comm) << to_string(g);
  for (GroupKind g : {GroupKind::kDp, GroupKind::kDpCp, GroupKind::kExpertDp, GroupKind::kEmbedding})
    EXPECT_EQ(comm_time_term(g), &TimeBreakdown::dp_comm) << to_string(g);
}

}  // namespace
}  // namespace monarch
