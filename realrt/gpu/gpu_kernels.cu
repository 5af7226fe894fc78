#include "realrt/gpu/gpu_kernels.h"

#include <cuda_bf16.h>

namespace monarch::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kFillBlocks = 1024;

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

// Value in [-1, 1) from a 32-bit hash of (i, seed).
__device__ float hashed_unit(size_t i, uint32_t seed) {
  uint32_t x = uint32_t(i) * 2654435761u ^ seed ^ uint32_t(i >> 32) * 40503u;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  return float(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_f32_kernel(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    p[i] = hashed_unit(i, seed);
  }
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    p[i] = __float2bfloat16(hashed_unit(i, seed));
  }
}

}  // namespace

cudaError_t launch_copy(const void* src, void* dst, size_t bytes, int blocks, cudaStream_t stream) {
  copy_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float4*>(src), static_cast<float4*>(dst),
                                               bytes / sizeof(float4));
  return cudaGetLastError();
}

cudaError_t launch_fill_f32(float* p, size_t n, uint32_t seed, cudaStream_t stream) {
  fill_f32_kernel<<<kFillBlocks, kThreads, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t launch_fill_bf16(void* p, size_t n, uint32_t seed, cudaStream_t stream) {
  fill_bf16_kernel<<<kFillBlocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  return cudaGetLastError();
}

}  // namespace monarch::gpu
