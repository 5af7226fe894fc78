// monarch-run --device gpu from the command line, where it must answer before touching a GPU:
// plans with a parallelism the GPU runtime lacks, bad options. Runs everywhere (with or without
// a GPU, with or without the GPU runtime built in).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "realrt/run_test_support.h"

namespace {

using monarch::realrt::run_test::kData;
using monarch::realrt::run_test::kTmp;
using monarch::realrt::run_test::Launch;

// monarch-run on one rank, logged to run_test_tmp/gpu_cli_NAME.log.
Launch run(const std::string& args, const std::string& name) {
  return monarch::realrt::run_test::mpirun(1, args, "gpu_cli_" + name);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(MonarchRunGpu, RefusesTensorAndPipelineParallelPlansNamingTheDegrees) {
  const Launch r = run(kData + "tiny_gpt_tp2_pp2.json --device gpu", "tp2_pp2");
  EXPECT_EQ(r.status, 2) << r.log;
#ifdef MONARCH_HAVE_GPU_RUNTIME
  EXPECT_TRUE(has(r.log, "/plan/tp: found 2, the GPU runtime does not run tensor parallelism")) << r.log;
  EXPECT_TRUE(has(r.log, "/plan/pp: found 2")) << r.log;
#else
  EXPECT_TRUE(has(r.log, "built without the GPU runtime")) << r.log;
#endif
}

TEST(MonarchRunGpu, RefusesZeroStagesNamingTheKey) {
  const Launch r = run(kData + "tiny_gpt_dp2_zero1.json --device gpu", "zero1");
  EXPECT_EQ(r.status, 2) << r.log;
#ifdef MONARCH_HAVE_GPU_RUNTIME
  EXPECT_TRUE(has(r.log, "/plan/zero_stage: found 1")) << r.log;
#endif
}

TEST(MonarchRunGpu, RefusesABadInitMethodAndGpuOptionsOnTheCpu) {
#ifdef MONARCH_HAVE_GPU_RUNTIME
  const Launch bad = run(kData + "gpu_parity_1gpu.json --device gpu --init-method env://", "init");
  EXPECT_EQ(bad.status, 2) << bad.log;
  EXPECT_TRUE(has(bad.log, "--init-method: found \"env://\", expected mpi, tcp://HOST:PORT or file://PATH")) << bad.log;
#endif
  const Launch cpu = run(kData + "gpu_parity_1gpu.json --precision bf16", "cpu_precision");
  EXPECT_EQ(cpu.status, 2) << cpu.log;
  EXPECT_TRUE(has(cpu.log, "--precision: applies to --device gpu only")) << cpu.log;
}

TEST(MonarchRunGpu, TrainsOnOneGpuOrSaysThereIsNone) {
  const auto out = std::filesystem::path(kTmp) / "gpu_cli_parity.json";
  std::filesystem::remove(out);
  const Launch r = run(kData + "gpu_parity_1gpu.json --device gpu --output " + out.string(), "one_gpu");
  if (r.status == 2 && has(r.log, "no usable GPU")) {
    EXPECT_FALSE(std::filesystem::exists(out));  // nothing half-written
    GTEST_SKIP() << "no GPU: " << r.log;
  }
#ifndef MONARCH_HAVE_GPU_RUNTIME
  EXPECT_EQ(r.status, 2) << r.log;
  GTEST_SKIP() << "monarch-run built without the GPU runtime";
#endif
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_TRUE(has(r.log, "step 9 loss")) << r.log;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(has(ss.str(), "\"backend\": \"real-gpu\"")) << ss.str();
}

}  // namespace
