// monarch-run --device gpu from the command line, where it must answer before touching a GPU:
// plans with a parallelism the GPU runtime lacks, bad options. Runs everywhere (with or without
// a GPU, with or without the GPU runtime built in).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/realrt/testdata/";

struct Launch {
  int status = -1;
  std::string log;  // stdout + stderr
};

Launch run(const std::string& args, const std::string& name) {
  const auto dir = std::filesystem::path(MONARCH_BINARY_DIR) / "realrt" / "gpu_cli_tmp";
  std::filesystem::create_directories(dir);
  const std::string log = (dir / (name + ".log")).string();
  const std::string cmd = std::string("timeout 120 ") + MONARCH_MPIEXEC + " --allow-run-as-root -np 1 " + MONARCH_RUN +
                          " " + args + " > " + log + " 2>&1";
  const int raw = std::system(cmd.c_str());
  Launch r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  r.log = ss.str();
  return r;
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
  const auto out = std::filesystem::path(MONARCH_BINARY_DIR) / "realrt" / "gpu_cli_tmp" / "parity.json";
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
