#include "measured/nccl_tests_io.h"

#include <gtest/gtest.h>

#include "core/profile_io.h"

namespace monarch::measured {
namespace {

// The layout all_reduce_perf prints (nccl-tests src/util.cu), 2 ranks.
constexpr const char* kText =
    "# Collective test starting: all_reduce_perf\n"
    "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  12001 on     node1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
    "#  Rank  1 Group  0 Pid  12002 on     node1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n"
    "#\n"
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
    "     1048576        262144     float     sum      -1    20.00   52.43   52.43      0    19.80   52.96   52.96      0\n"
    "     2097152        524288     float     sum      -1    32.00   65.54   65.54      0    31.90   65.74   65.74      0\n"
    "     4194304       1048576     float     sum      -1    56.00   74.90   74.90      0    55.00   76.26   76.26      0\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 64.29\n";

TEST(NcclTests, TextTable) {
  ASSERT_TRUE(looks_like_nccl_tests(kText));
  auto r = parse_nccl_tests(kText, "ar.txt");
  ASSERT_TRUE(r) << r.problems()[0].to_string();
  EXPECT_EQ(r->kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(r->ranks, 2);
  EXPECT_EQ(r->device_name, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->samples[0].bytes, 1048576);
  EXPECT_DOUBLE_EQ(r->samples[0].time_us, 20.0);
  EXPECT_NEAR(r->samples[0].algbw_GBps, 52.43, 0.01);
  // all-reduce bus factor 2 (n - 1) / n = 1 for 2 ranks
  EXPECT_NEAR(r->samples[2].busbw_GBps, 74.90, 0.01);
}

TEST(NcclTests, JsonOutput) {
  const std::string j = R"({"version": 1, "args": ["/opt/nccl-tests/build/all_gather_perf", "-b", "1M"],
    "nccl_version": 22703,
    "config": {"nthreads": 1, "ngpus": 1, "devices": [{"rank": 0, "device_info": "NVIDIA H200"}, {"rank": 1},
      {"rank": 2}, {"rank": 3}]},
    "results": [{"size": 1048576, "count": 65536, "type": "bfloat16", "redop": "none", "root": "-1",
      "out_of_place": {"time": 40.0, "alg_bw": 26.21, "bus_bw": 19.66, "nwrong": 0},
      "in_place": {"time": 39.0, "alg_bw": 26.9, "bus_bw": 20.1, "nwrong": 0}}]})";
  auto r = parse_nccl_tests(j, "ag.json");
  ASSERT_TRUE(r) << r.problems()[0].to_string();
  EXPECT_EQ(r->kind, CollectiveKind::kAllGather);
  EXPECT_EQ(r->ranks, 4);
  ASSERT_EQ(r->samples.size(), 1u);
  EXPECT_EQ(r->samples[0].dtype, DType::kBf16);
  EXPECT_NEAR(r->samples[0].busbw_GBps, 26.2144 * 3 / 4, 1e-3);
}

TEST(NcclTests, MergedSamplesMakeAValidProfile) {
  auto r = parse_nccl_tests(kText, "ar.txt");
  ASSERT_TRUE(r);
  CalibrationProfile p;
  p.device_kind = DeviceKind::kGpu;
  p.device_name = r->device_name;
  p.device_count = r->ranks;
  p.collectives.push_back(make_collective_sample(CollectiveKind::kAllReduce, 2, 1048576, DType::kFp32, 999));
  p.collectives.push_back(make_collective_sample(CollectiveKind::kAllGather, 2, 1048576, DType::kFp32, 10));
  merge_collectives(p, *r);
  ASSERT_EQ(p.collectives.size(), 4u);  // the old all-reduce replaced, the all-gather kept
  for (const auto& s : p.collectives)
    if (s.kind == CollectiveKind::kAllReduce) EXPECT_LT(s.time_us, 100);
  auto back = profile_from_json(profile_to_json(p));
  EXPECT_TRUE(back) << back.problems()[0].to_string();
  EXPECT_NEAR(profile_busbw_GBps(*back, CollectiveKind::kAllReduce, 2, 2097152), 65.54, 0.01);
}

TEST(NcclTests, UnknownCollectiveAndNoRowsAreProblems) {
  std::string no_name = kText;
  no_name.erase(0, no_name.find('\n') + 1);
  auto a = parse_nccl_tests(no_name, "results.txt");
  ASSERT_FALSE(a);
  EXPECT_NE(a.problems()[0].message.find("which collective"), std::string::npos);
  EXPECT_TRUE(parse_nccl_tests(no_name, "all_reduce_perf.log"));  // the file name tells it
  std::string header_only = std::string(kText).substr(0, std::string(kText).find("     1048576"));
  auto b = parse_nccl_tests(header_only, "ar.txt");
  ASSERT_FALSE(b);
  EXPECT_NE(b.problems()[0].message.find("no size row"), std::string::npos);
}

}  // namespace
}  // namespace monarch::measured
