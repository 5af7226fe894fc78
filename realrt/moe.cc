#include "realrt/moe.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "realrt/kernels.h"

namespace monarch::realrt {

template <typename T>
void MoeActs<T>::release() {
  for (Buf<T>* b : {&probs, &gate, &xin, &fch, &fch_gelu, &y}) b->release();
  expert.clear();
  slot.clear();
  count.clear();
}

template <typename T>
MoeBlock<T>::MoeBlock(const MoeDims& dims, EpCollectives<T>* ep, EtpCollectives<T>* etp)
    : d_(dims), ep_(ep), etp_(etp) {
  assert(d_.experts > 1 && d_.top_k >= 1 && d_.top_k <= d_.experts);
  assert(d_.ep_size >= 1 && d_.experts % d_.ep_size == 0);
  assert(d_.ep_size == 1 || ep != nullptr);
  assert(d_.etp_size >= 1 && d_.ffn % d_.etp_size == 0);
  assert(d_.etp_size == 1 || etp != nullptr);
  assert(d_.capacity >= 1);
}

template <typename T>
void MoeBlock<T>::gather_rows(const T* mine, T* all) {
  const int64_t Q = d_.etp_size, El = d_.local_experts(), pc = d_.ep_size * d_.capacity, C = d_.hidden;
  Buf<T> g(Q * El * pc * C, MemCategory::kBuffers);  // [Q, El, P * cap, C] gathered
  etp_->all_gather(mine, g.data(), El * pc * C);
  for (int64_t q = 0; q < Q; ++q)
    for (int64_t j = 0; j < El; ++j)
      std::memcpy(all + (j * Q + q) * pc * C, g.data() + (q * El + j) * pc * C, sizeof(T) * pc * C);
}

template <typename T>
void MoeBlock<T>::reduce_scatter_rows(const T* partial, T* mine) {
  const int64_t Q = d_.etp_size, El = d_.local_experts(), pc = d_.ep_size * d_.capacity, C = d_.hidden;
  Buf<T> s(Q * El * pc * C, MemCategory::kBuffers);  // [Q, El, P * cap, C] by destination
  for (int64_t q = 0; q < Q; ++q)
    for (int64_t j = 0; j < El; ++j)
      std::memcpy(s.data() + (q * El + j) * pc * C, partial + (j * Q + q) * pc * C, sizeof(T) * pc * C);
  etp_->reduce_scatter(s.data(), mine, El * pc * C);
}

template <typename T>
void MoeBlock<T>::exchange_to_experts(const T* by_expert, T* by_local) {
  const int64_t P = d_.ep_size, El = d_.local_experts(), cap = d_.capacity, C = d_.hidden;
  const int64_t block = El * cap * C;  // one rank's share: its experts' slots
  Buf<T> recv(P * block, MemCategory::kBuffers);  // [P, El, cap, C]
  if (P > 1)
    ep_->all_to_all(by_expert, recv.data(), block);
  else
    std::memcpy(recv.data(), by_expert, sizeof(T) * block);
  for (int64_t r = 0; r < P; ++r)
    for (int64_t j = 0; j < El; ++j)
      std::memcpy(by_local + (j * P + r) * cap * C, recv.data() + (r * El + j) * cap * C, sizeof(T) * cap * C);
}

template <typename T>
void MoeBlock<T>::exchange_to_tokens(const T* by_local, T* by_expert) {
  const int64_t P = d_.ep_size, El = d_.local_experts(), cap = d_.capacity, C = d_.hidden;
  const int64_t block = El * cap * C;
  Buf<T> send(P * block, MemCategory::kBuffers);  // [P, El, cap, C]: rank r's tokens through my experts
  for (int64_t r = 0; r < P; ++r)
    for (int64_t j = 0; j < El; ++j)
      std::memcpy(send.data() + (r * El + j) * cap * C, by_local + (j * P + r) * cap * C, sizeof(T) * cap * C);
  if (P > 1)
    ep_->all_to_all(send.data(), by_expert, block);
  else
    std::memcpy(by_expert, send.data(), sizeof(T) * block);
}

template <typename T>
double MoeBlock<T>::forward(const MoeParams<T>& w, const T* x, T* out, MoeActs<T>& a, T aux_weight) {
  const int64_t N = d_.tokens, C = d_.hidden, E = d_.experts, K = d_.top_k, cap = d_.capacity;
  const int64_t P = d_.ep_size, El = d_.local_experts(), rows = d_.expert_rows();
  const auto act = MemCategory::kActivations;
  // Router: probabilities [N, E].
  a.probs = Buf<T>(N * E, act);
  gemm(false, false, N, E, C, T(1), x, C, w.router_w, E, T(0), a.probs.data(), E);
  for (int64_t n = 0; n < N; ++n) {
    T* p = a.probs.data() + n * E;
    T mx = p[0];
    for (int64_t e = 1; e < E; ++e) mx = std::max(mx, p[e]);
    T s = 0;
    for (int64_t e = 0; e < E; ++e) s += (p[e] = std::exp(p[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[e] /= s;
  }
  // Top-k, renormalised gates, slots in token order.
  a.expert.assign(static_cast<size_t>(N * K), 0);
  a.slot.assign(static_cast<size_t>(N * K), -1);
  a.gate = Buf<T>(N * K, act);
  a.count.assign(static_cast<size_t>(E), 0);
  std::vector<int64_t> fill(static_cast<size_t>(E), 0);
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const T* p = a.probs.data() + n * E;
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t i, int32_t j) { return p[i] > p[j] || (p[i] == p[j] && i < j); });
    T s = 0;
    for (int64_t k = 0; k < K; ++k) s += p[order[static_cast<size_t>(k)]];
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = order[static_cast<size_t>(k)];
      const size_t i = static_cast<size_t>(n * K + k);
      a.expert[i] = e;
      a.gate[n * K + k] = p[e] / s;
      a.count[static_cast<size_t>(e)] += 1;
      if (fill[static_cast<size_t>(e)] < cap) a.slot[i] = static_cast<int32_t>(fill[static_cast<size_t>(e)]++);
    }
  }
  // Dispatch: padded [E, cap, C] -> [El, P * cap, C] (-> [El, Q * P * cap, C] with ETP).
  const int64_t Q = d_.etp_size, Fl = d_.local_ffn(), pc = P * cap;
  {
    Buf<T> disp(E * cap * C, MemCategory::kBuffers);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = static_cast<size_t>(n * K + k);
        if (a.slot[i] < 0) continue;
        std::memcpy(disp.data() + (a.expert[i] * cap + a.slot[i]) * C, x + n * C, sizeof(T) * C);
      }
    a.xin = Buf<T>(El * rows * C, act);
    if (Q == 1) {
      exchange_to_experts(disp.data(), a.xin.data());
    } else {
      Buf<T> mine(El * pc * C, MemCategory::kBuffers);
      exchange_to_experts(disp.data(), mine.data());
      disp.release();
      gather_rows(mine.data(), a.xin.data());
    }
  }
  // Experts on their Q * P * cap rows (padding included: fixed shapes, as drop-and-pad); with
  // ETP each rank holds F/Q of every expert's hidden units and the proj output is a partial sum.
  const int64_t FC = d_.local_fc();  // fc output columns: Fl, or 2 Fl gated
  a.fch = Buf<T>(El * rows * FC, act);
  a.fch_gelu = Buf<T>(El * rows * Fl, act);
  Buf<T> yl(El * pc * C, MemCategory::kBuffers);  // [El, P * cap, C]
  Buf<T> ypart(Q > 1 ? El * rows * C : 0, kWorkspace);  // [El, Q * P * cap, C] partial sums
  const int64_t ep = d_.expert_params();
  for (int64_t j = 0; j < El; ++j) {
    const T* fc_w = w.experts + j * ep;
    const T* fc_b = fc_w + C * FC;
    const T* proj_w = fc_b + FC;
    const T* proj_b = proj_w + Fl * C;
    matmul_forward(a.fch.data() + j * rows * FC, a.xin.data() + j * rows * C, fc_w, fc_b, rows, C, FC);
    mlp_activation_forward(d_.activation, a.fch_gelu.data() + j * rows * Fl, a.fch.data() + j * rows * FC, rows, Fl);
    if (Q == 1)
      matmul_forward(yl.data() + j * rows * C, a.fch_gelu.data() + j * rows * Fl, proj_w, proj_b, rows, Fl, C);
    else
      matmul_forward(ypart.data() + j * rows * C, a.fch_gelu.data() + j * rows * Fl, proj_w,
                     static_cast<const T*>(nullptr), rows, Fl, C);
  }
  if (Q > 1) {  // sum the partial outputs over the group, then the replicated bias
    reduce_scatter_rows(ypart.data(), yl.data());
    ypart.release();
    for (int64_t j = 0; j < El; ++j) {
      const T* proj_b = w.experts + j * ep + C * FC + FC + Fl * C;
      for (int64_t r = 0; r < pc; ++r)
        for (int64_t c = 0; c < C; ++c) yl[(j * pc + r) * C + c] += proj_b[c];
    }
  }
  // Combine.
  a.y = Buf<T>(E * cap * C, act);
  exchange_to_tokens(yl.data(), a.y.data());
  std::memset(out, 0, sizeof(T) * N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(n * K + k);
      if (a.slot[i] < 0) continue;
      const T g = a.gate[n * K + k];
      const T* y = a.y.data() + (a.expert[i] * cap + a.slot[i]) * C;
      for (int64_t c = 0; c < C; ++c) out[n * C + c] += g * y[c];
    }
  // Auxiliary loss.
  a.aux_weight = aux_weight;
  const double coef = kMoeAuxLossCoeff * static_cast<double>(E) / (static_cast<double>(N) * static_cast<double>(N * K));
  double aux = 0;
  for (int64_t e = 0; e < E; ++e) {
    double ps = 0;
    for (int64_t n = 0; n < N; ++n) ps += static_cast<double>(a.probs[n * E + e]);
    aux += static_cast<double>(a.count[static_cast<size_t>(e)]) * ps;
  }
  return coef * aux * static_cast<double>(aux_weight);
}

template <typename T>
void MoeBlock<T>::backward(const MoeParams<T>& w, const T* x, const T* dout, T* dx, MoeActs<T>& a) {
  const int64_t N = d_.tokens, C = d_.hidden, E = d_.experts, K = d_.top_k, cap = d_.capacity;
  const int64_t P = d_.ep_size, El = d_.local_experts(), rows = d_.expert_rows();
  const auto buf = MemCategory::kBuffers;
  // Combine backward: d gate and d y (gate x dout) per slot.
  Buf<T> dgate(N * K, buf);
  Buf<T> dy(E * cap * C, buf);  // [E, cap, C]
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(n * K + k);
      if (a.slot[i] < 0) continue;
      const T g = a.gate[n * K + k];
      const T* y = a.y.data() + (a.expert[i] * cap + a.slot[i]) * C;
      T* d = dy.data() + (a.expert[i] * cap + a.slot[i]) * C;
      T s = 0;
      for (int64_t c = 0; c < C; ++c) {
        s += dout[n * C + c] * y[c];
        d[c] = g * dout[n * C + c];
      }
      dgate[n * K + k] = s;
    }
  // Experts backward on the rank holding them (gathered over the expert-TP group).
  const int64_t Q = d_.etp_size, Fl = d_.local_ffn(), pc = P * cap;
  Buf<T> dyl(El * rows * C, buf);  // [El, Q * P * cap, C]
  if (Q == 1) {
    exchange_to_experts(dy.data(), dyl.data());
  } else {
    Buf<T> mine(El * pc * C, buf);
    exchange_to_experts(dy.data(), mine.data());
    gather_rows(mine.data(), dyl.data());
  }
  dy.release();
  Buf<T> dxl(El * rows * C, buf);  // [El, Q * P * cap, C] (partial sums with ETP)
  {
    const int64_t FC = d_.local_fc();
    Buf<T> dg(rows * Fl, buf), dh(rows * FC, buf);
    const int64_t ep = d_.expert_params();
    for (int64_t j = 0; j < El; ++j) {
      const T* fc_w = w.experts + j * ep;
      const T* proj_w = fc_w + C * FC + FC;
      T* dfc_w = w.dexperts + j * ep;
      T* dfc_b = dfc_w + C * FC;
      T* dproj_w = dfc_b + FC;
      T* dproj_b = dproj_w + Fl * C;
      matmul_backward(dg.data(), dproj_w, dproj_b, dyl.data() + j * rows * C, a.fch_gelu.data() + j * rows * Fl, proj_w,
                      rows, Fl, C);
      mlp_activation_backward(d_.activation, dh.data(), a.fch.data() + j * rows * FC, dg.data(), rows, Fl);
      matmul_backward(dxl.data() + j * rows * C, dfc_w, dfc_b, dh.data(), a.xin.data() + j * rows * C, fc_w, rows, C, FC);
    }
  }
  dyl.release();
  if (Q > 1) {
    Buf<T> mine(El * pc * C, buf);
    reduce_scatter_rows(dxl.data(), mine.data());
    dxl = std::move(mine);
  }
  Buf<T> dxe(E * cap * C, buf);  // [E, cap, C] input gradients back at the token's rank
  exchange_to_tokens(dxl.data(), dxe.data());
  dxl.release();
  std::memset(dx, 0, sizeof(T) * N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(n * K + k);
      if (a.slot[i] < 0) continue;
      const T* d = dxe.data() + (a.expert[i] * cap + a.slot[i]) * C;
      for (int64_t c = 0; c < C; ++c) dx[n * C + c] += d[c];
    }
  // Router backward: d probabilities (renormalised gates + aux loss), softmax, linear.
  const T aux_g = static_cast<T>(kMoeAuxLossCoeff * static_cast<double>(E) /
                                 (static_cast<double>(N) * static_cast<double>(N * K))) * a.aux_weight;
  Buf<T> dlogits(N * E, buf);  // [N, E]
  std::vector<T> dp(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const T* p = a.probs.data() + n * E;
    for (int64_t e = 0; e < E; ++e) dp[static_cast<size_t>(e)] = aux_g * static_cast<T>(a.count[static_cast<size_t>(e)]);
    // g_k = p_k / s, s = sum of chosen p: d p_j = (d g_j - sum_k d g_k g_k) / s.
    T s = 0, dot = 0;
    for (int64_t k = 0; k < K; ++k) {
      s += p[a.expert[static_cast<size_t>(n * K + k)]];
      dot += dgate[n * K + k] * a.gate[n * K + k];
    }
    for (int64_t k = 0; k < K; ++k)
      dp[static_cast<size_t>(a.expert[static_cast<size_t>(n * K + k)])] += (dgate[n * K + k] - dot) / s;
    T pd = 0;
    for (int64_t e = 0; e < E; ++e) pd += p[e] * dp[static_cast<size_t>(e)];
    for (int64_t e = 0; e < E; ++e) dlogits[n * E + e] = p[e] * (dp[static_cast<size_t>(e)] - pd);
  }
  gemm(false, true, N, C, E, T(1), dlogits.data(), E, w.router_w, E, T(1), dx, C);
  gemm(true, false, C, E, N, T(1), x, C, dlogits.data(), E, T(1), w.drouter_w, E);
}

template struct MoeActs<float>;
template struct MoeActs<double>;
template class MoeBlock<float>;
template class MoeBlock<double>;

}  // namespace monarch::realrt
