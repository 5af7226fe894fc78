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

namespace {

// Where each (token, slot) row goes and comes from: to rank q, for q's experts ascending, the
// rows routed there in token order; received rows come from source q, for this rank's experts
// ascending.
struct Dispatch {
  std::vector<std::vector<int64_t>> slots;  // by expert: the (token * K + k) rows routed to it
  std::vector<int> send_counts, recv_counts;  // floats to and from each rank
  int64_t rows_in = 0;                      // rows this rank's experts receive
  std::vector<int64_t> row_expert;          // local expert of each received row
  int64_t H = 0;
  int64_t rows_out = 0;  // T x K: no token is dropped, so the send buffer is rows_out x H

  // rows_of_slot [T*K, H] -> the send buffer in dispatch order.
  std::vector<float> pack(const std::vector<float>& rows_of_slot) const {
    std::vector<float> buf;
    for (const auto& expert_slots : slots)
      for (int64_t s : expert_slots) buf.insert(buf.end(), &rows_of_slot[s * H], &rows_of_slot[s * H] + H);
    return buf;
  }
  // The inverse of pack.
  std::vector<float> unpack(const std::vector<float>& buf) const {
    std::vector<float> rows(rows_out * H);
    int64_t off = 0;
    for (const auto& expert_slots : slots)
      for (int64_t s : expert_slots) {
        std::copy(&buf[off], &buf[off] + H, &rows[s * H]);
        off += H;
      }
    return rows;
  }
};

// One rank's part of the MoE block: its tokens, the dense and router weights (replicated) and
// its experts, trained step by step.
class MoeTrainer {
 public:
  MoeTrainer(const MoeCpuConfig& c, DlrmComm& comm)
      : c_(c), comm_(comm), n_(comm.size()), H_(c.hidden), F_(c.ffn), E_(c.experts), K_(c.top_k),
        T_(c.global_tokens / n_), El_(E_ / n_) {
    const int64_t t0 = comm.rank() * T_, e0 = comm.rank() * El_;  // local tokens and experts [e0, e0 + El)
    w0_ = init(kW0, 0, H_ * H_, 2.0f / std::sqrt(float(H_)));
    wg_ = init(kWg, 0, H_ * E_, 2.0f / std::sqrt(float(H_)));
    w1_.resize(El_);
    w2_.resize(El_);
    for (int64_t e = 0; e < El_; ++e) {
      w1_[e] = init(kW1, e0 + e, H_ * F_, 2.0f / std::sqrt(float(H_)));
      w2_[e] = init(kW2, e0 + e, F_ * H_, 2.0f / std::sqrt(float(F_)));
    }
    x_in_.resize(T_ * H_);
    target_.resize(T_ * H_);
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t j = 0; j < H_; ++j) {
        x_in_[t * H_ + j] = uniform(c.seed, kInput, t0 + t, j);
        target_[t * H_ + j] = uniform(c.seed, kTarget, t0 + t, j);
      }
  }

  void step(int64_t step, MoeCpuRun& run) {
    calls_ = 0;
    route();
    const Dispatch d = dispatch_layout();
    const std::vector<float> out_slot = experts_forward(d, step, run);
    run.losses.push_back(loss(out_slot));
    std::vector<float> dgate;
    const std::vector<float> dx_slot = experts_backward(d, out_slot, dgate);
    dense_backward_and_update(dx_slot, dgate);
    run.a2a_calls_per_step = calls_;
  }

 private:
  std::vector<float> init(Stream s, uint64_t which, int64_t size, float scale) const {
    std::vector<float> w(size);
    for (int64_t i = 0; i < size; ++i) w[i] = scale * uniform(c_.seed, s, which, i);
    return w;
  }

  // Dense projection and router: x, the top-k experts of each token and their gates.
  void route() {
    x_.assign(T_ * H_, 0.0f);
    std::vector<float> logits(T_ * E_);
    for (int64_t t = 0; t < T_; ++t) {
      row_times(&x_in_[t * H_], w0_, H_, H_, &x_[t * H_]);
      row_times(&x_[t * H_], wg_, H_, E_, &logits[t * E_]);
    }
    chosen_.assign(T_ * K_, 0);
    gate_.assign(T_ * K_, 0.0f);
    for (int64_t t = 0; t < T_; ++t) {
      std::vector<int64_t> idx(E_);
      for (int64_t e = 0; e < E_; ++e) idx[e] = e;
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return logits[t * E_ + a] > logits[t * E_ + b]; });
      float mx = logits[t * E_ + idx[0]], sum = 0;
      for (int64_t k = 0; k < K_; ++k) {
        chosen_[t * K_ + k] = idx[k];
        gate_[t * K_ + k] = std::exp(logits[t * E_ + idx[k]] - mx);
        sum += gate_[t * K_ + k];
      }
      for (int64_t k = 0; k < K_; ++k) gate_[t * K_ + k] /= sum;
    }
  }

  // The routed rows per expert, and the per-expert row counts exchanged (metadata all-to-all).
  Dispatch dispatch_layout() {
    Dispatch d;
    d.H = H_;
    d.rows_out = T_ * K_;
    d.slots.resize(E_);
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t k = 0; k < K_; ++k) d.slots[chosen_[t * K_ + k]].push_back(t * K_ + k);
    std::vector<float> counts_send(n_ * El_), counts_recv(n_ * El_);
    std::vector<int> cnt(n_, static_cast<int>(El_));
    for (int64_t e = 0; e < E_; ++e) counts_send[e] = static_cast<float>(d.slots[e].size());  // expert e is on rank e / El
    comm_.alltoallv(counts_send, cnt, counts_recv, cnt);
    d.send_counts.assign(n_, 0);
    d.recv_counts.assign(n_, 0);
    for (int64_t e = 0; e < E_; ++e) d.send_counts[e / El_] += static_cast<int>(d.slots[e].size() * H_);
    for (int q = 0; q < n_; ++q)
      for (int64_t e = 0; e < El_; ++e) d.recv_counts[q] += static_cast<int>(counts_recv[q * El_ + e]) * static_cast<int>(H_);
    for (int q = 0; q < n_; ++q) d.rows_in += d.recv_counts[q] / H_;
    d.row_expert.resize(d.rows_in);
    int64_t i = 0;
    for (int q = 0; q < n_; ++q)
      for (int64_t e = 0; e < El_; ++e)
        for (int64_t j = 0; j < static_cast<int64_t>(counts_recv[q * El_ + e]); ++j) d.row_expert[i++] = e;
    return d;
  }

  // Dispatch, the experts, combine: each (token, slot) row's expert output [T*K, H].
  std::vector<float> experts_forward(const Dispatch& d, int64_t step, MoeCpuRun& run) {
    std::vector<float> x_slot(T_ * K_ * H_);
    for (int64_t s = 0; s < T_ * K_; ++s) std::copy(&x_[(s / K_) * H_], &x_[(s / K_) * H_] + H_, &x_slot[s * H_]);
    const std::vector<float> send = d.pack(x_slot);
    xe_.resize(d.rows_in * H_);
    comm_.alltoallv(send, d.send_counts, xe_, d.recv_counts);
    ++calls_;
    if (step == 0) run.dispatch_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));
    h_.assign(d.rows_in * F_, 0.0f);
    std::vector<float> ye(d.rows_in * H_);
    for (int64_t i = 0; i < d.rows_in; ++i) {
      const int64_t e = d.row_expert[i];
      row_times(&xe_[i * H_], w1_[e], H_, F_, &h_[i * F_]);
      for (int64_t j = 0; j < F_; ++j) h_[i * F_ + j] = std::max(0.0f, h_[i * F_ + j]);
      row_times(&h_[i * F_], w2_[e], F_, H_, &ye[i * H_]);
    }
    // Combine: rows go back the way they came.
    std::vector<float> back(d.rows_out * H_);
    comm_.alltoallv(ye, d.recv_counts, back, d.send_counts);
    ++calls_;
    if (step == 0) run.combine_send_bytes = static_cast<int64_t>(ye.size() * sizeof(float));
    return d.unpack(back);
  }

  // y = the gated sum of each token's expert outputs; 0.5 |y - target|^2 averaged over the
  // global tokens (all-reduced); dy_ its gradient.
  double loss(const std::vector<float>& out_slot) {
    std::vector<float> y(T_ * H_, 0.0f);
    for (int64_t s = 0; s < T_ * K_; ++s)
      for (int64_t j = 0; j < H_; ++j) y[(s / K_) * H_ + j] += gate_[s] * out_slot[s * H_ + j];
    const int64_t Tg = c_.global_tokens;
    std::vector<float> loss = {0.0f};
    dy_.resize(T_ * H_);
    for (int64_t i = 0; i < T_ * H_; ++i) {
      const float d = y[i] - target_[i];
      loss[0] += 0.5f * d * d;
      dy_[i] = d / static_cast<float>(Tg);
    }
    comm_.allreduce_sum(loss);
    return static_cast<double>(loss[0]) / static_cast<double>(Tg);
  }

  // Backward through the gates and the experts (two more all-to-alls): the gradient of each
  // (token, slot) row's input, the gates' gradients in dgate; the experts' weights updated.
  std::vector<float> experts_backward(const Dispatch& d, const std::vector<float>& out_slot, std::vector<float>& dgate) {
    std::vector<float> dout_slot(T_ * K_ * H_);
    dgate.assign(T_ * K_, 0.0f);
    for (int64_t s = 0; s < T_ * K_; ++s) {
      float dg = 0;
      for (int64_t j = 0; j < H_; ++j) {
        dout_slot[s * H_ + j] = gate_[s] * dy_[(s / K_) * H_ + j];
        dg += dy_[(s / K_) * H_ + j] * out_slot[s * H_ + j];
      }
      dgate[s] = dg;
    }
    std::vector<float> dsend = d.pack(dout_slot), dye(d.rows_in * H_);
    comm_.alltoallv(dsend, d.send_counts, dye, d.recv_counts);
    ++calls_;
    std::vector<std::vector<float>> dw1(El_, std::vector<float>(H_ * F_, 0.0f)), dw2(El_, std::vector<float>(F_ * H_, 0.0f));
    std::vector<float> dxe(d.rows_in * H_), dh(F_);
    for (int64_t i = 0; i < d.rows_in; ++i) {
      const int64_t e = d.row_expert[i];
      outer_add(&h_[i * F_], &dye[i * H_], F_, H_, dw2[e]);
      row_times_t(&dye[i * H_], w2_[e], F_, H_, dh.data());
      for (int64_t j = 0; j < F_; ++j)
        if (h_[i * F_ + j] <= 0) dh[j] = 0;
      outer_add(&xe_[i * H_], dh.data(), H_, F_, dw1[e]);
      row_times_t(dh.data(), w1_[e], H_, F_, &dxe[i * H_]);
    }
    std::vector<float> dback(d.rows_out * H_);
    comm_.alltoallv(dxe, d.recv_counts, dback, d.send_counts);
    ++calls_;
    dw1_ = std::move(dw1);
    dw2_ = std::move(dw2);
    return d.unpack(dback);
  }

  // dx = expert path + router path; dWg and dW0 all-reduced; every weight updated (the
  // experts' gradients are complete on their owner).
  void dense_backward_and_update(const std::vector<float>& dx_slot, const std::vector<float>& dgate) {
    std::vector<float> grads(H_ * H_ + H_ * E_, 0.0f);  // [dW0 | dWg], all-reduced
    float* dw0 = grads.data();
    float* dwg = grads.data() + H_ * H_;
    std::vector<float> dx(H_), dlogit(E_), tmp(H_);
    for (int64_t t = 0; t < T_; ++t) {
      std::fill(dx.begin(), dx.end(), 0.0f);
      std::fill(dlogit.begin(), dlogit.end(), 0.0f);
      float gd = 0;
      for (int64_t k = 0; k < K_; ++k) gd += gate_[t * K_ + k] * dgate[t * K_ + k];
      for (int64_t k = 0; k < K_; ++k) {
        const int64_t s = t * K_ + k;
        for (int64_t j = 0; j < H_; ++j) dx[j] += dx_slot[s * H_ + j];
        dlogit[chosen_[s]] = gate_[s] * (dgate[s] - gd);  // softmax over the selected logits
      }
      for (int64_t i = 0; i < H_; ++i)
        for (int64_t e = 0; e < E_; ++e) dwg[i * E_ + e] += x_[t * H_ + i] * dlogit[e];
      row_times_t(dlogit.data(), wg_, H_, E_, tmp.data());
      for (int64_t j = 0; j < H_; ++j) dx[j] += tmp[j];
      for (int64_t i = 0; i < H_; ++i)
        for (int64_t j = 0; j < H_; ++j) dw0[i * H_ + j] += x_in_[t * H_ + i] * dx[j];
    }
    comm_.allreduce_sum(grads);
    for (int64_t i = 0; i < H_ * H_; ++i) w0_[i] -= c_.lr * grads[i];
    for (int64_t i = 0; i < H_ * E_; ++i) wg_[i] -= c_.lr * grads[H_ * H_ + i];
    for (int64_t e = 0; e < El_; ++e) {
      for (int64_t i = 0; i < H_ * F_; ++i) w1_[e][i] -= c_.lr * dw1_[e][i];
      for (int64_t i = 0; i < F_ * H_; ++i) w2_[e][i] -= c_.lr * dw2_[e][i];
    }
  }

  const MoeCpuConfig& c_;
  DlrmComm& comm_;
  const int n_;
  const int64_t H_, F_, E_, K_, T_, El_;
  std::vector<float> w0_, wg_, x_in_, target_;
  std::vector<std::vector<float>> w1_, w2_, dw1_, dw2_;
  // This step's activations: x, routing, the experts' inputs and hidden rows, the output gradient.
  std::vector<float> x_, gate_, xe_, h_, dy_;
  std::vector<int64_t> chosen_;
  int64_t calls_ = 0;
};

}  // namespace

MoeCpuRun train_moe_cpu(const MoeCpuConfig& c, DlrmComm& comm) {
  assert(check_moe_cpu_config(c, comm.size()).empty());
  MoeTrainer trainer(c, comm);
  MoeCpuRun run;
  for (int64_t step = 0; step < c.steps; ++step) trainer.step(step, run);
  return run;
}

}  // namespace monarch::realrt
