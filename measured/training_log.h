// Readers of training logs: Megatron-LM's and torchtitan's per-iteration lines.
//
// Megatron-LM (megatron/training/training.py, training_log):
//   [2024-05-01 10:00:00] iteration       10/    500 | consumed samples:        10240 |
//   elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 401.2 |
//   learning rate: 3.0E-04 | global batch size:  1024 | lm loss: 7.123456E+00 | ...
// torchtitan (torchtitan/train.py, the metrics logger; colour codes optional):
//   step: 10  loss:  7.1234  grad_norm:  1.2345  memory: 61.31GiB(77.45%)  tps: 6,012
//   tflops: 350.12  mfu: 35.40%
// Lines that are neither are ignored; a log with no iteration line at all is a problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"

namespace monarch::measured {

enum class LogFormat { kMegatron, kTorchtitan };

struct LogStep {
  int64_t step = 0;
  std::optional<double> iteration_s;       // Megatron: elapsed time per iteration
  std::optional<double> loss;              // lm loss / loss
  std::optional<double> tflops_per_gpu;    // Megatron: throughput per GPU; torchtitan: tflops
  std::optional<double> tokens_per_s_per_gpu;  // torchtitan: tps
  std::optional<double> memory_gib;        // torchtitan: max reserved memory
  std::optional<double> mfu;               // torchtitan: mfu / 100
  std::optional<double> grad_norm;
};

struct TrainingLog {
  std::string source;
  LogFormat format = LogFormat::kMegatron;
  std::vector<LogStep> steps;
};

// Parses the text of a log; `source` names it in problems.
Expected<TrainingLog> parse_training_log(const std::string& text, const std::string& source);
Expected<TrainingLog> read_training_log(const std::string& path);

// The text without ANSI escape sequences (ESC [ ... letter).
std::string strip_ansi(const std::string& text);

}  // namespace monarch::measured
