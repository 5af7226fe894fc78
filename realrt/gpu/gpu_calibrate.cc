#include "realrt/gpu/gpu_calibrate.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <memory>
#include <string>

#include "realrt/gpu/gpu_check.h"
#include "realrt/gpu/gpu_kernels.h"

namespace monarch::calibrate {

using gpu::GpuError;

namespace {

// Timing budgets per measurement (shape, size): long enough that launch overhead and event
// resolution (~0.5 us) are small against the total.
constexpr double kMatmulTargetQuick_s = 0.005;
constexpr double kMatmulTarget_s = 0.03;
constexpr int kMatmulWarmup = 2;
constexpr int kMatmulMinIters = 3;
constexpr int kMatmulMaxIters = 1000;
constexpr int64_t kCopyBytesQuick = int64_t(256) << 20;  // per buffer; >> L2 (50 MiB on H100/H200)
constexpr int64_t kCopyBytes = int64_t(1) << 30;
constexpr int kCopyPasses = 5;         // best of
constexpr int kCopyBlocksPerSm = 16;   // enough resident warps to saturate HBM
constexpr double kCollectiveTargetQuick_s = 0.005;
constexpr double kCollectiveTarget_s = 0.03;
constexpr int kCollectiveWarmup = 2;
constexpr int kCollectiveMinIters = 3;
constexpr int kCollectiveMaxIters = 100;
constexpr uint32_t kFillSeed = 12345;

struct Interrupted {};

void check_interrupt() {
  if (interrupt_requested()) throw Interrupted{};
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Device memory owned by one GPU; freed on scope exit even when a check throws.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes) : device_(device) {
    MONARCH_CUDA_CHECK(cudaSetDevice(device));
    MONARCH_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) {
      MONARCH_CUDA_WARN(cudaSetDevice(device_));
      MONARCH_CUDA_WARN(cudaFree(ptr_));
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  int device_ = 0;
  void* ptr_ = nullptr;
};

class Event {
 public:
  Event() { MONARCH_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { MONARCH_CUDA_WARN(cudaEventDestroy(e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Seconds between two recorded events.
double elapsed_s(const Event& start, const Event& stop) {
  MONARCH_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  MONARCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return double(ms) * 1e-3;
}

// Times `op` (enqueued on `stream`): warm-up, a probe to size the batch, then one batch.
template <typename Op>
double time_per_op_s(Op&& op, cudaStream_t stream, int warmup, double target_s, int min_iters, int max_iters) {
  for (int i = 0; i < warmup; ++i) op();
  Event start, stop;
  MONARCH_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  op();
  MONARCH_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  const int iters = timed_iterations(elapsed_s(start, stop), target_s, min_iters, max_iters);
  MONARCH_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < iters; ++i) op();
  MONARCH_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  return elapsed_s(start, stop) / iters;
}

struct GemmConfig {
  MatmulPrecision precision;
  cudaDataType_t data_type;
  cublasComputeType_t compute;
  const char* api;
};

constexpr GemmConfig kGemmConfigs[] = {
    {MatmulPrecision::kFp32, CUDA_R_32F, CUBLAS_COMPUTE_32F, "cublasGemmEx, CUDA_R_32F, CUBLAS_COMPUTE_32F"},
    {MatmulPrecision::kTf32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
     "cublasGemmEx, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32"},
    {MatmulPrecision::kBf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F,
     "cublasGemmEx, CUDA_R_16BF in and out, CUBLAS_COMPUTE_32F accumulation"},
};

std::vector<MatmulSample> measure_matmul(const Settings& settings, Progress& progress) {
  const std::vector<int64_t> axis = gpu_matmul_axis(settings.quick);
  const int64_t max_dim = axis.back();
  const size_t max_elems = size_t(max_dim * max_dim);
  MONARCH_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  MONARCH_CUDA_CHECK(cudaStreamCreate(&stream));
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_guard(stream, [](cudaStream_t s) { MONARCH_CUDA_WARN(cudaStreamDestroy(s)); });
  cublasHandle_t handle = nullptr;
  MONARCH_CUBLAS_CHECK(cublasCreate(&handle));
  std::unique_ptr<cublasContext, void (*)(cublasHandle_t)> handle_guard(handle, [](cublasHandle_t h) { MONARCH_CUBLAS_WARN(cublasDestroy(h)); });
  MONARCH_CUBLAS_CHECK(cublasSetStream(handle, stream));

  // Buffers sized for the largest shape in fp32; bf16 uses the first half of each.
  DeviceBuffer a(0, max_elems * 4), b(0, max_elems * 4), c(0, max_elems * 4);
  const double target_s = settings.quick ? kMatmulTargetQuick_s : kMatmulTarget_s;
  const int64_t total = int64_t(std::size(kGemmConfigs) * axis.size() * axis.size() * axis.size());
  int64_t done = 0;
  std::vector<MatmulSample> samples;
  for (const GemmConfig& cfg : kGemmConfigs) {
    if (cfg.data_type == CUDA_R_32F) {
      MONARCH_CUDA_CHECK(gpu::launch_fill_f32(static_cast<float*>(a.get()), max_elems, kFillSeed, stream));
      MONARCH_CUDA_CHECK(gpu::launch_fill_f32(static_cast<float*>(b.get()), max_elems, kFillSeed + 1, stream));
    } else {
      MONARCH_CUDA_CHECK(gpu::launch_fill_bf16(a.get(), max_elems, kFillSeed, stream));
      MONARCH_CUDA_CHECK(gpu::launch_fill_bf16(b.get(), max_elems, kFillSeed + 1, stream));
    }
    print_matmul_header(stdout, cfg.precision, cfg.api);
    const float alpha = 1.0f, beta = 0.0f;
    for (int64_t m : axis) {
      for (int64_t n : axis) {
        for (int64_t k : axis) {
          check_interrupt();
          progress.show("matmul", done, total);
          // Column-major C[m,n] = A[m,k] B[k,n].
          auto gemm = [&] {
            MONARCH_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(m), int(n), int(k), &alpha,
                                              a.get(), cfg.data_type, int(m), b.get(), cfg.data_type, int(k),
                                              &beta, c.get(), cfg.data_type, int(m), cfg.compute,
                                              CUBLAS_GEMM_DEFAULT));
          };
          const double t = time_per_op_s(gemm, stream, kMatmulWarmup, target_s, kMatmulMinIters, kMatmulMaxIters);
          samples.push_back(make_matmul_sample(cfg.precision, m, n, k, t * 1e6));
          progress.clear();
          print_matmul_row(stdout, samples.back());
          ++done;
        }
      }
    }
  }
  MONARCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return samples;
}

double measure_copy_GBps(const Settings& settings, int64_t* working_set_bytes) {
  const int64_t bytes = settings.quick ? kCopyBytesQuick : kCopyBytes;
  MONARCH_CUDA_CHECK(cudaSetDevice(0));
  int sms = 0;
  MONARCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  DeviceBuffer src(0, size_t(bytes)), dst(0, size_t(bytes));
  MONARCH_CUDA_CHECK(cudaMemset(src.get(), 1, size_t(bytes)));
  Event start, stop;
  double best_s = 0;
  for (int pass = 0; pass <= kCopyPasses; ++pass) {  // pass 0 warms up
    check_interrupt();
    MONARCH_CUDA_CHECK(cudaEventRecord(start.get(), nullptr));
    MONARCH_CUDA_CHECK(gpu::launch_copy(src.get(), dst.get(), size_t(bytes), sms * kCopyBlocksPerSm, nullptr));
    MONARCH_CUDA_CHECK(cudaEventRecord(stop.get(), nullptr));
    const double t = elapsed_s(start, stop);
    if (pass > 0 && (best_s == 0 || t < best_s)) best_s = t;
  }
  *working_set_bytes = 2 * bytes;
  const double GBps = 2.0 * double(bytes) / best_s / 1e9;  // read + write
  std::fprintf(stdout, "#\n# memory bandwidth: copy kernel, 2 x %lld MiB, best of %d\n  copy %.1f GB/s (read + write)\n",
               static_cast<long long>(bytes >> 20), kCopyPasses, GBps);
  return GBps;
}

// NCCL over every GPU of the node from this one process.
std::vector<CollectiveSample> measure_nccl(const Settings& settings, int ndev, Progress& progress) {
  std::vector<CollectiveSample> samples;
  if (ndev < 2) {
    std::fprintf(stdout, "#\n# collectives: skipped, NCCL needs at least 2 GPUs and this node has %d\n", ndev);
    return samples;
  }
  std::vector<ncclComm_t> comms(size_t(ndev), nullptr);
  MONARCH_NCCL_CHECK(ncclCommInitAll(comms.data(), ndev, nullptr));
  struct CommsGuard {
    std::vector<ncclComm_t>& c;
    ~CommsGuard() {
      for (ncclComm_t x : c) {
        if (x) MONARCH_NCCL_WARN(ncclCommDestroy(x));
      }
    }
  } comms_guard{comms};
  const std::vector<int64_t> sizes = gpu_collective_sizes(settings.quick);
  const int64_t max_bytes = round_to_ranks(sizes.back(), ndev, 4);
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
  std::vector<cudaStream_t> streams(size_t(ndev), nullptr);
  struct StreamsGuard {
    std::vector<cudaStream_t>& s;
    ~StreamsGuard() {
      for (cudaStream_t x : s) {
        if (x) MONARCH_CUDA_WARN(cudaStreamDestroy(x));
      }
    }
  } streams_guard{streams};
  for (int d = 0; d < ndev; ++d) {
    send.push_back(std::make_unique<DeviceBuffer>(d, size_t(max_bytes)));
    recv.push_back(std::make_unique<DeviceBuffer>(d, size_t(max_bytes)));
    MONARCH_CUDA_CHECK(cudaSetDevice(d));
    MONARCH_CUDA_CHECK(cudaStreamCreate(&streams[size_t(d)]));
    MONARCH_CUDA_CHECK(gpu::launch_fill_f32(static_cast<float*>(send.back()->get()), size_t(max_bytes / 4),
                                            kFillSeed + uint32_t(d), streams[size_t(d)]));
  }
  auto sync_all = [&] {
    for (int d = 0; d < ndev; ++d) {
      MONARCH_CUDA_CHECK(cudaSetDevice(d));
      MONARCH_CUDA_CHECK(cudaStreamSynchronize(streams[size_t(d)]));
    }
  };
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                  CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};
  const double target_s = settings.quick ? kCollectiveTargetQuick_s : kCollectiveTarget_s;
  const int64_t total = int64_t(std::size(kinds) * sizes.size());
  int64_t done = 0;
  for (CollectiveKind kind : kinds) {
    print_collective_header(stdout, kind, ndev,
                            kind == CollectiveKind::kAllToAll ? "grouped ncclSend/ncclRecv" : nccl_name(kind));
    for (int64_t requested : sizes) {
      check_interrupt();
      progress.show("collectives", done, total);
      const int64_t bytes = round_to_ranks(requested, ndev, 4);
      const size_t count = size_t(bytes / 4), share = count / size_t(ndev);
      auto op = [&] {
        MONARCH_NCCL_CHECK(ncclGroupStart());
        for (int d = 0; d < ndev; ++d) {
          float* s = static_cast<float*>(send[size_t(d)]->get());
          float* r = static_cast<float*>(recv[size_t(d)]->get());
          ncclComm_t comm = comms[size_t(d)];
          cudaStream_t st = streams[size_t(d)];
          switch (kind) {
            case CollectiveKind::kAllReduce:
              MONARCH_NCCL_CHECK(ncclAllReduce(s, r, count, ncclFloat, ncclSum, comm, st));
              break;
            case CollectiveKind::kAllGather:  // bytes = the gathered output
              MONARCH_NCCL_CHECK(ncclAllGather(s, r, share, ncclFloat, comm, st));
              break;
            case CollectiveKind::kReduceScatter:  // bytes = the input
              MONARCH_NCCL_CHECK(ncclReduceScatter(s, r, share, ncclFloat, ncclSum, comm, st));
              break;
            case CollectiveKind::kBroadcast:
              MONARCH_NCCL_CHECK(ncclBroadcast(s, r, count, ncclFloat, 0, comm, st));
              break;
            case CollectiveKind::kAllToAll:  // bytes = the send buffer
              for (int p = 0; p < ndev; ++p) {
                MONARCH_NCCL_CHECK(ncclSend(s + size_t(p) * share, share, ncclFloat, p, comm, st));
                MONARCH_NCCL_CHECK(ncclRecv(r + size_t(p) * share, share, ncclFloat, p, comm, st));
              }
              break;
            case CollectiveKind::kSendRecv:
              assert(!"point-to-point is not among the calibrated collectives");
              break;
          }
        }
        MONARCH_NCCL_CHECK(ncclGroupEnd());
      };
      for (int i = 0; i < kCollectiveWarmup; ++i) op();
      sync_all();
      double t0 = now_s();
      op();
      sync_all();
      const int iters = timed_iterations(now_s() - t0, target_s, kCollectiveMinIters, kCollectiveMaxIters);
      t0 = now_s();
      for (int i = 0; i < iters; ++i) op();
      sync_all();
      const double per_op_s = (now_s() - t0) / iters;
      samples.push_back(make_collective_sample(kind, ndev, bytes, DType::kFp32, per_op_s * 1e6));
      progress.clear();
      print_collective_row(stdout, samples.back());
      ++done;
    }
  }
  return samples;
}

}  // namespace

int usable_gpu_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no usable GPU: cudaGetDeviceCount failed with ") + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
    return 0;
  }
  if (count == 0 && why) *why = "no usable GPU: cudaGetDeviceCount found none";
  return count;
}

std::vector<int64_t> gpu_matmul_axis(bool quick) {
  if (quick) return {1024, 4096};
  return {512, 1024, 2048, 4096, 8192};
}

std::vector<int64_t> gpu_collective_sizes(bool quick) {
  return quick ? size_sweep(int64_t(1) << 20, int64_t(64) << 20, 4) : size_sweep(int64_t(64) << 10, int64_t(1) << 30, 4);
}

int calibrate_gpu(const Settings& settings, Progress& progress, CalibrationProfile* out, std::string* why) {
  const int ndev = usable_gpu_count(why);
  if (ndev == 0) return kExitNoDevice;
  try {
    cudaDeviceProp prop{};
    MONARCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int runtime = 0, driver = 0, cublas = 0, nccl = 0;
    MONARCH_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    MONARCH_CUDA_CHECK(cudaDriverGetVersion(&driver));
    MONARCH_NCCL_CHECK(ncclGetVersion(&nccl));
    {
      cublasHandle_t h = nullptr;
      MONARCH_CUBLAS_CHECK(cublasCreate(&h));
      const cublasStatus_t st = cublasGetVersion(h, &cublas);
      MONARCH_CUBLAS_WARN(cublasDestroy(h));
      MONARCH_CUBLAS_CHECK(st);
    }
    out->device_kind = DeviceKind::kGpu;
    out->device_name = prop.name;
    out->device_count = ndev;
    out->notes = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                 std::to_string(prop.multiProcessorCount) + " SMs, CUDA runtime " + std::to_string(runtime) +
                 ", driver " + std::to_string(driver) + ", cuBLAS " + std::to_string(cublas) + ", NCCL " +
                 std::to_string(nccl) + "; matmul and memory on GPU 0";
    std::fprintf(stdout, "# %s x %d (%s)\n", prop.name, ndev, out->notes.c_str());
    out->matmul = measure_matmul(settings, progress);
    out->memory_bandwidth_GBps = measure_copy_GBps(settings, &out->memory_bytes);
    out->memory_method = "copy-kernel";
    out->collectives = measure_nccl(settings, ndev, progress);
  } catch (const GpuError& e) {
    progress.clear();
    if (why) *why = e.what();
    return kExitFailed;
  } catch (const Interrupted&) {
    progress.clear();
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace monarch::calibrate
