// The GPU twin of the reference GPT trainer (realrt/reference.cc train_single_process), one GPU
// per rank, data parallel over NCCL. Std-only header: CUDA, cuBLAS and NCCL stay in the .cc.
//
// Same model as the CPU runtime: parameter layout (make_param_layout with the whole model on one
// chunk), initialisation (init_params from the seed), synthetic data (synthetic_batch, the same
// samples per data-parallel rank as first_sample), loss scale 1 / (S x global batch) and Adam
// (reference.h's constants). What differs is where it runs:
//   - matrix products in cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx, fp32 accumulation):
//       fp32  fp32 inputs and outputs, CUBLAS_COMPUTE_32F (no tensor-core rounding)
//       tf32  fp32 storage, CUBLAS_COMPUTE_32F_FAST_TF32 (inputs rounded to tf32)
//       bf16  bf16 activations and a bf16 copy of the weights for the products, fp32 master
//             weights, fp32 gradients (weight gradients accumulate in fp32 straight out of
//             cuBLAS), fp32 Adam, fp32 LayerNorm statistics and softmax / cross-entropy sums;
//   - everything else in hand-written kernels (gpt_kernels.cu);
//   - attention materialises the [B, NH, S, S] probabilities (no fused / flash attention yet);
//   - one compute stream; data-parallel gradient all-reduces on their own stream, one per layer
//     as soon as the last micro-batch's backward pass of that layer is done (overlapped with the
//     backward pass of the layers below), the embeddings and final norm at the end.
// Recompute none only; no tensor / pipeline / context / expert parallelism (callers refuse).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/problem.h"
#include "realrt/gpt.h"
#include "realrt/memory.h"
#include "realrt/reference.h"

namespace monarch::realrt {

enum class GpuMath { kFp32, kTf32, kBf16 };
const char* to_string(GpuMath);
// "fp32", "tf32" or "bf16"; a problem naming `where` otherwise.
Expected<GpuMath> parse_gpu_math(const std::string& text, const std::string& where);

struct GpuTrainConfig {
  GptConfig model;
  TrainSettings train;
  GpuMath math = GpuMath::kFp32;
  int device = 0;          // CUDA device of this rank
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  void* dp_comm = nullptr;  // ncclComm_t of the data-parallel group; needed when dp_size > 1
};

// Problems that make the configuration impossible (batch sizes that do not divide, ...).
Problems check_gpu_train_config(const GpuTrainConfig& cfg);

// Time and bytes of one kind of communication, summed over the measured steps (as CommStat of
// the CPU runtime: bytes = NCCL's size, wire_bytes = sent by this rank with ring algorithms).
struct GpuCommStat {
  int64_t bytes = 0;
  double wire_bytes = 0;
  int64_t count = 0;
  double time_s = 0;  // CUDA events around the calls on the communication stream
};

struct GpuReport {
  std::vector<double> losses;         // mean loss of each step (same on every rank)
  std::vector<double> step_times_s;   // CUDA events: start of the step to the end of Adam
  double compute_time_s = 0;          // forward + backward + Adam on the compute stream
  std::map<std::pair<std::string, std::string>, GpuCommStat> comm;  // (kind, group) -> totals
  MemoryCounters memory;              // counting allocator over every cudaMalloc of the run
  int64_t steps = 0;
};

// CUDA devices this process sees; 0 with the CUDA error in `why` when there is none.
int gpu_device_count(std::string* why);

class GpuTrainer {
 public:
  // Allocates everything on cfg.device and initialises the parameters. CUDA / cuBLAS / NCCL
  // failures throw gpu::GpuError (naming the call and file:line); configuration problems are
  // returned.
  static Expected<std::unique_ptr<GpuTrainer>> create(const GpuTrainConfig& cfg);
  ~GpuTrainer();

  // Runs optimizer steps [next_step(), last_step); returns the loss of each.
  std::vector<double> train(int64_t last_step);
  int64_t next_step() const;
  GpuReport report() const;
  // The fp32 master parameters (layout of make_param_layout for the whole model), for tests.
  std::vector<float> parameters() const;

  class Impl;

 private:
  explicit GpuTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace monarch::realrt
