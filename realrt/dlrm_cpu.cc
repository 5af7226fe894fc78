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

namespace {

// One rank's part of the DLRM: its shards of the embedding tables (with row-wise Adagrad
// state), the replicated MLPs, and one training step split into its phases. Every rank makes
// the whole global batch's ids and its own samples' dense features, so every layout sees the
// same data.
class DlrmTrainer {
 public:
  DlrmTrainer(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& pl, DlrmComm& comm)
      : c_(c), pl_(pl), comm_(comm), n_(comm.size()), r_(comm.rank()), T_(static_cast<int64_t>(c.table_rows.size())),
        D_(c.dim), B_(c.global_batch), b_(B_ / n_), s0_(r_ * b_), inter_(D_ + (T_ + 1) * T_ / 2),
        P_(c.table_pooling.empty() ? std::vector<int64_t>(T_, c.pooling) : c.table_pooling),
        Pmax_(*std::max_element(P_.begin(), P_.end())) {
    // Tables by kind. tw_owned: table-wise tables this rank owns, ascending; rw: row-wise tables.
    for (int64_t t = 0; t < T_; ++t) {
      if (is(t, CpuTableSharding::kTableWise) && pl_[t].owner == r_) tw_owned_.push_back(t);
      if (is(t, CpuTableSharding::kRowWise)) rw_.push_back(t);
      if (is(t, CpuTableSharding::kDataParallel)) dp_.push_back(t);
    }
    R_ = static_cast<int64_t>(rw_.size());
    any_tw_ = std::any_of(pl_.begin(), pl_.end(), [](const CpuTablePlacement& p) { return p.kind == CpuTableSharding::kTableWise; });
    init_shards();
    bottom_ = make_mlp(c.dense_features, c.bottom_mlp, true, c.seed, 1);
    top_ = make_mlp(inter_, c.top_mlp, false, c.seed, 2);
    scount_.assign(n_, 0);
    rcount_.assign(n_, 0);
  }

  void step(int64_t step, DlrmCpuRun& run) {
    const auto t_start = std::chrono::steady_clock::now();
    step_ = step;
    a2a_calls_ = 0;
    make_batch();
    embedding_forward(run);
    const std::vector<float> logit = dense_forward();
    const std::vector<float> dlogit = loss(logit, run);
    dense_backward(dlogit);
    embedding_backward(run);
    run.a2a_calls_per_step = a2a_calls_;
    update(run);
    run.step_time_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  }

 private:
  bool is(int64_t t, CpuTableSharding k) const { return pl_[t].kind == k; }
  int64_t owned_by(int q) const {
    int64_t k = 0;
    for (int64_t t = 0; t < T_; ++t) k += is(t, CpuTableSharding::kTableWise) && pl_[t].owner == q;
    return k;
  }
  int64_t wire(const std::vector<int>& counts) const {  // bytes to other ranks
    int64_t w = 0;
    for (int q = 0; q < n_; ++q)
      if (q != r_) w += static_cast<int64_t>(counts[q]) * static_cast<int64_t>(sizeof(float));
    return w;
  }
  // The k-th id of sample s (global order) into table t, this step.
  int64_t id_of(int64_t s, int64_t t, int64_t k) const {
    return static_cast<int64_t>(hash(c_.seed, kIds, step_, (s * T_ + t) * Pmax_ + k) % static_cast<uint64_t>(c_.table_rows[t]));
  }

  // Embedding shards, initialised from the global (table, row, column) so every layout holds
  // the same values.
  void init_shards() {
    const int64_t D = D_;
    shards_.resize(T_);
    for (int64_t t = 0; t < T_; ++t) {
      Shard& s = shards_[t];
      const int64_t rows = c_.table_rows[t];
      if (is(t, CpuTableSharding::kDataParallel)) {
        s.lo = 0, s.hi = rows;
      } else if (is(t, CpuTableSharding::kTableWise)) {
        s.lo = 0, s.hi = pl_[t].owner == r_ ? rows : 0;
      } else {
        const int64_t per = (rows + n_ - 1) / n_;
        s.lo = std::min(rows, r_ * per), s.hi = std::min(rows, (r_ + 1) * per);
      }
      s.w.resize((s.hi - s.lo) * D);
      for (int64_t row = s.lo; row < s.hi; ++row)
        for (int64_t j = 0; j < D; ++j)
          s.w[(row - s.lo) * D + j] = 0.1f * (2.0f * uniform01(hash(c_.seed, kEmbInit, t, row, j)) - 1.0f);
      s.state.assign(s.hi - s.lo, 0.0f);
    }
  }

  // This rank's samples: dense features and labels.
  void make_batch() {
    const int64_t b = b_, s0 = s0_, F = c_.dense_features;
    x_.assign(b * F, 0.0f);
    label_.assign(b, 0.0f);
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t f = 0; f < F; ++f) x_[i * F + f] = uniform01(hash(c_.seed, kDenseX, step_, (s0 + i) * F + f));
      // Learnable from both sides: two dense features and the parity of table 0's first id.
      const float odd = id_of(s0 + i, 0, 0) % 2 == 1 ? 0.5f : 0.0f;
      label_[i] = x_[i * F] + x_[i * F + 1] + odd > 1.25f ? 1.0f : 0.0f;
    }
  }

  // Adds the rows of sample s's ids this rank holds of table t (pooled sum).
  void pool(int64_t t, int64_t s, float* out) const {
    const Shard& sh = shards_[t];
    for (int64_t k = 0; k < P_[t]; ++k) {
      const int64_t id = id_of(s, t, k);
      if (id < sh.lo || id >= sh.hi) continue;
      for (int64_t j = 0; j < D_; ++j) out[j] += sh.w[(id - sh.lo) * D_ + j];
    }
  }

  // emb_ [b, T, D]: the pooled sums of this rank's samples, whatever rank holds the rows.
  void embedding_forward(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, b = b_;
    emb_.assign(b * T * D, 0.0f);
    for (int64_t t : dp_)  // data-parallel tables: local
      for (int64_t i = 0; i < b; ++i) pool(t, s0_ + i, &emb_[(i * T + t) * D]);
    if (any_tw_) forward_table_wise(run);
    if (R_ > 0) forward_row_wise(run);
  }

  void forward_table_wise(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, B = B_, b = b_;
    const int n = n_;
    // send to q: [owned table][q's samples][D]
    send_.assign(tw_owned_.size() * B * D, 0.0f);
    for (int q = 0; q < n; ++q) {
      scount_[q] = static_cast<int>(tw_owned_.size() * b * D);
      rcount_[q] = static_cast<int>(owned_by(q) * b * D);
      for (size_t o = 0; o < tw_owned_.size(); ++o)
        for (int64_t i = 0; i < b; ++i) pool(tw_owned_[o], q * b + i, &send_[((q * tw_owned_.size() + o) * b + i) * D]);
    }
    recv_.assign(owned_by_total(pl_) * b * D, 0.0f);
    comm_.alltoallv(send_, scount_, recv_, rcount_);
    ++a2a_calls_;
    if (step_ == 0) {
      run.pooled_forward_send_bytes = static_cast<int64_t>(send_.size() * sizeof(float));
      run.pooled_forward_wire_bytes = wire(scount_);
    }
    int64_t off = 0;
    for (int q = 0; q < n; ++q)
      for (int64_t t = 0; t < T; ++t) {
        if (!is(t, CpuTableSharding::kTableWise) || pl_[t].owner != q) continue;
        for (int64_t i = 0; i < b; ++i, off += D)
          for (int64_t j = 0; j < D; ++j) emb_[(i * T + t) * D + j] = recv_[off + j];
      }
  }

  void forward_row_wise(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, b = b_, R = R_;
    const int n = n_;
    // send to q: partial sums [T_rw][q's samples][D]; received chunks are summed (reduce-scatter).
    send_.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
    for (int q = 0; q < n; ++q) {
      scount_[q] = rcount_[q] = static_cast<int>(R * b * D);
      for (int64_t k = 0; k < R; ++k)
        for (int64_t i = 0; i < b; ++i) pool(rw_[k], q * b + i, &send_[((q * R + k) * b + i) * D]);
    }
    recv_.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
    comm_.alltoallv(send_, scount_, recv_, rcount_);
    ++a2a_calls_;
    if (step_ == 0) {
      run.rw_forward_send_bytes = static_cast<int64_t>(send_.size() * sizeof(float));
      run.rw_forward_wire_bytes = wire(scount_);
    }
    for (int q = 0; q < n; ++q)
      for (int64_t k = 0; k < R; ++k)
        for (int64_t i = 0; i < b; ++i)
          for (int64_t j = 0; j < D; ++j) emb_[(i * T + rw_[k]) * D + j] += recv_[((q * R + k) * b + i) * D + j];
  }

  // Vector v of sample i's interaction: 0 the bottom MLP's output, t + 1 table t's pooled sum.
  const float* vec(int64_t i, int64_t v) const { return v == 0 ? &z0_[i * D_] : &emb_[(i * T_ + v - 1) * D_]; }

  // Bottom MLP, dot interaction, top MLP: the logits [b, 1].
  std::vector<float> dense_forward() {
    const int64_t T = T_, D = D_, b = b_, inter = inter_;
    z0_ = mlp_forward(bottom_, x_, b);  // [b, D]
    inter_out_.assign(b * inter, 0.0f);  // [b, D + pairs]
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < D; ++j) inter_out_[i * inter + j] = z0_[i * D + j];
      int64_t p = D;
      for (int64_t u = 0; u <= T; ++u)
        for (int64_t v = u + 1; v <= T; ++v, ++p) {
          float dot = 0;
          for (int64_t j = 0; j < D; ++j) dot += vec(i, u)[j] * vec(i, v)[j];
          inter_out_[i * inter + p] = dot;
        }
    }
    return mlp_forward(top_, inter_out_, b);
  }

  // BCE with logits, mean over the global batch (all-reduced); returns dlogit = (sigmoid - y) / B.
  std::vector<float> loss(const std::vector<float>& logit, DlrmCpuRun& run) {
    const int64_t B = B_, b = b_;
    std::vector<float> loss_sum = {0.0f};
    std::vector<float> dlogit(b);
    for (int64_t i = 0; i < b; ++i) {
      const float z = logit[i], y = label_[i];
      loss_sum[0] += std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z)));
      dlogit[i] = (1.0f / (1.0f + std::exp(-z)) - y) / static_cast<float>(B);
    }
    comm_.allreduce_sum(loss_sum);
    run.losses.push_back(static_cast<double>(loss_sum[0]) / static_cast<double>(B));
    return dlogit;
  }

  // Top MLP, interaction and bottom MLP backward: the MLP gradients, and demb_ [b, T, D].
  void dense_backward(const std::vector<float>& dlogit) {
    const int64_t T = T_, D = D_, b = b_, inter = inter_;
    for (auto* m : {&bottom_, &top_})
      for (Linear& L : *m) {
        std::fill(L.dw.begin(), L.dw.end(), 0.0f);
        std::fill(L.db.begin(), L.db.end(), 0.0f);
      }
    std::vector<float> dinter = mlp_backward(top_, dlogit, b);  // [b, inter]
    std::vector<float> dz0(b * D, 0.0f);
    demb_.assign(b * T * D, 0.0f);
    auto dvec = [&](int64_t i, int64_t v) -> float* { return v == 0 ? &dz0[i * D] : &demb_[(i * T + v - 1) * D]; };
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
    mlp_backward(bottom_, dz0, b);
  }

  float* g_at(int64_t t, int64_t s) { return &G_[(t * B_ + s) * D_]; }

  // G_ [T][B][D]: the gradients of the global batch's pooled sums where this rank needs them
  // (data-parallel tables: this rank's samples only; their row sums are all-reduced later).
  void embedding_backward(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, B = B_, b = b_;
    G_.assign(T * B * D, 0.0f);
    for (int64_t t : dp_)
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < D; ++j) g_at(t, s0_ + i)[j] = demb_[(i * T + t) * D + j];
    if (any_tw_) backward_table_wise(run);
    if (R_ > 0) backward_row_wise(run);
  }

  void backward_table_wise(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, B = B_, b = b_;
    const int n = n_;
    // send to owner q: [q's tables][my samples][D]; receive [my tables][q's samples][D].
    send_.clear();
    for (int q = 0; q < n; ++q) {
      scount_[q] = static_cast<int>(owned_by(q) * b * D);
      rcount_[q] = static_cast<int>(tw_owned_.size() * b * D);
      for (int64_t t = 0; t < T; ++t) {
        if (!is(t, CpuTableSharding::kTableWise) || pl_[t].owner != q) continue;
        for (int64_t i = 0; i < b; ++i) send_.insert(send_.end(), &demb_[(i * T + t) * D], &demb_[(i * T + t) * D] + D);
      }
    }
    recv_.assign(tw_owned_.size() * B * D, 0.0f);
    comm_.alltoallv(send_, scount_, recv_, rcount_);
    ++a2a_calls_;
    if (step_ == 0) {
      run.pooled_backward_send_bytes = static_cast<int64_t>(send_.size() * sizeof(float));
      run.pooled_backward_wire_bytes = wire(scount_);
    }
    for (int q = 0; q < n; ++q)
      for (size_t o = 0; o < tw_owned_.size(); ++o)
        for (int64_t i = 0; i < b; ++i)
          for (int64_t j = 0; j < D; ++j) g_at(tw_owned_[o], q * b + i)[j] = recv_[((q * tw_owned_.size() + o) * b + i) * D + j];
  }

  void backward_row_wise(DlrmCpuRun& run) {
    const int64_t T = T_, D = D_, b = b_, R = R_;
    const int n = n_;
    // every rank gets every sample's gradients (all-gather): send my [T_rw][b][D] to each.
    send_.clear();
    for (int q = 0; q < n; ++q) {
      scount_[q] = rcount_[q] = static_cast<int>(R * b * D);
      for (int64_t k = 0; k < R; ++k)
        for (int64_t i = 0; i < b; ++i) send_.insert(send_.end(), &demb_[(i * T + rw_[k]) * D], &demb_[(i * T + rw_[k]) * D] + D);
    }
    recv_.assign(static_cast<size_t>(n) * R * b * D, 0.0f);
    comm_.alltoallv(send_, scount_, recv_, rcount_);
    ++a2a_calls_;
    if (step_ == 0) {
      run.rw_backward_send_bytes = static_cast<int64_t>(send_.size() * sizeof(float));
      run.rw_backward_wire_bytes = wire(scount_);
    }
    for (int q = 0; q < n; ++q)
      for (int64_t k = 0; k < R; ++k)
        for (int64_t i = 0; i < b; ++i)
          for (int64_t j = 0; j < D; ++j) g_at(rw_[k], q * b + i)[j] = recv_[((q * R + k) * b + i) * D + j];
  }

  // Row gradients of a table's shard from the samples [s_lo, s_hi) (global sample order);
  // touched marks the rows the global batch touched.
  void row_grads(int64_t t, int64_t s_lo, int64_t s_hi, std::vector<float>& rg, std::vector<char>& touched) {
    const int64_t D = D_;
    const Shard& sh = shards_[t];
    rg.assign((sh.hi - sh.lo) * D, 0.0f);
    touched.assign(sh.hi - sh.lo, 0);
    for (int64_t s = 0; s < B_; ++s)
      for (int64_t k = 0; k < P_[t]; ++k) {
        const int64_t id = id_of(s, t, k);
        if (id < sh.lo || id >= sh.hi) continue;
        touched[id - sh.lo] = 1;
        if (s < s_lo || s >= s_hi) continue;
        for (int64_t j = 0; j < D; ++j) rg[(id - sh.lo) * D + j] += g_at(t, s)[j];
      }
  }

  // Row-wise Adagrad on the touched rows this rank holds.
  void adagrad(Shard& sh, const float* rg, const std::vector<char>& touched) const {
    const int64_t D = D_;
    for (int64_t row = 0; row < sh.hi - sh.lo; ++row) {
      if (!touched[row]) continue;
      float sq = 0;
      for (int64_t j = 0; j < D; ++j) sq += rg[row * D + j] * rg[row * D + j];
      sh.state[row] += sq / static_cast<float>(D);
      const float scale = c_.embedding_lr / (std::sqrt(sh.state[row]) + kAdagradEps);
      for (int64_t j = 0; j < D; ++j) sh.w[row * D + j] -= scale * rg[row * D + j];
    }
  }

  // Data-parallel all-reduce of the MLP gradients and the data-parallel tables' row gradients
  // (sums; the loss is already / B), SGD on the MLPs, Adagrad on every table's rows.
  void update(DlrmCpuRun& run) {
    std::vector<float> grads;
    for (auto* m : {&bottom_, &top_})
      for (Linear& L : *m) {
        grads.insert(grads.end(), L.dw.begin(), L.dw.end());
        grads.insert(grads.end(), L.db.begin(), L.db.end());
      }
    const size_t mlp_grads = grads.size();
    std::vector<std::vector<char>> dp_touched(dp_.size());
    for (size_t k = 0; k < dp_.size(); ++k) {
      std::vector<float> rg;
      row_grads(dp_[k], s0_, s0_ + b_, rg, dp_touched[k]);
      grads.insert(grads.end(), rg.begin(), rg.end());
    }
    if (step_ == 0) run.dp_allreduce_bytes = static_cast<int64_t>(grads.size() * sizeof(float));
    comm_.allreduce_sum(grads);
    size_t off = 0;
    for (auto* m : {&bottom_, &top_})
      for (Linear& L : *m) {
        for (float& w : L.w) w -= c_.dense_lr * grads[off++];
        for (float& v : L.b) v -= c_.dense_lr * grads[off++];
      }
    assert(off == mlp_grads);
    (void)mlp_grads;
    for (size_t k = 0; k < dp_.size(); ++k) {
      adagrad(shards_[dp_[k]], &grads[off], dp_touched[k]);
      off += shards_[dp_[k]].w.size();
    }
    for (int64_t t = 0; t < T_; ++t) {
      if (is(t, CpuTableSharding::kDataParallel)) continue;
      Shard& sh = shards_[t];
      if (sh.hi <= sh.lo) continue;
      std::vector<float> rg;
      std::vector<char> touched;
      row_grads(t, 0, B_, rg, touched);
      adagrad(sh, rg.data(), touched);
    }
  }

  const DlrmCpuConfig& c_;
  const std::vector<CpuTablePlacement>& pl_;
  DlrmComm& comm_;
  const int n_, r_;
  const int64_t T_, D_, B_, b_, s0_, inter_;  // tables, dim, global and local batch, first sample, interaction width
  const std::vector<int64_t> P_;             // pooling per table
  const int64_t Pmax_;
  std::vector<int64_t> tw_owned_, rw_, dp_;
  int64_t R_ = 0;
  bool any_tw_ = false;
  std::vector<Shard> shards_;
  std::vector<Linear> bottom_, top_;
  // This step's values.
  int64_t step_ = 0, a2a_calls_ = 0;
  std::vector<float> x_, label_, emb_, z0_, inter_out_, demb_, G_, send_, recv_;
  std::vector<int> scount_, rcount_;
};

}  // namespace

DlrmCpuRun train_dlrm_cpu(const DlrmCpuConfig& c, const std::vector<CpuTablePlacement>& pl, DlrmComm& comm) {
  assert(check_dlrm_cpu_placements(c, pl, comm.size()).empty());
  DlrmTrainer trainer(c, pl, comm);
  DlrmCpuRun run;
  for (int64_t step = 0; step < c.steps; ++step) trainer.step(step, run);
  return run;
}

}  // namespace monarch::realrt
