// Hand-written kernels of the GPU GPT (gpt_kernels.cu), the GPU twins of realrt/kernels.h and the
// loops of realrt/gpt.cc. Same row-major layout: activations [N, C] with N = S * B token rows in
// (sequence, batch) order, row n = s * B + b. T is the activation type (float, or __nv_bfloat16
// with every sum and every transcendental in fp32); parameters, gradients and LayerNorm
// statistics are fp32. Launchers return the launch error; callers check it (MONARCH_CUDA_CHECK).
// Outputs marked += accumulate, as the CPU kernels do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace monarch::gpu {

using bf16 = __nv_bfloat16;

// out[N,C] = wte[tokens[n]] + wpe[n / B].
template <typename T>
cudaError_t embedding_forward(T* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t n,
                              int64_t b, int64_t c, cudaStream_t st);
// dwte[tokens[n]] += d[n] (atomic adds); dwpe[s] += sum over b of d[s * B + b].
template <typename T>
cudaError_t embedding_backward(float* dwte, float* dwpe, const int32_t* tokens, const T* d, int64_t n, int64_t b,
                               int64_t c, cudaStream_t st);

// out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N] saved (eps: realrt kLayerNormEps).
template <typename T>
cudaError_t layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const float* w, const float* b,
                              int64_t n, int64_t c, float eps, cudaStream_t st);
// dinp[N,C] += d/dinp; dw[C] += ..., db[C] += ... given dout[N,C].
template <typename T>
cudaError_t layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const float* w,
                               const float* mean, const float* rstd, int64_t n, int64_t c, cudaStream_t st);

// out[N,OC] += bias[OC].
template <typename T>
cudaError_t add_bias(T* out, const float* bias, int64_t n, int64_t oc, cudaStream_t st);
// dbias[OC] += column sums of dout[N,OC].
template <typename T>
cudaError_t bias_backward(float* dbias, const T* dout, int64_t n, int64_t oc, cudaStream_t st);
// out[N,C] = a + b + bias[C] (the residual after a row-parallel linear without its bias).
template <typename T>
cudaError_t residual_forward(T* out, const T* a, const T* b, const float* bias, int64_t n, int64_t c, cudaStream_t st);

// GeLU, tanh approximation: out = gelu(inp); dinp = dout * gelu'(inp) (overwritten).
template <typename T>
cudaError_t gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t st);
template <typename T>
cudaError_t gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t st);

// rows of length S (row r is query position r % S): scores -> causal softmax in place (zero
// above the diagonal). The 1/sqrt(hd) scale is applied by the Q K^T product.
template <typename T>
cudaError_t causal_softmax_forward(T* p, int64_t rows, int64_t s, cudaStream_t st);
// dp (= dO V^T) becomes dScores = P * (dP - rowsum(P * dP)) * scale, zero above the diagonal.
template <typename T>
cudaError_t causal_softmax_backward(T* dp, const T* p, int64_t rows, int64_t s, float scale, cudaStream_t st);

// Cross-entropy with the softmax over logits[N,V], in place: row_loss[n] += (logsumexp - logit of
// the target) * scale, and logits become d loss / d logits = (softmax - onehot) * scale.
template <typename T>
cudaError_t cross_entropy(T* logits, float* row_loss, const int32_t* targets, int64_t n, int64_t v, float scale,
                          cudaStream_t st);

// Adam with bias correction, exactly as realrt/reference.h adam_update in fp32.
cudaError_t adam_update(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                        float beta2, float eps, float inv_bias1, float inv_bias2, cudaStream_t st);

// out[n] = bf16(in[n]) (the bf16 copy of the fp32 master weights).
cudaError_t cast_to_bf16(bf16* out, const float* in, int64_t n, cudaStream_t st);

}  // namespace monarch::gpu
