#include "realrt/gpu/gpu_run.h"

#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/units.h"
#include "realrt/gpu/dist_init.h"
#include "realrt/gpu/gpu_check.h"
#include "realrt/gpu/gpu_plan.h"
#include "realrt/gpu/gpu_trainer.h"

namespace monarch::realrt {

namespace {

// Per-rank numbers exchanged at the end (every value per step, averaged over the measured steps).
// rank, step time, compute time, dp all-reduce (size bytes, wire bytes, count, time), peak bytes
// per memory category, peak total.
constexpr int kPackSize = 7 + kNumMemCategories + 1;

std::vector<double> pack(int64_t rank, const GpuReport& r) {
  const size_t measured = r.step_times_s.size();
  double st = 0;  // mean over the steps after the first (warm-up) when there are several, as the CPU path
  size_t ns = 0;
  for (size_t i = measured > 1 ? 1 : 0; i < measured; ++i, ++ns) st += r.step_times_s[i];
  const double d = measured ? static_cast<double>(measured) : 1;
  auto it = r.comm.find({"all-reduce", "dp"});
  const GpuCommStat c = it == r.comm.end() ? GpuCommStat{} : it->second;
  std::vector<double> v = {static_cast<double>(rank), ns ? st / static_cast<double>(ns) : 0, r.compute_time_s / d,
                           static_cast<double>(c.bytes) / d, c.wire_bytes / d, static_cast<double>(c.count) / d,
                           c.time_s / d};
  for (int i = 0; i < kNumMemCategories; ++i) v.push_back(static_cast<double>(r.memory.peak_bytes[i]));
  v.push_back(static_cast<double>(r.memory.peak_total_bytes));
  return v;
}

// Floating-point operations of one step, as the CPU runtime counts them (cpu_runtime.cc
// step_flops, recompute none): 3 x forward, forward per layer 2 B S h (4h + 2F) + 4 B S^2 h,
// plus the output projection 2 B S h V.
double step_flops(const GptConfig& m, int64_t batch) {
  const double b = static_cast<double>(batch), s = static_cast<double>(m.seq), h = static_cast<double>(m.hidden);
  const double f = static_cast<double>(m.ffn), v = static_cast<double>(m.vocab), l = static_cast<double>(m.num_layers);
  const double layer_fwd = 2 * b * s * h * (4 * h + 2 * f) + 4 * b * s * s * h;
  return 3 * (l * layer_fwd + 2 * b * s * h * v);
}

BackendResult make_result(const RunInput& in, const GpuReport& mine, const std::vector<double>& all, int64_t world,
                          Precision precision, std::vector<RankSummary>* ranks) {
  BackendResult res;
  res.backend = "real-gpu";
  res.plan = in.graph.plan;
  res.measured = true;
  res.losses = mine.losses;
  double iter = 0, compute = 0, bytes = 0, count = 0, time = 0;
  StageMemory sm;
  for (int64_t r = 0; r < world; ++r) {
    const double* v = all.data() + r * kPackSize;
    iter = std::max(iter, v[1]);
    compute = std::max(compute, v[2]);
    bytes = std::max(bytes, v[4]);
    count = std::max(count, v[5]);
    time = std::max(time, v[6]);
    const double* mem = v + 7;
    RankSummary rs;
    rs.rank = static_cast<int64_t>(v[0]);
    rs.step_time_s = v[1];
    rs.compute_time_s = v[2];
    if (v[5] > 0) {
      rs.communication.push_back({CollectiveKind::kAllReduce, GroupKind::kDp, std::llround(v[4]), std::llround(v[5]), v[6], world});
      rs.size_bytes.push_back(std::llround(v[3]));
    }
    rs.peak_bytes.assign(mem, mem + kNumMemCategories);
    rs.peak_total_bytes = mem[kNumMemCategories];
    ranks->push_back(rs);
    if (bytes_to_gib(mem[kNumMemCategories]) > sm.total_gib) {
      sm.weights_gib = bytes_to_gib(mem[0]);
      sm.gradients_gib = bytes_to_gib(mem[1]);
      sm.optimizer_gib = bytes_to_gib(mem[2]);
      sm.activations_gib = bytes_to_gib(mem[3]);
      sm.buffers_gib = bytes_to_gib(mem[4]);
      sm.total_gib = bytes_to_gib(mem[kNumMemCategories]);
    }
  }
  res.iteration_time_s = iter;
  const double tokens = static_cast<double>(in.train.global_batch_size * in.model.seq);
  res.tokens_per_s = iter > 0 ? tokens / iter : 0;
  res.model_flops_per_iteration = res.hardware_flops_per_iteration = step_flops(in.model, in.train.global_batch_size);
  if (iter > 0) {
    res.model_tflops_per_gpu = res.hardware_tflops_per_gpu =
        res.model_flops_per_iteration / iter / static_cast<double>(world) / kTera;
    // MFU against the dense peak of the scenario's GPU in the training precision (tf32 runs
    // count against the fp32 entry, which peak_tflops takes as the tf32 tensor-core peak).
    const double peak = peak_tflops(in.scenario.cluster.gpu, precision);
    if (peak > 0) res.mfu = res.hfu = res.model_tflops_per_gpu / peak;
  }
  res.memory.stages.push_back(sm);
  res.memory.peak_gib = sm.total_gib;
  res.time_breakdown_s.compute = compute;
  if (count > 0) {
    res.communication.push_back({CollectiveKind::kAllReduce, GroupKind::kDp, std::llround(bytes), std::llround(count), time, world});
    res.time_breakdown_s.dp_comm = time;
  }
  return res;
}

struct NcclComm {
  ncclComm_t comm = nullptr;
  ~NcclComm() {
    if (comm) MONARCH_NCCL_WARN(ncclCommDestroy(comm));
  }
};

}  // namespace

int run_gpu_main(const RunInput& in, const GpuRunOptions& opt) {
  int mpi_rank = 0, mpi_world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_world);
  int64_t rank = mpi_rank, world = mpi_world, local_rank = mpi_rank;
  auto fail = [&](const Problems& pr, int status) {
    for (const auto& p : pr) std::fprintf(stderr, "monarch-run: error: [rank %lld] %s\n", static_cast<long long>(rank),
                                          p.to_string().c_str());
    return status;
  };
  auto method = parse_init_method(opt.init_method);
  if (!method) return fail(method.problems(), 2);
  auto env = rank_from_env([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
  if (!env) return fail(env.problems(), 2);
  if (method->kind != InitMethod::Kind::kMpi) {
    if (mpi_world > 1)
      return fail({{"--init-method", "is for launches without mpirun; under mpirun use --init-method mpi"}}, 2);
    if (env->has_value()) {
      rank = (*env)->rank;
      world = (*env)->world_size;
      local_rank = (*env)->local_rank;
    }
  } else if (env->has_value() && (*env)->world_size == mpi_world) {
    local_rank = (*env)->local_rank;  // OMPI_COMM_WORLD_LOCAL_RANK under mpirun
  }
  if (Problems pr = check_gpu_plan(in.graph.plan); !pr.empty()) return fail(pr, 2);
  if (Problems pr = check_gpu_model(in.scenario.model); !pr.empty()) return fail(pr, 2);
  if (in.graph.world_size != world)
    return fail({{"--device gpu", "the plan needs " + std::to_string(in.graph.world_size) + " ranks, this launch has " +
                                      std::to_string(world)}},
                2);
  auto math_name = gpu_math_name(in.scenario.training.precision, opt.math, "--precision");
  if (!math_name) return fail(math_name.problems(), 2);
  GpuTrainConfig cfg;
  cfg.model = in.model;
  cfg.train = in.train;
  cfg.math = *parse_gpu_math(*math_name, "--precision");
  cfg.dp_rank = rank;
  cfg.dp_size = world;
  if (Problems pr = check_gpu_train_config(cfg); !pr.empty()) return fail(pr, 2);
  std::string why;
  const int devices = gpu_device_count(&why);
  if (devices == 0) return fail({{"--device gpu", "no usable GPU: " + why}}, 2);
  cfg.device = static_cast<int>(local_rank % devices);
  const Precision precision = cfg.math == GpuMath::kBf16 ? Precision::kBf16 : Precision::kFp32;

  try {
    MONARCH_CUDA_CHECK(cudaSetDevice(cfg.device));
    NcclComm dp;
    if (world > 1) {
      ncclUniqueId id{};
      if (rank == 0) MONARCH_NCCL_CHECK(ncclGetUniqueId(&id));
      if (method->kind == InitMethod::Kind::kMpi) {
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      } else {
        auto got = share_from_rank0(*method, rank, world, std::string(reinterpret_cast<const char*>(&id), sizeof id),
                                    opt.init_timeout_s);
        if (!got) return fail(got.problems(), 2);
        if (got->size() != sizeof id) return fail({{"--init-method", "rank 0 sent an id of the wrong size"}}, 2);
        std::copy(got->begin(), got->end(), reinterpret_cast<char*>(&id));
      }
      MONARCH_NCCL_CHECK(ncclCommInitRank(&dp.comm, static_cast<int>(world), id, static_cast<int>(rank)));
      cfg.dp_comm = dp.comm;
    }
    auto trainer = GpuTrainer::create(cfg);
    if (!trainer) return fail(trainer.problems(), 2);
    GpuTrainer& run = **trainer;
    const bool tty = isatty(2) && rank == 0;
    const int64_t last = cfg.train.steps;
    while (run.next_step() < last) {
      const double loss = run.train(run.next_step() + 1).front();
      if (tty) std::fprintf(stderr, "\rstep %lld/%lld loss %.4f", static_cast<long long>(run.next_step()),
                            static_cast<long long>(last), loss);
    }
    if (tty) std::fprintf(stderr, "\n");
    const GpuReport report = run.report();
    std::vector<double> all = pack(rank, report);
    if (world > 1) {  // every rank's numbers to every rank, over NCCL (there may be no MPI)
      double* dev = nullptr;
      MONARCH_CUDA_CHECK(cudaMalloc(&dev, sizeof(double) * kPackSize * static_cast<size_t>(world)));
      MONARCH_CUDA_CHECK(cudaMemcpy(dev + rank * kPackSize, all.data(), sizeof(double) * kPackSize, cudaMemcpyHostToDevice));
      MONARCH_NCCL_CHECK(ncclAllGather(dev + rank * kPackSize, dev, kPackSize, ncclFloat64, dp.comm, nullptr));
      all.resize(static_cast<size_t>(kPackSize * world));
      MONARCH_CUDA_CHECK(cudaMemcpy(all.data(), dev, sizeof(double) * all.size(), cudaMemcpyDeviceToHost));
      MONARCH_CUDA_CHECK(cudaFree(dev));
    }
    if (rank != 0) return 0;
    std::vector<RankSummary> ranks;
    const BackendResult res = make_result(in, report, all, world, precision, &ranks);
    for (size_t i = 0; i < res.losses.size(); ++i) std::printf("step %zu loss %.6f\n", i, res.losses[i]);
    std::printf("iteration %.4f s, %.0f tokens/s, %.1f model TFLOP/s per GPU (%s), MFU %.1f%%\n", res.iteration_time_s,
                res.tokens_per_s, res.model_tflops_per_gpu, to_string(cfg.math), 100 * res.mfu);
    if (!opt.output.empty()) {
      const std::string tmp = opt.output + ".tmp";
      std::ofstream(tmp) << run_output_json(res, 0, ranks).dump(1) << "\n";
      std::error_code ec;
      std::filesystem::rename(tmp, opt.output, ec);
      if (ec) return fail({{"--output", "cannot write " + opt.output + ": " + ec.message()}}, 1);
    }
    return 0;
  } catch (const gpu::GpuError& e) {
    return fail({{"--device gpu", e.what()}}, 1);
  }
}

}  // namespace monarch::realrt
