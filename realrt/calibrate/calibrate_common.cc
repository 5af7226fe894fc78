#include "realrt/calibrate/calibrate_common.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>

namespace monarch::calibrate {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int sig) {
  g_interrupted = 1;
  // A second Ctrl-C kills at once.
  std::signal(sig, SIG_DFL);
}

const char* redop(CollectiveKind k) {
  return (k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter) ? "sum" : "none";
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

bool interrupt_requested() { return g_interrupted != 0; }

Progress::Progress(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO) == 1) {}
Progress::~Progress() { clear(); }

void Progress::show(const std::string& phase, int64_t done, int64_t total) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[Kcalibrating %s %lld/%lld", phase.c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  std::fflush(stderr);
  dirty_ = true;
}

void Progress::clear() {
  if (!enabled_ || !dirty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  dirty_ = false;
}

void print_collective_header(std::FILE* f, CollectiveKind kind, int ranks, const std::string& api) {
  std::fprintf(f, "#\n# %s over %d ranks (%s), out-of-place\n", to_string(kind), ranks, api.c_str());
  std::fprintf(f, "# %10s %12s %8s %6s %10s %8s %8s\n", "size", "count", "type", "redop", "time", "algbw",
               "busbw");
  std::fprintf(f, "# %10s %12s %8s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
               "(GB/s)");
}

void print_collective_row(std::FILE* f, const CollectiveSample& s) {
  const int64_t elem = s.dtype == DType::kFp32 ? 4 : (s.dtype == DType::kFp8 ? 1 : 2);
  const char* type = s.dtype == DType::kFp32 ? "float" : to_string(s.dtype);
  std::fprintf(f, "  %10lld %12lld %8s %6s %10.2f %8.2f %8.2f\n", static_cast<long long>(s.bytes),
               static_cast<long long>(s.bytes / elem), type, redop(s.kind), s.time_us, s.algbw_GBps,
               s.busbw_GBps);
  std::fflush(f);
}

void print_matmul_header(std::FILE* f, MatmulPrecision p, const std::string& api) {
  std::fprintf(f, "#\n# matmul %s (%s): C[m,n] = A[m,k] B[k,n], flops = 2 m n k\n", to_string(p), api.c_str());
  std::fprintf(f, "# %7s %7s %7s %12s %10s\n", "m", "n", "k", "time (us)", "TFLOP/s");
}

void print_matmul_row(std::FILE* f, const MatmulSample& s) {
  std::fprintf(f, "  %7lld %7lld %7lld %12.2f %10.4f\n", static_cast<long long>(s.m), static_cast<long long>(s.n),
               static_cast<long long>(s.k), s.time_us, s.tflops);
  std::fflush(f);
}

void print_profile(std::FILE* f, const CalibrationProfile& p) {
  std::fprintf(f, "# profile: %s %s x %d on %s, %s, %s%s\n", to_string(p.device_kind), p.device_name.c_str(),
               p.device_count, p.host.c_str(), p.created_utc.c_str(), p.tool.c_str(), p.quick ? " --quick" : "");
  if (!p.notes.empty()) std::fprintf(f, "# %s\n", p.notes.c_str());
  std::fprintf(f, "#\n# memory bandwidth: %.2f GB/s (%s, %lld bytes)\n", p.memory_bandwidth_GBps,
               p.memory_method.c_str(), static_cast<long long>(p.memory_bytes));
  for (MatmulPrecision prec : {MatmulPrecision::kFp32, MatmulPrecision::kTf32, MatmulPrecision::kBf16,
                               MatmulPrecision::kFp16, MatmulPrecision::kFp8}) {
    const MatmulSample* best = nullptr;
    const MatmulSample* largest = nullptr;
    bool any = false;
    for (const MatmulSample& s : p.matmul) {
      if (s.precision != prec) continue;
      if (!any) print_matmul_header(f, prec, "measured");
      any = true;
      print_matmul_row(f, s);
      if (!best || s.tflops > best->tflops) best = &s;
      if (!largest || double(s.m) * s.n * s.k > double(largest->m) * largest->n * largest->k) largest = &s;
    }
    if (any) {
      std::fprintf(f, "# %s: best %.4f TFLOP/s at %lldx%lldx%lld; %.4f TFLOP/s at the largest shape %lldx%lldx%lld\n",
                   to_string(prec), best->tflops, static_cast<long long>(best->m), static_cast<long long>(best->n),
                   static_cast<long long>(best->k), largest->tflops, static_cast<long long>(largest->m),
                   static_cast<long long>(largest->n), static_cast<long long>(largest->k));
    }
  }
  // Collectives grouped by (kind, ranks), in file order within a group.
  std::vector<std::pair<CollectiveKind, int>> groups;
  for (const CollectiveSample& s : p.collectives) {
    const std::pair<CollectiveKind, int> g{s.kind, s.ranks};
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  for (const auto& [kind, ranks] : groups) {
    print_collective_header(f, kind, ranks, "measured");
    for (const CollectiveSample& s : p.collectives) {
      if (s.kind == kind && s.ranks == ranks) print_collective_row(f, s);
    }
  }
  if (groups.empty()) std::fprintf(f, "#\n# collectives: none measured\n");
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::vector<int64_t> size_sweep(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  assert(min_bytes > 0 && factor > 1);
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes; b <= max_bytes; b *= factor) sizes.push_back(b);
  return sizes;
}

int64_t round_to_ranks(int64_t bytes, int ranks, int64_t elem_bytes) {
  assert(ranks >= 1 && elem_bytes >= 1);
  const int64_t unit = int64_t(ranks) * elem_bytes;
  return std::max<int64_t>(unit, bytes / unit * unit);
}

int timed_iterations(double one_iteration_s, double target_s, int min_iters, int max_iters) {
  if (!(one_iteration_s > 0)) return max_iters;
  const double n = std::ceil(target_s / one_iteration_s);
  return static_cast<int>(std::clamp(n, double(min_iters), double(max_iters)));
}

}  // namespace monarch::calibrate
