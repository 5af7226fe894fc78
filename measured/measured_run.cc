#include "measured/measured_run.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/placement.h"

namespace monarch::measured {
namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
constexpr double kTera = 1e12;

// Plan groups in the order they are tried: the first whose members match names the group, so
// "dp" wins over "world" when data parallelism spans every rank.
constexpr GroupKind kGroupOrder[] = {GroupKind::kTp,   GroupKind::kCp,        GroupKind::kDp,       GroupKind::kPp,
                                     GroupKind::kEp,   GroupKind::kExpertTp,  GroupKind::kExpertDp, GroupKind::kDpCp,
                                     GroupKind::kEmbedding, GroupKind::kWorld};

std::string group_name(const CommStat& c, int32_t rank, int32_t world_size, const std::optional<Plan>& plan) {
  if (!plan) return c.group;
  std::vector<int32_t> ranks = parse_rank_list(c.group);
  if (ranks.empty() && (c.group_size == 0 || c.group_size == world_size)) {
    // No member list (gloo on CPU, or a trace without "Process Group Ranks"): the default
    // process group, every rank.
    for (int32_t r = 0; r < world_size; ++r) ranks.push_back(r);
  }
  if (ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) return c.group;
  const std::string g = plan_group_of(ranks, *plan);
  return g.empty() ? c.group : g;
}

Problems check_ranks(const MeasuredEvidence& ev, const std::optional<Plan>& plan) {
  Problems problems;
  std::set<int32_t> seen;
  for (const RankStats& r : ev.ranks) {
    if (r.rank < 0) {
      problems.push_back({r.source, "the trace names no rank (no distributedInfo.rank and none in the file name); give --rank"});
      continue;
    }
    if (!seen.insert(r.rank).second) problems.push_back({r.source, "a second trace of rank " + std::to_string(r.rank)});
    if (r.iterations.empty())
      problems.push_back({r.source, "no complete iteration: the trace needs at least two ProfilerStep#N events "
                                    "(the last one is dropped, as in HTA)"});
    if (plan) {
      if (r.world_size > 0 && r.world_size != plan->world_size())
        problems.push_back({r.source, "the trace is of a world of " + std::to_string(r.world_size) +
                                          " ranks (distributedInfo.world_size), the plan has " +
                                          std::to_string(plan->world_size())});
      if (r.rank >= plan->world_size())
        problems.push_back({r.source, "rank " + std::to_string(r.rank) + " is outside the plan's " +
                                          std::to_string(plan->world_size()) + " ranks"});
    }
  }
  return problems;
}

}  // namespace

std::vector<int32_t> parse_rank_list(const std::string& text) {
  std::vector<int32_t> out;
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return out;
  std::string inner = text.substr(1, text.size() - 2);
  std::replace(inner.begin(), inner.end(), ',', ' ');
  std::istringstream in(inner);
  long v = 0;
  while (in >> v) {
    if (v < 0) return {};
    out.push_back(static_cast<int32_t>(v));
  }
  if (!in.eof()) return {};
  std::sort(out.begin(), out.end());
  return out;
}

std::string plan_group_of(const std::vector<int32_t>& ranks_in, const Plan& plan) {
  if (ranks_in.empty()) return {};
  std::vector<int32_t> ranks = ranks_in;
  std::sort(ranks.begin(), ranks.end());
  if (ranks.back() >= plan.world_size()) return {};
  for (GroupKind k : kGroupOrder) {
    if (group_size(k, plan) != static_cast<int64_t>(ranks.size())) continue;
    std::vector<int32_t> g = group_ranks(k, ranks.front(), plan);
    std::sort(g.begin(), g.end());
    if (g == ranks) return to_string(k);
  }
  return {};
}

namespace {

// The traces' part of the result: per iteration index the slowest rank's time, the mean
// breakdown and communication per rank and iteration, the peak memory and one timeline.
void add_traces(const std::vector<RankStats>& ranks, const std::optional<Plan>& plan, BackendResult& r) {
  // Ranks may have different step numbers when they were profiled separately, so iterations
  // are matched by position.
  size_t n_iter = ranks.front().iterations.size();
  for (const RankStats& rk : ranks) n_iter = std::min(n_iter, rk.iterations.size());
  const double n_ranks = static_cast<double>(ranks.size());
  const double n_it = static_cast<double>(n_iter);
  // Under a pipeline plan, the stage's waits for its neighbours are its bubble.
  const bool pipelined = plan && plan->pp > 1;
  double iter_sum = 0, peak_bytes = 0;
  struct Acc {
    int64_t bytes = 0;
    int64_t count = 0;
    double time_s = 0;
    int64_t group_size = 0;
  };
  std::map<std::pair<CollectiveKind, std::string>, Acc> comm;
  std::vector<std::pair<CollectiveKind, std::string>> order;
  for (size_t i = 0; i < n_iter; ++i) {
    double slowest = 0;
    for (const RankStats& rk : ranks) slowest = std::max(slowest, rk.iterations[i].iteration_s);
    iter_sum += slowest;
  }
  for (const RankStats& rk : ranks) {
    const int32_t world = plan ? static_cast<int32_t>(plan->world_size()) : std::max<int32_t>(rk.world_size, static_cast<int32_t>(ranks.size()));
    for (size_t i = 0; i < n_iter; ++i) {
      const IterationStats& it = rk.iterations[i];
      r.time_breakdown_s.compute += it.compute_s / n_ranks / n_it;
      r.time_breakdown_s.exposed_comm += it.exposed_comm_s / n_ranks / n_it;
      if (pipelined) r.time_breakdown_s.bubble += it.pipeline_wait_s / n_ranks / n_it;
      peak_bytes = std::max(peak_bytes, it.peak_allocated_bytes);
      for (const CommStat& c : it.comm) {
        const std::string group = group_name(c, rk.rank, world, plan);
        const auto key = std::make_pair(c.kind, group);
        if (!comm.count(key)) order.push_back(key);
        Acc& a = comm[key];
        const int32_t n = c.group_size > 0 ? c.group_size : world;
        // Send / receive: the message itself crosses the link once.
        const double wire = c.kind == CollectiveKind::kSendRecv ? static_cast<double>(c.buffer_bytes)
                                                               : collective_wire_bytes(c.kind, c.buffer_bytes, n);
        a.bytes += static_cast<int64_t>(std::llround(wire));
        a.group_size = n;
        a.count += c.count;
        a.time_s += c.time_s;
      }
    }
  }
  r.iteration_time_s = iter_sum / n_it;
  // One iteration of every rank's device work, each from its own step start.
  for (const RankStats& rk : ranks) r.timeline.insert(r.timeline.end(), rk.timeline.begin(), rk.timeline.end());
  const double per = n_ranks * n_it;
  for (const auto& key : order) {
    const Acc& a = comm[key];
    CommEntry e{key.first, group_kind_from_string(key.second),
                static_cast<int64_t>(std::llround(static_cast<double>(a.bytes) / per)),
                static_cast<int64_t>(std::llround(static_cast<double>(a.count) / per)), a.time_s / per, a.group_size};
    // A group that is none of the plan's (no plan, or ranks the plan does not group) keeps its
    // trace name and counts in no time term.
    if (!e.group) e.group_label = key.second;
    else r.time_breakdown_s.*comm_time_term(*e.group) += e.time_s;
    r.communication.push_back(e);
  }
  r.memory.peak_gib = peak_bytes / kBytesPerGib;
}

// The log's part: losses, and (without traces) the iteration time and the peak memory.
void add_log(const TrainingLog& log, bool have_traces, const std::optional<Plan>& plan, const Scenario* scenario,
             BackendResult& r) {
  std::vector<double> times;
  double mem = 0;
  for (const LogStep& s : log.steps) {
    if (s.loss) r.losses.push_back(*s.loss);
    if (s.iteration_s) times.push_back(*s.iteration_s);
    if (s.memory_gib) mem = std::max(mem, *s.memory_gib);
  }
  if (!have_traces) {
    if (times.empty() && log.steps.front().tokens_per_s_per_gpu && scenario && plan) {
      // torchtitan logs tokens per second per GPU, not the step time.
      for (const LogStep& s : log.steps)
        if (s.tokens_per_s_per_gpu && *s.tokens_per_s_per_gpu > 0)
          times.push_back(static_cast<double>(scenario->training.global_batch_size) *
                          static_cast<double>(scenario->model.seq_length) /
                          (*s.tokens_per_s_per_gpu * static_cast<double>(plan->world_size())));
    }
    // The first logged iteration carries start-up work (compilation, allocator warm-up): left
    // out when there are others, as the trace drops its profiler warm-up.
    if (times.size() > 1) times.erase(times.begin());
    double sum = 0;
    for (double t : times) sum += t;
    r.iteration_time_s = times.empty() ? 0 : sum / static_cast<double>(times.size());
  }
  if (r.memory.peak_gib == 0) r.memory.peak_gib = mem;
}

}  // namespace

Expected<BackendResult> measured_result(const MeasuredEvidence& ev, const std::optional<Plan>& plan,
                                        const Scenario* scenario) {
  Problems problems = check_ranks(ev, plan);
  if (!problems.empty()) return problems;
  if (ev.ranks.empty() && !ev.log) return Expected<BackendResult>::fail("runs import", "nothing to import: no trace and no log");

  BackendResult r;
  r.backend = kMeasuredBackend;
  r.measured = true;
  if (plan) r.plan = *plan;

  if (!ev.ranks.empty()) add_traces(ev.ranks, plan, r);
  if (ev.log) add_log(*ev.log, !ev.ranks.empty(), plan, scenario, r);

  if (scenario && plan && r.iteration_time_s > 0) {
    const ModelShape m = model_shape(scenario->model);
    const double tokens = static_cast<double>(scenario->training.global_batch_size) * static_cast<double>(m.seq);
    r.tokens_per_s = tokens / r.iteration_time_s;
    const FlopsPerIteration f = flops_per_iteration(m, scenario->training, plan->recompute);
    r.model_flops_per_iteration = f.model;
    r.hardware_flops_per_iteration = f.hardware;
    const double gpus = static_cast<double>(plan->world_size());
    r.model_tflops_per_gpu = f.model / r.iteration_time_s / gpus / kTera;
    r.hardware_tflops_per_gpu = f.hardware / r.iteration_time_s / gpus / kTera;
    const double peak = peak_tflops(scenario->cluster.gpu, scenario->training.precision);
    r.mfu = peak > 0 ? r.model_tflops_per_gpu / peak : 0;
    r.hfu = peak > 0 ? r.hardware_tflops_per_gpu / peak : 0;
  }
  return r;
}

}  // namespace monarch::measured
