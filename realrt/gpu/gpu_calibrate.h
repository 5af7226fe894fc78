// GPU calibration for monarch-calibrate --device gpu: cuBLAS matrix products (fp32, tf32, bf16
// with fp32 accumulation) over a grid of shapes, device memory bandwidth with a copy kernel, and
// NCCL collectives across the GPUs of this node (one process, ncclCommInitAll).
// Std-only header: the CUDA, cuBLAS and NCCL includes stay in the .cc/.cu files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.h"
#include "realrt/calibrate/calibrate_common.h"

namespace monarch::calibrate {

// GPUs this process can use; 0 with the reason in `why` when there is none (no driver, no
// device, ...). Never throws.
int usable_gpu_count(std::string* why);

// The grid axis (m, n and k each take every value) and the collective sizes, bytes.
std::vector<int64_t> gpu_matmul_axis(bool quick);
std::vector<int64_t> gpu_collective_sizes(bool quick);

// Measures and fills `out` (device fields, matmul, memory, collectives). Returns kExitOk,
// kExitNoDevice (no usable GPU; `why` says why), kExitFailed (a CUDA/cuBLAS/NCCL call failed;
// `why` names it with file:line) or kExitInterrupted (Ctrl-C). Tables go to stdout.
int calibrate_gpu(const Settings&, Progress&, CalibrationProfile* out, std::string* why);

}  // namespace monarch::calibrate
