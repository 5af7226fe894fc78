#include "core/profile.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>

namespace monarch {

const char* to_string(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::kFp32: return "fp32";
    case MatmulPrecision::kTf32: return "tf32";
    case MatmulPrecision::kBf16: return "bf16";
    case MatmulPrecision::kFp16: return "fp16";
    case MatmulPrecision::kFp8: return "fp8";
  }
  return "?";
}

const char* to_string(DeviceKind d) { return d == DeviceKind::kCpu ? "cpu" : "gpu"; }

MatmulSample make_matmul_sample(MatmulPrecision precision, int64_t m, int64_t n, int64_t k,
                                double time_us) {
  assert(time_us > 0);
  MatmulSample s;
  s.precision = precision;
  s.m = m;
  s.n = n;
  s.k = k;
  s.time_us = time_us;
  s.tflops = 2.0 * double(m) * double(n) * double(k) / (time_us * 1e-6) / 1e12;
  return s;
}

CollectiveSample make_collective_sample(CollectiveKind kind, int ranks, int64_t bytes, DType dtype,
                                        double time_us) {
  assert(time_us > 0 && ranks >= 1);
  CollectiveSample s;
  s.kind = kind;
  s.ranks = ranks;
  s.bytes = bytes;
  s.dtype = dtype;
  s.time_us = time_us;
  s.algbw_GBps = double(bytes) / (time_us * 1e-6) / 1e9;
  s.busbw_GBps = s.algbw_GBps * collective_bus_factor(kind, ranks);
  return s;
}

namespace {

// Position of x between the sorted grid values: indices of the two neighbours and the weight of
// the upper one, in log2 space; clamped to the ends.
struct Bracket {
  size_t lo = 0, hi = 0;
  double t = 0;
};

Bracket bracket(const std::vector<int64_t>& axis, int64_t x) {
  assert(!axis.empty());
  if (x <= axis.front()) return {0, 0, 0};
  if (x >= axis.back()) return {axis.size() - 1, axis.size() - 1, 0};
  const size_t hi = std::upper_bound(axis.begin(), axis.end(), x) - axis.begin();
  const size_t lo = hi - 1;
  const double t = (std::log2(double(x)) - std::log2(double(axis[lo]))) /
                   (std::log2(double(axis[hi])) - std::log2(double(axis[lo])));
  return {lo, hi, t};
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Adds x to a small set kept as a vector (grid axes have a handful of values).
void insert_unique(std::vector<int64_t>& v, int64_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

double profile_matmul_tflops(const CalibrationProfile& p, MatmulPrecision precision, int64_t m,
                             int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  // Plain scans, no maps: the analytical search calls this for every candidate plan.
  std::vector<int64_t> ms, ns, ks;
  for (const MatmulSample& s : p.matmul) {
    if (s.precision != precision || s.tflops <= 0) continue;
    insert_unique(ms, s.m);
    insert_unique(ns, s.n);
    insert_unique(ks, s.k);
  }
  if (ms.empty()) return 0;
  ms = sorted_unique(std::move(ms));
  ns = sorted_unique(std::move(ns));
  ks = sorted_unique(std::move(ks));
  const Bracket bm = bracket(ms, m), bn = bracket(ns, n), bk = bracket(ks, k);

  // Multilinear interpolation when every corner of the surrounding cell was measured (a
  // repeated shape counts with its best measurement).
  double corner[8] = {};
  for (const MatmulSample& s : p.matmul) {
    if (s.precision != precision || s.tflops <= 0) continue;
    for (int c = 0; c < 8; ++c) {
      if (s.m == ms[(c & 1) ? bm.hi : bm.lo] && s.n == ns[(c & 2) ? bn.hi : bn.lo] &&
          s.k == ks[(c & 4) ? bk.hi : bk.lo]) {
        corner[c] = std::max(corner[c], s.tflops);
      }
    }
  }
  if (std::all_of(std::begin(corner), std::end(corner), [](double v) { return v > 0; })) {
    double sum = 0;
    for (int c = 0; c < 8; ++c) {
      sum += ((c & 1) ? bm.t : 1 - bm.t) * ((c & 2) ? bn.t : 1 - bn.t) * ((c & 4) ? bk.t : 1 - bk.t) * corner[c];
    }
    return sum;
  }

  // A sparse grid: inverse-square-distance weighting in log2 space over all samples (an exact
  // hit returns its best measurement).
  const double lm = std::log2(double(std::clamp(m, ms.front(), ms.back())));
  const double ln = std::log2(double(std::clamp(n, ns.front(), ns.back())));
  const double lk = std::log2(double(std::clamp(k, ks.front(), ks.back())));
  double wsum = 0, vsum = 0, exact = 0;
  for (const MatmulSample& s : p.matmul) {
    if (s.precision != precision || s.tflops <= 0) continue;
    const double dm = std::log2(double(s.m)) - lm;
    const double dn = std::log2(double(s.n)) - ln;
    const double dk = std::log2(double(s.k)) - lk;
    const double d2 = dm * dm + dn * dn + dk * dk;
    if (d2 < 1e-12) {
      exact = std::max(exact, s.tflops);
      continue;
    }
    wsum += 1 / d2;
    vsum += s.tflops / d2;
  }
  return exact > 0 ? exact : vsum / wsum;
}

double profile_matmul_tflops(const CalibrationProfile& p, Precision precision, int64_t m,
                             int64_t n, int64_t k) {
  switch (precision) {
    case Precision::kFp32: {
      const double tf32 = profile_matmul_tflops(p, MatmulPrecision::kTf32, m, n, k);
      return tf32 > 0 ? tf32 : profile_matmul_tflops(p, MatmulPrecision::kFp32, m, n, k);
    }
    case Precision::kBf16: return profile_matmul_tflops(p, MatmulPrecision::kBf16, m, n, k);
    case Precision::kFp16: return profile_matmul_tflops(p, MatmulPrecision::kFp16, m, n, k);
    case Precision::kFp8: return profile_matmul_tflops(p, MatmulPrecision::kFp8, m, n, k);
  }
  return 0;
}

double profile_busbw_GBps(const CalibrationProfile& p, CollectiveKind kind, int ranks,
                          int64_t bytes) {
  if (ranks < 1 || bytes <= 0) return 0;
  // The measured rank count closest to `ranks` (in log2, ties to the larger count).
  int best_ranks = 0;
  double best_dist = std::numeric_limits<double>::infinity();
  for (const CollectiveSample& s : p.collectives) {
    if (s.kind != kind || s.busbw_GBps <= 0 || s.ranks < 2) continue;
    const double d = std::abs(std::log2(double(s.ranks)) - std::log2(double(ranks)));
    if (d < best_dist - 1e-12 || (std::abs(d - best_dist) <= 1e-12 && s.ranks > best_ranks)) {
      best_dist = d;
      best_ranks = s.ranks;
    }
  }
  if (best_ranks == 0) return 0;
  std::map<int64_t, double> by_size;  // bytes -> best busbw
  for (const CollectiveSample& s : p.collectives) {
    if (s.kind != kind || s.ranks != best_ranks || s.busbw_GBps <= 0 || s.bytes <= 0) continue;
    double& v = by_size[s.bytes];
    v = std::max(v, s.busbw_GBps);
  }
  const auto first = by_size.begin();
  const auto last = std::prev(by_size.end());
  if (bytes <= first->first) return first->second * double(bytes) / double(first->first);
  if (bytes >= last->first) return last->second;
  const auto hi = by_size.upper_bound(bytes);
  const auto lo = std::prev(hi);
  const double t = (std::log2(double(bytes)) - std::log2(double(lo->first))) /
                   (std::log2(double(hi->first)) - std::log2(double(lo->first)));
  return lo->second + t * (hi->second - lo->second);
}

double profile_collective_time_s(const CalibrationProfile& p, CollectiveKind kind, int ranks,
                                 int64_t bytes) {
  const double busbw = profile_busbw_GBps(p, kind, ranks, bytes);
  if (busbw <= 0) return 0;
  // time = bytes / algbw = bytes x factor / busbw.
  return double(bytes) * collective_bus_factor(kind, ranks) / (busbw * 1e9);
}

}  // namespace monarch
