// Calibration profile: what `monarch-calibrate` measured on one machine (a GPU node or the CPU
// runtime), so that the analytical and SimGrid models can use measured matrix-product
// throughput and collective bus bandwidth instead of preset efficiencies.
//
// The JSON form ("monarch-profile/1") is documented in docs/calibration_profile.md and is
// read/written by profile_io. This header is std-only.
//
// Conventions follow nccl-tests: a collective's `bytes` is the nccl-tests "size" (the larger
// buffer per rank: the all-reduce buffer, the all-gather output, the reduce-scatter input, the
// all-to-all send buffer), algbw = bytes / time, busbw = algbw x collective_bus_factor().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collectives.h"  // collective_bus_factor
#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch {

// Precision of a measured matrix product. tf32 is separate from fp32: same fp32 storage, but
// tensor cores with a 10-bit mantissa (cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32). bf16/fp16 inputs
// accumulate in fp32.
enum class MatmulPrecision : uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };

enum class DeviceKind : uint8_t { kCpu, kGpu };

// One timed matrix product C[m,n] = A[m,k] x B[k,n]; flops = 2 m n k.
struct MatmulSample {
  MatmulPrecision precision = MatmulPrecision::kFp32;
  int64_t m = 0, n = 0, k = 0;
  double time_us = 0;  // per product
  double tflops = 0;   // 2 m n k / time, in 1e12 FLOP/s
};

// One timed collective, nccl-tests style.
struct CollectiveSample {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int32_t ranks = 0;        // participants
  int64_t bytes = 0;        // nccl-tests "size" (see top of file)
  DType dtype = DType::kFp32;
  double time_us = 0;       // per operation (slowest rank)
  double algbw_GBps = 0;    // bytes / time, 1e9 bytes/s
  double busbw_GBps = 0;    // algbw x collective_bus_factor(kind, ranks)
};

struct CalibrationProfile {
  static constexpr const char* kFormat = "monarch-profile/1";

  DeviceKind device_kind = DeviceKind::kCpu;
  std::string device_name;   // "NVIDIA H200", or the CPU model name
  int32_t device_count = 1;  // GPUs measured together (NCCL), or MPI ranks (CPU runtime)
  std::string host;          // host name where it was measured
  std::string created_utc;   // ISO 8601, e.g. "2026-11-29T18:00:00Z"
  std::string tool;          // "monarch-calibrate 0.1.0"
  std::string notes;         // free text: BLAS library and threads, CUDA/NCCL versions, ...
  bool quick = false;        // measured with --quick (fewer shapes, shorter timing)

  std::vector<MatmulSample> matmul;
  // Sustained memory bandwidth of one device (CPU: one process, STREAM triad; GPU: a copy
  // kernel), counting bytes read + bytes written, 1e9 bytes/s. 0 = not measured.
  double memory_bandwidth_GBps = 0;
  std::string memory_method;  // "stream-triad" or "copy-kernel"
  int64_t memory_bytes = 0;   // working set of the bandwidth test
  std::vector<CollectiveSample> collectives;
};

const char* to_string(MatmulPrecision);
const char* to_string(DeviceKind);

// A sample from a measured time, with the derived tflops (2 m n k / time) or algbw/busbw.
MatmulSample make_matmul_sample(MatmulPrecision, int64_t m, int64_t n, int64_t k, double time_us);
CollectiveSample make_collective_sample(CollectiveKind, int ranks, int64_t bytes, DType,
                                        double time_us);

// Achieved matrix-product throughput for a shape, TFLOP/s, interpolated over the measured grid:
// multilinear in (log2 m, log2 n, log2 k) between the surrounding grid points, clamped to the
// grid's edges outside it (a shape smaller than the smallest measured one gets the smallest
// one's throughput, which overestimates). Returns <= 0 when the profile has no sample of that
// precision.
double profile_matmul_tflops(const CalibrationProfile&, MatmulPrecision, int64_t m, int64_t n,
                             int64_t k);
// Same for a training precision: kFp32 uses tf32 samples where the profile has them (as
// peak_tflops() uses the tf32 peak for fp32 training) and fp32 samples otherwise.
double profile_matmul_tflops(const CalibrationProfile&, Precision, int64_t m, int64_t n, int64_t k);

// Bus bandwidth of a collective of `bytes` (nccl-tests size) over `ranks` ranks, 1e9 bytes/s:
// linear in log2(bytes) between measured sizes; above the largest size, the largest's busbw;
// below the smallest, the smallest's time (latency bound), so busbw shrinks with the size.
// Uses the samples with the measured rank count closest to `ranks` (busbw is meant to be
// independent of the rank count). Returns <= 0 when there is no sample of that kind.
double profile_busbw_GBps(const CalibrationProfile&, CollectiveKind, int ranks, int64_t bytes);

// Time of that collective, seconds, from the interpolated busbw; <= 0 when there is no sample.
double profile_collective_time_s(const CalibrationProfile&, CollectiveKind, int ranks,
                                 int64_t bytes);

}  // namespace monarch
