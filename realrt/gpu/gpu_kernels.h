// The few hand-written kernels of the GPU calibration (gpu_kernels.cu, compiled by nvcc for
// sm_80 and sm_90). Launchers return the launch error; callers check it with MONARCH_CUDA_CHECK.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace monarch::gpu {

// dst[i] = src[i] over `bytes` (a multiple of 16), 16-byte vector loads and stores.
cudaError_t launch_copy(const void* src, void* dst, size_t bytes, int blocks, cudaStream_t stream);

// Fills with pseudo-random values in [-1, 1) (fixed seed), so that matrix products run on
// realistic bits rather than zeros (zeros draw less power and run at higher clocks).
cudaError_t launch_fill_f32(float* p, size_t n, uint32_t seed, cudaStream_t stream);
cudaError_t launch_fill_bf16(void* p, size_t n, uint32_t seed, cudaStream_t stream);

}  // namespace monarch::gpu
