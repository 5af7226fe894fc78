// GPU calibration on a real GPU; SKIPPED (never passed) where this process sees none.
#include "realrt/gpu/gpu_calibrate.h"

#include <gtest/gtest.h>

#include "core/profile_io.h"

namespace monarch::calibrate {
namespace {

TEST(GpuCalibrate, QuickCalibrationMeasuresEveryPrecisionAndTheMemory) {
  std::string why;
  if (usable_gpu_count(&why) == 0) GTEST_SKIP() << why;

  Settings settings;
  settings.quick = true;
  Progress progress(false);
  CalibrationProfile p;
  std::string error;
  ASSERT_EQ(calibrate_gpu(settings, progress, &p, &error), kExitOk) << error;

  EXPECT_EQ(p.device_kind, DeviceKind::kGpu);
  EXPECT_FALSE(p.device_name.empty());
  const size_t shapes = gpu_matmul_axis(true).size() * gpu_matmul_axis(true).size() * gpu_matmul_axis(true).size();
  EXPECT_EQ(p.matmul.size(), 3 * shapes);  // fp32, tf32, bf16
  // Tensor cores: bf16 and tf32 beat plain fp32 on a large product (true of every sm_80+ GPU).
  const double fp32 = profile_matmul_tflops(p, MatmulPrecision::kFp32, 4096, 4096, 4096);
  const double tf32 = profile_matmul_tflops(p, MatmulPrecision::kTf32, 4096, 4096, 4096);
  const double bf16 = profile_matmul_tflops(p, MatmulPrecision::kBf16, 4096, 4096, 4096);
  EXPECT_GT(fp32, 1);
  EXPECT_GT(tf32, fp32);
  EXPECT_GT(bf16, tf32);
  // HBM of any sm_80+ data-centre GPU sustains well over 500 GB/s.
  EXPECT_GT(p.memory_bandwidth_GBps, 500);
  EXPECT_EQ(p.memory_method, "copy-kernel");
  if (p.device_count >= 2) {
    EXPECT_GT(profile_busbw_GBps(p, CollectiveKind::kAllReduce, p.device_count, 64 << 20), 1);
  } else {
    EXPECT_TRUE(p.collectives.empty());
  }
  // The profile survives the JSON round trip.
  auto back = profile_from_json(profile_to_json(p));
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(back->matmul.size(), p.matmul.size());
}

}  // namespace
}  // namespace monarch::calibrate
