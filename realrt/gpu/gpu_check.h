// Checked CUDA, cuBLAS and NCCL calls: every call goes through one of these macros. The CHECK
// ones turn a failure into a GpuError naming the call, its file:line and the library's error
// string; the WARN ones (cleanup in destructors, which must not throw) print the same on stderr.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace monarch::gpu {

class GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* file, int line, const char* call, const std::string& what) {
  throw GpuError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what);
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

// For cleanup in destructors, which must not throw: reports the failure on stderr and goes on.
inline void warn(const char* file, int line, const char* call, const std::string& what) {
  std::fprintf(stderr, "%s:%d: %s failed during cleanup: %s\n", file, line, call, what.c_str());
}

}  // namespace monarch::gpu

#define MONARCH_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t monarch_err_ = (call);                                                  \
    if (monarch_err_ != cudaSuccess)                                                          \
      ::monarch::gpu::fail(__FILE__, __LINE__, #call,                                         \
                           std::string(cudaGetErrorName(monarch_err_)) + " (" +               \
                               cudaGetErrorString(monarch_err_) + ")");                       \
  } while (0)

#define MONARCH_CUBLAS_CHECK(call)                                                            \
  do {                                                                                        \
    const cublasStatus_t monarch_st_ = (call);                                                \
    if (monarch_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::monarch::gpu::fail(__FILE__, __LINE__, #call, ::monarch::gpu::cublas_status_name(monarch_st_)); \
  } while (0)

#define MONARCH_NCCL_CHECK(call)                                                              \
  do {                                                                                        \
    const ncclResult_t monarch_nr_ = (call);                                                  \
    if (monarch_nr_ != ncclSuccess)                                                           \
      ::monarch::gpu::fail(__FILE__, __LINE__, #call, ncclGetErrorString(monarch_nr_));       \
  } while (0)

#define MONARCH_CUDA_WARN(call)                                                               \
  do {                                                                                        \
    const cudaError_t monarch_err_ = (call);                                                  \
    if (monarch_err_ != cudaSuccess)                                                          \
      ::monarch::gpu::warn(__FILE__, __LINE__, #call, cudaGetErrorName(monarch_err_));        \
  } while (0)

#define MONARCH_CUBLAS_WARN(call)                                                             \
  do {                                                                                        \
    const cublasStatus_t monarch_st_ = (call);                                                \
    if (monarch_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::monarch::gpu::warn(__FILE__, __LINE__, #call, ::monarch::gpu::cublas_status_name(monarch_st_)); \
  } while (0)

#define MONARCH_NCCL_WARN(call)                                                               \
  do {                                                                                        \
    const ncclResult_t monarch_nr_ = (call);                                                  \
    if (monarch_nr_ != ncclSuccess)                                                           \
      ::monarch::gpu::warn(__FILE__, __LINE__, #call, ncclGetErrorString(monarch_nr_));       \
  } while (0)
