#include "strategies/search.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "core/model_math.h"
#include "strategies/partition.h"
#include "strategies/schedule.h"

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

std::string gib_text(double gib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", gib);
  return buf;
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

template <typename T>
std::vector<T> fixed_or(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

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
// slices of the batch in turn.
void evaluate_batch(const Scenario& sc, const PlanEvaluator& evaluate, const std::vector<PendingPlan>& plans,
                    std::vector<PlanEstimate>& out, int64_t jobs) {
  out.assign(plans.size(), PlanEstimate{});
  constexpr size_t kSlice = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t begin = next.fetch_add(kSlice); begin < plans.size(); begin = next.fetch_add(kSlice))
      for (size_t i = begin; i < std::min(plans.size(), begin + kSlice); ++i)
        if (!plans[i].reject_kind) out[i] = evaluate(sc, plans[i].plan);
  };
  const auto threads = static_cast<size_t>(std::clamp<int64_t>(jobs, 1, static_cast<int64_t>((plans.size() + kSlice - 1) / kSlice)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace

SearchResult search_plans(const Scenario& sc, const SearchOptions& opt) {
  assert(opt.evaluate);
  SearchResult result;
  Rejections rej(result, opt.max_rejected_listed);
  const ParallelismConstraints& C = sc.parallelism;
  const ModelConfig& m = sc.model;
  const int64_t N = sc.cluster.num_gpus, gpn = sc.cluster.gpus_per_node, L = m.num_layers;
  const int64_t gbs = sc.training.global_batch_size;
  const int64_t heads = m.num_attention_heads, kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads;
  const int64_t ffn = m.is_moe() && m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size;
  const int64_t top_k = std::max<int64_t>(opt.top_k > 0 ? opt.top_k : sc.search.top_k, 1);
  const Objective objective = sc.search.objective;
  const std::string gpu = sc.cluster.gpu.name.empty() ? "the GPU" : sc.cluster.gpu.name;

  Plan base;
  base.overlap_grad_reduce = C.overlap_grad_reduce.value_or(true);
  base.overlap_param_gather = C.overlap_param_gather.value_or(true);
  base.tp_comm_overlap = C.tp_comm_overlap.value_or(false);

  // Keep the best few (more than top_k: balancing the pipeline may reorder them).
  const size_t keep = static_cast<size_t>(top_k) * 4 + 8;
  std::vector<RankedPlan> best;
  auto worse = [&](const RankedPlan& a, const RankedPlan& b) { return ranks_before(objective, a, b); };
  std::optional<RankedPlan> closest;

  const int64_t jobs = opt.jobs > 0 ? opt.jobs : std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<PendingPlan> batch;
  std::vector<PlanEstimate> estimates;
  // Ranks an evaluated plan: a rejection, or one of the best kept.
  auto consume = [&](const Plan& p, PlanEstimate e) {
    ++result.plans_evaluated;
    if (opt.estimated) opt.estimated(p, e);
    if (!e.fits) {
      if (e.peak_memory_gib <= 0) {  // the cost model cannot run it at all
        rej.add("cost-model", p, e.reject_reason.empty() ? "the cost model rejects it" : e.reject_reason);
        return;
      }
      std::string why = e.reject_reason.empty()
                            ? "needs " + gib_text(e.peak_memory_gib) + " GiB per GPU, " + gpu + " has " + gib_text(sc.cluster.gpu.memory_gib)
                            : e.reject_reason;
      if (!closest || e.peak_memory_gib < closest->estimate.peak_memory_gib) closest = RankedPlan{p, e};
      rej.add("memory", p, std::move(why), e.peak_memory_gib);
      return;
    }
    ++result.plans_fitting;
    RankedPlan rp{p, std::move(e)};
    if (best.size() < keep) {
      best.push_back(std::move(rp));
      std::push_heap(best.begin(), best.end(), worse);
    } else if (worse(rp, best.front())) {
      std::pop_heap(best.begin(), best.end(), worse);
      best.back() = std::move(rp);
      std::push_heap(best.begin(), best.end(), worse);
    }
  };
  // Evaluates the batch and ranks it in enumeration order; polls Ctrl-C and reports progress.
  auto flush = [&](int64_t enumerated) {
    if (batch.empty()) return;
    evaluate_batch(sc, opt.evaluate, batch, estimates, jobs);
    for (size_t i = 0; i < batch.size(); ++i) {
      PendingPlan& entry = batch[i];
      if (entry.reject_kind) rej.add(entry.reject_kind, entry.plan, std::move(entry.reason));
      else consume(entry.plan, std::move(estimates[i]));
    }
    batch.clear();
    if (opt.cancelled && opt.cancelled()) result.cancelled = true;
    if (opt.progress) opt.progress(enumerated, result.plans_in_space);
  };
  // Two passes: the first only counts (for progress), the second evaluates.
  for (int pass = 0; pass < 2 && !result.cancelled; ++pass) {
    const bool count_only = pass == 0;
    if (count_only && !opt.progress) continue;
    int64_t enumerated = 0;
    // Rejections of the enumeration join the batch, so that everything is recorded in
    // enumeration order whatever the batching.
    auto reject = [&](const char* kind, const Plan& p, std::string why) {
      ++enumerated;
      if (count_only) return;
      batch.push_back(PendingPlan{p, kind, std::move(why)});
      if (batch.size() >= kSearchBatchPlans) flush(enumerated);
    };
    for (int64_t tp : fixed_or(C.tp, divisors(N))) {
      if (result.cancelled) break;
      Plan p = base;
      p.tp = tp;
      if (tp < 1 || N % tp != 0) { reject("tp-gpus", p, "TP " + std::to_string(tp) + " does not divide " + std::to_string(N) + " GPUs"); continue; }
      if (heads % tp != 0) { reject("tp-heads", p, "TP " + std::to_string(tp) + " does not divide " + std::to_string(heads) + " attention heads"); continue; }
      if (kv % tp != 0) { reject("tp-kv-heads", p, "TP " + std::to_string(tp) + " does not divide " + std::to_string(kv) + " KV heads"); continue; }
      if (ffn > 0 && ffn % tp != 0) { reject("tp-ffn", p, "TP " + std::to_string(tp) + " does not divide the MLP width " + std::to_string(ffn)); continue; }
      // TP across nodes is valid but unwise: predicted, with a warning (core/plan_warnings.h).
      for (int64_t cp : fixed_or(C.cp, divisors(N / tp))) {
        p.cp = cp;
        if (cp < 1 || (N / tp) % cp != 0) { reject("cp-gpus", p, "CP " + std::to_string(cp) + " does not divide the " + std::to_string(N / tp) + " GPUs left by TP"); continue; }
        if (cp > 1 && m.seq_length % (2 * cp) != 0) {
          reject("cp-seq", p, "CP " + std::to_string(cp) + " cannot cut the sequence of " + std::to_string(m.seq_length) + " into " + std::to_string(2 * cp) + " equal chunks");
          continue;
        }
        for (int64_t pp : fixed_or(C.pp, divisors(N / (tp * cp)))) {
          p.pp = pp;
          if (pp < 1 || (N / (tp * cp)) % pp != 0) { reject("pp-gpus", p, "PP " + std::to_string(pp) + " does not divide the " + std::to_string(N / (tp * cp)) + " GPUs left by TP x CP"); continue; }
          if (pp > L) { reject("pp-layers", p, "PP " + std::to_string(pp) + " exceeds the " + std::to_string(L) + " layers"); continue; }
          const int64_t dp = N / (tp * cp * pp);
          p.dp = dp;
          if (C.dp && *C.dp > 0 && *C.dp != dp) {
            reject("dp", p, "DP " + std::to_string(*C.dp) + " is not " + std::to_string(N) + " / (TP " + std::to_string(tp) + " x CP " + std::to_string(cp) + " x PP " + std::to_string(pp) + ")");
            continue;
          }
          if (gbs % dp != 0) { reject("batch", p, "the global batch of " + std::to_string(gbs) + " does not split over DP " + std::to_string(dp)); continue; }
          // Expert layouts (ep, etp) of one pipeline stage of S = tp x cp x dp ranks
          // (core/placement.h): etp x ep must divide S. Dense models: (1, tp) only, so the
          // dense search space and speed are unchanged.
          const int64_t stage = tp * cp * dp;
          std::vector<std::pair<int64_t, int64_t>> layouts;  // (ep, etp)
          {
            std::vector<int64_t> eps;
            if (m.is_moe()) {
              for (int64_t e : divisors(stage))
                if (m.num_experts % e == 0) eps.push_back(e);
            } else {
              eps = {1};
            }
            for (int64_t ep : fixed_or(C.ep, eps)) {
              if (!m.is_moe()) {  // no experts: an expert TP degree means nothing (the scenario allows only 1)
                layouts.push_back({ep, tp});
                continue;
              }
              if (C.etp || ep < 1 || stage % ep != 0) {
                layouts.push_back({ep, C.etp.value_or(tp)});
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
          }
          for (const auto& [ep, etp] : layouts) {
            p.ep = ep;
            p.etp = etp == tp ? 0 : etp;  // 0 = same as tp: one form per plan
            if (ep < 1 || stage % ep != 0 || (ep > 1 && (!m.is_moe() || m.num_experts % ep != 0))) {
              reject("ep", p, "EP " + std::to_string(ep) + (m.is_moe() ? " does not divide both TP x CP x DP = " + std::to_string(stage) + " and the " + std::to_string(m.num_experts) + " experts" : " needs a mixture-of-experts model"));
              continue;
            }
            if (etp != tp && !m.is_moe()) { reject("etp", p, "expert TP " + std::to_string(etp) + " needs a mixture-of-experts model"); continue; }
            if (etp < 1 || stage % (etp * ep) != 0) {
              reject("etp", p, "expert TP " + std::to_string(etp) + " x EP " + std::to_string(ep) + " does not divide the " + std::to_string(stage) + " ranks of a pipeline stage (TP x CP x DP)");
              continue;
            }
            if (ffn > 0 && ffn % etp != 0) { reject("etp", p, "expert TP " + std::to_string(etp) + " does not divide the expert FFN width " + std::to_string(ffn)); continue; }
            // Model chunks need a layer each, or (Megatron's account-for flags) the embedding
            // or the loss in place of one.
            const int64_t split_units = L + (C.account_for_embedding ? 1 : 0) + (C.account_for_loss ? 1 : 0);
            std::vector<int64_t> vpps{1};
            if (pp > 1)
              for (int64_t v = 2; v <= split_units / pp; ++v) vpps.push_back(v);
            for (int64_t vpp : fixed_or(C.vpp, vpps)) {
              p.vpp = vpp;
              if (vpp < 1 || vpp * pp > split_units) { reject("vpp", p, "virtual pipeline degree " + std::to_string(vpp) + " leaves model chunks without layers (" + std::to_string(L) + " layers, PP " + std::to_string(pp) + ")"); continue; }
              p.layers_per_stage = fixed_layer_split(sc, p);  // empty: the default split, balanced below
              std::vector<Schedule> schedules;
              if (C.schedule) schedules = {*C.schedule};
              else if (vpp > 1) schedules = {Schedule::kInterleaved};
              else if (pp == 1) schedules = {Schedule::kOneFOneB};
              else schedules = {Schedule::kGpipe, Schedule::kOneFOneB};
              for (Schedule sched : schedules) {
                p.schedule = sched;
                const int64_t per_replica = gbs / dp;
                std::vector<int64_t> mbss;
                if (sc.training.micro_batch_size) mbss = {*sc.training.micro_batch_size};
                else mbss = divisors(per_replica);
                for (int64_t mbs : mbss) {
                  p.micro_batch_size = mbs;
                  if (mbs < 1 || per_replica % mbs != 0) { reject("batch", p, "micro-batch " + std::to_string(mbs) + " does not split the " + std::to_string(per_replica) + " samples per DP replica"); continue; }
                  if (std::string why = schedule_problem(sched, pp, per_replica / mbs, vpp); !why.empty()) { reject("schedule", p, why); continue; }
                  std::vector<bool> sps = tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
                  // Megatron's MoELayer refuses tensor parallelism without sequence parallelism:
                  // SP is on for MoE with tp > 1 (a scenario fixing it off is rejected by the
                  // cost model with that reason).
                  if (m.is_moe() && tp > 1) sps = {true};
                  if (C.sequence_parallel) sps = {*C.sequence_parallel};
                  for (bool sp : sps) {
                    p.sequence_parallel = sp;
                    for (Recompute rc : fixed_or(C.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull})) {
                      p.recompute = rc;
                      std::vector<int64_t> zeros = dp * cp > 1 ? std::vector<int64_t>{0, 1, 2, 3} : std::vector<int64_t>{0};
                      for (int64_t z : fixed_or(C.zero_stage, zeros)) {
                        p.zero_stage = z;
                        if (count_only) {
                          ++enumerated;
                          continue;
                        }
                        if (result.cancelled) break;
                        ++enumerated;
                        batch.push_back(PendingPlan{p, nullptr, {}});
                        if (batch.size() >= kSearchBatchPlans) flush(enumerated);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    if (!count_only) flush(enumerated);
    result.plans_in_space = enumerated;
  }
  rej.finish();

  // Balance the pipeline split of the kept plans, then rank.
  if (opt.balance_pipeline && !result.cancelled)
    for (RankedPlan& rp : best)
      if (rp.plan.pp > 1) {
        PartitionResult part = partition_layers(sc, rp.plan, opt.evaluate);
        result.plans_evaluated += part.splits_tried;
        if (part.estimate.fits) rp = RankedPlan{std::move(part.plan), std::move(part.estimate)};
      }
  std::sort(best.begin(), best.end(), worse);
  if (static_cast<int64_t>(best.size()) > top_k) best.resize(static_cast<size_t>(top_k));
  result.ranked = std::move(best);

  if (result.ranked.empty()) {
    result.closest_miss = closest;
    if (closest)
      result.no_fit_message = "no plan fits: the smallest memory need is " + gib_text(closest->estimate.peak_memory_gib) +
                              " GiB per GPU (" + describe(closest->plan) + "), " + gpu + " has " +
                              gib_text(sc.cluster.gpu.memory_gib) + " GiB";
    else if (!result.rejection_groups.empty())
      result.no_fit_message = "no plan can run: " + result.rejection_groups.front().example.reason +
                              (result.rejection_groups.size() > 1 ? " (and other reasons, see the rejected list)" : "");
    else
      result.no_fit_message = result.cancelled ? "search interrupted before any plan was found" : "no plan in the search space";
  }

  // Baseline: FSDP / ZeRO-3 over all GPUs, micro-batch 1; TP inside a node only when the
  // batch cannot give every GPU a sample (a PyTorch user's FSDP + TP, torchtitan's 2D).
  Plan b;
  b.zero_stage = 3;
  b.micro_batch_size = 1;
  b.schedule = Schedule::kOneFOneB;
  int64_t btp = 0;
  for (int64_t t = 1; t <= std::max<int64_t>(gpn, 1); t *= 2) {
    if (N % t || (gpn > 0 && gpn % t) || heads % t || kv % t) continue;
    if (gbs % (N / t) == 0) {
      btp = t;
      break;
    }
  }
  if (btp == 0) {
    result.baseline_note = "no FSDP baseline: the global batch of " + std::to_string(gbs) + " does not split over " +
                           std::to_string(N) + " GPUs (nor with TP inside a node)";
  } else {
    b.tp = btp;
    b.dp = N / btp;
    if (b.dp == 1) b.zero_stage = 0;
    result.baseline_note = btp == 1 ? "FSDP (ZeRO-3) over " + std::to_string(N) + " GPUs, micro-batch 1"
                                    : "FSDP (ZeRO-3) over " + std::to_string(b.dp) + " ranks x TP " + std::to_string(btp) +
                                          " (the batch of " + std::to_string(gbs) + " does not give each of " + std::to_string(N) +
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
  return result;
}

}  // namespace monarch
