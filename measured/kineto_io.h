// Reader of PyTorch profiler (Kineto) Chrome traces, `.json` or `.json.gz` (zlib reads both).
//
// Two forms:
//   - Kineto's object {"traceEvents": [...], "distributedInfo": {"rank", "world_size", ...}}:
//     GPU kernels (`cat` "kernel", args.device / args.stream / args.correlation), NCCL kernels by
//     name (`ncclDevKernel_*`, older `ncclKernel_*`) with args "Collective name", "In msg nelems",
//     "Out msg nelems", "Group size", "dtype", "Process Group Ranks" (or "Process Group Name"),
//     memory copies (`gpu_memcpy`, `gpu_memset`), launches (`cuda_runtime`, `cuda_driver`) and
//     "[memory]" events ("Total Allocated", "Device Type", "Device Id").
//   - the bare array older PyTorch (1.13 CPU builds) writes: CPU ops only, collectives as
//     `gloo:all_reduce`, `gloo:broadcast`, ... with their "Input Dims" (record_shapes); no
//     distributedInfo, so the rank comes from the file name or the caller.
// Iterations are the CPU events `ProfilerStep#N`.
//
// Streaming: the file goes through nlohmann's SAX interface one event at a time; only the few
// numbers each event contributes are kept (TraceReadout), so memory grows with the number of
// kernels, not with the size of the JSON. A truncated or malformed file is a problem naming the
// file and the byte where reading stopped.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/problem.h"
#include "measured/trace_analysis.h"

namespace monarch::measured {

struct TraceReadOptions {
  std::optional<int32_t> rank;  // overrides distributedInfo / the file name
  // Called now and then with (bytes of the file read so far, file size on disk); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

Expected<TraceReadout> read_kineto_trace(const std::string& path, const TraceReadOptions& options = {});

// The rank written in a trace's file name: "rank3_trace.json.gz", "rank-3.json.gz",
// "rank_3.pt.trace.json", "worker3..." (torch.profiler's tensorboard handler names files after
// the worker); nullopt when the name has none.
std::optional<int32_t> rank_from_file_name(const std::string& path);

// Bytes of one element of a PyTorch dtype name as Kineto writes it ("Float", "BFloat16",
// "c10::BFloat16", "float", "Half", "Double", "Long", "Int", "Byte", ...); 0 when unknown.
int64_t dtype_bytes(const std::string& name);

}  // namespace monarch::measured
