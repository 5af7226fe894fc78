#include "strategies/search.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "core/cost_model.h"
#include "core/framework_rules.h"
#include "core/placement.h"
#include "core/units.h"
#include "core/model_math.h"
#include "strategies/partition.h"
#include "strategies/plan_check.h"
#include "core/pipeline_schedule.h"

namespace monarch {

std::vector<RejectedPlan> SearchResult::rejected_for_report(int64_t max_listed) const {
  if (plans_rejected <= max_listed && static_cast<int64_t>(rejected_examples.size()) == plans_rejected) return rejected_examples;
  std::vector<RejectedPlan> out;
  for (const RejectionGroup& g : rejection_groups) {
    RejectedPlan r = g.example;
    if (g.count > 1) r.reason += " (and " + std::to_string(g.count - 1) + " more like it)";
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

template <typename T>
std::vector<T> fixed_or(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

// ----------------------------------------------------------------------------- pruning rules

// A rule of the search's own: the plan against a degree the scenario pins but the enumeration
// derives (DP is what TP x CP x PP leave), rather than a rule every plan must keep.
struct ConstraintRule {
  const char* kind;
  PlanLevel level;
  std::string (*broken)(const Scenario& scenario, const Plan& plan);
};

std::string pinned_dp(const Scenario& sc, const Plan& p) {
  const std::optional<int64_t>& dp = sc.parallelism.dp;
  if (!dp || *dp <= 0 || *dp == p.dp) return "";
  return "DP " + std::to_string(*dp) + " is not " + std::to_string(sc.cluster.num_gpus) + " / (TP " + std::to_string(p.tp) +
         " x CP " + std::to_string(p.cp) + " x PP " + std::to_string(p.pp) + ")";
}

const ConstraintRule kConstraintRules[] = {{"dp", PlanLevel::kDp, pinned_dp}};

// The pruning table: the search's constraint rules, then the rules of every plan
// (strategies/plan_check.h), of one enumeration level. The kind of the first broken rule, its
// reason in *why; nullptr when the partial plan may go on.
const char* pruned_by(PlanLevel level, const Scenario& sc, const Plan& p, std::string* why) {
  for (const ConstraintRule& r : kConstraintRules)
    if (r.level == level)
      if (std::string reason = r.broken(sc, p); !reason.empty()) {
        *why = std::move(reason);
        return r.kind;
      }
  const PlanRule* rule = first_broken_rule(level, sc, p, why);
  return rule ? rule->kind : nullptr;
}

// ----------------------------------------------------------------------------- enumerator

// Walks the plan space level by level (TP, CP, PP, DP, expert layout, VPP, schedule,
// micro-batch, then the switches), pruning each partial plan with the table above. One plan
// is mutated along the way, so a plan pruned at an outer level carries the inner values of the
// branch before it, as the rejected list has always shown them.
class PlanEnumerator {
 public:
  using Reject = std::function<void(const char* kind, const Plan&, std::string why)>;
  using Emit = std::function<void(const Plan&)>;
  using Stop = std::function<bool()>;

  PlanEnumerator(const Scenario& sc, Reject reject, Emit emit, Stop stop)
      : sc_(sc), c_(sc.parallelism), m_(sc.model), reject_(std::move(reject)), emit_(std::move(emit)), stop_(std::move(stop)) {}

  void run(const Plan& base) {
    const int64_t n = sc_.cluster.num_gpus;
    for (int64_t tp : fixed_or(c_.tp, divisors(n))) {
      if (stop_()) break;
      p_ = base;
      p_.tp = tp;
      // TP across nodes is valid but unwise: predicted, with a warning (core/plan_warnings.h).
      if (!pruned(PlanLevel::kTp)) cp_level();
    }
  }

 private:
  bool pruned(PlanLevel level) {
    std::string why;
    const char* kind = pruned_by(level, sc_, p_, &why);
    if (kind) reject_(kind, p_, std::move(why));
    return kind != nullptr;
  }

  void cp_level() {
    for (int64_t cp : fixed_or(c_.cp, divisors(sc_.cluster.num_gpus / p_.tp))) {
      p_.cp = cp;
      if (!pruned(PlanLevel::kCp)) pp_level();
    }
  }

  void pp_level() {
    for (int64_t pp : fixed_or(c_.pp, divisors(sc_.cluster.num_gpus / (p_.tp * p_.cp)))) {
      p_.pp = pp;
      if (pruned(PlanLevel::kPp)) continue;
      p_.dp = sc_.cluster.num_gpus / (p_.tp * p_.cp * pp);
      if (!pruned(PlanLevel::kDp)) expert_level();
    }
  }

  // Expert layouts (ep, etp) of one pipeline stage of S = tp x cp x dp ranks
  // (core/placement.h): etp x ep must divide S. Dense models: (1, tp) only, so the dense
  // search space and speed are unchanged.
  std::vector<std::pair<int64_t, int64_t>> expert_layouts() const {
    const int64_t tp = p_.tp, stage = p_.tp * p_.cp * p_.dp, gpn = sc_.cluster.gpus_per_node;
    const int64_t ffn = m_.is_moe() && m_.moe_ffn_hidden_size > 0 ? m_.moe_ffn_hidden_size : m_.ffn_hidden_size;
    std::vector<int64_t> eps;
    if (m_.is_moe()) {
      for (int64_t e : divisors(stage))
        if (m_.num_experts % e == 0) eps.push_back(e);
    } else {
      eps = {1};
    }
    std::vector<std::pair<int64_t, int64_t>> layouts;
    for (int64_t ep : fixed_or(c_.ep, eps)) {
      if (!m_.is_moe()) {  // no experts: an expert TP degree means nothing (the scenario allows only 1)
        layouts.push_back({ep, tp});
        continue;
      }
      if (c_.etp || ep < 1 || stage % ep != 0) {
        layouts.push_back({ep, c_.etp.value_or(tp)});
        continue;
      }
      // Searched etp: divisors of the stage with etp x ep | S, at most a node (expert TP
      // splits every expert GEMM, as dense TP it stays on NVLink), dividing the expert
      // FFN, and powers of two (the degrees Megatron and torchtitan recipes use) plus
      // etp == tp (Megatron's default) whatever tp is. etp == 1 is always among them.
      for (int64_t etp : divisors(stage / ep)) {
        const bool power_of_two = (etp & (etp - 1)) == 0;
        if ((power_of_two || etp == tp) && (gpn <= 0 || etp <= gpn) && (ffn <= 0 || ffn % etp == 0))
          layouts.push_back({ep, etp});
      }
    }
    return layouts;
  }

  void expert_level() {
    for (const auto& [ep, etp] : expert_layouts()) {
      p_.ep = ep;
      p_.etp = etp == p_.tp ? 0 : etp;  // 0 = same as tp: one form per plan
      if (!pruned(PlanLevel::kExperts)) vpp_level();
    }
  }

  void vpp_level() {
    // Candidates up to one model chunk per layer, or (Megatron's account-for flags) per
    // embedding or loss in place of one; the vpp rule refuses a pinned degree beyond that.
    const int64_t split_units = pipeline_split_units(sc_);
    std::vector<int64_t> vpps{1};
    if (p_.pp > 1)
      for (int64_t v = 2; v <= split_units / p_.pp; ++v) vpps.push_back(v);
    for (int64_t vpp : fixed_or(c_.vpp, vpps)) {
      p_.vpp = vpp;
      p_.layers_per_stage.clear();  // the default split: the vpp rule counts the chunks
      if (pruned(PlanLevel::kVpp)) continue;
      p_.layers_per_stage = fixed_layer_split(sc_, p_);  // empty: the default split, balanced later
      schedule_level();
    }
  }

  void schedule_level() {
    std::vector<Schedule> schedules;
    if (c_.schedule) schedules = {*c_.schedule};
    else if (p_.vpp > 1) schedules = {Schedule::kInterleaved};
    else if (p_.pp == 1) schedules = {Schedule::kOneFOneB};
    else schedules = {Schedule::kGpipe, Schedule::kOneFOneB};
    for (Schedule sched : schedules) {
      p_.schedule = sched;
      const int64_t per_replica = sc_.training.global_batch_size / p_.dp;
      const std::vector<int64_t> mbss =
          sc_.training.micro_batch_size ? std::vector<int64_t>{*sc_.training.micro_batch_size} : divisors(per_replica);
      for (int64_t mbs : mbss) {
        p_.micro_batch_size = mbs;
        if (!pruned(PlanLevel::kMicroBatch)) switch_level();
      }
    }
  }

  // Sequence parallelism, recompute and ZeRO: every combination is a plan to estimate.
  void switch_level() {
    std::vector<bool> sps = p_.tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
    // Megatron's MoELayer refuses tensor parallelism without sequence parallelism: SP is on
    // for MoE with tp > 1 (a scenario fixing it off is rejected by the cost model with that
    // reason).
    if (m_.is_moe() && p_.tp > 1) sps = {true};
    if (c_.sequence_parallel) sps = {*c_.sequence_parallel};
    const std::vector<int64_t> zeros = p_.dp * p_.cp > 1 ? std::vector<int64_t>{0, 1, 2, 3} : std::vector<int64_t>{0};
    for (bool sp : sps) {
      p_.sequence_parallel = sp;
      for (bool overlap : tp_overlap_options()) {
        p_.tp_comm_overlap = overlap;
        for (Recompute rc : fixed_or(c_.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull})) {
          p_.recompute = rc;
          for (bool ep_overlap : ep_overlap_options()) {
            p_.ep_comm_overlap = ep_overlap;
            for (int64_t z : fixed_or(c_.zero_stage, zeros)) {
              p_.zero_stage = z;
              for (int64_t offload : offload_options()) {
                p_.activation_offload_layers = offload;
                if (stop_()) return;
                if (!pruned(PlanLevel::kSwitches)) emit_(p_);
              }
            }
          }
        }
      }
    }
  }

  // TP communication overlap (userbuffers, async TP) when the scenario leaves it open: tried
  // on and off where it changes the plan's cost, that is a dense model with TP and sequence
  // parallelism (core/layer_cost.cc), on a framework that has it (Megatron-LM / NeMo
  // --tp-comm-overlap, torchtitan enable_async_tensor_parallel with training.compile, which it
  // needs (async_tp_problem); DeepSpeed has none), a GPU it runs on (gpu_runs_tp_comm_overlap:
  // Hopper and later) and a TP group inside one NVLink domain (tp_group_in_nvlink_domain).
  std::vector<bool> tp_overlap_options() const {
    if (c_.tp_comm_overlap) return {*c_.tp_comm_overlap};
    const bool applies = p_.tp > 1 && p_.sequence_parallel && !m_.is_moe() &&
                         sc_.training.framework != Framework::kDeepspeed && gpu_runs_tp_comm_overlap(sc_.cluster.gpu) &&
                         tp_group_in_nvlink_domain(p_, sc_.cluster.gpus_per_node) &&
                         async_tp_problem(sc_.training.framework, sc_.training.compile, true).empty();
    return applies ? std::vector<bool>{false, true} : std::vector<bool>{false};
  }

  // EP communication overlap when the scenario leaves it open: tried on and off where the plan
  // can run it (ep_overlap_problem: Megatron, ep > 1, virtual stages with pp > 1, no full
  // recompute, a 16-bit model).
  std::vector<bool> ep_overlap_options() const {
    if (c_.ep_comm_overlap) return {*c_.ep_comm_overlap};
    if (!m_.is_moe() || p_.ep <= 1) return {false};  // the common case, without copying the plan
    Plan probe = p_;
    probe.ep_comm_overlap = true;
    return ep_overlap_problem(sc_.training, m_, probe).empty() ? std::vector<bool>{false, true} : std::vector<bool>{false};
  }

  // Activation offloading when the scenario leaves it open: off, and where the plan without it
  // does not fit but can offload (activation_offload_problem: Megatron, pp 1, no recompute, no
  // per-layer CUDA graphs), also the fewest layers that make it fit (offloading only adds copies,
  // so more layers than that are never faster).
  std::vector<int64_t> offload_options() {
    if (c_.activation_offload_layers) return {*c_.activation_offload_layers};
    if (p_.pp != 1 || p_.recompute != Recompute::kNone) return {0};  // the common case, without a memory estimate
    p_.activation_offload_layers = 0;
    const int64_t n = fewest_offload_layers_to_fit(sc_, p_);
    return n > 0 ? std::vector<int64_t>{0, n} : std::vector<int64_t>{0};
  }

  const Scenario& sc_;
  const ParallelismConstraints& c_;
  const ModelConfig& m_;
  Reject reject_;
  Emit emit_;
  Stop stop_;
  Plan p_;
};

// ----------------------------------------------------------------------------- ranker

bool ranks_before(Objective obj, const RankedPlan& a, const RankedPlan& b) {
  if (obj == Objective::kTimeToTrain && a.estimate.time_to_train_s != b.estimate.time_to_train_s)
    return a.estimate.time_to_train_s < b.estimate.time_to_train_s;
  if (obj == Objective::kMemory) {
    if (a.estimate.peak_memory_gib != b.estimate.peak_memory_gib) return a.estimate.peak_memory_gib < b.estimate.peak_memory_gib;
    return a.estimate.iteration_time_s < b.estimate.iteration_time_s;
  }
  if (a.estimate.iteration_time_s != b.estimate.iteration_time_s) return a.estimate.iteration_time_s < b.estimate.iteration_time_s;
  return a.estimate.peak_memory_gib < b.estimate.peak_memory_gib;
}

// Collects rejections: counts per kind, a few examples, the closest memory miss.
class Rejections {
 public:
  Rejections(SearchResult& r, int64_t keep) : r_(r), keep_(keep) {}
  void add(const char* kind, const Plan& plan, std::string reason, double memory_gib = 0) {
    ++r_.plans_rejected;
    RejectionGroup& g = groups_[kind];
    if (g.count == 0 || (memory_gib > 0 && memory_gib < g.example_memory_gib)) {
      g.kind = kind;
      g.example = RejectedPlan{plan, reason};
      g.example_memory_gib = memory_gib;
    }
    ++g.count;
    if (static_cast<int64_t>(r_.rejected_examples.size()) < keep_) r_.rejected_examples.push_back(RejectedPlan{plan, std::move(reason)});
  }
  void finish() {
    for (auto& [k, g] : groups_) r_.rejection_groups.push_back(std::move(g));
    std::stable_sort(r_.rejection_groups.begin(), r_.rejection_groups.end(),
                     [](const RejectionGroup& a, const RejectionGroup& b) { return a.count > b.count; });
  }

 private:
  SearchResult& r_;
  int64_t keep_;
  std::map<std::string, RejectionGroup> groups_;
};

// Ranks estimated plans by the objective: the best few kept in a heap (more than top_k:
// balancing the pipeline may reorder them), the rest and the misfits counted.
class Ranker {
 public:
  Ranker(const Scenario& sc, int64_t top_k, SearchResult& result, Rejections& rej)
      : sc_(sc), objective_(sc.search.objective), keep_(static_cast<size_t>(top_k) * 4 + 8), result_(result), rej_(rej) {}

  bool worse(const RankedPlan& a, const RankedPlan& b) const { return ranks_before(objective_, a, b); }

  // The time a plan must beat to be kept: the slowest kept plan's once the set is full (under
  // the iteration_time objective), else none.
  double time_bound_s() const {
    if (objective_ != Objective::kIterationTime || best_.size() < keep_) return kNoTimeBound;
    return best_.front().estimate.iteration_time_s;
  }

  void consume(const Plan& p, PlanEstimate e) {
    ++result_.plans_evaluated;
    if (e.time_is_lower_bound) {  // fits, and slower than the bound it was given
      assert(e.fits && e.iteration_time_s > time_bound_s());
      ++result_.plans_fitting;
      return;
    }
    if (!e.fits) {
      if (e.peak_memory_gib <= 0) {  // the cost model cannot run it at all
        rej_.add("cost-model", p, e.reject_reason.empty() ? "the cost model rejects it" : e.reject_reason);
        return;
      }
      std::string why = e.reject_reason.empty() ? "needs " + gib_text(e.peak_memory_gib) + " GiB per GPU, " + gpu_name(sc_) +
                                                      " has " + gib_text(sc_.cluster.gpu.memory_gib)
                                                : e.reject_reason;
      if (!closest_ || e.peak_memory_gib < closest_->estimate.peak_memory_gib) closest_ = RankedPlan{p, e};
      rej_.add("memory", p, std::move(why), e.peak_memory_gib);
      return;
    }
    ++result_.plans_fitting;
    auto worse = [this](const RankedPlan& a, const RankedPlan& b) { return this->worse(a, b); };
    RankedPlan rp{p, std::move(e)};
    if (best_.size() < keep_) {
      best_.push_back(std::move(rp));
      std::push_heap(best_.begin(), best_.end(), worse);
    } else if (worse(rp, best_.front())) {
      std::pop_heap(best_.begin(), best_.end(), worse);
      best_.back() = std::move(rp);
      std::push_heap(best_.begin(), best_.end(), worse);
    }
  }

  std::vector<RankedPlan>& best() { return best_; }
  const std::optional<RankedPlan>& closest() const { return closest_; }

  static std::string gpu_name(const Scenario& sc) { return sc.cluster.gpu.name.empty() ? "the GPU" : sc.cluster.gpu.name; }

 private:
  const Scenario& sc_;
  Objective objective_;
  size_t keep_;
  SearchResult& result_;
  Rejections& rej_;
  std::vector<RankedPlan> best_;
  std::optional<RankedPlan> closest_;
};

// ----------------------------------------------------------------------------- evaluation

// Plans enumerated before a batch is evaluated: big enough that starting the threads costs
// little next to the evaluations, small enough to keep Ctrl-C and progress responsive.
constexpr size_t kSearchBatchPlans = 4096;

// A plan in enumeration order: to be estimated, or already rejected by the enumeration.
struct PendingPlan {
  Plan plan;
  const char* reject_kind = nullptr;  // set: rejected before any estimate, for `reason`
  std::string reason;
};

// Estimates of the batch's plans into out[i] (rejected ones skipped), on `jobs` threads taking
// slices of the batch in turn. With `evaluate_within` and a finite `time_bound_s` (fixed for the
// whole batch, so the estimates do not depend on the threads' order), through that evaluator.
void evaluate_batch(const Scenario& sc, const SearchOptions& opt, double time_bound_s,
                    const std::vector<PendingPlan>& plans, std::vector<PlanEstimate>& out, int64_t jobs) {
  out.assign(plans.size(), PlanEstimate{});
  const bool bounded = opt.evaluate_within && !opt.estimated && time_bound_s < kNoTimeBound;
  constexpr size_t kSlice = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t begin = next.fetch_add(kSlice); begin < plans.size(); begin = next.fetch_add(kSlice))
      for (size_t i = begin; i < std::min(plans.size(), begin + kSlice); ++i) {
        if (plans[i].reject_kind) continue;
        out[i] = bounded ? opt.evaluate_within(sc, plans[i].plan, time_bound_s) : opt.evaluate(sc, plans[i].plan);
      }
  };
  const auto threads = static_cast<size_t>(std::clamp<int64_t>(jobs, 1, static_cast<int64_t>((plans.size() + kSlice - 1) / kSlice)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

// Enumerates the space twice when progress is wanted (the first pass only counts), else
// once; the plans go in batches to the evaluator and, in enumeration order, to the ranker.
void enumerate_and_rank(const Scenario& sc, const SearchOptions& opt, SearchResult& result, Rejections& rej, Ranker& ranker) {
  const ParallelismConstraints& c = sc.parallelism;
  Plan base;
  base.overlap_grad_reduce = c.overlap_grad_reduce.value_or(true);
  base.overlap_param_gather = c.overlap_param_gather.value_or(true);
  const int64_t jobs = opt.jobs > 0 ? opt.jobs : std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<PendingPlan> batch;
  std::vector<PlanEstimate> estimates;
  // Evaluates the batch and ranks it in enumeration order; polls Ctrl-C and reports progress.
  auto flush = [&](int64_t enumerated) {
    if (batch.empty()) return;
    evaluate_batch(sc, opt, ranker.time_bound_s(), batch, estimates, jobs);
    for (size_t i = 0; i < batch.size(); ++i) {
      PendingPlan& entry = batch[i];
      if (entry.reject_kind) {
        rej.add(entry.reject_kind, entry.plan, std::move(entry.reason));
      } else {
        if (opt.estimated) opt.estimated(entry.plan, estimates[i]);
        ranker.consume(entry.plan, std::move(estimates[i]));
      }
    }
    batch.clear();
    if (opt.cancelled && opt.cancelled()) result.cancelled = true;
    if (opt.progress) opt.progress(enumerated, result.plans_in_space);
  };
  for (int pass = 0; pass < 2 && !result.cancelled; ++pass) {
    const bool count_only = pass == 0;
    if (count_only && !opt.progress) continue;
    int64_t enumerated = 0;
    // Rejections of the enumeration join the batch, so that everything is recorded in
    // enumeration order whatever the batching.
    auto add = [&](PendingPlan entry) {
      ++enumerated;
      if (count_only) return;
      batch.push_back(std::move(entry));
      if (batch.size() >= kSearchBatchPlans) flush(enumerated);
    };
    PlanEnumerator enumerator(
        sc, [&](const char* kind, const Plan& p, std::string why) { add(PendingPlan{p, kind, std::move(why)}); },
        [&](const Plan& p) { add(PendingPlan{p, nullptr, {}}); }, [&] { return !count_only && result.cancelled; });
    enumerator.run(base);
    if (!count_only) flush(enumerated);
    result.plans_in_space = enumerated;
  }
}

// ----------------------------------------------------------------------------- results

std::string no_fit_message(const Scenario& sc, const SearchResult& result, const std::optional<RankedPlan>& closest) {
  if (closest)
    return "no plan fits: the smallest memory need is " + gib_text(closest->estimate.peak_memory_gib) + " GiB per GPU (" +
           describe(closest->plan) + "), " + Ranker::gpu_name(sc) + " has " + gib_text(sc.cluster.gpu.memory_gib) + " GiB";
  if (!result.rejection_groups.empty())
    return "no plan can run: " + result.rejection_groups.front().example.reason +
           (result.rejection_groups.size() > 1 ? " (and other reasons, see the rejected list)" : "");
  return result.cancelled ? "search interrupted before any plan was found" : "no plan in the search space";
}

// Baseline: FSDP / ZeRO-3 over all GPUs, micro-batch 1; TP inside a node only when the batch
// cannot give every GPU a sample (a PyTorch user's FSDP + TP, torchtitan's 2D).
void fsdp_baseline(const Scenario& sc, const SearchOptions& opt, SearchResult& result) {
  const int64_t n = sc.cluster.num_gpus, gpn = sc.cluster.gpus_per_node, gbs = sc.training.global_batch_size;
  const ModelConfig& m = sc.model;
  const int64_t heads = m.num_attention_heads, kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads;
  Plan b;
  b.zero_stage = 3;
  b.micro_batch_size = 1;
  b.schedule = Schedule::kOneFOneB;
  int64_t btp = 0;
  for (int64_t t = 1; t <= std::max<int64_t>(gpn, 1); t *= 2) {
    if (n % t || (gpn > 0 && gpn % t) || heads % t || kv % t) continue;
    if (gbs % (n / t) == 0) {
      btp = t;
      break;
    }
  }
  if (btp == 0) {
    result.baseline_note = "no FSDP baseline: the global batch of " + std::to_string(gbs) + " does not split over " +
                           std::to_string(n) + " GPUs (nor with TP inside a node)";
    return;
  }
  b.tp = btp;
  b.dp = n / btp;
  if (b.dp == 1) b.zero_stage = 0;
  result.baseline_note = btp == 1 ? "FSDP (ZeRO-3) over " + std::to_string(n) + " GPUs, micro-batch 1"
                                  : "FSDP (ZeRO-3) over " + std::to_string(b.dp) + " ranks x TP " + std::to_string(btp) +
                                        " (the batch of " + std::to_string(gbs) + " does not give each of " + std::to_string(n) +
                                        " GPUs a sample), micro-batch 1";
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    b.recompute = rc;
    PlanEstimate e = opt.evaluate(sc, b);
    ++result.plans_evaluated;
    result.baseline = RankedPlan{b, e};
    if (e.fits) break;
  }
  result.baseline_note += std::string(", recompute ") + to_string(b.recompute);
  if (!result.baseline->estimate.fits) result.baseline_note += "; does not fit even so";
}

}  // namespace

SearchResult search_plans(const Scenario& sc, const SearchOptions& opt) {
  assert(opt.evaluate);
  SearchResult result;
  Rejections rej(result, opt.max_rejected_listed);
  const int64_t top_k = std::max<int64_t>(opt.top_k > 0 ? opt.top_k : sc.search.top_k, 1);
  Ranker ranker(sc, top_k, result, rej);
  enumerate_and_rank(sc, opt, result, rej, ranker);
  rej.finish();

  // Balance the pipeline split of the kept plans, then rank.
  std::vector<RankedPlan>& best = ranker.best();
  if (opt.balance_pipeline && !result.cancelled)
    for (RankedPlan& rp : best)
      if (rp.plan.pp > 1) {
        PartitionResult part = partition_layers(sc, rp.plan, opt.evaluate);
        result.plans_evaluated += part.splits_tried;
        if (part.estimate.fits) rp = RankedPlan{std::move(part.plan), std::move(part.estimate)};
      }
  std::sort(best.begin(), best.end(), [&](const RankedPlan& a, const RankedPlan& b) { return ranker.worse(a, b); });
  if (static_cast<int64_t>(best.size()) > top_k) best.resize(static_cast<size_t>(top_k));
  result.ranked = std::move(best);
  if (result.ranked.empty()) {
    result.closest_miss = ranker.closest();
    result.no_fit_message = no_fit_message(sc, result, ranker.closest());
  }
  fsdp_baseline(sc, opt, result);
  return result;
}

}  // namespace monarch
