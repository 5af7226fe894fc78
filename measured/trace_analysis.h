// What one rank's profiler trace says about each training iteration, in the terms of Holistic
// Trace Analysis (HTA): per iteration the time, the compute / communication / memory-copy / idle
// split of the device, the communication per collective kind and group, the communication not
// hidden behind compute, and HTA's comm-compute overlap ratio.
//
// The reader (measured/kineto_io.h) turns trace events into TraceActivity records; this file
// turns those into iteration statistics and knows no JSON.
//
// Definitions (all per iteration, on the rank's device; a CPU-only trace uses its CPU ops):
//   iteration i      the span of the CPU event `ProfilerStep#i`; the last step of the trace is
//                    dropped because its device work may be cut off (HTA does the same)
//   compute_s        length of the union of compute activities in the iteration
//   comm_s           length of the union of communication activities
//   memory_s         length of the union of memory copies / sets not covered by compute or comm
//   idle_s           iteration time minus the union of every activity (never negative)
//   exposed_comm_s   comm_s minus the part of it overlapped by compute
//   overlap_ratio    (comm overlapped by compute) / comm_s, HTA's get_comm_comp_overlap; 0 with no comm
// An activity belongs to the iteration in which its launch happened (correlation id of the
// CUDA runtime call) or, without a launch, to the iteration its start falls in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/result.h"

namespace monarch::measured {

enum class ActivityClass : uint8_t { kCompute, kComm, kMemory };

// One timed piece of work from a trace (a GPU kernel, a memcpy, or a CPU op of a CPU-only trace).
struct TraceActivity {
  double start_us = 0;
  double dur_us = 0;
  ActivityClass cls = ActivityClass::kCompute;
  int64_t correlation = -1;  // CUDA correlation id linking a kernel to its launch; -1 = none
  // Communication only:
  int32_t comm_index = -1;  // index into TraceReadout::comm_ops
};

// What a communication activity moved.
struct CommOp {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  bool p2p = false;           // send / recv (kind then meaningless)
  int64_t buffer_bytes = 0;   // the nccl-tests "size": all-reduce buffer, all-gather output, reduce-scatter input
  int32_t group_size = 0;     // 0 = not recorded
  std::string group;          // process group ranks "[0, 1]" or its name; "" = not recorded
};

// Everything the importer keeps from one rank's trace (not the raw events).
struct TraceReadout {
  std::string source;        // file name, for messages
  int32_t rank = -1;         // distributedInfo.rank, or from the file name; -1 unknown
  int32_t world_size = 0;    // distributedInfo.world_size; 0 unknown
  bool has_device = false;   // GPU kernels were seen
  bool kineto_object = true; // false: the bare-array form of older PyTorch
  struct Step {
    int64_t number = 0;
    double start_us = 0;
    double dur_us = 0;
  };
  std::vector<Step> steps;                  // ProfilerStep#N events
  std::vector<TraceActivity> activities;
  std::vector<CommOp> comm_ops;
  std::vector<std::pair<int64_t, double>> launches;  // (correlation, launch start_us) of runtime calls
  struct MemoryPoint {
    double ts_us = 0;
    double allocated_bytes = 0;
  };
  std::vector<MemoryPoint> memory;          // "[memory]" events of this rank's device (or the CPU)
  int64_t events_read = 0;
};

// Per collective kind and group of one iteration.
struct CommStat {
  CollectiveKind kind = CollectiveKind::kAllReduce;  // kSendRecv: point-to-point
  std::string group;   // as recorded in the trace (ranks or name), mapped by the caller
  int32_t group_size = 0;
  int64_t buffer_bytes = 0;  // sum of nccl-tests sizes
  int64_t count = 0;
  double time_s = 0;         // sum of kernel durations
};

struct IterationStats {
  int64_t step = 0;
  double iteration_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double memory_s = 0;
  double idle_s = 0;
  double exposed_comm_s = 0;
  double overlap_ratio = 0;
  // Time the rank runs neither compute nor a collective: idle gaps plus send / receive kernels
  // that nothing else overlaps. Under a pipeline plan this is the stage waiting for its
  // neighbours, the measured counterpart of the simulated bubble (it also holds host-bound
  // gaps, which a trace cannot tell apart from waiting).
  double pipeline_wait_s = 0;
  double peak_allocated_bytes = 0;  // 0 = no memory events in the iteration
  std::vector<CommStat> comm;
};

struct RankStats {
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string source;
  std::vector<IterationStats> iterations;
  // The device work of the last kept iteration, from its ProfilerStep's start (t = 0), as a
  // simulator's timeline draws one: stream "compute" (kernel), "nccl" (collective; "p2p" for
  // send / receive) or "memcpy" (copies and sets). Kernels are not named in what is kept, so
  // compute spans are named "kernel" and collectives by their NCCL name.
  std::vector<TimelineSpan> timeline;
};

// Iteration statistics of one rank. Returns fewer iterations than ProfilerStep events (the
// last is dropped); the caller refuses a trace with none left.
RankStats analyze_trace(const TraceReadout& trace);

// Length of the union of [start, start + dur) intervals, microseconds (sorts a copy).
double union_length_us(std::vector<std::pair<double, double>> intervals);
// Length of the intersection of two interval unions, microseconds.
double overlap_length_us(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b);

// Collective kind from NCCL's or gloo's name ("allreduce", "AllGather", "_allgather_base",
// "reduce_scatter", "all_to_all", "broadcast", "send", "recv"); false when it is none of them.
bool parse_collective_name(const std::string& name, CommOp& op);

}  // namespace monarch::measured
