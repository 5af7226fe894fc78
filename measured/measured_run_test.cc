#include "measured/measured_run.h"

#include <gtest/gtest.h>

#include "core/cost_model.h"

namespace monarch::measured {
namespace {

RankStats rank_stats(int32_t rank, double iteration_s, const std::string& group) {
  RankStats r;
  r.rank = rank;
  r.world_size = 4;
  r.source = "rank" + std::to_string(rank) + ".json";
  for (int i = 0; i < 2; ++i) {
    IterationStats it;
    it.step = i;
    it.iteration_s = iteration_s;
    it.compute_s = 0.5 * iteration_s;
    it.exposed_comm_s = 0.1 * iteration_s;
    it.peak_allocated_bytes = (rank + 1) * 1073741824.0;
    it.comm.push_back(CommStat{CollectiveKind::kAllReduce, group, 2, 1000, 2, 0.01});
    r.iterations.push_back(it);
  }
  return r;
}

TEST(PlanGroups, RanksMapToPlanGroups) {
  Plan p;
  p.tp = 2;
  p.dp = 2;
  EXPECT_EQ(plan_group_of({0, 1}, p), "tp");
  EXPECT_EQ(plan_group_of({1, 3}, p), "dp");
  EXPECT_EQ(plan_group_of({0, 1, 2, 3}, p), "world");
  EXPECT_EQ(plan_group_of({0, 3}, p), "");
  EXPECT_EQ(parse_rank_list("[0,1,2]"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(parse_rank_list("default_pg").empty());
}

TEST(MeasuredResult, FromTraces) {
  Plan p;
  p.tp = 2;
  p.dp = 2;
  MeasuredEvidence ev;
  ev.ranks = {rank_stats(0, 1.0, "[0,1]"), rank_stats(1, 1.2, "[0,1]"), rank_stats(2, 1.1, "[2,3]"),
              rank_stats(3, 1.0, "[2,3]")};
  auto r = measured_result(ev, p, nullptr);
  ASSERT_TRUE(r) << r.problems()[0].to_string();
  EXPECT_EQ(r->backend, "measured");
  EXPECT_TRUE(r->measured);
  EXPECT_DOUBLE_EQ(r->iteration_time_s, 1.2);  // the slowest rank
  EXPECT_NEAR(r->time_breakdown_s.compute, 0.5 * 4.3 / 4, 1e-12);
  EXPECT_DOUBLE_EQ(r->memory.peak_gib, 4.0);
  ASSERT_EQ(r->communication.size(), 1u);
  EXPECT_EQ(r->communication[0].group, GroupKind::kTp);
  // Wire bytes as the models count them: the ring all-reduce of 1000 bytes over 2 ranks.
  EXPECT_EQ(r->communication[0].bytes, static_cast<int64_t>(collective_wire_bytes(CollectiveKind::kAllReduce, 1000, 2)));
  EXPECT_EQ(r->communication[0].count, 2);
  EXPECT_NEAR(r->time_breakdown_s.tp_comm, 0.01, 1e-12);
}

TEST(MeasuredResult, WorldSizeMismatchAndDuplicateRanksAreProblems) {
  Plan p;
  p.dp = 8;
  MeasuredEvidence ev;
  ev.ranks = {rank_stats(0, 1.0, "[0,1]"), rank_stats(0, 1.0, "[0,1]")};
  auto r = measured_result(ev, p, nullptr);
  ASSERT_FALSE(r);
  bool world = false, twice = false;
  for (const Problem& pr : r.problems()) {
    world |= pr.message.find("world of 4 ranks") != std::string::npos && pr.where == "rank0.json";
    twice |= pr.message.find("second trace of rank 0") != std::string::npos;
  }
  EXPECT_TRUE(world);
  EXPECT_TRUE(twice);
}

TEST(MeasuredResult, FromALogAlone) {
  MeasuredEvidence ev;
  TrainingLog log;
  log.source = "train.log";
  for (int i = 1; i <= 3; ++i) {
    LogStep s;
    s.step = i;
    s.iteration_s = i == 1 ? 9.0 : 2.0;  // the first iteration's start-up is left out
    s.loss = 10.0 - i;
    log.steps.push_back(s);
  }
  ev.log = log;
  auto r = measured_result(ev, std::nullopt, nullptr);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->iteration_time_s, 2.0);
  EXPECT_EQ(r->losses, (std::vector<double>{9, 8, 7}));
}

}  // namespace
}  // namespace monarch::measured
