#include "core/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/profile_io.h"

namespace monarch {
namespace {

MatmulSample mm(MatmulPrecision p, int64_t m, int64_t n, int64_t k, double tflops) {
  MatmulSample s;
  s.precision = p;
  s.m = m;
  s.n = n;
  s.k = k;
  s.tflops = tflops;
  s.time_us = 2.0 * m * n * k / (tflops * 1e12) * 1e6;
  return s;
}

CollectiveSample coll(CollectiveKind kind, int ranks, int64_t bytes, double time_us) {
  CollectiveSample s;
  s.kind = kind;
  s.ranks = ranks;
  s.bytes = bytes;
  s.time_us = time_us;
  s.algbw_GBps = double(bytes) / (time_us * 1e-6) / 1e9;
  s.busbw_GBps = s.algbw_GBps * collective_bus_factor(kind, ranks);
  return s;
}

// A 2x2x2 grid whose throughput grows with log2(m) only: 10 at m=256, 20 at m=1024.
CalibrationProfile grid_profile() {
  CalibrationProfile p;
  p.device_name = "test";
  for (int64_t m : {256, 1024}) {
    for (int64_t n : {256, 1024}) {
      for (int64_t k : {256, 1024}) p.matmul.push_back(mm(MatmulPrecision::kFp32, m, n, k, m == 256 ? 10 : 20));
    }
  }
  return p;
}

TEST(BusFactor, FollowsNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather/reduce-scatter (n-1)/n.
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(collective_bus_factor(CollectiveKind::kAllReduce, 1), 0.0);
}

TEST(BusFactor, SamplesDeriveAlgbwAndBusbwFromTheTime) {
  // 8 ranks all-reduce 1e9 bytes in 10 ms: algbw 100 GB/s, busbw 175 GB/s.
  const CollectiveSample s = make_collective_sample(CollectiveKind::kAllReduce, 8, 1'000'000'000, DType::kFp32, 10'000);
  EXPECT_DOUBLE_EQ(s.algbw_GBps, 100);
  EXPECT_DOUBLE_EQ(s.busbw_GBps, 175);
  const CollectiveSample g = make_collective_sample(CollectiveKind::kAllGather, 4, 4'000'000, DType::kFp32, 100);
  EXPECT_DOUBLE_EQ(g.algbw_GBps, 40);
  EXPECT_DOUBLE_EQ(g.busbw_GBps, 30);
  // 2 x 1024^3 flops in 1 ms = 2.147 TFLOP/s.
  const MatmulSample m = make_matmul_sample(MatmulPrecision::kBf16, 1024, 1024, 1024, 1000);
  EXPECT_NEAR(m.tflops, 2.147483648, 1e-12);
}

TEST(ProfileMatmul, ExactGridPointsAreReturnedAsMeasured) {
  const CalibrationProfile p = grid_profile();
  EXPECT_DOUBLE_EQ(profile_matmul_tflops(p, MatmulPrecision::kFp32, 256, 1024, 256), 10);
  EXPECT_DOUBLE_EQ(profile_matmul_tflops(p, MatmulPrecision::kFp32, 1024, 256, 1024), 20);
}

TEST(ProfileMatmul, InterpolatesInLogSpaceAndClampsOutside) {
  const CalibrationProfile p = grid_profile();
  // m = 512 is halfway between 256 and 1024 in log2.
  EXPECT_NEAR(profile_matmul_tflops(p, MatmulPrecision::kFp32, 512, 300, 700), 15, 1e-9);
  EXPECT_NEAR(profile_matmul_tflops(p, MatmulPrecision::kFp32, 362, 300, 700),
              10 + 10 * (std::log2(362.0) - 8) / 2, 1e-9);
  EXPECT_DOUBLE_EQ(profile_matmul_tflops(p, MatmulPrecision::kFp32, 8192, 8192, 8192), 20);
  EXPECT_DOUBLE_EQ(profile_matmul_tflops(p, MatmulPrecision::kFp32, 16, 16, 16), 10);
}

TEST(ProfileMatmul, NoDataGivesZero) {
  const CalibrationProfile p = grid_profile();
  EXPECT_LE(profile_matmul_tflops(p, MatmulPrecision::kBf16, 512, 512, 512), 0);
  EXPECT_LE(profile_matmul_tflops(p, Precision::kBf16, 512, 512, 512), 0);
  EXPECT_LE(profile_matmul_tflops(CalibrationProfile{}, Precision::kFp32, 512, 512, 512), 0);
}

TEST(ProfileMatmul, Fp32TrainingPrefersTf32Samples) {
  CalibrationProfile p = grid_profile();
  EXPECT_NEAR(profile_matmul_tflops(p, Precision::kFp32, 512, 512, 512), 15, 1e-9);
  p.matmul.push_back(mm(MatmulPrecision::kTf32, 512, 512, 512, 100));
  EXPECT_DOUBLE_EQ(profile_matmul_tflops(p, Precision::kFp32, 512, 512, 512), 100);
}

TEST(ProfileMatmul, SparseGridFallsBackToDistanceWeighting) {
  CalibrationProfile p;
  p.matmul.push_back(mm(MatmulPrecision::kBf16, 1024, 1024, 1024, 100));
  p.matmul.push_back(mm(MatmulPrecision::kBf16, 4096, 4096, 4096, 300));
  // (2048,2048,2048) is equally far from both in log2 space.
  EXPECT_NEAR(profile_matmul_tflops(p, MatmulPrecision::kBf16, 2048, 2048, 2048), 200, 1e-9);
  const double near_small = profile_matmul_tflops(p, MatmulPrecision::kBf16, 1200, 1200, 1200);
  EXPECT_GT(near_small, 100);
  EXPECT_LT(near_small, 200);
}

TEST(ProfileBusbw, InterpolatesOverSizesAndKeepsLatencyBelow) {
  CalibrationProfile p;
  // 2 ranks, all-reduce: busbw = algbw. 1 MB in 100 us = 10 GB/s; 4 MB in 200 us = 20 GB/s.
  p.collectives.push_back(coll(CollectiveKind::kAllReduce, 2, 1'000'000, 100));
  p.collectives.push_back(coll(CollectiveKind::kAllReduce, 2, 4'000'000, 200));
  EXPECT_NEAR(profile_busbw_GBps(p, CollectiveKind::kAllReduce, 2, 1'000'000), 10, 1e-9);
  EXPECT_NEAR(profile_busbw_GBps(p, CollectiveKind::kAllReduce, 2, 2'000'000), 15, 1e-9);
  EXPECT_NEAR(profile_busbw_GBps(p, CollectiveKind::kAllReduce, 2, 64'000'000), 20, 1e-9);
  // Below the smallest size the time stays at the smallest size's 100 us.
  EXPECT_NEAR(profile_collective_time_s(p, CollectiveKind::kAllReduce, 2, 1000), 100e-6, 1e-12);
  EXPECT_NEAR(profile_collective_time_s(p, CollectiveKind::kAllReduce, 2, 4'000'000), 200e-6, 1e-12);
  EXPECT_LE(profile_busbw_GBps(p, CollectiveKind::kAllGather, 2, 1'000'000), 0);
}

TEST(ProfileBusbw, UsesTheClosestMeasuredRankCount) {
  CalibrationProfile p;
  p.collectives.push_back(coll(CollectiveKind::kAllGather, 2, 1 << 20, 100));
  p.collectives.push_back(coll(CollectiveKind::kAllGather, 8, 1 << 20, 50));
  const double bw8 = p.collectives[1].busbw_GBps;
  EXPECT_DOUBLE_EQ(profile_busbw_GBps(p, CollectiveKind::kAllGather, 16, 1 << 20), bw8);
  EXPECT_DOUBLE_EQ(profile_busbw_GBps(p, CollectiveKind::kAllGather, 2, 1 << 20), p.collectives[0].busbw_GBps);
  // Time for 8 ranks: bytes x 7/8 / busbw = the measured 50 us.
  EXPECT_NEAR(profile_collective_time_s(p, CollectiveKind::kAllGather, 8, 1 << 20), 50e-6, 1e-12);
}

CalibrationProfile full_profile() {
  CalibrationProfile p = grid_profile();
  p.device_kind = DeviceKind::kGpu;
  p.device_name = "NVIDIA H200";
  p.device_count = 8;
  p.host = "node1";
  p.created_utc = "2026-11-29T18:00:00Z";
  p.tool = "monarch-calibrate 0.1.0";
  p.notes = "cuBLAS 13";
  p.quick = true;
  p.memory_bandwidth_GBps = 4000.5;
  p.memory_method = "copy-kernel";
  p.memory_bytes = 1 << 30;
  p.collectives.push_back(coll(CollectiveKind::kReduceScatter, 8, 1 << 26, 400));
  return p;
}

TEST(ProfileIo, RoundTrips) {
  const CalibrationProfile p = full_profile();
  auto back = profile_from_json(profile_to_json(p));
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(back->device_kind, DeviceKind::kGpu);
  EXPECT_EQ(back->device_name, "NVIDIA H200");
  EXPECT_EQ(back->device_count, 8);
  EXPECT_TRUE(back->quick);
  EXPECT_DOUBLE_EQ(back->memory_bandwidth_GBps, 4000.5);
  ASSERT_EQ(back->matmul.size(), p.matmul.size());
  EXPECT_DOUBLE_EQ(back->matmul[3].tflops, p.matmul[3].tflops);
  ASSERT_EQ(back->collectives.size(), 1u);
  EXPECT_EQ(back->collectives[0].kind, CollectiveKind::kReduceScatter);
  EXPECT_DOUBLE_EQ(back->collectives[0].busbw_GBps, p.collectives[0].busbw_GBps);
  EXPECT_EQ(profile_to_json(*back), profile_to_json(p));
}

std::string first_problem(const std::string& text) {
  auto r = profile_from_json(text);
  if (r.ok()) return "(accepted)";
  return r.problems()[0].to_string();
}

TEST(ProfileIo, ErrorsNameTheJsonPath) {
  EXPECT_NE(first_problem("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(first_problem(R"({"format":"monarch-plan/1","device":{"kind":"cpu","name":"x","count":1}})")
                .find("/format: found \"monarch-plan/1\", expected \"monarch-profile/1\""),
            std::string::npos);
  EXPECT_NE(first_problem(R"({"format":"monarch-profile/1","device":{"kind":"tpu","name":"x","count":1}})")
                .find("/device/kind: found \"tpu\""),
            std::string::npos);
  EXPECT_NE(first_problem(R"({"format":"monarch-profile/1"})").find("/device: missing"), std::string::npos);
  const std::string head = R"({"format":"monarch-profile/1","device":{"kind":"cpu","name":"x","count":1},)";
  EXPECT_EQ(first_problem(head + R"("matmul":[{"precision":"fp32","m":2,"n":2,"k":-2,"time_us":1,"tflops":1}]})"),
            "/matmul/0/k: found -2, expected an integer >= 1");
  EXPECT_EQ(first_problem(head + R"("matmul":[{"precision":"fp32","m":1000,"n":1000,"k":1000,"time_us":1000,"tflops":5}]})"),
            "/matmul/0/tflops: found 5, but 2*m*n*k/time_us gives 2");
  EXPECT_NE(first_problem(head + R"("collectives":[{"kind":"all-reduce","ranks":2,"bytes":1000,"dtype":"fp32",)"
                                 R"("time_us":1,"algbw_GBps":1,"busbw_GBps":2}]})")
                .find("/collectives/0/busbw_GBps: found 2, but algbw x bus factor (1 for all-reduce over 2 ranks)"),
            std::string::npos);
  EXPECT_EQ(first_problem(head + R"("memroy":{}})"), "/memroy: unknown key");
  EXPECT_EQ(first_problem(head + R"("collectives":[{"kind":"all-reduce","ranks":1,"bytes":1000,"dtype":"fp32",)"
                                 R"("time_us":1,"algbw_GBps":1,"busbw_GBps":0}]})"),
            "/collectives/0/ranks: found 1, expected an integer >= 2");
}

TEST(ProfileIo, WriteIsAllOrNothingAndReadNamesTheFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("monarch_profile_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "p.json").string();
  ASSERT_TRUE(write_profile(path, full_profile()).empty());
  auto back = read_profile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->device_name, "NVIDIA H200");
  // Only the profile itself is left, no temporary file.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  const Problems missing_dir = write_profile((dir / "no" / "p.json").string(), full_profile());
  ASSERT_EQ(missing_dir.size(), 1u);
  EXPECT_NE(missing_dir[0].message.find("does not exist"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "no"));

  auto absent = read_profile((dir / "absent.json").string());
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.problems()[0].to_string().find("absent.json: cannot open"), std::string::npos);

  std::ofstream(dir / "bad.json") << R"({"format":"monarch-profile/1","device":{"kind":"cpu","name":"","count":1}})";
  auto bad = read_profile((dir / "bad.json").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.problems()[0].to_string().find("bad.json:/device/name: is empty"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace monarch
