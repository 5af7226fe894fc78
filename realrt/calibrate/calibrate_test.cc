// monarch-calibrate end to end (the real binary, single process and under mpirun), and the
// helpers of its measurement loops.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/profile.h"
#include "core/profile_io.h"
#include "realrt/calibrate/calibrate_common.h"
#if MONARCH_CALIBRATE_GPU
#include "realrt/gpu/gpu_calibrate.h"
#endif

namespace monarch::calibrate {
namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int status = -1;
  std::string out, err;
};

class CalibrateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("monarch_calibrate_") + info->name() + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Runs a shell command line with stdout and stderr captured; `status` is the exit status.
  CmdResult sh(const std::string& command) {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string line = command + " >" + out.string() + " 2>" + err.string() + " </dev/null";
    const int raw = std::system(line.c_str());
    CmdResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  CmdResult calibrate(const std::string& args) { return sh(std::string(MONARCH_CALIBRATE_EXE) + " " + args); }

  fs::path dir_;
};

TEST(CalibrateHelpers, SizeSweepAndRankRounding) {
  EXPECT_EQ(size_sweep(4096, 262144, 4), (std::vector<int64_t>{4096, 16384, 65536, 262144}));
  // nccl-tests rounds the size down to a whole number of elements per rank.
  EXPECT_EQ(round_to_ranks(1000, 3, 4), 996);
  EXPECT_EQ(round_to_ranks(4, 8, 4), 32);
  EXPECT_EQ(timed_iterations(0.001, 0.05, 3, 200), 50);
  EXPECT_EQ(timed_iterations(1.0, 0.05, 3, 200), 3);
  EXPECT_EQ(timed_iterations(1e-9, 0.05, 3, 200), 200);
}

TEST(CalibrateHelpers, CollectiveRowsFollowNcclTests) {
  const CollectiveSample s = make_collective_sample(CollectiveKind::kAllReduce, 4, 1 << 20, DType::kFp32, 100);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  print_collective_header(f, CollectiveKind::kAllReduce, 4, "MPI_Allreduce");
  print_collective_row(f, s);
  std::fclose(f);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_NE(text.find("busbw"), std::string::npos);
  // size, count (floats), type, redop, time, algbw = 1048576 B / 100 us, busbw = algbw x 2*3/4.
  EXPECT_NE(text.find("1048576       262144    float    sum     100.00    10.49    15.73"), std::string::npos) << text;
}

TEST_F(CalibrateCli, BadOptionsExit2AndWriteNothing) {
  CmdResult r = calibrate("--device tpu --out " + (dir_ / "p.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  r = calibrate("--quick");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  r = calibrate("--threads 0 --out " + (dir_ / "p.json").string());
  EXPECT_EQ(r.status, 2);
  r = calibrate("--quick --out " + (dir_ / "missing" / "p.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--out: folder"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = calibrate("--quick --out " + dir_.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "p.json"));
}

#if MONARCH_CALIBRATE_CPU
TEST_F(CalibrateCli, QuickSingleProcessCalibrationWritesAValidProfile) {
  const fs::path out = dir_ / "cpu.json";
  const CmdResult r = calibrate("--quick --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << "stderr is not a terminal, so no progress: " << r.err;
  EXPECT_NE(r.out.find("# matmul fp32 (cblas_sgemm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("STREAM triad"), std::string::npos) << r.out;

  auto p = read_profile(out.string());
  ASSERT_TRUE(p.ok()) << p.problems()[0].to_string();
  EXPECT_EQ(p->device_kind, DeviceKind::kCpu);
  EXPECT_EQ(p->device_count, 1);
  EXPECT_FALSE(p->device_name.empty());
  EXPECT_TRUE(p->quick);
  EXPECT_EQ(p->memory_method, "stream-triad");
  EXPECT_GT(p->memory_bandwidth_GBps, 0.1);
  EXPECT_TRUE(p->collectives.empty()) << "one rank has no collectives";
  ASSERT_EQ(p->matmul.size(), 27u);  // 3 x 3 x 3 grid
  std::set<int64_t> ms;
  for (const MatmulSample& s : p->matmul) {
    EXPECT_EQ(s.precision, MatmulPrecision::kFp32);
    EXPECT_GT(s.tflops, 0);
    ms.insert(s.m);
  }
  EXPECT_EQ(ms, (std::set<int64_t>{64, 256, 512}));
  // --show prints it back as tables; a broken profile is refused with its JSON path.
  const CmdResult shown = calibrate("--show " + out.string());
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("# fp32: best "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("stream-triad"), std::string::npos) << shown.out;
  {
    std::string text = slurp(out);
    const std::string method = "\"method\": \"stream-triad\"";
    ASSERT_NE(text.find(method), std::string::npos);
    text.replace(text.find(method), method.size(), method + ", \"speed\": 1");
    std::ofstream(dir_ / "broken.json") << text;
  }
  const CmdResult broken = calibrate("--show " + (dir_ / "broken.json").string());
  EXPECT_EQ(broken.status, 2);
  EXPECT_NE(broken.err.find("broken.json:/memory/speed: unknown key"), std::string::npos) << broken.err;
  fs::remove(dir_ / "broken.json");
  // The profile answers the models' lookups inside and outside its grid.
  EXPECT_GT(profile_matmul_tflops(*p, Precision::kFp32, 300, 300, 300), 0);
  EXPECT_GT(profile_matmul_tflops(*p, Precision::kFp32, 8192, 8192, 8192), 0);
  EXPECT_LE(profile_matmul_tflops(*p, Precision::kBf16, 300, 300, 300), 0);
  // Only the profile is left in the folder (no temporary file), besides the captured output.
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "cpu.json" || name == "stdout.txt" || name == "stderr.txt") << name;
  }
}

TEST_F(CalibrateCli, CtrlCStopsWithoutWritingAProfile) {
  // A full (not --quick) calibration, interrupted once its first table row is out (the handler
  // is installed by then): exit 130, a message, no profile and no temporary file.
  const fs::path out = dir_ / "int.json", log = dir_ / "log.txt", err = dir_ / "err.txt";
  const std::string line = std::string(MONARCH_CALIBRATE_EXE) + " --out " + out.string() + " >" + log.string() +
                           " 2>" + err.string() + " </dev/null & pid=$!; i=0; until grep -q TFLOP/s " +
                           log.string() + " || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; " +
                           "kill -INT $pid; wait $pid";
  const int raw = std::system(("/bin/sh -c '" + line + "'").c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 130) << slurp(err);
  EXPECT_NE(slurp(err).find("interrupted; no profile written"), std::string::npos) << slurp(err);
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "log.txt" || name == "err.txt") << name;
  }
}

TEST_F(CalibrateCli, TwoRankMpirunMeasuresCollectivesWithNcclTestsBusbw) {
  const fs::path out = dir_ / "mpi.json";
  const CmdResult r = sh(std::string(MONARCH_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " +
                   // Containers often forbid the cross-process reads of Open MPI's shared-memory
                   // single copy (CMA); plain copies work everywhere.
                   "--mca btl_vader_single_copy_mechanism none " +
                   MONARCH_CALIBRATE_EXE + " --quick --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# all-reduce over 2 ranks (MPI_Allreduce)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("algbw"), std::string::npos);

  auto p = read_profile(out.string());
  ASSERT_TRUE(p.ok()) << p.problems()[0].to_string();
  EXPECT_EQ(p->device_count, 2);
  std::set<CollectiveKind> kinds;
  for (const CollectiveSample& s : p->collectives) {
    kinds.insert(s.kind);
    EXPECT_EQ(s.ranks, 2);
    EXPECT_EQ(s.bytes % 8, 0) << "whole floats per rank";
    EXPECT_NEAR(s.algbw_GBps, double(s.bytes) / (s.time_us * 1e3), 1e-9 * s.algbw_GBps);
    EXPECT_NEAR(s.busbw_GBps, s.algbw_GBps * (s.kind == CollectiveKind::kAllReduce ? 1.0 : 0.5),
                1e-9 * s.algbw_GBps);
  }
  EXPECT_EQ(kinds, (std::set<CollectiveKind>{CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                             CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}));
  EXPECT_EQ(p->collectives.size(), 4u * 4u);  // 4 kinds x 4 sizes (4 KiB .. 256 KiB)
  EXPECT_GT(profile_busbw_GBps(*p, CollectiveKind::kAllReduce, 2, 100'000), 0);
  EXPECT_GT(profile_collective_time_s(*p, CollectiveKind::kAllGather, 8, 1 << 20), 0);
}
#endif

TEST_F(CalibrateCli, GpuDeviceWithoutAGpuExits3WithTheReason) {
#if MONARCH_CALIBRATE_GPU
  std::string why;
  if (usable_gpu_count(&why) > 0) GTEST_SKIP() << "a GPU is present; gpu_calibrate_tests covers it";
#endif
  const CmdResult r = calibrate("--device gpu --quick --out " + (dir_ / "gpu.json").string());
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("--device gpu: "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "gpu.json"));
}

}  // namespace
}  // namespace monarch::calibrate
