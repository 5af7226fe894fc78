// monarch-run end to end (mpirun): bad input exits 2 before training, a resumed run continues
// with identical losses, a crashed or hung rank ends every rank with a message naming it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "realrt/run_test_support.h"

namespace {

using namespace monarch::realrt::run_test;

TEST(MonarchRun, MalformedInputExits2WithTheReason) {
  std::filesystem::create_directories(kTmp);
  std::ofstream(kTmp + "broken.json") << "{ \"name\": \"x\", \"model\": { ";
  const Launch r = mpirun(2, kTmp + "broken.json", "broken");
  EXPECT_EQ(r.status, 2) << r.log;
  EXPECT_NE(r.log.find("broken.json"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("step 0 loss"), std::string::npos) << "trained despite bad input";
}

TEST(MonarchRun, WrongNumberOfRanksExits2BeforeTraining) {
  const Launch r = mpirun(2, kData + "tiny_gpt_tp2_pp2.json", "wrong_ranks");
  EXPECT_EQ(r.status, 2) << r.log;
  EXPECT_NE(r.log.find("needs 4 ranks"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("step 0 loss"), std::string::npos);
}

TEST(MonarchRun, UnknownOptionOrMissingCheckpointExits2) {
  Launch r = mpirun(1, "--no-such-option x.json", "bad_option");
  EXPECT_EQ(r.status, 2) << r.log;
  std::filesystem::remove_all(kTmp + "no_ckpt");
  r = mpirun(2, kData + "tiny_gpt_pp2.json --resume --checkpoint-dir " + kTmp + "no_ckpt", "no_ckpt");
  EXPECT_EQ(r.status, 2) << r.log;
  EXPECT_NE(r.log.find("no checkpoint"), std::string::npos) << r.log;
}

// ZeRO-1 (sharded Adam states) on 2 ranks: 6 steps straight, against 3 steps + checkpoint and a
// resumed run to step 6. The resumed steps' losses are the same numbers.
TEST(MonarchRun, ResumedRunContinuesWithIdenticalLosses) {
  const std::string in = kData + "tiny_gpt_dp2_zero1.json";
  const std::string ck = kTmp + "ckpt_zero1";
  std::filesystem::remove_all(ck);
  Launch a = mpirun(2, in + " --steps 6 --output " + kTmp + "straight.json", "straight");
  ASSERT_EQ(a.status, 0) << a.log;
  Launch b = mpirun(2, in + " --steps 3 --checkpoint-every 3 --checkpoint-dir " + ck + " --output " + kTmp + "first.json",
                 "first");
  ASSERT_EQ(b.status, 0) << b.log;
  Launch c = mpirun(2, in + " --steps 6 --resume --checkpoint-dir " + ck + " --output " + kTmp + "resumed.json", "resumed");
  ASSERT_EQ(c.status, 0) << c.log;
  const auto straight = losses_of(kTmp + "straight.json");
  const auto first = losses_of(kTmp + "first.json");
  const auto resumed = losses_of(kTmp + "resumed.json");
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i], straight[i]) << "step " << i;
    EXPECT_EQ(resumed[i], straight[3 + i]) << "step " << 3 + i;
  }
}

// A rank that crashes: mpirun ends the job, non-zero, and the message names the rank.
TEST(MonarchRunFaults, CrashedRankEndsEveryRankAndIsNamed) {
  const Launch r = mpirun(2, kData + "tiny_gpt_pp2.json --inject-fault crash --fault-rank 1 --fault-step 2", "crash");
  EXPECT_NE(r.status, 0) << r.log;
  EXPECT_NE(r.log.find("rank 1: crashed with signal"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("step 9 loss"), std::string::npos);
}

// A rank that hangs (sleeps for ever inside a step): with --watchdog-timeout 3 every rank exits
// non-zero within the timeout plus kWatchdogPollS plus mpirun's teardown; the watchdog names it.
TEST(MonarchRunFaults, HungRankIsNamedAndEveryRankExitsWithinTheTimeout) {
  // Step 2 of 3 is the step whose timeline is recorded: rank 0 waits for rank 1 at the barrier
  // before it, and the watchdog must still blame rank 1 only.
  const Launch r = mpirun(2, kData + "tiny_gpt_pp2.json --steps 3 --watchdog-timeout 3 --inject-fault hang --fault-rank 1 "
                                     "--fault-step 2",
                       "hang");
  EXPECT_NE(r.status, 0) << r.log;
  EXPECT_NE(r.log.find("watchdog"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("hung: rank 1 "), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("rank 0 (no progress"), std::string::npos) << r.log;
  // Start-up and two steps take a few seconds on a loaded 2-core machine; the bound is loose on
  // purpose (the test is about ending at all, not about speed), the 300 s `timeout` is the hang.
  EXPECT_LT(r.seconds, 60.0) << r.log;
}

}  // namespace
