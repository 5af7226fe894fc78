#include "core/pipeline_bubble.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "core/pipeline_schedule.h"
#include "core/recent_entries.h"

namespace monarch {

namespace {

// One step of a stage with what the makespan loop needs: its model chunk i (c x pp + s) and
// its slot i x m + micro-batch in the arrival tables.
struct Step {
  int32_t chunk = 0;
  int32_t slot = 0;
  bool forward = true;
};

// The steps of every stage of one schedule, one stage after another (stage s's from begin[s]).
// They depend on the schedule's shape only, not on the times, and a search times many plans
// of one shape, so the last few are kept per thread.
struct CompiledSchedule {
  Schedule schedule = Schedule::kOneFOneB;
  Framework framework = Framework::kMegatron;
  int64_t pp = 0, micro_batches = 0, vpp = 0, extra_warmup = 0;
  std::vector<Step> steps;
  std::vector<size_t> begin;
};

const CompiledSchedule& compiled_schedule(Schedule schedule, Framework framework, int64_t p, int64_t m, int64_t v,
                                          int64_t extra_warmup) {
  // Up to 8 schedules of at most 2^17 steps are kept (1.5 MB each); a longer one takes one
  // scratch entry that the next long one reuses.
  constexpr size_t kKept = 8;
  constexpr int64_t kMaxKeptSteps = int64_t{1} << 17;
  thread_local std::vector<CompiledSchedule> kept(kKept + 1);
  thread_local size_t next_slot = 0;
  for (const CompiledSchedule& c : kept)
    if (c.pp == p && c.micro_batches == m && c.vpp == v && c.schedule == schedule && c.framework == framework &&
        c.extra_warmup == extra_warmup)
      return c;
  const bool keep = 2 * p * m * v <= kMaxKeptSteps;
  CompiledSchedule& c = kept[keep ? next_slot : kKept];
  if (keep) next_slot = (next_slot + 1) % kKept;
  if (!keep) {
    c.steps = {};  // release the previous long schedule's memory before building this one
    c.begin = {};
  }
  c.schedule = schedule;
  c.framework = framework;
  c.pp = p;
  c.micro_batches = m;
  c.vpp = v;
  c.extra_warmup = extra_warmup;
  c.steps.clear();
  c.begin.assign(static_cast<size_t>(p + 1), 0);
  std::vector<PipelineStep> order;
  for (int64_t s = 0; s < p; ++s) {
    order.clear();
    append_pipeline_order(order, schedule, p, s, m, v, framework, extra_warmup);
    for (const PipelineStep& st : order) {
      const int64_t i = int64_t{st.chunk} * p + s;
      c.steps.push_back(Step{static_cast<int32_t>(i), static_cast<int32_t>(i * m + st.micro_batch), st.forward});
    }
    c.begin[static_cast<size_t>(s + 1)] = c.steps.size();
  }
  return c;
}

// When chunk i's output for micro-batch k of the last run reached the next (previous) chunk,
// at slot i x m + k; negative while it had not been sent.
thread_local std::vector<double> activation_at, gradient_at;

// The schedule of `m` micro-batches run step by step.
double run_schedule_s(const PipelineShape& sh, int64_t m) {
  const int64_t p = sh.pp;
  const int64_t v = sh.vpp;
  const int64_t chunks = p * v;
  const auto at = [](int64_t i) { return static_cast<size_t>(i); };
  assert(static_cast<int64_t>(sh.forward_s.size()) == chunks && static_cast<int64_t>(sh.backward_s.size()) == chunks);
  assert(static_cast<int64_t>(sh.forward_send_s.size()) == chunks && static_cast<int64_t>(sh.backward_send_s.size()) == chunks);
  const CompiledSchedule& cs = compiled_schedule(sh.schedule, sh.framework, p, m, v, sh.extra_warmup);

  thread_local std::vector<size_t> next;
  thread_local std::vector<double> free_at;
  next.assign(cs.begin.begin(), cs.begin.end() - 1);
  free_at.assign(at(p), 0.0);
  activation_at.assign(at(chunks * m), -1.0);
  gradient_at.assign(at(chunks * m), -1.0);

  // Advance each stage as far as its inputs allow, round after round; every round advances at
  // least one stage (the schedules do not deadlock), so this ends after all steps.
  size_t left = cs.steps.size();
  const auto last_chunk = static_cast<int32_t>(chunks - 1);
  while (left > 0) {
    const size_t left_before = left;
    for (int64_t s = 0; s < p; ++s) {
      double& clock = free_at[at(s)];
      size_t& k = next[at(s)];
      for (const size_t end = cs.begin[at(s + 1)]; k < end; ++k, --left) {
        const Step& st = cs.steps[k];
        const auto slot = static_cast<size_t>(st.slot);
        const auto i = static_cast<size_t>(st.chunk);
        if (st.forward) {
          const double in = st.chunk > 0 ? activation_at[slot - at(m)] : 0.0;
          if (in < 0) break;
          clock = std::max(clock, in) + sh.forward_s[i] + sh.forward_send_s[i];
          activation_at[slot] = clock;
        } else {
          const double in = st.chunk < last_chunk ? gradient_at[slot + at(m)] : 0.0;
          if (in < 0) break;
          clock = std::max(clock, in) + sh.backward_s[i] + sh.backward_send_s[i];
          gradient_at[slot] = clock;
        }
      }
    }
    assert(left < left_before && "a pipeline schedule that cannot run to its end");
    if (left == left_before) break;
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

// The time one lap (p micro-batches) adds in the steady state of the last run of m
// micro-batches, if it has settled by lap `first`: every step (each chunk's forward and backward
// of each micro-batch) of laps first + 1 and first + 2 ends one same time after the same step a
// lap before, within `tolerance_s`. A step waits only for steps at most two laps before it (its
// stage's previous step, at most the warm-up's forwards back, and its input from the
// neighbouring chunk), so from then on every lap repeats the last one that much later: the
// schedule is a max-plus linear system whose state has become its own shift. NaN otherwise.
double settled_lap_s(int64_t m, int64_t p, int64_t chunks, int64_t first, double tolerance_s) {
  const int64_t lap_start = first * p;
  const double lap_s = activation_at[static_cast<size_t>(lap_start + p)] - activation_at[static_cast<size_t>(lap_start)];
  for (const std::vector<double>* at : {&activation_at, &gradient_at})
    for (int64_t i = 0; i < chunks; ++i)
      for (int64_t k = lap_start; k < lap_start + 2 * p; ++k) {
        const auto slot = static_cast<size_t>(i * m + k);
        if (!(std::abs((*at)[slot + static_cast<size_t>(p)] - (*at)[slot] - lap_s) <= tolerance_s))
          return std::numeric_limits<double>::quiet_NaN();
      }
  return lap_s;
}

// Whether the steps of micro-batch k + p follow the same pattern as those of k in the
// schedule's steady state, whatever the micro-batch count: 1F1B's warm-up depends on p alone,
// the interleaved orders go by laps of p micro-batches when m is a multiple of p (torch's
// rounds are then p micro-batches too). GPipe runs every forward before any backward.
bool repeats_by_lap(const PipelineShape& sh) {
  if (sh.schedule == Schedule::kOneFOneB) return true;
  return sh.schedule == Schedule::kInterleaved && sh.micro_batches % std::max<int64_t>(sh.pp, 1) == 0;
}

}  // namespace

std::string pipeline_length_problem(int64_t pp, int64_t vpp) {
  const int64_t p = std::max<int64_t>(pp, 1), v = std::max<int64_t>(vpp, 1);
  if (p < 2 || v * p * 3 * p <= kPipelineMaxCells) return "";
  return "a pipeline of " + std::to_string(p) + " stages x " + std::to_string(v) +
         " chunks is too long to time: three laps of it are " + std::to_string(v * p * 3 * p) +
         " chunk x micro-batch cells, more than " + std::to_string(kPipelineMaxCells);
}

namespace {

// The makespan of a shape, not yet looked up among the last ones timed.
double time_pipeline_s(const PipelineShape& sh, int64_t max_cells) {
  const int64_t p = std::max<int64_t>(sh.pp, 1), m = sh.micro_batches;
  const int64_t chunks = p * sh.vpp;
  // Micro-batch counts are whole laps here, which every schedule accepts.
  assert(pipeline_length_problem(p, sh.vpp).empty());
  // A run of laps x p micro-batches (plus m's remainder, so that m - run is whole laps) shows
  // whether the steady state has settled by its lap laps - 6: two laps of warm-up before it,
  // three of cool-down after the laps compared. Then the makespan grows by the lap's time.
  static_assert(kPipelineSettleLaps >= 8, "two laps of warm-up, three compared, three of cool-down");
  if (repeats_by_lap(sh)) {
    for (int64_t laps = kPipelineSettleLaps; laps * p + m % p < m && (laps * p + m % p) * chunks <= max_cells; laps *= 2) {
      const int64_t run = laps * p + m % p;
      const double run_s = run_schedule_s(sh, run);
      const double lap_s = settled_lap_s(run, p, chunks, laps - 6, kPipelineSettledTolerance * run_s);
      if (!std::isnan(lap_s)) return run_s + lap_s * static_cast<double>((m - run) / p);
    }
  }
  const int64_t budget_laps = std::max<int64_t>(3, max_cells / (chunks * p));
  if (m <= budget_laps * p) return run_schedule_s(sh, m);
  const int64_t m2 = budget_laps * p, m1 = m2 - p;
  const double t2 = run_schedule_s(sh, m2), t1 = run_schedule_s(sh, m1);
  return t2 + (t2 - t1) * static_cast<double>(m - m2) / static_cast<double>(p);
}

bool same_shape(const PipelineShape& a, const PipelineShape& b) {
  return a.schedule == b.schedule && a.framework == b.framework && a.pp == b.pp && a.micro_batches == b.micro_batches &&
         a.vpp == b.vpp && a.extra_warmup == b.extra_warmup && a.forward_s == b.forward_s && a.backward_s == b.backward_s &&
         a.forward_send_s == b.forward_send_s && a.backward_send_s == b.backward_send_s;
}

}  // namespace

// A search times plans that differ only in what the pipeline does not see (the ZeRO stage, the
// data-parallel overlaps, the optimizer) one after another: the last few shapes are kept per
// thread with their makespans.
double pipeline_makespan_s(const PipelineShape& sh, int64_t max_cells) {
  struct Timed {
    PipelineShape shape;
    int64_t max_cells = 0;
    double makespan_s = 0;
  };
  thread_local RecentEntries<Timed, 8> kept;
  if (const Timed* t = kept.find([&](const Timed& e) { return e.max_cells == max_cells && same_shape(e.shape, sh); }))
    return t->makespan_s;
  const double makespan_s = time_pipeline_s(sh, max_cells);
  kept.add(Timed{sh, max_cells, makespan_s});
  return makespan_s;
}

double pipeline_makespan_every_step_s(const PipelineShape& sh) { return run_schedule_s(sh, sh.micro_batches); }

}  // namespace monarch
