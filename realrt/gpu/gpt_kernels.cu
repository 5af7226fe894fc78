// Kernels of the GPU GPT; see gpt_kernels.h. Written for clarity first (llm.c's "dev" kernels
// style): one thread per element for elementwise work, one warp per row for row reductions
// (LayerNorm, causal softmax), one block per row for the cross-entropy over the vocabulary, and
// column sums split into row chunks with one atomic add per chunk and column.
#include "realrt/gpu/gpt_kernels.h"

#include <algorithm>

namespace monarch::gpu {

namespace {

constexpr int kThreads = 256;                  // threads per block
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // warp-per-row kernels
constexpr int64_t kMaxBlocks = 1 << 20;        // grid-stride loops beyond this
constexpr int64_t kColumnChunks = 128;         // row chunks of a column sum (atomics per column)

__device__ __forceinline__ float f32(float x) { return x; }
__device__ __forceinline__ float f32(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block (blockDim.x == kThreads); every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v) {
  __shared__ float partial[kThreads / kWarp];
  __shared__ float result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kThreads / kWarp ? partial[lane] : (kMax ? -INFINITY : 0.0f);
    w = kMax ? warp_max(w) : warp_sum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const float out = result;
  __syncthreads();  // partial and result may be reused by the next call
  return out;
}

int blocks_for(int64_t n) { return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)); }
int row_blocks(int64_t rows) { return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t n,
                                         int64_t b, int64_t c) {
  GRID_STRIDE(i, n * c) {
    const int64_t r = i / c, j = i % c;
    out[i] = from_f32<T>(wte[int64_t(tokens[r]) * c + j] + wpe[(r / b) * c + j]);
  }
}

template <typename T>
__global__ void embedding_wte_backward_kernel(float* dwte, const int32_t* tokens, const T* d, int64_t n, int64_t c) {
  GRID_STRIDE(i, n * c) { atomicAdd(&dwte[int64_t(tokens[i / c]) * c + i % c], f32(d[i])); }
}

template <typename T>
__global__ void embedding_wpe_backward_kernel(float* dwpe, const T* d, int64_t s, int64_t b, int64_t c) {
  GRID_STRIDE(i, s * c) {
    const int64_t pos = i / c, j = i % c;
    float acc = 0;
    for (int64_t k = 0; k < b; ++k) acc += f32(d[(pos * b + k) * c + j]);
    dwpe[i] += acc;
  }
}

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const float* w,
                                         const float* bias, int64_t n, int64_t c, float eps) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + row * c;
  float sum = 0;
  for (int64_t j = lane; j < c; j += kWarp) sum += f32(x[j]);
  const float m = warp_sum(sum) / float(c);
  float var = 0;
  for (int64_t j = lane; j < c; j += kWarp) {
    const float dx = f32(x[j]) - m;
    var += dx * dx;
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / float(c) + eps);
  T* o = out + row * c;
  for (int64_t j = lane; j < c; j += kWarp) o[j] = from_f32<T>((f32(x[j]) - m) * s * w[j] + bias[j]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

template <typename T>
__global__ void layernorm_backward_rows_kernel(T* dinp, const T* dout, const T* inp, const float* w, const float* mean,
                                               const float* rstd, int64_t n, int64_t c) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* d = dout + row * c;
  const T* x = inp + row * c;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0, dnorm_norm_mean = 0;
  for (int64_t j = lane; j < c; j += kWarp) {
    const float norm = (f32(x[j]) - m) * s;
    const float dnorm = w[j] * f32(d[j]);
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * norm;
  }
  dnorm_mean = warp_sum(dnorm_mean) / float(c);
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / float(c);
  T* dx = dinp + row * c;
  for (int64_t j = lane; j < c; j += kWarp) {
    const float norm = (f32(x[j]) - m) * s;
    const float dnorm = w[j] * f32(d[j]);
    dx[j] = from_f32<T>(f32(dx[j]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
  }
}

// Column sums over a chunk of rows: grid (column blocks, kColumnChunks). With inp (LayerNorm):
// dw[j] += sum norm * dout, db[j] += sum dout; without: db[j] += sum dout.
template <typename T>
__global__ void column_sums_kernel(float* dw, float* db, const T* dout, const T* inp, const float* mean,
                                   const float* rstd, int64_t n, int64_t c) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= c) return;
  const int64_t per_chunk = (n + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per_chunk, r1 = r0 + per_chunk < n ? r0 + per_chunk : n;
  float sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = f32(dout[r * c + j]);
    sb += d;
    if (inp) sw += (f32(inp[r * c + j]) - mean[r]) * rstd[r] * d;
  }
  if (r1 > r0) {
    atomicAdd(&db[j], sb);
    if (inp) atomicAdd(&dw[j], sw);
  }
}

template <typename T>
__global__ void add_bias_kernel(T* out, const float* bias, int64_t n, int64_t oc) {
  GRID_STRIDE(i, n * oc) { out[i] = from_f32<T>(f32(out[i]) + bias[i % oc]); }
}

template <typename T>
__global__ void residual_kernel(T* out, const T* a, const T* b, const float* bias, int64_t n, int64_t c) {
  GRID_STRIDE(i, n * c) { out[i] = from_f32<T>(f32(a[i]) + f32(b[i]) + bias[i % c]); }
}

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;            // GPT-2's tanh approximation

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  GRID_STRIDE(i, n) {
    const float x = f32(inp[i]);
    out[i] = from_f32<T>(0.5f * x * (1.0f + tanhf(kGeluK * (x + kGeluC * x * x * x))));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
  GRID_STRIDE(i, n) {
    const float x = f32(inp[i]);
    const float th = tanhf(kGeluK * (x + kGeluC * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluK * (1.0f + 3.0f * kGeluC * x * x);
    dinp[i] = from_f32<T>(f32(dout[i]) * grad);
  }
}

template <typename T>
__global__ void causal_softmax_forward_kernel(T* p, int64_t rows, int64_t s) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int64_t i = row % s;  // query position: keys 0..i are visible
  T* x = p + row * s;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= i; j += kWarp) mx = fmaxf(mx, f32(x[j]));
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t j = lane; j <= i; j += kWarp) sum += expf(f32(x[j]) - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < s; j += kWarp) x[j] = from_f32<T>(j <= i ? expf(f32(x[j]) - mx) * inv : 0.0f);
}

template <typename T>
__global__ void causal_softmax_backward_kernel(T* dp, const T* p, int64_t rows, int64_t s, float scale) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int64_t i = row % s;
  T* d = dp + row * s;
  const T* pr = p + row * s;
  float dot = 0;
  for (int64_t j = lane; j <= i; j += kWarp) dot += f32(pr[j]) * f32(d[j]);
  dot = warp_sum(dot);
  for (int64_t j = lane; j < s; j += kWarp) d[j] = from_f32<T>(j <= i ? f32(pr[j]) * (f32(d[j]) - dot) * scale : 0.0f);
}

template <typename T>
__global__ void cross_entropy_kernel(T* logits, float* row_loss, const int32_t* targets, int64_t v, float scale) {
  T* x = logits + blockIdx.x * v;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, f32(x[j]));
  mx = block_reduce<true>(mx);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += expf(f32(x[j]) - mx);
  sum = block_reduce<false>(sum);
  const int64_t tgt = targets[blockIdx.x];
  if (threadIdx.x == 0) row_loss[blockIdx.x] += (logf(sum) + mx - f32(x[tgt])) * scale;
  __syncthreads();  // the target logit is read before it is overwritten
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
    x[j] = from_f32<T>((expf(f32(x[j]) - mx) * inv - (j == tgt ? 1.0f : 0.0f)) * scale);
}

__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float b1,
                            float b2, float eps, float inv_b1c, float inv_b2c) {
  GRID_STRIDE(i, n) {
    const float g = grads[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float mhat = m[i] * inv_b1c, vhat = v[i] * inv_b2c;
    params[i] -= lr * mhat / (sqrtf(vhat) + eps);
  }
}

__global__ void cast_to_bf16_kernel(bf16* out, const float* in, int64_t n) {
  GRID_STRIDE(i, n) { out[i] = __float2bfloat16(in[i]); }
}

template <typename T>
cudaError_t column_sums(float* dw, float* db, const T* dout, const T* inp, const float* mean, const float* rstd,
                        int64_t n, int64_t c, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>((c + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::max<int64_t>(1, std::min(n, kColumnChunks))));
  column_sums_kernel<<<grid, kThreads, 0, st>>>(dw, db, dout, inp, mean, rstd, n, c);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t embedding_forward(T* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t n, int64_t b,
                              int64_t c, cudaStream_t st) {
  embedding_forward_kernel<<<blocks_for(n * c), kThreads, 0, st>>>(out, tokens, wte, wpe, n, b, c);
  return cudaGetLastError();
}

template <typename T>
cudaError_t embedding_backward(float* dwte, float* dwpe, const int32_t* tokens, const T* d, int64_t n, int64_t b,
                               int64_t c, cudaStream_t st) {
  embedding_wte_backward_kernel<<<blocks_for(n * c), kThreads, 0, st>>>(dwte, tokens, d, n, c);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  embedding_wpe_backward_kernel<<<blocks_for((n / b) * c), kThreads, 0, st>>>(dwpe, d, n / b, b, c);
  return cudaGetLastError();
}

template <typename T>
cudaError_t layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const float* w, const float* b, int64_t n,
                              int64_t c, float eps, cudaStream_t st) {
  layernorm_forward_kernel<<<row_blocks(n), kThreads, 0, st>>>(out, mean, rstd, inp, w, b, n, c, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const float* w,
                               const float* mean, const float* rstd, int64_t n, int64_t c, cudaStream_t st) {
  layernorm_backward_rows_kernel<<<row_blocks(n), kThreads, 0, st>>>(dinp, dout, inp, w, mean, rstd, n, c);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return column_sums(dw, db, dout, inp, mean, rstd, n, c, st);
}

template <typename T>
cudaError_t add_bias(T* out, const float* bias, int64_t n, int64_t oc, cudaStream_t st) {
  add_bias_kernel<<<blocks_for(n * oc), kThreads, 0, st>>>(out, bias, n, oc);
  return cudaGetLastError();
}

template <typename T>
cudaError_t bias_backward(float* dbias, const T* dout, int64_t n, int64_t oc, cudaStream_t st) {
  return column_sums<T>(nullptr, dbias, dout, nullptr, nullptr, nullptr, n, oc, st);
}

template <typename T>
cudaError_t residual_forward(T* out, const T* a, const T* b, const float* bias, int64_t n, int64_t c, cudaStream_t st) {
  residual_kernel<<<blocks_for(n * c), kThreads, 0, st>>>(out, a, b, bias, n, c);
  return cudaGetLastError();
}

template <typename T>
cudaError_t gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t st) {
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, st>>>(out, inp, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t st) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, st>>>(dinp, inp, dout, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t causal_softmax_forward(T* p, int64_t rows, int64_t s, cudaStream_t st) {
  causal_softmax_forward_kernel<<<row_blocks(rows), kThreads, 0, st>>>(p, rows, s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t causal_softmax_backward(T* dp, const T* p, int64_t rows, int64_t s, float scale, cudaStream_t st) {
  causal_softmax_backward_kernel<<<row_blocks(rows), kThreads, 0, st>>>(dp, p, rows, s, scale);
  return cudaGetLastError();
}

template <typename T>
cudaError_t cross_entropy(T* logits, float* row_loss, const int32_t* targets, int64_t n, int64_t v, float scale,
                          cudaStream_t st) {
  cross_entropy_kernel<<<static_cast<unsigned>(n), kThreads, 0, st>>>(logits, row_loss, targets, v, scale);
  return cudaGetLastError();
}

cudaError_t adam_update(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                        float beta2, float eps, float inv_bias1, float inv_bias2, cudaStream_t st) {
  adam_kernel<<<blocks_for(n), kThreads, 0, st>>>(params, grads, m, v, n, lr, beta1, beta2, eps, inv_bias1, inv_bias2);
  return cudaGetLastError();
}

cudaError_t cast_to_bf16(bf16* out, const float* in, int64_t n, cudaStream_t st) {
  cast_to_bf16_kernel<<<blocks_for(n), kThreads, 0, st>>>(out, in, n);
  return cudaGetLastError();
}

#define MONARCH_GPT_KERNELS(T)                                                                                      \
  template cudaError_t embedding_forward<T>(T*, const int32_t*, const float*, const float*, int64_t, int64_t,      \
                                            int64_t, cudaStream_t);                                                 \
  template cudaError_t embedding_backward<T>(float*, float*, const int32_t*, const T*, int64_t, int64_t, int64_t,  \
                                             cudaStream_t);                                                         \
  template cudaError_t layernorm_forward<T>(T*, float*, float*, const T*, const float*, const float*, int64_t,      \
                                            int64_t, float, cudaStream_t);                                          \
  template cudaError_t layernorm_backward<T>(T*, float*, float*, const T*, const T*, const float*, const float*,    \
                                             const float*, int64_t, int64_t, cudaStream_t);                         \
  template cudaError_t add_bias<T>(T*, const float*, int64_t, int64_t, cudaStream_t);                               \
  template cudaError_t bias_backward<T>(float*, const T*, int64_t, int64_t, cudaStream_t);                          \
  template cudaError_t residual_forward<T>(T*, const T*, const T*, const float*, int64_t, int64_t, cudaStream_t);   \
  template cudaError_t gelu_forward<T>(T*, const T*, int64_t, cudaStream_t);                                        \
  template cudaError_t gelu_backward<T>(T*, const T*, const T*, int64_t, cudaStream_t);                             \
  template cudaError_t causal_softmax_forward<T>(T*, int64_t, int64_t, cudaStream_t);                               \
  template cudaError_t causal_softmax_backward<T>(T*, const T*, int64_t, int64_t, float, cudaStream_t);             \
  template cudaError_t cross_entropy<T>(T*, float*, const int32_t*, int64_t, int64_t, float, cudaStream_t);

MONARCH_GPT_KERNELS(float)
MONARCH_GPT_KERNELS(bf16)

}  // namespace monarch::gpu
