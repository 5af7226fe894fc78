// Kernels of the reference GPT (llm.c style): plain loops plus BLAS matrix products, templated on
// the element type so the same code runs in fp32 (the runtime) and fp64 (the gradient check).
// Row-major throughout. Activations are [N, C] with N = S * B token rows in (sequence, batch)
// order, row n = s * B + b, as Megatron lays them out, so a sequence shard is a row range.
#pragma once

#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <functional>

#include "core/scenario.h"

namespace monarch::realrt {

// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// LayerNorm epsilon (GPT-2 / llm.c).
inline constexpr double kLayerNormEps = 1e-5;

// out[N,C] = (inp - mean) * rstd * w[C] + b[C]; mean[N], rstd[N] saved for the backward pass.
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    T m = 0;
    for (int64_t j = 0; j < c; ++j) m += x[j];
    m /= static_cast<T>(c);
    T v = 0;
    for (int64_t j = 0; j < c; ++j) v += (x[j] - m) * (x[j] - m);
    v /= static_cast<T>(c);
    const T s = static_cast<T>(1) / std::sqrt(v + static_cast<T>(kLayerNormEps));
    T* o = out + i * c;
    for (int64_t j = 0; j < c; ++j) o[j] = (x[j] - m) * s * w[j] + b[j];
    mean[i] = m;
    rstd[i] = s;
  }
}

// dinp[N,C] += d/dinp, dw[C] += ..., db[C] += ... given dout[N,C].
template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean, const T* rstd,
                        int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i) {
    const T* d = dout + i * c;
    const T* x = inp + i * c;
    const T m = mean[i], s = rstd[i];
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t j = 0; j < c; ++j) {
      const T norm = (x[j] - m) * s;
      const T dnorm = w[j] * d[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<T>(c);
    dnorm_norm_mean /= static_cast<T>(c);
    T* dx = dinp + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const T norm = (x[j] - m) * s;
      const T dnorm = w[j] * d[j];
      db[j] += d[j];
      dw[j] += norm * d[j];
      dx[j] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

// out[N,OC] = inp[N,IC] @ w[IC,OC] (+ bias[OC] when not null).
template <typename T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int64_t n, int64_t ic, int64_t oc) {
  gemm(false, false, n, oc, ic, T(1), inp, ic, w, oc, T(0), out, oc);
  if (bias) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < oc; ++j) out[i * oc + j] += bias[j];
  }
}

// dinp[N,IC] = dout @ w^T (overwritten; skipped when null); dw[IC,OC] += inp^T @ dout;
// dbias[OC] += column sums of dout (skipped when null).
template <typename T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t n, int64_t ic,
                     int64_t oc) {
  if (dinp) gemm(false, true, n, ic, oc, T(1), dout, oc, w, oc, T(0), dinp, ic);
  gemm(true, false, ic, oc, n, T(1), inp, ic, dout, oc, T(1), dw, oc);
  if (dbias) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < oc; ++j) dbias[j] += dout[i * oc + j];
  }
}

// GeLU, tanh approximation (GPT-2).
template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
  const T k = static_cast<T>(std::sqrt(2.0 / M_PI));
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
}
// dinp[n] = dout * gelu'(inp) (overwritten).
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
  const T k = static_cast<T>(std::sqrt(2.0 / M_PI));
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T u = k * (x + T(0.044715) * x * x * x);
    const T th = std::tanh(u);
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * k * (T(1) + T(3) * T(0.044715) * x * x);
    dinp[i] = dout[i] * grad;
  }
}

// The MLP's activation between fc and fc-proj, on `rows` rows: out[rows, width] from the fc
// output in[rows, fc_width(a, width)]. gelu and squared-relu are elementwise (squared ReLU:
// relu(x)^2, Nemotron-4 / Primer); swiglu reads each row as [gate | up], width columns each, and
// gives silu(gate) * up (Megatron-LM's gated linear unit, megatron/core/transformer/mlp.py:
// torch.chunk(x, 2, dim=-1), silu(x0) * x1).
inline int64_t fc_width(Activation a, int64_t width) { return a == Activation::kSwiglu ? 2 * width : width; }

template <typename T>
void mlp_activation_forward(Activation a, T* out, const T* in, int64_t rows, int64_t width) {
  switch (a) {
    case Activation::kGelu: gelu_forward(out, in, rows * width); return;
    case Activation::kSquaredRelu:
      for (int64_t i = 0; i < rows * width; ++i) out[i] = in[i] > T(0) ? in[i] * in[i] : T(0);
      return;
    case Activation::kSwiglu:
      for (int64_t r = 0; r < rows; ++r) {
        const T* gate = in + r * 2 * width;
        const T* up = gate + width;
        for (int64_t j = 0; j < width; ++j) {
          const T g = gate[j];
          out[r * width + j] = g / (T(1) + std::exp(-g)) * up[j];
        }
      }
      return;
  }
}
// din[rows, fc_width(a, width)] = d activation / d in, times dout[rows, width] (overwritten).
template <typename T>
void mlp_activation_backward(Activation a, T* din, const T* in, const T* dout, int64_t rows, int64_t width) {
  switch (a) {
    case Activation::kGelu: gelu_backward(din, in, dout, rows * width); return;
    case Activation::kSquaredRelu:
      for (int64_t i = 0; i < rows * width; ++i) din[i] = in[i] > T(0) ? T(2) * in[i] * dout[i] : T(0);
      return;
    case Activation::kSwiglu:
      for (int64_t r = 0; r < rows; ++r) {
        const T* gate = in + r * 2 * width;
        const T* up = gate + width;
        T* dgate = din + r * 2 * width;
        T* dup = dgate + width;
        for (int64_t j = 0; j < width; ++j) {
          const T g = gate[j], sig = T(1) / (T(1) + std::exp(-g)), d = dout[r * width + j];
          dgate[j] = d * up[j] * sig * (T(1) + g * (T(1) - sig));  // silu'(g) = sig (1 + g (1 - sig))
          dup[j] = d * g * sig;
        }
      }
      return;
  }
}

// Causal softmax of one head's scores in place: p[S,S] holds q.k * scale; rows become
// probabilities over j <= i, zero above the diagonal.
template <typename T>
void causal_softmax_rows(T* p, int64_t s) {
  for (int64_t i = 0; i < s; ++i) {
    T* row = p + i * s;
    T mx = row[0];
    for (int64_t j = 1; j <= i; ++j) mx = row[j] > mx ? row[j] : mx;
    T sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
    for (int64_t j = i + 1; j < s; ++j) row[j] = 0;
  }
}

// Probabilities of head h of sample b: p[S,S] = causal_softmax(Q K^T / sqrt(hd)).
// qkv is [N, 3*CL] (q | k | v, CL = NH*hd local width), rows n = s*B + b.
template <typename T>
void attention_probs(T* p, const T* qkv, int64_t bsz, int64_t s, int64_t nh, int64_t hd, int64_t b, int64_t h) {
  const int64_t cl = nh * hd, ld = bsz * 3 * cl;
  const T* q = qkv + b * 3 * cl + h * hd;
  const T* k = q + cl;
  gemm(false, true, s, s, hd, static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd))), q, ld, k, ld, T(0), p, s);
  causal_softmax_rows(p, s);
}

// Dropout of the attention probabilities of one head: pd[S,S] = p * keep / (1 - prob), as
// Megatron (inverted dropout). keep_of(b, h) gives the head's [S,S] keep mask.
template <typename T>
void dropout_apply(T* out, const T* in, const uint8_t* keep, T scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = keep[i] ? in[i] * scale : T(0);
}

// Per-head dropout masks of the attention probabilities, or none (keep_of empty).
using HeadMask = std::function<const uint8_t*(int64_t b, int64_t h)>;

// out[N, CL] = per head dropout(softmax(Q K^T / sqrt(hd))) V. att[B,NH,S,S] keeps the
// probabilities when not null (no recompute); otherwise scratch[S,S] holds them one head at a
// time. With dropout (keep_of set) att_drop[B,NH,S,S] keeps the dropped-out probabilities (or
// scratch_drop[S,S] when null), scale = 1 / (1 - p).
template <typename T>
void attention_forward(T* out, T* att, T* scratch, const T* qkv, int64_t bsz, int64_t s, int64_t nh, int64_t hd,
                       const HeadMask& keep_of = {}, T* att_drop = nullptr, T* scratch_drop = nullptr, T scale = T(1)) {
  const int64_t cl = nh * hd;
  for (int64_t b = 0; b < bsz; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      T* p = att ? att + (b * nh + h) * s * s : scratch;
      attention_probs(p, qkv, bsz, s, nh, hd, b, h);
      const T* pv = p;
      if (keep_of) {
        T* pd = att_drop ? att_drop + (b * nh + h) * s * s : scratch_drop;
        dropout_apply(pd, p, keep_of(b, h), scale, s * s);
        pv = pd;
      }
      const T* v = qkv + b * 3 * cl + 2 * cl + h * hd;
      gemm(false, false, s, hd, s, T(1), pv, s, v, bsz * 3 * cl, T(0), out + b * cl + h * hd, bsz * cl);
    }
  }
}

// dqkv[N, 3*CL] (overwritten) from dout[N, CL]. att (and att_drop with dropout) as saved by the
// forward pass, or null to recompute the probabilities (selective recompute) into scratch_p[S,S]
// (and scratch_pd[S,S]); scratch_d is [S,S].
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, T* scratch_p, T* scratch_d,
                        int64_t bsz, int64_t s, int64_t nh, int64_t hd, const HeadMask& keep_of = {},
                        const T* att_drop = nullptr, T* scratch_pd = nullptr, T drop_scale = T(1)) {
  const int64_t cl = nh * hd, ld = bsz * 3 * cl, ldo = bsz * cl;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  for (int64_t b = 0; b < bsz; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      const T* p = att ? att + (b * nh + h) * s * s : scratch_p;
      if (!att) attention_probs(scratch_p, qkv, bsz, s, nh, hd, b, h);
      const uint8_t* keep = keep_of ? keep_of(b, h) : nullptr;
      const T* pv = p;  // what multiplied V in the forward pass
      if (keep) {
        if (att_drop) {
          pv = att_drop + (b * nh + h) * s * s;
        } else {
          dropout_apply(scratch_pd, p, keep, drop_scale, s * s);
          pv = scratch_pd;
        }
      }
      const T* q = qkv + b * 3 * cl + h * hd;
      const T* k = q + cl;
      const T* v = q + 2 * cl;
      const T* d = dout + b * cl + h * hd;
      T* dq = dqkv + b * 3 * cl + h * hd;
      T* dk = dq + cl;
      T* dv = dq + 2 * cl;
      T* dp = scratch_d;
      gemm(false, true, s, s, hd, T(1), d, ldo, v, ld, T(0), dp, s);   // dPv[S,S] = dO V^T
      gemm(true, false, s, hd, s, T(1), pv, s, d, ldo, T(0), dv, ld);  // dV[S,hd] = Pv^T dO
      if (keep) dropout_apply(dp, dp, keep, drop_scale, s * s);        // dP = dPv * keep / (1 - p)
      for (int64_t i = 0; i < s; ++i) {                                 // dScores = P * (dP - rowsum(P dP))
        T dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += p[i * s + j] * dp[i * s + j];
        for (int64_t j = 0; j <= i; ++j) dp[i * s + j] = p[i * s + j] * (dp[i * s + j] - dot) * scale;
        for (int64_t j = i + 1; j < s; ++j) dp[i * s + j] = 0;
      }
      gemm(false, false, s, hd, s, T(1), dp, s, k, ld, T(0), dq, ld);  // dQ = dS K
      gemm(true, false, s, hd, s, T(1), dp, s, q, ld, T(0), dk, ld);   // dK = dS^T Q
    }
  }
}

}  // namespace monarch::realrt
