// Chrome / Perfetto trace (JSON "Trace Event Format") of a simulated or measured iteration:
// one process per rank (pid = rank), one thread per stream (tid: compute 0, tp 1, cp 2, ep 3,
// dp 4, pp-send 5, pp-recv 6), complete slices ("X") that nest properly on each track,
// collectives named the NCCL way ("ncclAllReduce tp"), point-to-point messages as flow arrows
// ("s"/"f" from the send to its receive), memory as a counter per rank ("C" "memory"), and the
// run's metadata (world size, plan, backend) in "otherData". Open it in ui.perfetto.dev or
// chrome://tracing.
#pragma once

#include <string>

#include "core/problem.h"
#include "core/result.h"

namespace monarch {

struct TraceMetadata {
  std::string scenario;     // scenario name
  int64_t world_size = 0;   // ranks of the plan
};

// The trace as JSON text.
std::string chrome_trace_text(const BackendResult& result, const TraceMetadata& meta);

// Writes the trace to `path` (through a temporary file renamed into place, so a failed write
// leaves nothing half-written). Problems name "--trace".
Problems write_chrome_trace(const std::string& path, const BackendResult& result, const TraceMetadata& meta);

}  // namespace monarch
