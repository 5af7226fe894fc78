#include "realrt/calibrate/cpu_calibrate.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <fstream>
#include <string>

namespace monarch::calibrate {

namespace {

// Timing budgets. Long enough that clock resolution (< 1 us) and one-off noise are small,
// short enough that --quick stays a smoke test: a CI run of the quick grid takes ~1-2 s.
constexpr double kMatmulTargetQuick_s = 0.01;   // per shape
constexpr double kMatmulTarget_s = 0.1;
constexpr int kMatmulMinReps = 3;
constexpr int kMatmulMaxReps = 1000;
constexpr int64_t kTriadArrayBytesQuick = int64_t(16) << 20;  // per array, 3 arrays
constexpr int64_t kTriadArrayBytes = int64_t(32) << 20;       // > last-level cache of common CPUs
constexpr int kTriadPasses = 5;                                // STREAM reports the best of NTIMES
constexpr double kCollectiveTargetQuick_s = 0.005;  // per size
constexpr double kCollectiveTarget_s = 0.05;
constexpr int kCollectiveWarmup = 2;
constexpr int kCollectiveMinIters = 3;
constexpr int kCollectiveMaxIters = 200;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// True on every rank when Ctrl-C was pressed on any rank.
bool stop_everywhere(MPI_Comm comm) {
  int local = interrupt_requested() ? 1 : 0, any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, comm);
  return any != 0;
}

double average_over_ranks(double v, MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  double sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  return sum / n;
}

double max_over_ranks(double v, MPI_Comm comm) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

// One collective of `bytes` (nccl-tests size) on float buffers.
void run_collective(CollectiveKind kind, int64_t bytes, int ranks, std::vector<float>& send,
                    std::vector<float>& recv, MPI_Comm comm) {
  const int64_t count = bytes / 4;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      MPI_Allreduce(send.data(), recv.data(), int(count), MPI_FLOAT, MPI_SUM, comm);
      break;
    case CollectiveKind::kAllGather:  // bytes = the gathered output
      MPI_Allgather(send.data(), int(count / ranks), MPI_FLOAT, recv.data(), int(count / ranks), MPI_FLOAT, comm);
      break;
    case CollectiveKind::kReduceScatter:  // bytes = the input
      MPI_Reduce_scatter_block(send.data(), recv.data(), int(count / ranks), MPI_FLOAT, MPI_SUM, comm);
      break;
    case CollectiveKind::kAllToAll:  // bytes = the send buffer
      MPI_Alltoall(send.data(), int(count / ranks), MPI_FLOAT, recv.data(), int(count / ranks), MPI_FLOAT, comm);
      break;
    case CollectiveKind::kBroadcast:
      MPI_Bcast(send.data(), int(count), MPI_FLOAT, 0, comm);
      break;
    case CollectiveKind::kSendRecv:
      assert(!"point-to-point is not among the calibrated collectives");
      break;
  }
}

const char* mpi_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "MPI_Allreduce";
    case CollectiveKind::kAllGather: return "MPI_Allgather";
    case CollectiveKind::kReduceScatter: return "MPI_Reduce_scatter_block";
    case CollectiveKind::kAllToAll: return "MPI_Alltoall";
    case CollectiveKind::kBroadcast: return "MPI_Bcast";
    case CollectiveKind::kSendRecv: return "MPI_Sendrecv";
  }
  return "?";
}

}  // namespace

std::vector<int64_t> cpu_matmul_axis(bool quick) {
  if (quick) return {64, 256, 512};
  return {64, 256, 1024, 2048};
}

std::vector<int64_t> cpu_collective_sizes(bool quick) {
  return quick ? size_sweep(4 << 10, 256 << 10, 4) : size_sweep(4 << 10, 16 << 20, 4);
}

std::optional<std::vector<MatmulSample>> measure_cpu_matmul(const Settings& settings, MPI_Comm comm,
                                                            Progress& progress) {
  openblas_set_num_threads(settings.threads);
  const bool root = rank_of(comm) == 0;
  const std::vector<int64_t> axis = cpu_matmul_axis(settings.quick);
  const double target_s = settings.quick ? kMatmulTargetQuick_s : kMatmulTarget_s;
  const int64_t total = int64_t(axis.size() * axis.size() * axis.size());
  if (root) {
    print_matmul_header(stdout, MatmulPrecision::kFp32,
                        "cblas_sgemm, " + std::to_string(settings.threads) + " thread(s) per rank");
  }
  std::vector<MatmulSample> samples;
  int64_t done = 0;
  for (int64_t m : axis) {
    for (int64_t n : axis) {
      for (int64_t k : axis) {
        if (stop_everywhere(comm)) return std::nullopt;
        if (root) progress.show("matmul", done, total);
        // A[m,k], B[k,n], C[m,n], row-major; small values so nothing overflows or goes denormal.
        std::vector<float> a(size_t(m * k), 0.5f), b(size_t(k * n), 0.25f), c(size_t(m * n), 0.0f);
        auto gemm = [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a.data(), int(k),
                      b.data(), int(n), 0.0f, c.data(), int(n));
        };
        MPI_Barrier(comm);
        gemm();  // warm-up: thread pool, page faults
        std::vector<double> times;
        double spent = 0;
        while ((spent < target_s || int(times.size()) < kMatmulMinReps) && int(times.size()) < kMatmulMaxReps) {
          const double t0 = now_s();
          gemm();
          const double dt = now_s() - t0;
          times.push_back(dt);
          spent += dt;
        }
        std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
        const double median_s = average_over_ranks(times[times.size() / 2], comm);
        samples.push_back(make_matmul_sample(MatmulPrecision::kFp32, m, n, k, median_s * 1e6));
        if (root) {
          progress.clear();
          print_matmul_row(stdout, samples.back());
        }
        ++done;
      }
    }
  }
  return samples;
}

std::optional<double> measure_cpu_triad_GBps(const Settings& settings, MPI_Comm comm, int64_t* working_set_bytes) {
  const int64_t array_bytes = settings.quick ? kTriadArrayBytesQuick : kTriadArrayBytes;
  const size_t n = size_t(array_bytes / int64_t(sizeof(double)));
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const double scalar = 3.0;
  double best_s = 0;
  for (int pass = 0; pass < kTriadPasses + 1; ++pass) {  // pass 0 warms up
    if (stop_everywhere(comm)) return std::nullopt;
    MPI_Barrier(comm);
    const double t0 = now_s();
    double* __restrict pa = a.data();
    const double* __restrict pb = b.data();
    const double* __restrict pc = c.data();
    for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + scalar * pc[i];
    const double dt = now_s() - t0;
    if (pass > 0 && (best_s == 0 || dt < best_s)) best_s = dt;
  }
  // Keep the result observable so the loop is not optimised away.
  volatile double sink = a[n / 2];
  (void)sink;
  const double bytes = 3.0 * double(n) * sizeof(double);
  if (working_set_bytes) *working_set_bytes = int64_t(bytes);
  if (rank_of(comm) == 0) {
    std::fprintf(stdout, "#\n# memory bandwidth: STREAM triad a = b + s*c, 3 x %lld MiB doubles, best of %d\n",
                 static_cast<long long>(array_bytes >> 20), kTriadPasses);
  }
  const double GBps = average_over_ranks(bytes / best_s / 1e9, comm);
  if (rank_of(comm) == 0) std::fprintf(stdout, "  triad %.2f GB/s per process\n", GBps);
  return GBps;
}

std::optional<std::vector<CollectiveSample>> measure_mpi_collectives(const Settings& settings, MPI_Comm comm,
                                                                     Progress& progress) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::vector<CollectiveSample> samples;
  if (ranks < 2) return samples;
  const bool root = rank_of(comm) == 0;
  const std::vector<int64_t> sizes = cpu_collective_sizes(settings.quick);
  const double target_s = settings.quick ? kCollectiveTargetQuick_s : kCollectiveTarget_s;
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                  CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};
  const int64_t total = int64_t(std::size(kinds) * sizes.size());
  int64_t done = 0;
  for (CollectiveKind kind : kinds) {
    if (root) print_collective_header(stdout, kind, ranks, mpi_name(kind));
    for (int64_t requested : sizes) {
      if (stop_everywhere(comm)) return std::nullopt;
      if (root) progress.show("collectives", done, total);
      const int64_t bytes = round_to_ranks(requested, ranks, 4);
      std::vector<float> send(size_t(bytes / 4), 1.0f), recv(size_t(bytes / 4), 0.0f);
      for (int i = 0; i < kCollectiveWarmup; ++i) run_collective(kind, bytes, ranks, send, recv, comm);
      MPI_Barrier(comm);
      double t0 = now_s();
      run_collective(kind, bytes, ranks, send, recv, comm);
      const int iters = timed_iterations(max_over_ranks(now_s() - t0, comm), target_s, kCollectiveMinIters,
                                         kCollectiveMaxIters);
      MPI_Barrier(comm);
      t0 = now_s();
      for (int i = 0; i < iters; ++i) run_collective(kind, bytes, ranks, send, recv, comm);
      const double per_op_s = max_over_ranks((now_s() - t0) / iters, comm);
      samples.push_back(make_collective_sample(kind, ranks, bytes, DType::kFp32, per_op_s * 1e6));
      if (root) {
        progress.clear();
        print_collective_row(stdout, samples.back());
      }
      ++done;
    }
  }
  return samples;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        if (!name.empty()) return name;
      }
    }
  }
  return "unknown CPU";
}

}  // namespace monarch::calibrate
