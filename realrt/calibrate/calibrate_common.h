// Pieces shared by the CPU and GPU calibrations of monarch-calibrate: settings, progress on a
// terminal, Ctrl-C, and the nccl-tests style result tables. Std only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/profile.h"

namespace monarch::calibrate {

struct Settings {
  bool quick = false;
  int threads = 1;  // CPU: OpenBLAS threads per process
};

// Exit statuses of monarch-calibrate (docs/calibration_profile.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // a measurement failed (CUDA/NCCL/MPI error)
inline constexpr int kExitBadInput = 2;     // bad option, output not writable
inline constexpr int kExitNoDevice = 3;     // the device asked for is not available here
inline constexpr int kExitInterrupted = 130;

// Ctrl-C: the first SIGINT/SIGTERM sets a flag the measurement loops poll; a second one kills.
void install_interrupt_handler();
bool interrupt_requested();

// One-line progress on stderr, only when stderr is a terminal and `enabled`.
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  void show(const std::string& phase, int64_t done, int64_t total);
  void clear();

 private:
  bool enabled_ = false;
  bool dirty_ = false;
};

// Tables on stdout. Collectives follow nccl-tests: size (B), count (elements), type, redop,
// time (us), algbw (GB/s), busbw (GB/s).
void print_collective_header(std::FILE*, CollectiveKind, int ranks, const std::string& api);
void print_collective_row(std::FILE*, const CollectiveSample&);
void print_matmul_header(std::FILE*, MatmulPrecision, const std::string& api);
void print_matmul_row(std::FILE*, const MatmulSample&);

// The whole profile as the tables above (monarch-calibrate --show), with a summary line per
// matmul precision (best and largest-shape throughput).
void print_profile(std::FILE*, const CalibrationProfile&);

// "2026-11-29T18:00:00Z"
std::string utc_now_iso8601();
std::string host_name();

// The message sizes of the collective sweep: from `min_bytes` to `max_bytes` by x`factor`.
std::vector<int64_t> size_sweep(int64_t min_bytes, int64_t max_bytes, int64_t factor);

// Round `bytes` down to a whole number of `elem_bytes` elements per rank (and at least one per
// rank), as nccl-tests does so that every rank gets the same share.
int64_t round_to_ranks(int64_t bytes, int ranks, int64_t elem_bytes);

// Number of timed iterations so that they last about `target_s`, given one iteration's time.
int timed_iterations(double one_iteration_s, double target_s, int min_iters, int max_iters);

}  // namespace monarch::calibrate
