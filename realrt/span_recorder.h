// Timeline of one measured step of the CPU runtime: what every rank's streams did, as
// TimelineSpans (core/result.h) in the result file, the store, `--trace` and the GUI timeline.
//
// Each rank records, between start() and stop():
//   compute stream   forward / backward pass of each (chunk, micro-batch) ("fwd c0 mb2"), the
//                    optimizer step ("optimizer step"); TP collectives issued inside a pass are
//                    on their own stream, so a pass span includes the time it waited for them;
//   tp / dp streams  every collective call, named the NCCL way with its group ("ncclAllReduce tp";
//                    group "embedding" = the tied-embedding all-reduce between first and last
//                    stage, on the dp stream; the plan graph has no task for it);
//   pp-send/pp-recv  point-to-point: a send from posting to the return of MPI_Isend (sends are
//                    eager: they do not wait for the receiver), a receive from posting to its
//                    completion; a send and its receive share a flow id (trace arrows).
// Times are seconds from start(), which every rank calls right after a barrier, so ranks share
// an origin to within the barrier's skew (microseconds on one node). The runtime is single-
// threaded per rank, so spans of one stream never overlap.
//
// Bound: kMaxSpansPerRank per rank; later spans of the step are dropped (counted, reported).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/result.h"

namespace monarch::realrt {

// Spans one rank keeps of the recorded step. A step of the CI models (4 layers, 4-8 micro-
// batches, TP 2) records a few hundred; a 32-layer TP model with 16 micro-batches about 4,000
// (4 TP collectives per layer and pass). With the launcher's 16 ranks at most this bounds a
// timeline at 131,072 spans (~20 MB of result JSON).
inline constexpr int64_t kMaxSpansPerRank = 8192;

enum class SpanWhat : uint8_t { kForward, kBackward, kOptimizer, kCollective, kSend, kRecv };

struct RecordedSpan {
  SpanWhat what = SpanWhat::kForward;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int32_t group = 0;  // index into kSpanGroups (collectives)
  int32_t chunk = 0, micro_batch = 0;  // compute
  int32_t peer = -1, tag = -1;         // point-to-point
  double start_s = 0, end_s = 0;
};

// Group names the runtime gives its communicators, as recorded.
inline constexpr const char* kSpanGroups[] = {"tp", "cp", "ep", "dp", "edp", "pp", "embedding", "world", "etp", "other"};

class SpanRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  void start() {
    spans_.clear();
    dropped_ = 0;
    origin_ = Clock::now();
    on_ = true;
  }
  void stop() { on_ = false; }
  bool recording() const { return on_; }

  void compute(SpanWhat what, int64_t chunk, int64_t micro_batch, Clock::time_point t0, Clock::time_point t1);
  void collective(CollectiveKind kind, const char* group, Clock::time_point t0, Clock::time_point t1);
  void p2p(bool send, int64_t peer, int64_t tag, Clock::time_point t0, Clock::time_point t1);

  const std::vector<RecordedSpan>& spans() const { return spans_; }
  int64_t dropped() const { return dropped_; }

 private:
  void add(RecordedSpan s, Clock::time_point t0, Clock::time_point t1);
  bool on_ = false;
  Clock::time_point origin_;
  std::vector<RecordedSpan> spans_;
  int64_t dropped_ = 0;
};

// Gathers every rank's spans on rank 0 (collective) and returns them as TimelineSpans sorted by
// start time (empty on the other ranks). *dropped (may be null): spans dropped over all ranks.
std::vector<TimelineSpan> gather_timeline(MPI_Comm world, const SpanRecorder& mine, int64_t* dropped = nullptr);

}  // namespace monarch::realrt
