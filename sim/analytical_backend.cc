#include "sim/analytical_backend.h"

#include <limits>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/placement.h"
#include "strategies/plan_check.h"

namespace monarch {

BackendResult run_analytical(const Scenario& scenario, const Plan& plan) { return estimate_plan(scenario, plan); }

Expected<Plan> resolve_plan(const Scenario& s) {
  const ParallelismConstraints& c = s.parallelism;
  Plan base;
  base.tp = c.tp.value_or(1);
  base.pp = c.pp.value_or(1);
  base.cp = c.cp.value_or(1);
  base.ep = c.ep.value_or(1);
  base.vpp = c.vpp.value_or(1);
  // Absent: expert TP = TP (Megatron's default). Dense models have no experts to split.
  if (c.etp && *c.etp != base.tp && s.model.is_moe()) base.etp = *c.etp;
  const int64_t fixed = base.tp * base.pp * base.cp;
  if (c.dp) {
    base.dp = *c.dp;
  } else {
    if (fixed <= 0 || s.cluster.num_gpus % fixed != 0)
      return Expected<Plan>::fail("/parallelism", "tp x pp x cp does not divide the GPU count");
    base.dp = s.cluster.num_gpus / fixed;
  }
  base.schedule = c.schedule.value_or(base.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB);
  base.layers_per_stage = fixed_layer_split(s, base);
  if (c.overlap_grad_reduce) base.overlap_grad_reduce = *c.overlap_grad_reduce;
  if (c.overlap_param_gather) base.overlap_param_gather = *c.overlap_param_gather;
  if (c.tp_comm_overlap) base.tp_comm_overlap = *c.tp_comm_overlap;
  if (c.ep_comm_overlap) base.ep_comm_overlap = *c.ep_comm_overlap;
  if (c.activation_offload_layers) base.activation_offload_layers = *c.activation_offload_layers;
  if (std::string w = world_size_problem(base, s.cluster.num_gpus); !w.empty()) return Expected<Plan>::fail("/parallelism", w);

  std::vector<int64_t> mbs;
  if (s.training.micro_batch_size && *s.training.micro_batch_size > 0) {
    mbs.push_back(*s.training.micro_batch_size);
  } else {
    for (int64_t b = 1; b <= 16; b *= 2)
      if (s.training.global_batch_size % (b * base.dp) == 0) mbs.push_back(b);
    if (mbs.empty()) return Expected<Plan>::fail("/training/global_batch_size", "not a multiple of data_parallel_degree");
  }
  std::vector<int64_t> zero = c.zero_stage ? std::vector<int64_t>{*c.zero_stage} : std::vector<int64_t>{0, 1, 2, 3};
  std::vector<Recompute> rec = c.recompute ? std::vector<Recompute>{*c.recompute}
                                           : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  // MoE with tp > 1 runs with sequence parallelism (Megatron's MoELayer requires it).
  std::vector<bool> sp = c.sequence_parallel              ? std::vector<bool>{*c.sequence_parallel}
                         : base.tp > 1 && s.model.is_moe() ? std::vector<bool>{true}
                         : base.tp > 1                     ? std::vector<bool>{false, true}
                                                           : std::vector<bool>{false};

  // A plan that breaks a rule of the scenario's framework (strategies/plan_check.h: the rules
  // the search prunes with and the lowering checks) is no candidate, so the plan given here is
  // one both backends can run; the first broken rule is the answer when no candidate is left.
  Problems first_broken;
  auto runnable = [&](const Plan& p) {
    Problems broken = check_plan(s, p);
    if (broken.empty()) return true;
    if (first_broken.empty()) first_broken = std::move(broken);
    return false;
  };

  // Megatron-LM's defaults first (no sequence parallelism, no recompute, no distributed
  // optimizer, the smallest micro-batch): a published run that leaves a switch unstated ran
  // with the framework's default unless that would not have fit.
  {
    Plan d = base;
    d.micro_batch_size = mbs.front();
    d.zero_stage = zero.front();
    d.recompute = rec.front();
    d.sequence_parallel = sp.front();
    if (runnable(d) && quick_estimate(s, d).fits) return d;
  }
  Plan best = base, smallest = base;
  double best_time = std::numeric_limits<double>::infinity();
  double least_mem = std::numeric_limits<double>::infinity();
  std::string last_reason;
  auto consider = [&](const Plan& p) {
    if (!runnable(p)) return;
    const QuickEstimate e = quick_estimate(s, p);
    if (e.iteration_time_s <= 0) {  // the plan cannot run at all
      last_reason = e.reject_reason;
      return;
    }
    if (e.fits && e.iteration_time_s < best_time) {
      best_time = e.iteration_time_s;
      best = p;
    }
    if (e.peak_memory_gib < least_mem) {
      least_mem = e.peak_memory_gib;
      smallest = p;
    }
  };
  for (int64_t b : mbs)
    for (int64_t z : zero)
      for (Recompute r : rec)
        for (bool q : sp) {
          Plan p = base;
          p.micro_batch_size = b;
          p.zero_stage = z;
          p.recompute = r;
          p.sequence_parallel = q;
          consider(p);
          // Activation offloading left open: the fewest layers that make the plan fit, as the
          // search tries it (fewest_offload_layers_to_fit).
          if (!c.activation_offload_layers)
            if (const int64_t n = fewest_offload_layers_to_fit(s, p); n > 0) {
              p.activation_offload_layers = n;
              consider(p);
            }
        }
  if (best_time < std::numeric_limits<double>::infinity()) return best;
  if (least_mem < std::numeric_limits<double>::infinity()) return smallest;
  if (!first_broken.empty()) return first_broken;
  return Expected<Plan>::fail("/parallelism", last_reason.empty() ? "no plan can run" : last_reason);
}

}  // namespace monarch
