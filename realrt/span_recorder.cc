#include "realrt/span_recorder.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace monarch::realrt {

namespace {
constexpr int kNumSpanGroups = static_cast<int>(sizeof kSpanGroups / sizeof kSpanGroups[0]);
constexpr int kFields = 9;  // what, collective, group, chunk, mb, peer, tag, start, end

int group_index(const char* name) {
  for (int i = 0; i + 1 < kNumSpanGroups; ++i)
    if (std::strcmp(kSpanGroups[i], name) == 0) return i;
  return kNumSpanGroups - 1;
}

const char* stream_of_group(const std::string& g) {
  if (g == "tp") return to_string(Stream::kTpComm);
  if (g == "cp") return to_string(Stream::kCpComm);
  if (g == "ep" || g == "etp") return to_string(Stream::kEpComm);  // MoE token exchange
  return to_string(Stream::kDpComm);  // dp, edp, embedding, ...: the plan's stream_for rule
}
}  // namespace

void SpanRecorder::add(RecordedSpan s, Clock::time_point t0, Clock::time_point t1) {
  if (!on_) return;
  if (static_cast<int64_t>(spans_.size()) >= kMaxSpansPerRank) {
    ++dropped_;
    return;
  }
  s.start_s = std::max(0.0, std::chrono::duration<double>(t0 - origin_).count());
  s.end_s = std::max(s.start_s, std::chrono::duration<double>(t1 - origin_).count());
  spans_.push_back(s);
}

void SpanRecorder::compute(SpanWhat what, int64_t chunk, int64_t micro_batch, Clock::time_point t0, Clock::time_point t1) {
  RecordedSpan s;
  s.what = what;
  s.chunk = static_cast<int32_t>(chunk);
  s.micro_batch = static_cast<int32_t>(micro_batch);
  add(s, t0, t1);
}

void SpanRecorder::collective(CollectiveKind kind, const char* group, Clock::time_point t0, Clock::time_point t1) {
  RecordedSpan s;
  s.what = SpanWhat::kCollective;
  s.collective = kind;
  s.group = group_index(group);
  add(s, t0, t1);
}

void SpanRecorder::p2p(bool send, int64_t peer, int64_t tag, Clock::time_point t0, Clock::time_point t1) {
  RecordedSpan s;
  s.what = send ? SpanWhat::kSend : SpanWhat::kRecv;
  s.peer = static_cast<int32_t>(peer);
  s.tag = static_cast<int32_t>(tag);
  add(s, t0, t1);
}

std::vector<TimelineSpan> gather_timeline(MPI_Comm world, const SpanRecorder& mine, int64_t* dropped) {
  int size = 0, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  std::vector<double> packed;
  packed.reserve(mine.spans().size() * kFields);
  for (const RecordedSpan& s : mine.spans())
    for (double v : {static_cast<double>(s.what), static_cast<double>(s.collective), static_cast<double>(s.group),
                     static_cast<double>(s.chunk), static_cast<double>(s.micro_batch), static_cast<double>(s.peer),
                     static_cast<double>(s.tag), s.start_s, s.end_s})
      packed.push_back(v);
  int count = static_cast<int>(packed.size());  // <= kMaxSpansPerRank * kFields
  std::vector<int> counts(rank == 0 ? static_cast<size_t>(size) : 0), offsets(counts.size());
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);
  int64_t total_dropped = 0, my_dropped = mine.dropped();
  MPI_Reduce(&my_dropped, &total_dropped, 1, MPI_INT64_T, MPI_SUM, 0, world);
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
  }
  std::vector<double> all(static_cast<size_t>(total));
  MPI_Gatherv(packed.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0, world);
  std::vector<TimelineSpan> out;
  if (rank != 0) return out;
  if (dropped) *dropped = total_dropped;
  out.reserve(static_cast<size_t>(total / kFields));
  // Flow ids: a send (src -> peer, tag) and the receive on peer from src with that tag.
  std::map<std::tuple<int, int, int>, int64_t> flows;  // (src, dst, tag) -> id
  auto flow = [&](int src, int dst, int tag) {
    auto [it, fresh] = flows.try_emplace({src, dst, tag}, static_cast<int64_t>(flows.size()));
    return it->second;
  };
  for (int r = 0; r < size; ++r) {
    const double* v = all.data() + offsets[static_cast<size_t>(r)];
    for (int i = 0; i < counts[static_cast<size_t>(r)]; i += kFields, v += kFields) {
      const auto what = static_cast<SpanWhat>(static_cast<int>(v[0]));
      TimelineSpan t;
      t.rank = r;
      t.start_s = v[7];
      t.end_s = v[8];
      const int chunk = static_cast<int>(v[3]), mb = static_cast<int>(v[4]);
      const int peer = static_cast<int>(v[5]), tag = static_cast<int>(v[6]);
      switch (what) {
        case SpanWhat::kForward:
        case SpanWhat::kBackward:
          t.stream = to_string(Stream::kCompute);
          t.category = "compute";
          t.name = std::string(what == SpanWhat::kForward ? "fwd" : "bwd") + " c" + std::to_string(chunk) + " mb" +
                   std::to_string(mb);
          break;
        case SpanWhat::kOptimizer:
          t.stream = to_string(Stream::kCompute);
          t.category = "optimizer";
          t.name = "optimizer step";
          break;
        case SpanWhat::kCollective: {
          const std::string group = kSpanGroups[std::clamp(static_cast<int>(v[2]), 0, kNumSpanGroups - 1)];
          t.stream = stream_of_group(group);
          t.category = "collective";
          t.name = std::string(nccl_name(static_cast<CollectiveKind>(static_cast<int>(v[1])))) + " " + group;
          break;
        }
        case SpanWhat::kSend:
        case SpanWhat::kRecv: {
          const bool send = what == SpanWhat::kSend;
          t.stream = to_string(send ? Stream::kPpSend : Stream::kPpRecv);
          t.category = "p2p";
          t.name = std::string(send ? "ncclSend" : "ncclRecv") + " pp";
          t.peer = peer;
          t.flow_id = send ? flow(r, peer, tag) : flow(peer, r, tag);
          break;
        }
      }
      out.push_back(std::move(t));
    }
  }
  // A flow whose other end was not recorded (dropped, or outside the step) has no arrow.
  std::map<int64_t, int> ends;
  for (const TimelineSpan& t : out)
    if (t.flow_id >= 0) ++ends[t.flow_id];
  for (TimelineSpan& t : out)
    if (t.flow_id >= 0 && ends[t.flow_id] != 2) t.flow_id = -1;
  std::stable_sort(out.begin(), out.end(), [](const TimelineSpan& a, const TimelineSpan& b) { return a.start_s < b.start_s; });
  return out;
}

}  // namespace monarch::realrt
