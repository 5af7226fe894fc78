#include "realrt/dlrm_moe_cpu.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace monarch::realrt {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {  // in [-0.5, 0.5)
  return static_cast<float>(mix(mix(mix(seed ^ mix(a)) ^ b) ^ c) >> 40) * (1.0f / 16777216.0f) - 0.5f;
}
enum Stream : uint64_t { kInput = 11, kTarget, kW0, kWg, kW1, kW2 };

// out[n] = sum_i a[i] * W[i, n] for one row (plain loops: a row's result does not depend on
// how many rows a rank holds, so routing decisions are identical in every layout).
void row_times(const float* a, const std::vector<float>& w, int64_t in, int64_t out, float* y) {
  for (int64_t j = 0; j < out; ++j) y[j] = 0;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j) y[j] += a[i] * w[i * out + j];
}
// y[i] = sum_j d[j] * W[i, j] (row times W transposed).
void row_times_t(const float* d, const std::vector<float>& w, int64_t in, int64_t out, float* y) {
  for (int64_t i = 0; i < in; ++i) {
    float s = 0;
    for (int64_t j = 0; j < out; ++j) s += d[j] * w[i * out + j];
    y[i] = s;
  }
}
// dW[i, j] += a[i] * d[j]
void outer_add(const float* a, const float* d, int64_t in, int64_t out, std::vector<float>& dw) {
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j) dw[i * out + j] += a[i] * d[j];
}

}  // namespace

std::string check_moe_cpu_config(const MoeCpuConfig& c, int n) {
  if (n < 1 || c.experts % n != 0) return "experts must be divisible by the expert-parallel degree";
  if (c.global_tokens % n != 0) return "global_tokens must be divisible by the number of ranks";
  if (c.top_k < 1 || c.top_k > c.experts) return "top_k must be in 1..experts";
  if (c.hidden < 1 || c.ffn < 1 || c.steps < 1) return "hidden, ffn and steps must be positive";
  return "";
}

MoeCpuRun train_moe_cpu(const MoeCpuConfig& c, DlrmComm& comm) {
  const int n = comm.size(), r = comm.rank();
  assert(check_moe_cpu_config(c, n).empty());
  const int64_t H = c.hidden, F = c.ffn, E = c.experts, K = c.top_k;
  const int64_t Tg = c.global_tokens, T = Tg / n, t0 = r * T;
  const int64_t El = E / n, e0 = r * El;  // local experts [e0, e0 + El)

  auto init = [&](Stream s, uint64_t which, int64_t size, float scale) {
    std::vector<float> w(size);
    for (int64_t i = 0; i < size; ++i) w[i] = scale * uniform(c.seed, s, which, i);
    return w;
  };
  std::vector<float> w0 = init(kW0, 0, H * H, 2.0f / std::sqrt(float(H)));
  std::vector<float> wg = init(kWg, 0, H * E, 2.0f / std::sqrt(float(H)));
  std::vector<std::vector<float>> w1(El), w2(El);
  for (int64_t e = 0; e < El; ++e) {
    w1[e] = init(kW1, e0 + e, H * F, 2.0f / std::sqrt(float(H)));
    w2[e] = init(kW2, e0 + e, F * H, 2.0f / std::sqrt(float(F)));
  }
  std::vector<float> x_in(T * H), target(T * H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) {
      x_in[t * H + j] = uniform(c.seed, kInput, t0 + t, j);
      target[t * H + j] = uniform(c.seed, kTarget, t0 + t, j);
    }

  MoeCpuRun run;
  for (int64_t step = 0; step < c.steps; ++step) {
    int64_t calls = 0;
    // ---- dense projection and router.
    std::vector<float> x(T * H), logits(T * E);
    for (int64_t t = 0; t < T; ++t) {
      row_times(&x_in[t * H], w0, H, H, &x[t * H]);
      row_times(&x[t * H], wg, H, E, &logits[t * E]);
    }
    std::vector<int64_t> chosen(T * K);
    std::vector<float> gate(T * K);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> idx(E);
      for (int64_t e = 0; e < E; ++e) idx[e] = e;
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return logits[t * E + a] > logits[t * E + b]; });
      float mx = logits[t * E + idx[0]], sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        chosen[t * K + k] = idx[k];
        gate[t * K + k] = std::exp(logits[t * E + idx[k]] - mx);
        sum += gate[t * K + k];
      }
      for (int64_t k = 0; k < K; ++k) gate[t * K + k] /= sum;
    }

    // ---- dispatch layout: to rank q, for q's experts ascending, the (token, slot) rows routed
    // there in token order. `slots` remembers which row is which.
    std::vector<std::vector<int64_t>> slots(E);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) slots[chosen[t * K + k]].push_back(t * K + k);
    std::vector<float> counts_send(n * El), counts_recv(n * El);
    std::vector<int> cnt(n, static_cast<int>(El));
    for (int64_t e = 0; e < E; ++e) counts_send[e] = static_cast<float>(slots[e].size());  // expert e is on rank e / El
    comm.alltoallv(counts_send, cnt, counts_recv, cnt);  // per-expert row counts (metadata)
    std::vector<int> sc(n, 0), rc(n, 0);
    for (int64_t e = 0; e < E; ++e) sc[e / El] += static_cast<int>(slots[e].size() * H);
    for (int q = 0; q < n; ++q)
      for (int64_t e = 0; e < El; ++e) rc[q] += static_cast<int>(counts_recv[q * El + e]) * static_cast<int>(H);
    auto pack = [&](const std::vector<float>& rows_of_slot) {  // rows_of_slot [T*K, H]
      std::vector<float> buf;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t s : slots[e]) buf.insert(buf.end(), &rows_of_slot[s * H], &rows_of_slot[s * H] + H);
      return buf;
    };
    auto unpack = [&](const std::vector<float>& buf) {  // inverse of pack
      std::vector<float> rows(T * K * H);
      int64_t off = 0;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t s : slots[e]) {
          std::copy(&buf[off], &buf[off] + H, &rows[s * H]);
          off += H;
        }
      return rows;
    };
    std::vector<float> x_slot(T * K * H);
    for (int64_t s = 0; s < T * K; ++s) std::copy(&x[(s / K) * H], &x[(s / K) * H] + H, &x_slot[s * H]);
    std::vector<float> send = pack(x_slot), xe;
    int64_t rows_in = 0;
    for (int q = 0; q < n; ++q) rows_in += rc[q] / H;
    xe.resize(rows_in * H);
    comm.alltoallv(send, sc, xe, rc);
    ++calls;
    if (step == 0) run.dispatch_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));

    // Received rows: from source q, for my experts ascending. Expert of each row:
    std::vector<int64_t> row_expert(rows_in);
    {
      int64_t i = 0;
      for (int q = 0; q < n; ++q)
        for (int64_t e = 0; e < El; ++e)
          for (int64_t j = 0; j < static_cast<int64_t>(counts_recv[q * El + e]); ++j) row_expert[i++] = e;
    }
    // ---- experts.
    std::vector<float> h(rows_in * F), ye(rows_in * H);
    for (int64_t i = 0; i < rows_in; ++i) {
      const int64_t e = row_expert[i];
      row_times(&xe[i * H], w1[e], H, F, &h[i * F]);
      for (int64_t j = 0; j < F; ++j) h[i * F + j] = std::max(0.0f, h[i * F + j]);
      row_times(&h[i * F], w2[e], F, H, &ye[i * H]);
    }
    // ---- combine: rows go back the way they came.
    std::vector<float> back(send.size());
    comm.alltoallv(ye, rc, back, sc);
    ++calls;
    if (step == 0) run.combine_send_bytes = static_cast<int64_t>(ye.size() * sizeof(float));
    const std::vector<float> out_slot = unpack(back);
    std::vector<float> y(T * H, 0.0f);
    for (int64_t s = 0; s < T * K; ++s)
      for (int64_t j = 0; j < H; ++j) y[(s / K) * H + j] += gate[s] * out_slot[s * H + j];

    // ---- loss.
    std::vector<float> loss = {0.0f};
    std::vector<float> dy(T * H);
    for (int64_t i = 0; i < T * H; ++i) {
      const float d = y[i] - target[i];
      loss[0] += 0.5f * d * d;
      dy[i] = d / static_cast<float>(Tg);
    }
    comm.allreduce_sum(loss);
    run.losses.push_back(static_cast<double>(loss[0]) / static_cast<double>(Tg));

    // ---- backward: gates, then the expert path through two more all-to-alls.
    std::vector<float> dout_slot(T * K * H), dgate(T * K);
    for (int64_t s = 0; s < T * K; ++s) {
      float dg = 0;
      for (int64_t j = 0; j < H; ++j) {
        dout_slot[s * H + j] = gate[s] * dy[(s / K) * H + j];
        dg += dy[(s / K) * H + j] * out_slot[s * H + j];
      }
      dgate[s] = dg;
    }
    std::vector<float> dsend = pack(dout_slot), dye(rows_in * H);
    comm.alltoallv(dsend, sc, dye, rc);
    ++calls;
    std::vector<std::vector<float>> dw1(El, std::vector<float>(H * F, 0.0f)), dw2(El, std::vector<float>(F * H, 0.0f));
    std::vector<float> dxe(rows_in * H), dh(F);
    for (int64_t i = 0; i < rows_in; ++i) {
      const int64_t e = row_expert[i];
      outer_add(&h[i * F], &dye[i * H], F, H, dw2[e]);
      row_times_t(&dye[i * H], w2[e], F, H, dh.data());
      for (int64_t j = 0; j < F; ++j)
        if (h[i * F + j] <= 0) dh[j] = 0;
      outer_add(&xe[i * H], dh.data(), H, F, dw1[e]);
      row_times_t(dh.data(), w1[e], H, F, &dxe[i * H]);
    }
    std::vector<float> dback(send.size());
    comm.alltoallv(dxe, rc, dback, sc);
    ++calls;
    const std::vector<float> dx_slot = unpack(dback);

    // dx = expert path + router path; dWg, dW0.
    std::vector<float> grads(H * H + H * E, 0.0f);  // [dW0 | dWg], all-reduced
    float* dw0 = grads.data();
    float* dwg = grads.data() + H * H;
    std::vector<float> dx(H), dlogit(E), tmp(H);
    for (int64_t t = 0; t < T; ++t) {
      std::fill(dx.begin(), dx.end(), 0.0f);
      std::fill(dlogit.begin(), dlogit.end(), 0.0f);
      float gd = 0;
      for (int64_t k = 0; k < K; ++k) gd += gate[t * K + k] * dgate[t * K + k];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t s = t * K + k;
        for (int64_t j = 0; j < H; ++j) dx[j] += dx_slot[s * H + j];
        dlogit[chosen[s]] = gate[s] * (dgate[s] - gd);  // softmax over the selected logits
      }
      for (int64_t i = 0; i < H; ++i)
        for (int64_t e = 0; e < E; ++e) dwg[i * E + e] += x[t * H + i] * dlogit[e];
      row_times_t(dlogit.data(), wg, H, E, tmp.data());
      for (int64_t j = 0; j < H; ++j) dx[j] += tmp[j];
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < H; ++j) dw0[i * H + j] += x_in[t * H + i] * dx[j];
    }
    comm.allreduce_sum(grads);
    for (int64_t i = 0; i < H * H; ++i) w0[i] -= c.lr * grads[i];
    for (int64_t i = 0; i < H * E; ++i) wg[i] -= c.lr * grads[H * H + i];
    for (int64_t e = 0; e < El; ++e) {
      for (int64_t i = 0; i < H * F; ++i) w1[e][i] -= c.lr * dw1[e][i];
      for (int64_t i = 0; i < F * H; ++i) w2[e][i] -= c.lr * dw2[e][i];
    }
    run.a2a_calls_per_step = calls;
  }
  return run;
}

}  // namespace monarch::realrt
