#include "core/pipeline_schedule.h"

#include <algorithm>
#include <cassert>

namespace monarch {

namespace {

// torch.distributed.pipelining ScheduleInterleaved1F1B: the micro-batches of one round.
int64_t torch_round_size(int64_t pp, int64_t m) { return m / std::max<int64_t>(1, m / pp); }

}  // namespace

std::string schedule_problem(Schedule schedule, int64_t pp, int64_t m, int64_t vpp, Framework framework) {
  if (pp < 1) return "pipeline degree must be at least 1";
  if (m < 1) return "needs at least one micro-batch";
  if (vpp < 1) return "virtual pipeline degree must be at least 1";
  const bool torch = framework == Framework::kTorchtitan;
  if (schedule != Schedule::kInterleaved) {
    if (vpp != 1) return std::string("virtual pipeline degree ") + std::to_string(vpp) + " needs the interleaved-1f1b schedule";
    if (torch && schedule == Schedule::kOneFOneB && pp > 1 && m < pp)
      return "torchtitan's Schedule1F1B (torch.distributed.pipelining) needs at least as many micro-batches (" +
             std::to_string(m) + ") as pipeline stages (" + std::to_string(pp) + ")";
    return "";
  }
  if (pp < 2) return "interleaved-1f1b needs at least 2 pipeline stages";
  if (torch) {
    const int64_t rounds = std::max<int64_t>(1, m / pp);
    if (m % rounds != 0)
      return "torchtitan's ScheduleInterleaved1F1B (torch.distributed.pipelining) needs the micro-batch count (" +
             std::to_string(m) + ") to be a multiple of its rounds (max(1, m / pp) = " + std::to_string(rounds) + ")";
    return "";
  }
  if (m % pp != 0)
    return "interleaved-1f1b needs the micro-batch count (" + std::to_string(m) +
           ") to be a multiple of the pipeline degree (" + std::to_string(pp) + ")";
  return "";
}

namespace {

// Megatron's get_model_chunk_id / micro-batch of virtual step k (interleaved).
PipelineStep interleaved_step(int64_t k, bool forward, int64_t pp, int64_t vpp) {
  const int64_t group = pp * vpp;
  const int64_t in_group = k % group;
  int64_t chunk = in_group / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  const int64_t mb = (k / group) * pp + k % pp;
  return PipelineStep{forward, static_cast<int32_t>(mb), static_cast<int32_t>(chunk)};
}

// torch.distributed.pipelining ScheduleInterleaved1F1B's order of one stage (_get_1f1b_rank_ops
// without zero bubble): forward op k runs chunk (k / r) mod v, backward op k chunk
// v - 1 - (k / r) mod v; each chunk takes its micro-batches in order.
void append_torch_interleaved_order(std::vector<PipelineStep>& out, int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  const int64_t r = torch_round_size(pp, m);
  const int64_t total = m * vpp;
  const int64_t warmup = warmup_forwards(Schedule::kInterleaved, pp, stage, m, vpp, Framework::kTorchtitan);
  std::vector<int32_t> next_fwd(static_cast<size_t>(vpp), 0), next_bwd(static_cast<size_t>(vpp), 0);
  auto forward = [&](int64_t k) {
    const auto chunk = static_cast<int32_t>((k / r) % vpp);
    out.push_back(PipelineStep{true, next_fwd[static_cast<size_t>(chunk)]++, chunk});
  };
  auto backward = [&](int64_t k) {
    const auto chunk = static_cast<int32_t>(vpp - 1 - (k / r) % vpp);
    out.push_back(PipelineStep{false, next_bwd[static_cast<size_t>(chunk)]++, chunk});
  };
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t k = 0; k < total - warmup; ++k) {
    forward(warmup + k);
    backward(k);
  }
  for (int64_t k = total - warmup; k < total; ++k) backward(k);
}

}  // namespace

int64_t warmup_forwards(Schedule schedule, int64_t pp, int64_t stage, int64_t m, int64_t vpp, Framework framework,
                        int64_t extra_warmup) {
  const int64_t total = m * (schedule == Schedule::kInterleaved ? vpp : 1);
  if (extra_warmup > 0)
    return std::min(warmup_forwards(schedule, pp, stage, m, vpp, framework) + extra_warmup, total);
  switch (schedule) {
    case Schedule::kGpipe: return total;
    case Schedule::kOneFOneB: return std::min(pp - stage - 1, m);
    case Schedule::kInterleaved:
      if (framework == Framework::kTorchtitan) return std::min((vpp - 1) * torch_round_size(pp, m) + 2 * (pp - 1 - stage), total);
      if (m == pp) return total;  // Megatron runs every forward first
      return std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  }
  return total;
}

int64_t extra_warmup_forwards(const Plan& plan) { return plan.ep_comm_overlap ? 1 : 0; }

int64_t ep_overlap_unpaired_passes(const Plan& plan, int64_t stage, int64_t m) {
  return warmup_forwards(plan.schedule, plan.pp, stage, m, plan.chunks_per_stage(), Framework::kMegatron, 1);
}

PipelineInFlight peak_in_flight(Schedule schedule, int64_t pp, int64_t stage, int64_t m, int64_t vpp,
                                Framework framework, int64_t extra_warmup) {
  const int64_t total = m * (schedule == Schedule::kInterleaved ? vpp : 1);
  const int64_t warmup = warmup_forwards(schedule, pp, stage, m, vpp, framework, extra_warmup);
  // After the warm-up every forward is followed by a backward, so the count peaks with the
  // steady state's first forward; a warm-up of every forward holds every micro-batch of every
  // chunk, the last one's included.
  if (warmup >= total) return {total, m};
  return {warmup + 1, 1};
}

std::vector<PipelineStep> pipeline_order(Schedule schedule, int64_t pp, int64_t stage, int64_t m,
                                         int64_t vpp, Framework framework, int64_t extra_warmup) {
  std::vector<PipelineStep> out;
  out.reserve(static_cast<size_t>(2 * m * vpp));
  append_pipeline_order(out, schedule, pp, stage, m, vpp, framework, extra_warmup);
  return out;
}

void append_pipeline_order(std::vector<PipelineStep>& out, Schedule schedule, int64_t pp, int64_t stage, int64_t m,
                           int64_t vpp, Framework framework, int64_t extra_warmup) {
  assert(schedule_problem(schedule, pp, m, vpp, framework).empty());
  assert(stage >= 0 && stage < pp);
  if (schedule == Schedule::kInterleaved && framework == Framework::kTorchtitan) {
    append_torch_interleaved_order(out, pp, stage, m, vpp);
    return;
  }
  auto step = [](bool fwd, int64_t mb) { return PipelineStep{fwd, static_cast<int32_t>(mb), 0}; };
  switch (schedule) {
    case Schedule::kGpipe:
      for (int64_t i = 0; i < m; ++i) out.push_back(step(true, i));
      for (int64_t i = 0; i < m; ++i) out.push_back(step(false, i));
      break;
    case Schedule::kOneFOneB: {
      const int64_t warmup = warmup_forwards(schedule, pp, stage, m, vpp, framework, extra_warmup);
      const int64_t remaining = m - warmup;
      for (int64_t i = 0; i < warmup; ++i) out.push_back(step(true, i));
      for (int64_t i = 0; i < remaining; ++i) {
        out.push_back(step(true, warmup + i));
        out.push_back(step(false, i));
      }
      for (int64_t i = remaining; i < m; ++i) out.push_back(step(false, i));
      break;
    }
    case Schedule::kInterleaved: {
      const int64_t total = m * vpp;
      const int64_t warmup = warmup_forwards(schedule, pp, stage, m, vpp, framework, extra_warmup);
      const int64_t remaining = total - warmup;
      for (int64_t k = 0; k < warmup; ++k) out.push_back(interleaved_step(k, true, pp, vpp));
      for (int64_t k = 0; k < remaining; ++k) {
        out.push_back(interleaved_step(warmup + k, true, pp, vpp));
        out.push_back(interleaved_step(k, false, pp, vpp));
      }
      for (int64_t k = remaining; k < total; ++k) out.push_back(interleaved_step(k, false, pp, vpp));
      break;
    }
  }
}

std::string to_string(const std::vector<PipelineStep>& steps, bool show_chunk) {
  std::string s;
  for (const PipelineStep& st : steps) {
    if (!s.empty()) s += ' ';
    s += st.forward ? 'F' : 'B';
    s += std::to_string(st.micro_batch);
    if (show_chunk) s += "." + std::to_string(st.chunk);
  }
  return s;
}

}  // namespace monarch
