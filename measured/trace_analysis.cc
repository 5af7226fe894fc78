#include "measured/trace_analysis.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace monarch::measured {
namespace {

using Intervals = std::vector<std::pair<double, double>>;  // (start, end)

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [s, e] : v) {
    if (e <= s) continue;
    if (!out.empty() && s <= out.back().second) out.back().second = std::max(out.back().second, e);
    else out.push_back({s, e});
  }
  return out;
}

double total(const Intervals& merged_intervals) {
  double sum = 0;
  for (const auto& [s, e] : merged_intervals) sum += e - s;
  return sum;
}

double overlap_merged(const Intervals& a, const Intervals& b) {
  double sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first);
    const double hi = std::min(a[i].second, b[j].second);
    if (hi > lo) sum += hi - lo;
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return sum;
}

std::string lower_alnum(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct StepWork {
  Intervals compute, comm, memory;
  Intervals p2p, collectives;  // comm split into send / receive and the rest
  std::vector<CommStat> comm_stats;
};

// Send / receive time during which the rank runs nothing else: no compute, no collective, no
// copy. A pipeline stage that waits for its neighbour's activations or gradients sits in its
// receive kernel (NCCL's SendRecv kernel spins until the peer's data arrives).
double exposed_p2p_us(StepWork& w, const Intervals& compute, const Intervals& memory) {
  if (w.p2p.empty()) return 0;
  const Intervals p2p = merged(std::move(w.p2p));
  Intervals others = std::move(w.collectives);
  others.insert(others.end(), compute.begin(), compute.end());
  others.insert(others.end(), memory.begin(), memory.end());
  return total(p2p) - overlap_merged(p2p, merged(std::move(others)));
}

void add_comm_stat(std::vector<CommStat>& stats, const CommOp& op, double dur_s) {
  const CollectiveKind kind = op.p2p ? CollectiveKind::kSendRecv : op.kind;
  for (CommStat& c : stats) {
    if (c.kind == kind && c.group == op.group) {
      c.buffer_bytes += op.buffer_bytes;
      c.count += 1;
      c.time_s += dur_s;
      return;
    }
  }
  stats.push_back(CommStat{kind, op.group, op.group_size, op.buffer_bytes, 1, dur_s});
}

}  // namespace

double union_length_us(Intervals intervals) { return total(merged(std::move(intervals))); }

double overlap_length_us(Intervals a, Intervals b) { return overlap_merged(merged(std::move(a)), merged(std::move(b))); }

bool parse_collective_name(const std::string& name, CommOp& op) {
  // "ncclDevKernel_AllReduce_Sum_f32_RING_LL" and "allreduce" reduce to the same words.
  const std::string n = lower_alnum(name);
  auto has = [&](const char* word) { return n.find(word) != std::string::npos; };
  op.p2p = false;
  if (has("allreduce")) op.kind = CollectiveKind::kAllReduce;
  else if (has("reducescatter")) op.kind = CollectiveKind::kReduceScatter;
  else if (has("allgather")) op.kind = CollectiveKind::kAllGather;
  else if (has("alltoall")) op.kind = CollectiveKind::kAllToAll;
  else if (has("broadcast")) op.kind = CollectiveKind::kBroadcast;
  else if (has("sendrecv") || has("send") || has("recv")) op.p2p = true;
  else return false;
  return true;
}

RankStats analyze_trace(const TraceReadout& trace) {
  RankStats out;
  out.rank = trace.rank;
  out.world_size = trace.world_size;
  out.source = trace.source;
  std::vector<TraceReadout::Step> steps = trace.steps;
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  if (steps.size() < 2) return out;  // nothing left once the last step is dropped
  steps.pop_back();

  std::unordered_map<int64_t, double> launch_at;
  launch_at.reserve(trace.launches.size());
  for (const auto& [corr, ts] : trace.launches) launch_at.emplace(corr, ts);

  // The step whose CPU span holds `t`, or -1.
  auto step_of = [&](double t) -> int64_t {
    auto it = std::upper_bound(steps.begin(), steps.end(), t,
                               [](double x, const TraceReadout::Step& s) { return x < s.start_us; });
    if (it == steps.begin()) return -1;
    --it;
    if (t > it->start_us + it->dur_us) return -1;
    return it - steps.begin();
  };

  std::vector<StepWork> work(steps.size());
  const int64_t timeline_step = static_cast<int64_t>(steps.size()) - 1;
  auto add_span = [&](const TraceActivity& a) {
    TimelineSpan span;
    span.rank = trace.rank;
    span.start_s = (a.start_us - steps.back().start_us) * 1e-6;
    span.end_s = span.start_s + a.dur_us * 1e-6;
    switch (a.cls) {
      case ActivityClass::kCompute:
        span.stream = "compute";
        span.name = "kernel";
        span.category = "compute";
        break;
      case ActivityClass::kMemory:
        span.stream = "memcpy";
        span.name = "memcpy";
        span.category = "memory";
        break;
      case ActivityClass::kComm: {
        const CommOp* op = a.comm_index >= 0 ? &trace.comm_ops[static_cast<size_t>(a.comm_index)] : nullptr;
        const bool p2p = op && op->p2p;
        span.stream = p2p ? "p2p" : "nccl";
        span.name = p2p ? "ncclSendRecv" : op ? nccl_name(op->kind) : "nccl";
        span.category = p2p ? "p2p" : "collective";
        break;
      }
    }
    out.timeline.push_back(std::move(span));
  };
  for (const TraceActivity& a : trace.activities) {
    double anchor = a.start_us;
    if (a.correlation >= 0) {
      auto it = launch_at.find(a.correlation);
      if (it != launch_at.end()) anchor = it->second;
    }
    const int64_t s = step_of(anchor);
    if (s < 0) continue;
    if (s == timeline_step) add_span(a);
    StepWork& w = work[static_cast<size_t>(s)];
    const std::pair<double, double> iv{a.start_us, a.start_us + a.dur_us};
    switch (a.cls) {
      case ActivityClass::kCompute: w.compute.push_back(iv); break;
      case ActivityClass::kMemory: w.memory.push_back(iv); break;
      case ActivityClass::kComm:
        w.comm.push_back(iv);
        if (a.comm_index >= 0 && trace.comm_ops[static_cast<size_t>(a.comm_index)].p2p) w.p2p.push_back(iv);
        else w.collectives.push_back(iv);
        if (a.comm_index >= 0)
          add_comm_stat(w.comm_stats, trace.comm_ops[static_cast<size_t>(a.comm_index)], a.dur_us * 1e-6);
        break;
    }
  }

  for (size_t i = 0; i < steps.size(); ++i) {
    StepWork& w = work[i];
    IterationStats it;
    it.step = steps[i].number;
    it.iteration_s = steps[i].dur_us * 1e-6;
    const Intervals compute = merged(std::move(w.compute));
    const Intervals comm = merged(std::move(w.comm));
    const Intervals memory = merged(std::move(w.memory));
    Intervals all = compute;
    all.insert(all.end(), comm.begin(), comm.end());
    all.insert(all.end(), memory.begin(), memory.end());
    const Intervals busy = merged(std::move(all));
    const double comm_us = total(comm);
    const double hidden_us = overlap_merged(comm, compute);
    Intervals compute_or_comm = compute;
    compute_or_comm.insert(compute_or_comm.end(), comm.begin(), comm.end());
    const double busy_us = total(busy);
    it.compute_s = total(compute) * 1e-6;
    it.comm_s = comm_us * 1e-6;
    it.memory_s = (busy_us - total(merged(std::move(compute_or_comm)))) * 1e-6;
    it.idle_s = std::max(0.0, steps[i].dur_us - busy_us) * 1e-6;
    it.exposed_comm_s = (comm_us - hidden_us) * 1e-6;
    it.overlap_ratio = comm_us > 0 ? hidden_us / comm_us : 0.0;
    it.pipeline_wait_s = it.idle_s + exposed_p2p_us(w, compute, memory) * 1e-6;
    it.comm = std::move(w.comm_stats);
    const double lo = steps[i].start_us, hi = steps[i].start_us + steps[i].dur_us;
    for (const auto& m : trace.memory)
      if (m.ts_us >= lo && m.ts_us <= hi) it.peak_allocated_bytes = std::max(it.peak_allocated_bytes, m.allocated_bytes);
    out.iterations.push_back(std::move(it));
  }
  return out;
}

}  // namespace monarch::measured
