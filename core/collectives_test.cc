#include "core/collectives.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {

TEST(Collectives, NamedKindsGiveTheFactorOfTheirKind) {
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllToAll, CollectiveKind::kBroadcast}) {
    ASSERT_EQ(collective_kind_from_string(to_string(k)), k);
    EXPECT_EQ(collective_bus_factor(to_string(k), 8), collective_bus_factor(k, 8.0)) << to_string(k);
  }
  EXPECT_FALSE(collective_kind_from_string("gossip").has_value());
  EXPECT_DOUBLE_EQ(collective_bus_factor("send-recv", 2), 1.0);  // point-to-point moves the buffer once
  EXPECT_DOUBLE_EQ(collective_bus_factor("gossip", 8), 0.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor("all-reduce", 0), 0.0);
}

}  // namespace
}  // namespace monarch
