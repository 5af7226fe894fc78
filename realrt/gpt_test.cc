#include "realrt/gpt.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "realrt/reference.h"

namespace monarch::realrt {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.num_layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.ffn = 64;
  c.vocab = 32;
  c.seq = 8;
  return c;
}

ChunkSpec whole(const GptConfig& c, int64_t batch, Recompute r = Recompute::kNone) {
  ChunkSpec s;
  s.num_layers = c.num_layers;
  s.has_embedding = s.has_head = true;
  s.micro_batch_size = batch;
  s.recompute = r;
  return s;
}

// Loss of the double-precision model on one fixed batch (mean over tokens).
double loss_of(GptChunk<double>& m, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt, double scale,
               const DropoutKey& key) {
  const double l = m.forward(0, tok.data(), tgt.data(), nullptr, scale, key);
  m.discard(0);
  return l;
}

// Finite-difference gradient check of the whole model in fp64. For a few elements of every
// parameter tensor, the backward pass's gradient must match the central difference
// (L(p + h) - L(p - h)) / 2h with h = 1e-6. Tolerance |analytic - numeric| <= 1e-6 |numeric| +
// 1e-9: the central difference's truncation error is O(h^2) ~ 1e-12 and its rounding error about
// 1e-16 * L / h ~ 4e-10 for a loss near ln(32) = 3.5, so 1e-9 absolute leaves a margin of two
// and a half; a wrong formula is off by far more (a missing factor or term moves the gradient
// by its own size, >= 1e-4 here). Without dropout, and with hidden and attention dropout 0.3
// (the masks are a function of the key, so they are the same in every evaluation).
constexpr Activation kActivations[] = {Activation::kGelu, Activation::kSwiglu, Activation::kSquaredRelu};

TEST(GptGradCheck, BackwardMatchesCentralDifferencesInFp64) {
  for (Activation act : kActivations)
  for (const double drop : {0.0, 0.3})
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    GptConfig c = tiny();
    c.activation = act;
    c.hidden_dropout = c.attention_dropout = drop;
    const DropoutKey key{9, 4};
    const int64_t B = 2;
    const ChunkSpec spec = whole(c, B, r);
    GptChunk<double> m(c, spec, nullptr);
    const int64_t n = m.layout().total;
    std::vector<double> params(n), grads(n, 0.0);
    init_params(params.data(), m.layout(), c, spec, 7);
    // Non-trivial LayerNorm and bias values so their gradients are exercised away from 1 and 0.
    for (const auto& p : m.layout().params)
      if (p.init_std == 0)
        for (int64_t i = 0; i < p.size; ++i) params[p.offset + i] += 0.1 * std::sin(static_cast<double>(i + p.offset));
    m.bind(params.data(), grads.data());
    std::vector<int32_t> tok(c.seq * B), tgt(c.seq * B);
    synthetic_batch(tok.data(), tgt.data(), 3, 0, B, c.seq, c.vocab);
    const double scale = 1.0 / static_cast<double>(c.seq * B);
    m.forward(0, tok.data(), tgt.data(), nullptr, scale, key);
    m.backward(0, nullptr);
    const double h = 1e-6;
    double worst = 0;
    int checked = 0;
    for (const auto& p : m.layout().params) {
      for (int64_t k = 0; k < 4; ++k) {
        int64_t i = p.offset + (k * 7919 + 13) % p.size;
        if (p.name == "wte") i = p.offset + tok[k] * c.hidden + k;  // rows that are used
        const double saved = params[i];
        params[i] = saved + h;
        const double up = loss_of(m, tok, tgt, scale, key);
        params[i] = saved - h;
        const double down = loss_of(m, tok, tgt, scale, key);
        params[i] = saved;
        const double numeric = (up - down) / (2 * h);
        const double err = std::abs(grads[i] - numeric);
        EXPECT_LE(err, 1e-6 * std::abs(numeric) + 1e-9)
            << p.name << "[" << i - p.offset << "] analytic " << grads[i] << " numeric " << numeric
            << " recompute " << to_string(r) << " dropout " << drop << " activation " << to_string(act);
        worst = std::max(worst, err);
        ++checked;
      }
    }
    EXPECT_GT(checked, 50);
    RecordProperty("worst_abs_error", std::to_string(worst));
  }
}

// The same check on a mixture-of-experts model: 4 experts, top-2, capacity factor 0.75 so some
// assignments are dropped (capacity ceil(0.75 x 16 x 2 / 4) = 6 slots per expert for 16 tokens),
// aux loss included. The router's top-k choice and the drops are piecewise constant in the
// parameters; this seed's routing has no near-tie (a flipped choice would move the loss by far
// more than the tolerance, so a tie would show as a failure, not pass silently).
TEST(GptGradCheck, MixtureOfExpertsBackwardMatchesCentralDifferencesInFp64) {
  for (Activation act : kActivations)
  for (int64_t groups : {1, 2})  // 2: two routing groups per micro-batch, as the reference of TP 2 + SP
  for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
    GptConfig c = tiny();
    c.activation = act;
    c.experts = 4;
    c.top_k = 2;
    c.moe_ffn = 8;
    c.capacity_factor = 0.75;
    const int64_t B = 2;
    ChunkSpec spec = whole(c, B, r);
    spec.moe_route_groups = groups;
    GptChunk<double> m(c, spec, nullptr);
    const int64_t n = m.layout().total;
    ASSERT_TRUE(m.layout().find("h1.router_w") && m.layout().find("h1.e3.proj_w"));
    ASSERT_FALSE(m.layout().find("h1.fc_w"));
    std::vector<double> params(n), grads(n, 0.0);
    // Router weights 10x the default so the routing is far from uniform (large gaps between
    // the k-th and the next probability).
    init_params(params.data(), m.layout(), c, spec, 7);
    for (const auto& p : m.layout().params) {
      if (p.name.find("router_w") != std::string::npos)
        for (int64_t i = 0; i < p.size; ++i) params[p.offset + i] *= 10;
      if (p.init_std == 0)
        for (int64_t i = 0; i < p.size; ++i) params[p.offset + i] += 0.1 * std::sin(static_cast<double>(i + p.offset));
    }
    m.bind(params.data(), grads.data());
    std::vector<int32_t> tok(c.seq * B), tgt(c.seq * B);
    synthetic_batch(tok.data(), tgt.data(), 3, 0, B, c.seq, c.vocab);
    const double scale = 1.0 / static_cast<double>(c.seq * B);
    m.forward(0, tok.data(), tgt.data(), nullptr, scale);
    m.backward(0, nullptr);
    const double h = 1e-6;
    int checked = 0;
    for (const auto& p : m.layout().params) {
      for (int64_t k = 0; k < 4; ++k) {
        int64_t i = p.offset + (k * 7919 + 13) % p.size;
        if (p.name == "wte") i = p.offset + tok[k] * c.hidden + k;
        const double saved = params[i];
        params[i] = saved + h;
        const double up = loss_of(m, tok, tgt, scale, {});
        params[i] = saved - h;
        const double down = loss_of(m, tok, tgt, scale, {});
        params[i] = saved;
        const double numeric = (up - down) / (2 * h);
        EXPECT_LE(std::abs(grads[i] - numeric), 1e-6 * std::abs(numeric) + 1e-9)
            << p.name << "[" << i - p.offset << "] analytic " << grads[i] << " numeric " << numeric
            << " recompute " << to_string(r) << " routing groups " << groups;
        ++checked;
      }
    }
    EXPECT_GT(checked, 100);
  }
}

// Expert tensor parallelism of one MoE block in fp64, two ranks as two threads with in-memory
// all-gather / reduce-scatter: each rank routes its own 24 tokens and holds half of every
// expert's hidden units (fc columns, proj rows, the proj bias whole). Its output and input
// gradient must equal the unsharded block's on its tokens, its expert-weight gradients the
// matching slices of the unsharded gradients summed over both ranks' tokens (the proj bias: the
// whole sum on each rank), and its router gradient the unsharded one on its own tokens (the
// runtime then sums it over TP with the other replicated parameters). Together with the
// finite-difference check above (unsharded), this checks the ETP backward.
class ThreadEtp final : public EtpCollectives<double> {
 public:
  ThreadEtp(std::barrier<>& bar, std::vector<std::vector<double>>& slots, int rank) : bar_(bar), slots_(slots), rank_(rank) {}
  void all_gather(const double* in, double* out, int64_t n) override {
    slots_[rank_].assign(in, in + n);
    bar_.arrive_and_wait();
    for (size_t q = 0; q < slots_.size(); ++q) std::copy(slots_[q].begin(), slots_[q].end(), out + q * n);
    bar_.arrive_and_wait();
  }
  void reduce_scatter(const double* in, double* out, int64_t n) override {
    slots_[rank_].assign(in, in + n * static_cast<int64_t>(slots_.size()));
    bar_.arrive_and_wait();
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (const auto& sl : slots_) s += sl[rank_ * n + i];
      out[i] = s;
    }
    bar_.arrive_and_wait();
  }

 private:
  std::barrier<>& bar_;
  std::vector<std::vector<double>>& slots_;
  size_t rank_;
};

TEST(MoeBlock, ExpertTensorParallelShardsGiveTheUnshardedBlocksOutputsAndGradients) {
  MoeDims d;
  d.tokens = 24;
  d.hidden = 8;
  d.experts = 4;
  d.top_k = 2;
  d.ffn = 12;
  d.capacity = 10;  // 48 assignments, 40 slots: some drops
  const int64_t N = d.tokens, C = d.hidden, E = d.experts, F = d.ffn, Q = 2, Fl = F / Q;
  std::vector<double> router(C * E), experts(E * d.expert_params());
  for (size_t i = 0; i < router.size(); ++i) router[i] = std::sin(1.7 * static_cast<double>(i)) + (i % 4 == 0 ? 0.8 : 0);
  for (size_t i = 0; i < experts.size(); ++i) experts[i] = 0.1 * std::cos(0.3 * static_cast<double>(i));
  std::vector<std::vector<double>> x(Q, std::vector<double>(N * C)), dout(Q, std::vector<double>(N * C));
  for (int64_t q = 0; q < Q; ++q)
    for (int64_t i = 0; i < N * C; ++i) {
      x[q][i] = std::sin(0.37 * static_cast<double>(i + 1000 * q));
      dout[q][i] = std::cos(0.23 * static_cast<double>(i + 500 * q));
    }
  // Unsharded: per rank's tokens; expert gradients summed over both.
  MoeBlock<double> full(d, nullptr);
  std::vector<double> dexp_full(experts.size(), 0.0);
  std::vector<std::vector<double>> out_ref(Q), dx_ref(Q), drouter_ref(Q);
  for (int64_t q = 0; q < Q; ++q) {
    drouter_ref[q].assign(router.size(), 0.0);
    MoeParams<double> w{router.data(), drouter_ref[q].data(), experts.data(), dexp_full.data()};
    MoeActs<double> a;
    out_ref[q].resize(N * C);
    dx_ref[q].resize(N * C);
    full.forward(w, x[q].data(), out_ref[q].data(), a, 0.5);
    full.backward(w, x[q].data(), dout[q].data(), dx_ref[q].data(), a);
  }
  // Sharded: rank q's slice of every expert.
  MoeDims ds = d;
  ds.etp_size = Q;
  const int64_t ep_full = d.expert_params(), ep_l = ds.expert_params();
  auto shard = [&](const std::vector<double>& src, int64_t q) {
    std::vector<double> dst(E * ep_l);
    for (int64_t j = 0; j < E; ++j) {
      const double* f = src.data() + j * ep_full;
      double* o = dst.data() + j * ep_l;
      for (int64_t r = 0; r < C; ++r)
        for (int64_t c = 0; c < Fl; ++c) o[r * Fl + c] = f[r * F + q * Fl + c];  // fc_w columns
      for (int64_t c = 0; c < Fl; ++c) o[C * Fl + c] = f[C * F + q * Fl + c];    // fc_b
      for (int64_t r = 0; r < Fl; ++r)
        for (int64_t c = 0; c < C; ++c) o[C * Fl + Fl + r * C + c] = f[C * F + F + (q * Fl + r) * C + c];  // proj_w rows
      for (int64_t c = 0; c < C; ++c) o[C * Fl + Fl + Fl * C + c] = f[C * F + F + F * C + c];  // proj_b
    }
    return dst;
  };
  std::barrier<> bar(Q);
  std::vector<std::vector<double>> slots(Q);
  std::vector<std::vector<double>> out(Q, std::vector<double>(N * C)), dx(Q, std::vector<double>(N * C)),
      dexp(Q, std::vector<double>(E * ep_l, 0.0)), drouter(Q, std::vector<double>(router.size(), 0.0)), wexp(Q);
  std::vector<std::thread> threads;
  for (int64_t q = 0; q < Q; ++q) {
    wexp[q] = shard(experts, q);
    threads.emplace_back([&, q] {
      ThreadEtp coll(bar, slots, static_cast<int>(q));
      MoeDims dq = ds;
      dq.etp_rank = q;
      MoeBlock<double> blk(dq, nullptr, &coll);
      MoeParams<double> w{router.data(), drouter[q].data(), wexp[q].data(), dexp[q].data()};
      MoeActs<double> a;
      blk.forward(w, x[q].data(), out[q].data(), a, 0.5);
      blk.backward(w, x[q].data(), dout[q].data(), dx[q].data(), a);
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t q = 0; q < Q; ++q) {
    const std::vector<double> want = shard(dexp_full, q);
    for (int64_t i = 0; i < N * C; ++i) {
      EXPECT_NEAR(out[q][i], out_ref[q][i], 1e-12) << "rank " << q << " output " << i;
      EXPECT_NEAR(dx[q][i], dx_ref[q][i], 1e-12) << "rank " << q << " dx " << i;
    }
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(dexp[q][i], want[i], 1e-12) << "rank " << q << " expert grad " << i;
    for (size_t i = 0; i < router.size(); ++i) EXPECT_NEAR(drouter[q][i], drouter_ref[q][i], 1e-12) << "router " << i;
  }
}

// Routing and capacity of one MoE block: every token gets k distinct experts with gates summing
// to 1, each expert keeps at most `capacity` assignments in token order, and a token whose
// experts all dropped it gets a zero output.
TEST(MoeBlock, RoutesTopKWithinCapacityInTokenOrder) {
  MoeDims d;
  d.tokens = 32;
  d.hidden = 8;
  d.experts = 4;
  d.top_k = 2;
  d.ffn = 8;
  d.capacity = 10;  // 64 assignments, 40 slots: some drops
  MoeBlock<double> blk(d, nullptr);
  std::vector<double> router(d.hidden * d.experts), experts(d.experts * d.expert_params()), x(d.tokens * d.hidden),
      out(d.tokens * d.hidden);
  for (size_t i = 0; i < router.size(); ++i) router[i] = std::sin(1.7 * static_cast<double>(i)) + (i % 4 == 0 ? 0.8 : 0);
  for (size_t i = 0; i < experts.size(); ++i) experts[i] = 0.1 * std::cos(0.3 * static_cast<double>(i));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  MoeParams<double> w;
  w.router_w = router.data();
  w.experts = experts.data();
  MoeActs<double> a;
  blk.forward(w, x.data(), out.data(), a, 1.0);
  std::vector<int64_t> kept(4, 0), last_token(4, -1);
  int dropped = 0;
  for (int64_t n = 0; n < d.tokens; ++n) {
    EXPECT_NE(a.expert[n * 2], a.expert[n * 2 + 1]);
    EXPECT_NEAR(a.gate[n * 2] + a.gate[n * 2 + 1], 1.0, 1e-12);
    EXPECT_GE(a.gate[n * 2], a.gate[n * 2 + 1]);
    bool any = false;
    for (int64_t k = 0; k < 2; ++k) {
      const int32_t e = a.expert[n * 2 + k], s = a.slot[n * 2 + k];
      if (s < 0) {
        ++dropped;
        EXPECT_EQ(kept[e], d.capacity) << "dropped while expert " << e << " had room";
        continue;
      }
      any = true;
      EXPECT_EQ(s, kept[e]++);  // slots fill in token order
    }
    if (!any)
      for (int64_t c = 0; c < d.hidden; ++c) EXPECT_EQ(out[n * d.hidden + c], 0.0);
  }
  EXPECT_GT(dropped, 0);
  for (int64_t e = 0; e < 4; ++e) EXPECT_LE(kept[e], d.capacity);
}

// Recompute changes what is stored, never the result: fp32 gradients are bitwise equal (with
// dropout, so recomputation must regenerate the same masks).
TEST(GptRecompute, SelectiveAndFullGiveIdenticalGradients) {
  GptConfig c = tiny();
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  std::vector<std::vector<float>> all;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const ChunkSpec spec = whole(c, 2, r);
    GptChunk<float> m(c, spec, nullptr);
    std::vector<float> params(m.layout().total), grads(m.layout().total, 0.0f);
    init_params(params.data(), m.layout(), c, spec, 5);
    m.bind(params.data(), grads.data());
    std::vector<int32_t> tok(c.seq * 2), tgt(c.seq * 2);
    synthetic_batch(tok.data(), tgt.data(), 5, 0, 2, c.seq, c.vocab);
    m.forward(0, tok.data(), tgt.data(), nullptr, 0.01f, {5, 0});
    m.backward(0, nullptr);
    all.push_back(grads);
  }
  EXPECT_EQ(all[0], all[1]);
  EXPECT_EQ(all[0], all[2]);
}

// Tensor-parallel shards are slices of the same full tensors: concatenating the two shards of
// a column-parallel QKV weight gives the tp=1 tensor.
TEST(GptInit, ShardsAreSlicesOfTheFullTensor) {
  GptConfig c = tiny();
  ChunkSpec full_spec = whole(c, 1);
  ParamLayout full = make_param_layout(c, full_spec);
  std::vector<float> fp(full.total);
  init_params(fp.data(), full, c, full_spec, 11);
  const ParamInfo* q = full.find("h1.qkv_w");
  const ParamInfo* w = full.find("wte");
  ASSERT_TRUE(q && w);
  for (int64_t t = 0; t < 2; ++t) {
    ChunkSpec s = full_spec;
    s.tp_size = 2;
    s.tp_rank = t;
    ParamLayout l = make_param_layout(c, s);
    std::vector<float> sp(l.total);
    init_params(sp.data(), l, c, s, 11);
    const ParamInfo* qs = l.find("h1.qkv_w");
    const int64_t C = c.hidden, ls = C / 2;
    for (int64_t r = 0; r < C; ++r)
      for (int64_t k = 0; k < 3; ++k)
        for (int64_t j = 0; j < ls; ++j)
          ASSERT_EQ(sp[qs->offset + r * 3 * ls + k * ls + j], fp[q->offset + r * 3 * C + k * C + t * ls + j]);
    const ParamInfo* ws = l.find("wte");
    for (int64_t i = 0; i < ws->size; ++i) ASSERT_EQ(sp[ws->offset + i], fp[w->offset + t * ws->size + i]);
  }
}

// SwiGLU's fc [C, 2F] holds the gate and the up sections: each TP rank keeps its columns of both,
// in that order, so silu(gate) * up pairs the same hidden unit on every rank.
TEST(GptInit, GatedFcShardsTheGateAndUpSectionsAlike) {
  GptConfig c = tiny();
  c.activation = Activation::kSwiglu;
  ChunkSpec full_spec = whole(c, 1);
  ParamLayout full = make_param_layout(c, full_spec);
  const ParamInfo* fc = full.find("h0.fc_w");
  ASSERT_TRUE(fc);
  EXPECT_EQ(fc->cols, 2 * c.ffn);
  EXPECT_EQ(full.find("h0.fcproj_w")->rows, c.ffn);
  std::vector<float> fp(full.total);
  init_params(fp.data(), full, c, full_spec, 11);
  const int64_t C = c.hidden, F = c.ffn, T = 2, ls = F / T;
  for (int64_t t = 0; t < T; ++t) {
    ChunkSpec s = full_spec;
    s.tp_size = T;
    s.tp_rank = t;
    ParamLayout l = make_param_layout(c, s);
    std::vector<float> sp(l.total);
    init_params(sp.data(), l, c, s, 11);
    const ParamInfo* fs = l.find("h0.fc_w");
    ASSERT_EQ(fs->size, C * 2 * ls);
    for (int64_t r = 0; r < C; ++r)
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t j = 0; j < ls; ++j)
          ASSERT_EQ(sp[fs->offset + r * 2 * ls + k * ls + j], fp[fc->offset + r * 2 * F + k * F + t * ls + j]);
  }
}

// Dropout masks: the kept fraction is 1 - p; a sequence shard of the rows (SP) or a later
// micro-batch's rows are slices of the masks of the whole batch; another sample or layer
// draws other masks.
TEST(GptDropout, MasksDependOnPositionNotSharding) {
  const int64_t S = 64, B = 2, C = 32;
  const DropoutKey key{3, 10};
  std::vector<uint8_t> all(S * B * C), part(S * C), other(S * B * C);
  dropout_rows_mask(all.data(), key, 1, DropoutSite::kMlpOutput, 0, S * B, C, B, 0.25);
  double kept = 0;
  for (uint8_t k : all) kept += k;
  EXPECT_NEAR(kept / static_cast<double>(all.size()), 0.75, 0.02);
  // Rows 32..95 (a sequence shard of 2 under SP with tp 2).
  dropout_rows_mask(part.data(), key, 1, DropoutSite::kMlpOutput, S, S, C, B, 0.25);
  for (int64_t i = 0; i < S * C; ++i) ASSERT_EQ(part[i], all[S * C + i]);
  // Sample 11 alone (micro-batch of 1 starting there) = column b = 1 of the batch of 2.
  std::vector<uint8_t> one(S * C);
  dropout_rows_mask(one.data(), DropoutKey{3, 11}, 1, DropoutSite::kMlpOutput, 0, S, C, 1, 0.25);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t j = 0; j < C; ++j) ASSERT_EQ(one[s * C + j], all[(s * B + 1) * C + j]);
  dropout_rows_mask(other.data(), key, 2, DropoutSite::kMlpOutput, 0, S * B, C, B, 0.25);
  EXPECT_NE(other, all);
  std::vector<uint8_t> h0(S * S), h0b(S * S), h1(S * S);
  dropout_attention_mask(h0.data(), key, 0, 0, 0, 4, S, 0.1);
  dropout_attention_mask(h0b.data(), key, 0, 0, 0, 4, S, 0.1);
  dropout_attention_mask(h1.data(), key, 0, 0, 1, 4, S, 0.1);
  EXPECT_EQ(h0, h0b);
  EXPECT_NE(h0, h1);
  // p = 0 keeps everything.
  dropout_rows_mask(all.data(), key, 1, DropoutSite::kEmbedding, 0, S * B, C, B, 0.0);
  for (uint8_t k : all) ASSERT_EQ(k, 1);
}

// Dropout is applied in training: the loss with p > 0 differs from p = 0, and the masks are
// kept as 1 byte per element in the activations category (two hidden masks per layer and the
// embedding's [N, C], the attention masks [B, NH, S, S] with the dropped probabilities).
TEST(GptDropout, ChangesTheLossAndKeepsOneBytePerMaskElement) {
  GptConfig c = tiny();
  const int64_t B = 2, N = c.seq * B;
  std::vector<int32_t> tok(N), tgt(N);
  synthetic_batch(tok.data(), tgt.data(), 3, 0, B, c.seq, c.vocab);
  auto run = [&](double p, int64_t* act_bytes) {
    GptConfig cc = c;
    cc.hidden_dropout = cc.attention_dropout = p;
    const ChunkSpec spec = whole(cc, B);
    GptChunk<float> m(cc, spec, nullptr);
    std::vector<float> params(m.layout().total), grads(m.layout().total, 0.0f);
    init_params(params.data(), m.layout(), cc, spec, 5);
    m.bind(params.data(), grads.data());
    const int64_t before = memory_counters().current_bytes[static_cast<int>(MemCategory::kActivations)];
    const double loss = m.forward(0, tok.data(), tgt.data(), nullptr, 1.0f / static_cast<float>(N), {1, 0});
    *act_bytes = memory_counters().current_bytes[static_cast<int>(MemCategory::kActivations)] - before;
    m.discard(0);
    return loss;
  };
  int64_t with = 0, without = 0;
  const double l1 = run(0.1, &with), l0 = run(0.0, &without);
  EXPECT_GT(std::abs(l1 - l0), 1e-4);
  const int64_t masks = N * c.hidden * (1 + 2 * c.num_layers) + c.num_layers * B * c.heads * c.seq * c.seq;
  const int64_t dropped_probs = c.num_layers * B * c.heads * c.seq * c.seq * 4;
  EXPECT_EQ(with - without, masks + dropped_probs);
}

TEST(GptData, SyntheticStreamIsDeterministicAndInRange) {
  std::vector<int32_t> a(64 * 3), b(64 * 3), ta(64 * 3), tb(64 * 3);
  synthetic_batch(a.data(), ta.data(), 1, 10, 3, 64, 50);
  synthetic_batch(b.data(), tb.data(), 1, 10, 3, 64, 50);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ta, tb);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_GE(a[i], 0);
    ASSERT_LT(a[i], 50);
  }
  // Targets are the next inputs: row (s+1, b) input equals row (s, b) target.
  for (int64_t s = 0; s + 1 < 64; ++s)
    for (int64_t bb = 0; bb < 3; ++bb) ASSERT_EQ(a[(s + 1) * 3 + bb], ta[s * 3 + bb]);
  synthetic_batch(b.data(), tb.data(), 2, 10, 3, 64, 50);
  EXPECT_NE(a, b);  // another seed, another stream
}

TEST(GptTrain, SingleProcessLossFallsAndIsReproducible) {
  GptConfig c = tiny();
  c.seq = 16;
  TrainSettings t;
  t.global_batch_size = 4;
  t.micro_batch_size = 2;
  t.steps = 10;
  const auto a = train_single_process(c, t, Recompute::kNone);
  const auto b = train_single_process(c, t, Recompute::kNone);
  ASSERT_EQ(a.size(), 10u);
  EXPECT_EQ(a, b);
  EXPECT_NEAR(a[0], std::log(32.0), 0.2);  // near-uniform predictions at initialisation
  EXPECT_LT(a[9], a[0] - 0.05);
}

}  // namespace
}  // namespace monarch::realrt
