#include "realrt/gpu/gpu_trainer.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cassert>
#include <cmath>
#include <type_traits>

#include "realrt/gpu/gpt_kernels.h"
#include "realrt/gpu/gpu_check.h"
#include "realrt/kernels.h"

namespace monarch::realrt {

using gpu::bf16;

const char* to_string(GpuMath m) {
  switch (m) {
    case GpuMath::kFp32: return "fp32";
    case GpuMath::kTf32: return "tf32";
    case GpuMath::kBf16: return "bf16";
  }
  return "?";
}

Expected<GpuMath> parse_gpu_math(const std::string& text, const std::string& where) {
  if (text == "fp32") return GpuMath::kFp32;
  if (text == "tf32") return GpuMath::kTf32;
  if (text == "bf16") return GpuMath::kBf16;
  return Expected<GpuMath>::fail(where, "found \"" + text + "\", expected fp32, tf32 or bf16");
}

Problems check_gpu_train_config(const GpuTrainConfig& c) {
  Problems pr;
  const TrainSettings& t = c.train;
  if (c.dp_size < 1 || c.dp_rank < 0 || c.dp_rank >= c.dp_size) pr.push_back({"/plan/dp", "invalid data-parallel rank"});
  if (c.dp_size > 1 && !c.dp_comm) pr.push_back({"/plan/dp", "data parallelism needs an NCCL communicator"});
  if (t.micro_batch_size < 1 || t.global_batch_size % (t.micro_batch_size * std::max<int64_t>(c.dp_size, 1)) != 0)
    pr.push_back({"/training/global_batch_size", "must be a multiple of micro_batch_size x dp (" +
                                                    std::to_string(t.micro_batch_size) + " x " + std::to_string(c.dp_size) + ")"});
  if (c.model.seq > (int64_t(1) << 16))
    pr.push_back({"/model/seq_length", "the GPU runtime materialises [S, S] attention scores; at most 65536"});
  return pr;
}

int gpu_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount: no CUDA device";
  return n;
}

namespace {

// Device memory counted under one category of the runtime's allocator (realrt/memory.h), as
// Buf<T> is on the CPU; zeroed on allocation.
template <typename T>
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(int64_t n, MemCategory category) : n_(n), category_(category) {
    if (n_ <= 0) return;
    MONARCH_CUDA_CHECK(cudaMalloc(&p_, static_cast<size_t>(bytes())));
    MONARCH_CUDA_CHECK(cudaMemset(p_, 0, static_cast<size_t>(bytes())));
    count_alloc(static_cast<int>(category_), bytes());
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept { *this = std::move(o); }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      category_ = o.category_;
    }
    return *this;
  }
  ~DevBuf() { release(); }
  void release() {
    if (p_) {
      MONARCH_CUDA_WARN(cudaFree(p_));
      count_free(static_cast<int>(category_), bytes());
    }
    p_ = nullptr;
    n_ = 0;
  }
  T* data() const { return p_; }
  int64_t size() const { return n_; }
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(T)); }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
  MemCategory category_ = MemCategory::kBuffers;
};

// A CUDA event that is destroyed with its owner.
class Event {
 public:
  Event() { MONARCH_CUDA_CHECK(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { MONARCH_CUDA_WARN(cudaEventDestroy(e_)); }
  void record(cudaStream_t s) { MONARCH_CUDA_CHECK(cudaEventRecord(e_, s)); }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

double elapsed_s(const Event& a, const Event& b) {
  float ms = 0;
  MONARCH_CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return ms * 1e-3;
}

#define CK(call) MONARCH_CUDA_CHECK(call)  // kernel launchers return their launch error

}  // namespace

class GpuTrainer::Impl {
 public:
  virtual ~Impl() = default;
  virtual std::vector<double> train(int64_t last_step) = 0;
  virtual int64_t next_step() const = 0;
  virtual GpuReport report() const = 0;
  virtual std::vector<float> parameters() const = 0;
};

namespace {

// T: activation type (float for fp32 / tf32, bf16 for bf16).
template <typename T>
class Trainer final : public GpuTrainer::Impl {
 public:
  explicit Trainer(const GpuTrainConfig& cfg);
  ~Trainer() override;
  std::vector<double> train(int64_t last_step) override;
  int64_t next_step() const override { return step_; }
  GpuReport report() const override {
    GpuReport r = report_;
    r.memory = memory_counters();
    return r;
  }
  std::vector<float> parameters() const override {
    std::vector<float> out(static_cast<size_t>(layout_.total));
    CK(cudaMemcpy(out.data(), params_.data(), out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  // Activations of one layer for the current micro-batch (N = S * B rows).
  struct LayerActs {
    DevBuf<T> ln1;                  // [N, C]
    DevBuf<float> ln1_mean, ln1_rstd;  // [N]
    DevBuf<T> qkv;                  // [N, 3C]
    DevBuf<T> att;                  // [B, NH, S, S] softmax probabilities
    DevBuf<T> atty;                 // [N, C]
    DevBuf<T> res2;                 // [N, C]
    DevBuf<T> ln2;                  // [N, C]
    DevBuf<float> ln2_mean, ln2_rstd;  // [N]
    DevBuf<T> fch, fch_gelu;        // [N, F]
    DevBuf<T> out;                  // [N, C]
  };
  // A contiguous range of the flat gradient buffer, all-reduced as one call.
  struct Range {
    int64_t offset = 0, size = 0;
  };

  const float* P(const std::string& name) const { return params_.data() + offsets_.at(name); }
  float* G(const std::string& name) const { return grads_.data() + offsets_.at(name); }
  // Weights as matrix-product inputs: the fp32 master, or its bf16 copy.
  const T* W(const std::string& name) const {
    if constexpr (std::is_same_v<T, float>)
      return params_.data() + offsets_.at(name);
    else
      return params_bf16_.data() + offsets_.at(name);
  }
  Range range(const std::string& first, const std::string& last) const {
    const ParamInfo* a = layout_.find(first);
    const ParamInfo* b = layout_.find(last);
    assert(a && b && b->offset >= a->offset);
    return {a->offset, b->offset + b->size - a->offset};
  }

  // Row-major, exactly as realrt/kernels.h gemm: C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C,
  // `batch` times with element strides sa, sb, sc. A and B are T; C is T, or fp32 when c_fp32
  // (weight gradients). cuBLAS is column-major: a row-major X is X^T to it, so it computes
  // C^T = op(B)^T op(A)^T with the operands swapped.
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, float beta, void* c, int64_t ldc, bool c_fp32 = false, int64_t batch = 1, int64_t sa = 0,
            int64_t sb = 0, int64_t sc = 0) {
    const cudaDataType ab = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
    const cudaDataType ct = c_fp32 ? CUDA_R_32F : ab;
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    if (batch == 1) {
      MONARCH_CUBLAS_CHECK(cublasGemmEx(blas_, op_b, op_a, i(n), i(m), i(k), &alpha, b, ab, i(ldb), a, ab, i(lda), &beta, c,
                                        ct, i(ldc), compute_type_, CUBLAS_GEMM_DEFAULT));
    } else {
      MONARCH_CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas_, op_b, op_a, i(n), i(m), i(k), &alpha, b, ab, i(ldb), sb, a, ab,
                                                      i(lda), sa, &beta, c, ct, i(ldc), sc, i(batch), compute_type_,
                                                      CUBLAS_GEMM_DEFAULT));
    }
  }

  void forward(const int32_t* tokens, const int32_t* targets);
  void backward(const int32_t* tokens, bool last_micro_batch);
  void layer_forward(int64_t l, const T* in, LayerActs& a);
  void layer_backward(int64_t l, const T* in, LayerActs& a, const T* dout, T* din);
  void attention_forward(LayerActs& a);
  void attention_backward(LayerActs& a);
  // Data parallelism: all-reduces the ranges on the communication stream once the compute
  // stream has produced them, timed with events.
  void all_reduce_grads(const std::vector<Range>& ranges);

  GpuTrainConfig cfg_;
  ParamLayout layout_;
  std::map<std::string, int64_t> offsets_;
  int64_t n_, c_, f_, v_, nh_, hd_, s_, b_;  // rows (S x micro-batch), widths, heads, head dim, seq, micro-batch
  int64_t num_mb_;
  float loss_scale_;
  cublasComputeType_t compute_type_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  ncclComm_t dp_comm_ = nullptr;

  DevBuf<float> params_, grads_, adam_m_, adam_v_;
  DevBuf<bf16> params_bf16_;  // bf16 only
  std::vector<LayerActs> acts_;
  DevBuf<T> in_, lnf_, logits_;  // [N, C], [N, C], [N, V] (logits, then d loss / d logits)
  DevBuf<float> lnf_mean_, lnf_rstd_, row_loss_;  // [N]
  DevBuf<int32_t> tokens_, targets_;  // [num_mb, N] of the current step
  // Backward scratch.
  DevBuf<T> d_a_, d_b_, dres2_, dsmall_, tmp_, datty_;  // [N, C]
  DevBuf<T> dfch_;   // [N, F]
  DevBuf<T> dqkv_;   // [N, 3C]
  DevBuf<T> dp_;     // [NH, S, S] one sample's d probabilities

  // Measurement.
  Event ev_step_start_, ev_bwd_end_, ev_opt_start_, ev_step_end_;
  std::vector<std::unique_ptr<Event>> comm_events_;  // pairs (start, end) of this step's all-reduces
  size_t comm_events_used_ = 0;
  int64_t comm_bytes_this_step_ = 0, comm_calls_this_step_ = 0;
  GpuReport report_;
  int64_t step_ = 0;
};

template <typename T>
Trainer<T>::Trainer(const GpuTrainConfig& cfg) : cfg_(cfg) {
  const GptConfig& m = cfg.model;
  ChunkSpec spec;
  spec.first_layer = 0;
  spec.num_layers = m.num_layers;
  spec.has_embedding = spec.has_head = true;
  spec.micro_batch_size = cfg.train.micro_batch_size;
  layout_ = make_param_layout(m, spec);
  for (const auto& p : layout_.params) offsets_[p.name] = p.offset;
  s_ = m.seq;
  b_ = cfg.train.micro_batch_size;
  n_ = s_ * b_;
  c_ = m.hidden;
  f_ = m.ffn;
  v_ = m.vocab;
  nh_ = m.heads;
  hd_ = c_ / nh_;
  num_mb_ = cfg.train.global_batch_size / (cfg.dp_size * b_);
  loss_scale_ = 1.0f / static_cast<float>(m.seq * cfg.train.global_batch_size);
  compute_type_ = cfg.math == GpuMath::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  dp_comm_ = static_cast<ncclComm_t>(cfg.dp_comm);

  CK(cudaSetDevice(cfg.device));
  CK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  MONARCH_CUBLAS_CHECK(cublasCreate(&blas_));
  MONARCH_CUBLAS_CHECK(cublasSetStream(blas_, compute_));

  // Parameters, initialised on the host exactly as the CPU runtime does.
  const int64_t total = layout_.total;
  params_ = DevBuf<float>(total, MemCategory::kWeights);
  {
    std::vector<float> host(static_cast<size_t>(total));
    init_params(host.data(), layout_, m, spec, cfg.train.seed);
    CK(cudaMemcpy(params_.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  if constexpr (std::is_same_v<T, bf16>) {
    params_bf16_ = DevBuf<bf16>(total, MemCategory::kWeights);
    CK(gpu::cast_to_bf16(params_bf16_.data(), params_.data(), total, compute_));
  }
  grads_ = DevBuf<float>(total, MemCategory::kGradients);
  adam_m_ = DevBuf<float>(total, MemCategory::kOptimizer);
  adam_v_ = DevBuf<float>(total, MemCategory::kOptimizer);

  const auto act = MemCategory::kActivations, buf = MemCategory::kBuffers;
  const int64_t nc = n_ * c_, nf = n_ * f_;
  acts_.resize(static_cast<size_t>(m.num_layers));
  for (LayerActs& a : acts_) {
    a.ln1 = DevBuf<T>(nc, act);
    a.ln1_mean = DevBuf<float>(n_, act);
    a.ln1_rstd = DevBuf<float>(n_, act);
    a.qkv = DevBuf<T>(3 * nc, act);
    a.att = DevBuf<T>(b_ * nh_ * s_ * s_, act);
    a.atty = DevBuf<T>(nc, act);
    a.res2 = DevBuf<T>(nc, act);
    a.ln2 = DevBuf<T>(nc, act);
    a.ln2_mean = DevBuf<float>(n_, act);
    a.ln2_rstd = DevBuf<float>(n_, act);
    a.fch = DevBuf<T>(nf, act);
    a.fch_gelu = DevBuf<T>(nf, act);
    a.out = DevBuf<T>(nc, act);
  }
  in_ = DevBuf<T>(nc, act);
  lnf_ = DevBuf<T>(nc, act);
  lnf_mean_ = DevBuf<float>(n_, act);
  lnf_rstd_ = DevBuf<float>(n_, act);
  logits_ = DevBuf<T>(n_ * v_, act);
  row_loss_ = DevBuf<float>(n_, buf);
  tokens_ = DevBuf<int32_t>(num_mb_ * n_, buf);
  targets_ = DevBuf<int32_t>(num_mb_ * n_, buf);
  for (DevBuf<T>* d : {&d_a_, &d_b_, &dres2_, &dsmall_, &tmp_, &datty_}) *d = DevBuf<T>(nc, buf);
  dfch_ = DevBuf<T>(nf, buf);
  dqkv_ = DevBuf<T>(3 * nc, buf);
  dp_ = DevBuf<T>(nh_ * s_ * s_, buf);
  // The zeroing cudaMemsets run on the legacy default stream, which the non-blocking streams do
  // not wait for: finish everything before the first step.
  CK(cudaDeviceSynchronize());
  reset_memory_peaks();
}

template <typename T>
Trainer<T>::~Trainer() {
  if (compute_) MONARCH_CUDA_WARN(cudaStreamSynchronize(compute_));
  if (comm_) MONARCH_CUDA_WARN(cudaStreamSynchronize(comm_));
  if (blas_) MONARCH_CUBLAS_WARN(cublasDestroy(blas_));
  if (comm_) MONARCH_CUDA_WARN(cudaStreamDestroy(comm_));
  if (compute_) MONARCH_CUDA_WARN(cudaStreamDestroy(compute_));
}

template <typename T>
void Trainer<T>::attention_forward(LayerActs& a) {
  const int64_t C = c_, S = s_, ld = b_ * 3 * C, ss = S * S;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)));
  for (int64_t b = 0; b < b_; ++b) {  // per sample, batched over heads (head h at column h * hd)
    const T* q = a.qkv.data() + b * 3 * C;
    gemm(false, true, S, S, hd_, scale, q, ld, q + C, ld, 0.0f, a.att.data() + b * nh_ * ss, S, false, nh_, hd_, hd_, ss);
  }
  CK(gpu::causal_softmax_forward(a.att.data(), b_ * nh_ * S, S, compute_));
  for (int64_t b = 0; b < b_; ++b) {
    const T* v = a.qkv.data() + b * 3 * C + 2 * C;
    gemm(false, false, S, hd_, S, 1.0f, a.att.data() + b * nh_ * ss, S, v, ld, 0.0f, a.atty.data() + b * C, b_ * C,
         false, nh_, ss, hd_, hd_);
  }
}

template <typename T>
void Trainer<T>::attention_backward(LayerActs& a) {
  // As realrt/kernels.h attention_backward: dqkv[N, 3C] from datty_[N, C].
  const int64_t C = c_, S = s_, ld = b_ * 3 * C, ldo = b_ * C, ss = S * S;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)));
  for (int64_t b = 0; b < b_; ++b) {
    const T* p = a.att.data() + b * nh_ * ss;
    const T* q = a.qkv.data() + b * 3 * C;
    const T* k = q + C;
    const T* v = q + 2 * C;
    const T* d = datty_.data() + b * C;
    T* dq = dqkv_.data() + b * 3 * C;
    T* dk = dq + C;
    T* dv = dq + 2 * C;
    T* dp = dp_.data();
    gemm(false, true, S, S, hd_, 1.0f, d, ldo, v, ld, 0.0f, dp, S, false, nh_, hd_, hd_, ss);  // dP = dO V^T
    gemm(true, false, S, hd_, S, 1.0f, p, S, d, ldo, 0.0f, dv, ld, false, nh_, ss, hd_, hd_);  // dV = P^T dO
    CK(gpu::causal_softmax_backward(dp, p, nh_ * S, S, scale, compute_));                      // dS
    gemm(false, false, S, hd_, S, 1.0f, dp, S, k, ld, 0.0f, dq, ld, false, nh_, ss, hd_, hd_);  // dQ = dS K
    gemm(true, false, S, hd_, S, 1.0f, dp, S, q, ld, 0.0f, dk, ld, false, nh_, ss, hd_, hd_);   // dK = dS^T Q
  }
}

template <typename T>
void Trainer<T>::layer_forward(int64_t l, const T* in, LayerActs& a) {
  const std::string h = "h" + std::to_string(l) + ".";
  const int64_t N = n_, C = c_, F = f_;
  const float eps = static_cast<float>(kLayerNormEps);
  CK(gpu::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), in, P(h + "ln1_w"), P(h + "ln1_b"), N, C,
                            eps, compute_));
  gemm(false, false, N, 3 * C, C, 1.0f, a.ln1.data(), C, W(h + "qkv_w"), 3 * C, 0.0f, a.qkv.data(), 3 * C);
  CK(gpu::add_bias(a.qkv.data(), P(h + "qkv_b"), N, 3 * C, compute_));
  attention_forward(a);
  gemm(false, false, N, C, C, 1.0f, a.atty.data(), C, W(h + "proj_w"), C, 0.0f, tmp_.data(), C);
  CK(gpu::residual_forward(a.res2.data(), tmp_.data(), in, P(h + "proj_b"), N, C, compute_));
  CK(gpu::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), P(h + "ln2_w"),
                            P(h + "ln2_b"), N, C, eps, compute_));
  gemm(false, false, N, F, C, 1.0f, a.ln2.data(), C, W(h + "fc_w"), F, 0.0f, a.fch.data(), F);
  CK(gpu::add_bias(a.fch.data(), P(h + "fc_b"), N, F, compute_));
  CK(gpu::gelu_forward(a.fch_gelu.data(), a.fch.data(), N * F, compute_));
  gemm(false, false, N, C, F, 1.0f, a.fch_gelu.data(), F, W(h + "fcproj_w"), C, 0.0f, tmp_.data(), C);
  CK(gpu::residual_forward(a.out.data(), tmp_.data(), a.res2.data(), P(h + "fcproj_b"), N, C, compute_));
}

template <typename T>
void Trainer<T>::layer_backward(int64_t l, const T* in, LayerActs& a, const T* dout, T* din) {
  // The CPU's layer_backward (realrt/gpt.cc) with tp = 1, kernel for kernel.
  const std::string h = "h" + std::to_string(l) + ".";
  const int64_t N = n_, C = c_, F = f_;
  const size_t nc_bytes = static_cast<size_t>(N * C) * sizeof(T);
  // MLP block: out = res2 + fcproj(gelu(fc(ln2(res2)))) + fcproj_b.
  CK(cudaMemcpyAsync(dres2_.data(), dout, nc_bytes, cudaMemcpyDeviceToDevice, compute_));
  CK(gpu::bias_backward(G(h + "fcproj_b"), dout, N, C, compute_));
  gemm(false, true, N, F, C, 1.0f, dout, C, W(h + "fcproj_w"), C, 0.0f, dfch_.data(), F);        // d gelu output
  gemm(true, false, F, C, N, 1.0f, a.fch_gelu.data(), F, dout, C, 1.0f, G(h + "fcproj_w"), C, true);
  CK(gpu::gelu_backward(dfch_.data(), a.fch.data(), dfch_.data(), N * F, compute_));            // in place
  gemm(false, true, N, C, F, 1.0f, dfch_.data(), F, W(h + "fc_w"), F, 0.0f, dsmall_.data(), C);
  gemm(true, false, C, F, N, 1.0f, a.ln2.data(), C, dfch_.data(), F, 1.0f, G(h + "fc_w"), F, true);
  CK(gpu::bias_backward(G(h + "fc_b"), dfch_.data(), N, F, compute_));
  CK(gpu::layernorm_backward(dres2_.data(), G(h + "ln2_w"), G(h + "ln2_b"), dsmall_.data(), a.res2.data(),
                             P(h + "ln2_w"), a.ln2_mean.data(), a.ln2_rstd.data(), N, C, compute_));
  // Attention block: res2 = in + proj(attention(qkv(ln1(in)))) + proj_b.
  CK(gpu::bias_backward(G(h + "proj_b"), dres2_.data(), N, C, compute_));
  gemm(false, true, N, C, C, 1.0f, dres2_.data(), C, W(h + "proj_w"), C, 0.0f, datty_.data(), C);
  gemm(true, false, C, C, N, 1.0f, a.atty.data(), C, dres2_.data(), C, 1.0f, G(h + "proj_w"), C, true);
  attention_backward(a);
  gemm(false, true, N, C, 3 * C, 1.0f, dqkv_.data(), 3 * C, W(h + "qkv_w"), 3 * C, 0.0f, dsmall_.data(), C);
  gemm(true, false, C, 3 * C, N, 1.0f, a.ln1.data(), C, dqkv_.data(), 3 * C, 1.0f, G(h + "qkv_w"), 3 * C, true);
  CK(gpu::bias_backward(G(h + "qkv_b"), dqkv_.data(), N, 3 * C, compute_));
  CK(cudaMemcpyAsync(din, dres2_.data(), nc_bytes, cudaMemcpyDeviceToDevice, compute_));
  CK(gpu::layernorm_backward(din, G(h + "ln1_w"), G(h + "ln1_b"), dsmall_.data(), in, P(h + "ln1_w"),
                             a.ln1_mean.data(), a.ln1_rstd.data(), N, C, compute_));
}

template <typename T>
void Trainer<T>::forward(const int32_t* tokens, const int32_t* targets) {
  const int64_t N = n_, C = c_, V = v_;
  CK(gpu::embedding_forward(in_.data(), tokens, P("wte"), P("wpe"), N, b_, C, compute_));
  const T* x = in_.data();
  for (int64_t l = 0; l < cfg_.model.num_layers; ++l) {
    layer_forward(l, x, acts_[static_cast<size_t>(l)]);
    x = acts_[static_cast<size_t>(l)].out.data();
  }
  CK(gpu::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, P("lnf_w"), P("lnf_b"), N, C,
                            static_cast<float>(kLayerNormEps), compute_));
  gemm(false, true, N, V, C, 1.0f, lnf_.data(), C, W("wte"), C, 0.0f, logits_.data(), V);  // tied output
  CK(gpu::cross_entropy(logits_.data(), row_loss_.data(), targets, N, V, loss_scale_, compute_));
}

template <typename T>
void Trainer<T>::backward(const int32_t* tokens, bool last_micro_batch) {
  const int64_t N = n_, C = c_, V = v_, L = cfg_.model.num_layers;
  const bool reduce = cfg_.dp_size > 1 && last_micro_batch;
  const T* last = L > 0 ? acts_.back().out.data() : in_.data();
  gemm(false, false, N, C, V, 1.0f, logits_.data(), V, W("wte"), C, 0.0f, dsmall_.data(), C);     // d lnf
  gemm(true, false, V, C, N, 1.0f, logits_.data(), V, lnf_.data(), C, 1.0f, G("wte"), C, true);   // d wte (output)
  T* d = d_a_.data();
  T* dn = d_b_.data();
  CK(cudaMemsetAsync(d, 0, static_cast<size_t>(N * C) * sizeof(T), compute_));
  CK(gpu::layernorm_backward(d, G("lnf_w"), G("lnf_b"), dsmall_.data(), last, P("lnf_w"), lnf_mean_.data(),
                             lnf_rstd_.data(), N, C, compute_));
  for (int64_t l = L - 1; l >= 0; --l) {
    const T* in = l == 0 ? in_.data() : acts_[static_cast<size_t>(l - 1)].out.data();
    layer_backward(l, in, acts_[static_cast<size_t>(l)], d, dn);
    std::swap(d, dn);
    if (reduce) {  // this layer's gradients are final: reduce them while the layers below run
      const std::string h = "h" + std::to_string(l) + ".";
      all_reduce_grads({range(h + "qkv_w", h + "fcproj_w"), range(h + "ln1_w", h + "fcproj_b")});
    }
  }
  CK(gpu::embedding_backward(G("wte"), G("wpe"), tokens, d, N, b_, C, compute_));
  if (reduce) all_reduce_grads({range("wte", "wte"), range("wpe", "wpe"), range("lnf_w", "lnf_b")});
}

template <typename T>
void Trainer<T>::all_reduce_grads(const std::vector<Range>& ranges) {
  while (comm_events_.size() < comm_events_used_ + 3) comm_events_.push_back(std::make_unique<Event>());
  Event& ready = *comm_events_[comm_events_used_];
  Event& start = *comm_events_[comm_events_used_ + 1];
  Event& end = *comm_events_[comm_events_used_ + 2];
  comm_events_used_ += 3;
  ready.record(compute_);
  CK(cudaStreamWaitEvent(comm_, ready.get(), 0));
  start.record(comm_);
  MONARCH_NCCL_CHECK(ncclGroupStart());
  for (const Range& r : ranges) {
    float* g = grads_.data() + r.offset;
    MONARCH_NCCL_CHECK(ncclAllReduce(g, g, static_cast<size_t>(r.size), ncclFloat32, ncclSum, dp_comm_, comm_));
    comm_bytes_this_step_ += r.size * static_cast<int64_t>(sizeof(float));
    ++comm_calls_this_step_;
  }
  MONARCH_NCCL_CHECK(ncclGroupEnd());
  end.record(comm_);
}

template <typename T>
std::vector<double> Trainer<T>::train(int64_t last_step) {
  std::vector<double> losses;
  const TrainSettings& t = cfg_.train;
  std::vector<int32_t> tokens(static_cast<size_t>(num_mb_ * n_)), targets(tokens.size());
  std::vector<float> row_loss(static_cast<size_t>(n_));
  Event comm_done;
  for (; step_ < last_step; ++step_) {
    for (int64_t mb = 0; mb < num_mb_; ++mb)
      synthetic_batch(tokens.data() + mb * n_, targets.data() + mb * n_, t.seed,
                      first_sample(t, cfg_.dp_size, step_, cfg_.dp_rank, mb), b_, s_, v_);
    comm_events_used_ = 0;
    comm_bytes_this_step_ = comm_calls_this_step_ = 0;
    ev_step_start_.record(compute_);
    const size_t tok_bytes = tokens.size() * sizeof(int32_t);
    CK(cudaMemcpyAsync(tokens_.data(), tokens.data(), tok_bytes, cudaMemcpyHostToDevice, compute_));
    CK(cudaMemcpyAsync(targets_.data(), targets.data(), tok_bytes, cudaMemcpyHostToDevice, compute_));
    CK(cudaMemsetAsync(grads_.data(), 0, static_cast<size_t>(grads_.bytes()), compute_));
    CK(cudaMemsetAsync(row_loss_.data(), 0, static_cast<size_t>(row_loss_.bytes()), compute_));
    for (int64_t mb = 0; mb < num_mb_; ++mb) {
      forward(tokens_.data() + mb * n_, targets_.data() + mb * n_);
      backward(tokens_.data() + mb * n_, mb == num_mb_ - 1);
    }
    ev_bwd_end_.record(compute_);
    if (cfg_.dp_size > 1) {  // Adam needs the reduced gradients
      comm_done.record(comm_);
      CK(cudaStreamWaitEvent(compute_, comm_done.get(), 0));
    }
    ev_opt_start_.record(compute_);
    const double b1c = 1.0 - std::pow(kAdamBeta1, static_cast<double>(step_ + 1));
    const double b2c = 1.0 - std::pow(kAdamBeta2, static_cast<double>(step_ + 1));
    CK(gpu::adam_update(params_.data(), grads_.data(), adam_m_.data(), adam_v_.data(), layout_.total,
                        static_cast<float>(kAdamLearningRate), static_cast<float>(kAdamBeta1),
                        static_cast<float>(kAdamBeta2), static_cast<float>(kAdamEps), static_cast<float>(1.0 / b1c),
                        static_cast<float>(1.0 / b2c), compute_));
    if constexpr (std::is_same_v<T, bf16>)
      CK(gpu::cast_to_bf16(params_bf16_.data(), params_.data(), layout_.total, compute_));
    ev_step_end_.record(compute_);
    if (cfg_.dp_size > 1) {  // every rank's share of the loss (row losses are already scaled)
      comm_done.record(compute_);
      CK(cudaStreamWaitEvent(comm_, comm_done.get(), 0));
      MONARCH_NCCL_CHECK(ncclAllReduce(row_loss_.data(), row_loss_.data(), static_cast<size_t>(n_), ncclFloat32, ncclSum,
                                       dp_comm_, comm_));
      CK(cudaStreamSynchronize(comm_));
    }
    CK(cudaMemcpyAsync(row_loss.data(), row_loss_.data(), row_loss.size() * sizeof(float), cudaMemcpyDeviceToHost,
                       compute_));
    CK(cudaStreamSynchronize(compute_));
    double loss = 0;
    for (float x : row_loss) loss += x;
    losses.push_back(loss);
    report_.losses.push_back(loss);
    report_.step_times_s.push_back(elapsed_s(ev_step_start_, ev_step_end_));
    report_.compute_time_s += elapsed_s(ev_step_start_, ev_bwd_end_) + elapsed_s(ev_opt_start_, ev_step_end_);
    if (comm_calls_this_step_ > 0) {
      GpuCommStat& st = report_.comm[{"all-reduce", "dp"}];
      const double ring = 2.0 * static_cast<double>(cfg_.dp_size - 1) / static_cast<double>(cfg_.dp_size);
      st.bytes += comm_bytes_this_step_;
      st.wire_bytes += ring * static_cast<double>(comm_bytes_this_step_);
      st.count += comm_calls_this_step_;
      for (size_t i = 0; i < comm_events_used_; i += 3) st.time_s += elapsed_s(*comm_events_[i + 1], *comm_events_[i + 2]);
    }
    ++report_.steps;
  }
  return losses;
}

}  // namespace

GpuTrainer::GpuTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuTrainer::~GpuTrainer() = default;

Expected<std::unique_ptr<GpuTrainer>> GpuTrainer::create(const GpuTrainConfig& cfg) {
  if (Problems pr = check_gpu_train_config(cfg); !pr.empty()) return pr;
  std::string why;
  if (gpu_device_count(&why) == 0) return Expected<std::unique_ptr<GpuTrainer>>::fail("--device gpu", "no usable GPU: " + why);
  if (cfg.device < 0 || cfg.device >= gpu_device_count(nullptr))
    return Expected<std::unique_ptr<GpuTrainer>>::fail("--device gpu", "no CUDA device " + std::to_string(cfg.device));
  MONARCH_CUDA_CHECK(cudaSetDevice(cfg.device));  // before the trainer creates its events and streams
  std::unique_ptr<Impl> impl;
  if (cfg.math == GpuMath::kBf16)
    impl = std::make_unique<Trainer<bf16>>(cfg);
  else
    impl = std::make_unique<Trainer<float>>(cfg);
  return std::unique_ptr<GpuTrainer>(new GpuTrainer(std::move(impl)));
}

std::vector<double> GpuTrainer::train(int64_t last_step) { return impl_->train(last_step); }
int64_t GpuTrainer::next_step() const { return impl_->next_step(); }
GpuReport GpuTrainer::report() const { return impl_->report(); }
std::vector<float> GpuTrainer::parameters() const { return impl_->parameters(); }

}  // namespace monarch::realrt
