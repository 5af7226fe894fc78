#include "sim/simgrid_backend.h"

#include <gtest/gtest.h>

#include "sim/simgrid_test_graphs.h"

namespace monarch {
namespace {
using namespace monarch::testing;

TEST(SimgridBackend, Smoke) {
  auto sc = make_scenario(make_cluster(8, 8, 8));
  auto g = collective_graph(8, {0, 1, 2, 3, 4, 5, 6, 7}, CollectiveKind::kAllReduce, 64 << 20, 1, GroupKind::kTp);
  auto r = run_simgrid(sc, g);
  ASSERT_TRUE(r.ok()) << r.problems().front().to_string();
  EXPECT_GT(r->iteration_time_s, 0);
}

}  // namespace
}  // namespace monarch
