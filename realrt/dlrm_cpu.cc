#include "realrt/dlrm_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>

namespace monarch::realrt {

namespace {

// Row-wise Adagrad epsilon (FBGEMM's default eps for EXACT_ROWWISE_ADAGRAD is 1e-8).
constexpr float kAdagradEps = 1e-8f;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t hash(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  return mix(mix(mix(mix(seed ^ mix(a)) ^ b) ^ c) ^ d);
}
float uniform01(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

// Tags that keep the random streams apart.
enum Stream : uint64_t { kDenseX = 1, kIds, kEmbInit, kMlpInit };

struct Linear {
  int64_t in = 0, out = 0;
  bool relu = true;
  std::vector<float> w, b, dw, db;   // w [in, out] row-major
  std::vector<float> x, y;           // saved input [n, in] and output [n, out]

  void forward(const std::vector<float>& input, int64_t n) {
    x = input;
    y.assign(n * out, 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) y[i * out + j] = b[j];
    // y [n, out] += x [n, in] . w [in, out]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, x.data(), in, w.data(), out, 1.0f, y.data(), out);
    if (relu)
      for (float& v : y) v = v > 0 ? v : 0;
  }
  // dy [n, out] -> dx [n, in]; accumulates dw, db.
  std::vector<float> backward(std::vector<float> dy, int64_t n) {
    if (relu)
      for (size_t i = 0; i < dy.size(); ++i)
        if (y[i] <= 0) dy[i] = 0;
    // dw [in, out] += x^T [in, n] . dy [n, out]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, n, 1.0f, x.data(), in, dy.data(), out, 1.0f, dw.data(), out);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) db[j] += dy[i * out + j];
    std::vector<float> dx(n * in, 0.0f);
    // dx [n, in] = dy [n, out] . w^T [out, in]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, in, out, 1.0f, dy.data(), out, w.data(), out, 0.0f, dx.data(), in);
    return dx;
  }
};

std::vector<Linear> make_mlp(int64_t in, const std::vector<int64_t>& widths, bool last_relu, uint64_t seed, uint64_t tag) {
  std::vector<Linear> m;
  for (size_t l = 0; l < widths.size(); ++l) {
    Linear L;
    L.in = in;
    L.out = widths[l];
    L.relu = last_relu || l + 1 < widths.size();
    const float a = std::sqrt(1.0f / static_cast<float>(in));
    L.w.resize(in * L.out);
    for (size_t i = 0; i < L.w.size(); ++i) L.w[i] = a * (2.0f * uniform01(hash(seed, kMlpInit, tag * 1000 + l, i)) - 1.0f);
    L.b.assign(L.out, 0.0f);
    L.dw.assign(L.w.size(), 0.0f);
    L.db.assign(L.out, 0.0f);
    m.push_back(std::move(L));
    in = widths[l];
  }
  return m;
}

std::vector<float> mlp_forward(std::vector<Linear>& m, std::vector<float> x, int64_t n) {
  for (Linear& L : m) {
    L.forward(x, n);
    x = L.y;
  }
  return x;
}
std::vector<float> mlp_backward(std::vector<Linear>& m, std::vector<float> dy, int64_t n) {
  for (size_t l = m.size(); l-- > 0;) dy = m[l].backward(std::move(dy), n);
  return dy;
}

// One embedding table's rows [lo, hi) held by this rank, with row-wise Adagrad state.
struct Shard {
  int64_t lo = 0, hi = 0;
  std::vector<float> w;      // [hi - lo, dim]
  std::vector<float> state;  // [hi - lo]
};

// Table-wise tables in all (each rank receives b x D of each).
int64_t owned_by_total(const std::vector<CpuTablePlacement>& pl) {
  return std::count_if(pl.begin(), pl.end(), [](const CpuTablePlacement& p) { return p.kind == CpuTableSharding::kTableWise; });
}

}  // namespace

std::string check_dlrm_cpu_config(const DlrmCpuConfig& c, int n) {
  if (c.table_rows.empty()) return "no embedding tables";
  for (int64_t r : c.table_rows)
    if (r < 1) return "every table needs at least one row";
  if (!c.table_pooling.empty() && c.table_pooling.size() != c.table_rows.size())
    return "table_pooling needs one entry per table";
  for (int64_t p : c.table_pooling)
    if (p < 1) return "every table's pooling must be positive";
  if (c.bottom_mlp.empty() || c.bottom_mlp.back() != c.dim) return "the last bottom-MLP width must equal dim (dot interaction)";
  if (c.top_mlp.empty() || c.top_mlp.back() != 1) return "the last top-MLP width must be 1 (the logit)";
  if (n < 1 || c.global_batch % n != 0) return "global_batch must be divisible by the number of ranks";
  if (c.pooling < 1 || c.dim < 1 || c.dense_features < 1 || c.steps < 1) return "pooling, dim, dense_features and steps must be positive";
  return "";
}

std::string check_dlrm_cpu_placements(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& pl, int n) {
  if (std::string why = check_dlrm_cpu_config(c, n); !why.empty()) return why;
  if (pl.size() != c.table_rows.size()) return "one placement per table needed";
  for (size_t t = 0; t < pl.size(); ++t) {
    if (pl[t].kind == CpuTableSharding::kTableWise && (pl[t].owner < 0 || pl[t].owner >= n))
      return "table " + std::to_string(t) + ": owner rank " + std::to_string(pl[t].owner) + " outside 0.." + std::to_string(n - 1);
    if (pl[t].kind == CpuTableSharding::kRowWise && c.table_rows[t] < n)
      return "table " + std::to_string(t) + ": row-wise needs at least as many rows as ranks";
  }
  return "";
}

DlrmCpuRun train_dlrm_cpu(const DlrmCpuConfig& c, EmbeddingSharding sharding, DlrmComm& comm) {
  const int n = comm.size();
  assert(sharding != EmbeddingSharding::kLocal || n == 1);
  std::vector<CpuTablePlacement> pl;
  for (size_t t = 0; t < c.table_rows.size(); ++t) {
    if (sharding == EmbeddingSharding::kTableWise) pl.push_back({CpuTableSharding::kTableWise, static_cast<int>(t % n)});
    else if (sharding == EmbeddingSharding::kRowWise) pl.push_back({CpuTableSharding::kRowWise, 0});
    else pl.push_back({CpuTableSharding::kDataParallel, 0});
  }
  DlrmCpuRun run = train_dlrm_cpu(c, pl, comm);
  run.forward_a2a_send_bytes = run.pooled_forward_send_bytes + run.rw_forward_send_bytes;
  run.backward_a2a_send_bytes = run.pooled_backward_send_bytes + run.rw_backward_send_bytes;
  return run;
}

DlrmCpuRun train_dlrm_cpu(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& pl, DlrmComm& comm) {
  const int n = comm.size(), r = comm.rank();
  assert(check_dlrm_cpu_placements(c, pl, n).empty());
  const int64_t T = static_cast<int64_t>(c.table_rows.size());
  const int64_t D = c.dim, B = c.global_batch, b = B / n, s0 = r * b;
  const int64_t npairs = (T + 1) * T / 2;
  const int64_t inter = D + npairs;
  std::vector<int64_t> P(T, c.pooling);
  if (!c.table_pooling.empty()) P = c.table_pooling;
  const int64_t Pmax = *std::max_element(P.begin(), P.end());

  // Tables by kind. tw_owned: table-wise tables this rank owns, ascending; rw: row-wise tables.
  auto is = [&](int64_t t, CpuTableSharding k) { return pl[t].kind == k; };
  std::vector<int64_t> tw_owned, rw, dp;
  for (int64_t t = 0; t < T; ++t) {
    if (is(t, CpuTableSharding::kTableWise) && pl[t].owner == r) tw_owned.push_back(t);
    if (is(t, CpuTableSharding::kRowWise)) rw.push_back(t);
    if (is(t, CpuTableSharding::kDataParallel)) dp.push_back(t);
  }
  const int64_t R = static_cast<int64_t>(rw.size());
  auto owned_by = [&](int q) {
    int64_t k = 0;
    for (int64_t t = 0; t < T; ++t) k += is(t, CpuTableSharding::kTableWise) && pl[t].owner == q;
    return k;
  };
  const bool any_tw = std::any_of(pl.begin(), pl.end(), [](const CpuTablePlacement& p) { return p.kind == CpuTableSharding::kTableWise; });

  // Embedding shards, initialised from the global (table, row, column) so every layout holds
  // the same values.
  std::vector<Shard> shards(T);
  for (int64_t t = 0; t < T; ++t) {
    Shard& s = shards[t];
    const int64_t rows = c.table_rows[t];
    if (is(t, CpuTableSharding::kDataParallel)) {
      s.lo = 0, s.hi = rows;
    } else if (is(t, CpuTableSharding::kTableWise)) {
      s.lo = 0, s.hi = pl[t].owner == r ? rows : 0;
    } else {
      const int64_t per = (rows + n - 1) / n;
      s.lo = std::min(rows, r * per), s.hi = std::min(rows, (r + 1) * per);
    }
    s.w.resize((s.hi - s.lo) * D);
    for (int64_t row = s.lo; row < s.hi; ++row)
      for (int64_t j = 0; j < D; ++j)
        s.w[(row - s.lo) * D + j] = 0.1f * (2.0f * uniform01(hash(c.seed, kEmbInit, t, row, j)) - 1.0f);
    s.state.assign(s.hi - s.lo, 0.0f);
  }
  std::vector<Linear> bottom = make_mlp(c.dense_features, c.bottom_mlp, true, c.seed, 1);
  std::vector<Linear> top = make_mlp(inter, c.top_mlp, false, c.seed, 2);

  DlrmCpuRun run;
  auto wire = [&](const std::vector<int>& counts) {  // bytes to other ranks
    int64_t w = 0;
    for (int q = 0; q < n; ++q)
      if (q != r) w += static_cast<int64_t>(counts[q]) * static_cast<int64_t>(sizeof(float));
    return w;
  };
  for (int64_t step = 0; step < c.steps; ++step) {
    const auto t_start = std::chrono::steady_clock::now();
    // ---- data of the global batch (every rank makes all of it).
    auto id_of = [&](int64_t s, int64_t t, int64_t k) {
      return static_cast<int64_t>(hash(c.seed, kIds, step, (s * T + t) * Pmax + k) % static_cast<uint64_t>(c.table_rows[t]));
    };
    std::vector<float> x(b * c.dense_features), label(b);
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t f = 0; f < c.dense_features; ++f)
        x[i * c.dense_features + f] = uniform01(hash(c.seed, kDenseX, step, (s0 + i) * c.dense_features + f));
      // Learnable from both sides: two dense features and the parity of table 0's first id.
      const float odd = id_of(s0 + i, 0, 0) % 2 == 1 ? 0.5f : 0.0f;
      label[i] = x[i * c.dense_features] + x[i * c.dense_features + 1] + odd > 1.25f ? 1.0f : 0.0f;
    }

    // ---- embedding forward: emb [b, T, D] pooled sums for the local samples.
    auto pool = [&](int64_t t, int64_t s, float* out) {  // adds rows in [lo, hi) of sample s
      const Shard& sh = shards[t];
      for (int64_t k = 0; k < P[t]; ++k) {
        const int64_t id = id_of(s, t, k);
        if (id < sh.lo || id >= sh.hi) continue;
        for (int64_t j = 0; j < D; ++j) out[j] += sh.w[(id - sh.lo) * D + j];
      }
    };
    std::vector<float> emb(b * T * D, 0.0f);
    std::vector<int> scount(n), rcount(n);
    std::vector<float> send, recv;
    int64_t a2a_calls = 0;
    // data-parallel tables: local.
    for (int64_t t : dp)
      for (int64_t i = 0; i < b; ++i) pool(t, s0 + i, &emb[(i * T + t) * D]);
    if (any_tw) {
      // send to q: [owned table][q's samples][D]
      send.assign(tw_owned.size() * B * D, 0.0f);
      for (int q = 0; q < n; ++q) {
        scount[q] = static_cast<int>(tw_owned.size() * b * D);
        rcount[q] = static_cast<int>(owned_by(q) * b * D);
        for (size_t o = 0; o < tw_owned.size(); ++o)
          for (int64_t i = 0; i < b; ++i) pool(tw_owned[o], q * b + i, &send[((q * tw_owned.size() + o) * b + i) * D]);
      }
      recv.assign(owned_by_total(pl) * b * D, 0.0f);
      comm.alltoallv(send, scount, recv, rcount);
      ++a2a_calls;
      if (step == 0) {
        run.pooled_forward_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));
        run.pooled_forward_wire_bytes = wire(scount);
      }
      int64_t off = 0;
      for (int q = 0; q < n; ++q)
        for (int64_t t = 0; t < T; ++t) {
          if (!is(t, CpuTableSharding::kTableWise) || pl[t].owner != q) continue;
          for (int64_t i = 0; i < b; ++i, off += D)
            for (int64_t j = 0; j < D; ++j) emb[(i * T + t) * D + j] = recv[off + j];
        }
    }
    if (R > 0) {
      // send to q: partial sums [T_rw][q's samples][D]; received chunks are summed (reduce-scatter).
      send.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
      for (int q = 0; q < n; ++q) {
        scount[q] = rcount[q] = static_cast<int>(R * b * D);
        for (int64_t k = 0; k < R; ++k)
          for (int64_t i = 0; i < b; ++i) pool(rw[k], q * b + i, &send[((q * R + k) * b + i) * D]);
      }
      recv.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
      comm.alltoallv(send, scount, recv, rcount);
      ++a2a_calls;
      if (step == 0) {
        run.rw_forward_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));
        run.rw_forward_wire_bytes = wire(scount);
      }
      for (int q = 0; q < n; ++q)
        for (int64_t k = 0; k < R; ++k)
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < D; ++j) emb[(i * T + rw[k]) * D + j] += recv[((q * R + k) * b + i) * D + j];
    }
    // ---- dense forward.
    std::vector<float> z0 = mlp_forward(bottom, x, b);  // [b, D]
    auto vec = [&](int64_t i, int64_t v) -> const float* { return v == 0 ? &z0[i * D] : &emb[(i * T + v - 1) * D]; };
    std::vector<float> inter_out(b * inter);  // [b, D + pairs]
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < D; ++j) inter_out[i * inter + j] = z0[i * D + j];
      int64_t p = D;
      for (int64_t u = 0; u <= T; ++u)
        for (int64_t v = u + 1; v <= T; ++v, ++p) {
          float dot = 0;
          for (int64_t j = 0; j < D; ++j) dot += vec(i, u)[j] * vec(i, v)[j];
          inter_out[i * inter + p] = dot;
        }
    }
    std::vector<float> logit = mlp_forward(top, inter_out, b);  // [b, 1]

    // ---- loss: BCE with logits, mean over the global batch; dlogit = (sigmoid - y) / B.
    std::vector<float> loss_sum = {0.0f};
    std::vector<float> dlogit(b);
    for (int64_t i = 0; i < b; ++i) {
      const float z = logit[i], y = label[i];
      loss_sum[0] += std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z)));
      dlogit[i] = (1.0f / (1.0f + std::exp(-z)) - y) / static_cast<float>(B);
    }
    comm.allreduce_sum(loss_sum);
    run.losses.push_back(static_cast<double>(loss_sum[0]) / static_cast<double>(B));

    // ---- dense backward.
    for (auto* m : {&bottom, &top})
      for (Linear& L : *m) {
        std::fill(L.dw.begin(), L.dw.end(), 0.0f);
        std::fill(L.db.begin(), L.db.end(), 0.0f);
      }
    std::vector<float> dinter = mlp_backward(top, dlogit, b);  // [b, inter]
    std::vector<float> dz0(b * D, 0.0f), demb(b * T * D, 0.0f);
    auto dvec = [&](int64_t i, int64_t v) -> float* { return v == 0 ? &dz0[i * D] : &demb[(i * T + v - 1) * D]; };
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < D; ++j) dz0[i * D + j] += dinter[i * inter + j];
      int64_t p = D;
      for (int64_t u = 0; u <= T; ++u)
        for (int64_t v = u + 1; v <= T; ++v, ++p) {
          const float g = dinter[i * inter + p];
          for (int64_t j = 0; j < D; ++j) {
            dvec(i, u)[j] += g * vec(i, v)[j];
            dvec(i, v)[j] += g * vec(i, u)[j];
          }
        }
    }
    mlp_backward(bottom, dz0, b);

    // ---- embedding backward: G [T][B][D] gradients of the global batch where needed
    // (data-parallel tables: this rank's samples only; their row sums are all-reduced below).
    std::vector<float> G(T * B * D, 0.0f);
    auto g_at = [&](int64_t t, int64_t s) { return &G[(t * B + s) * D]; };
    for (int64_t t : dp)
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < D; ++j) g_at(t, s0 + i)[j] = demb[(i * T + t) * D + j];
    if (any_tw) {
      // send to owner q: [q's tables][my samples][D]; receive [my tables][q's samples][D].
      send.clear();
      for (int q = 0; q < n; ++q) {
        scount[q] = static_cast<int>(owned_by(q) * b * D);
        rcount[q] = static_cast<int>(tw_owned.size() * b * D);
        for (int64_t t = 0; t < T; ++t) {
          if (!is(t, CpuTableSharding::kTableWise) || pl[t].owner != q) continue;
          for (int64_t i = 0; i < b; ++i)
            send.insert(send.end(), &demb[(i * T + t) * D], &demb[(i * T + t) * D] + D);
        }
      }
      recv.assign(tw_owned.size() * B * D, 0.0f);
      comm.alltoallv(send, scount, recv, rcount);
      ++a2a_calls;
      if (step == 0) {
        run.pooled_backward_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));
        run.pooled_backward_wire_bytes = wire(scount);
      }
      for (int q = 0; q < n; ++q)
        for (size_t o = 0; o < tw_owned.size(); ++o)
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < D; ++j) g_at(tw_owned[o], q * b + i)[j] = recv[((q * tw_owned.size() + o) * b + i) * D + j];
    }
    if (R > 0) {
      // every rank gets every sample's gradients (all-gather): send my [T_rw][b][D] to each.
      send.clear();
      for (int q = 0; q < n; ++q) {
        scount[q] = rcount[q] = static_cast<int>(R * b * D);
        for (int64_t k = 0; k < R; ++k)
          for (int64_t i = 0; i < b; ++i) send.insert(send.end(), &demb[(i * T + rw[k]) * D], &demb[(i * T + rw[k]) * D] + D);
      }
      recv.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
      comm.alltoallv(send, scount, recv, rcount);
      ++a2a_calls;
      if (step == 0) {
        run.rw_backward_send_bytes = static_cast<int64_t>(send.size() * sizeof(float));
        run.rw_backward_wire_bytes = wire(scount);
      }
      for (int q = 0; q < n; ++q)
        for (int64_t k = 0; k < R; ++k)
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < D; ++j) g_at(rw[k], q * b + i)[j] = recv[((q * R + k) * b + i) * D + j];
    }
    run.a2a_calls_per_step = a2a_calls;

    // Row gradients of a table's shard from the samples [s_lo, s_hi) (global sample order).
    auto row_grads = [&](int64_t t, int64_t s_lo, int64_t s_hi, std::vector<float>& rg, std::vector<char>& touched) {
      const Shard& sh = shards[t];
      rg.assign((sh.hi - sh.lo) * D, 0.0f);
      touched.assign(sh.hi - sh.lo, 0);
      for (int64_t s = 0; s < B; ++s)
        for (int64_t k = 0; k < P[t]; ++k) {
          const int64_t id = id_of(s, t, k);
          if (id < sh.lo || id >= sh.hi) continue;
          touched[id - sh.lo] = 1;  // the global batch touched it
          if (s < s_lo || s >= s_hi) continue;
          for (int64_t j = 0; j < D; ++j) rg[(id - sh.lo) * D + j] += g_at(t, s)[j];
        }
    };

    // ---- data-parallel all-reduce of the MLP gradients and the data-parallel tables' dense
    // gradients (sums; the loss is already / B).
    std::vector<float> grads;
    for (auto* m : {&bottom, &top})
      for (Linear& L : *m) {
        grads.insert(grads.end(), L.dw.begin(), L.dw.end());
        grads.insert(grads.end(), L.db.begin(), L.db.end());
      }
    const size_t mlp_grads = grads.size();
    std::vector<std::vector<char>> dp_touched(dp.size());
    for (size_t k = 0; k < dp.size(); ++k) {
      std::vector<float> rg;
      row_grads(dp[k], s0, s0 + b, rg, dp_touched[k]);
      grads.insert(grads.end(), rg.begin(), rg.end());
    }
    if (step == 0) run.dp_allreduce_bytes = static_cast<int64_t>(grads.size() * sizeof(float));
    comm.allreduce_sum(grads);
    size_t off = 0;
    for (auto* m : {&bottom, &top})
      for (Linear& L : *m) {
        for (float& w : L.w) w -= c.dense_lr * grads[off++];
        for (float& v : L.b) v -= c.dense_lr * grads[off++];
      }
    assert(off == mlp_grads);
    (void)mlp_grads;

    // ---- row-wise Adagrad on the touched rows this rank holds.
    auto adagrad = [&](Shard& sh, const float* rg, const std::vector<char>& touched) {
      for (int64_t row = 0; row < sh.hi - sh.lo; ++row) {
        if (!touched[row]) continue;
        float sq = 0;
        for (int64_t j = 0; j < D; ++j) sq += rg[row * D + j] * rg[row * D + j];
        sh.state[row] += sq / static_cast<float>(D);
        const float scale = c.embedding_lr / (std::sqrt(sh.state[row]) + kAdagradEps);
        for (int64_t j = 0; j < D; ++j) sh.w[row * D + j] -= scale * rg[row * D + j];
      }
    };
    for (size_t k = 0; k < dp.size(); ++k) {
      adagrad(shards[dp[k]], &grads[off], dp_touched[k]);
      off += shards[dp[k]].w.size();
    }
    for (int64_t t = 0; t < T; ++t) {
      if (is(t, CpuTableSharding::kDataParallel)) continue;
      Shard& sh = shards[t];
      if (sh.hi <= sh.lo) continue;
      std::vector<float> rg;
      std::vector<char> touched;
      row_grads(t, 0, B, rg, touched);
      adagrad(sh, rg.data(), touched);
    }
    run.step_time_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  }
  return run;
}

}  // namespace monarch::realrt
