// Plan search: enumerate every plan the scenario leaves open, prune what cannot run (with a
// one-line reason each), estimate the rest with a cost model, rank by the scenario's
// objective, balance the pipeline split of the best plans, and compare the winner with the
// plain FSDP / ZeRO-3 baseline a PyTorch user would start with.
//
// The space: TP over the divisors of the GPU count that divide the attention heads, the KV
// heads and the MLP width and stay inside a node; CP over divisors whose 2 x CP chunks split
// the sequence (load-balanced ring attention); PP over divisors up to the layer count; DP the
// rest; EP (mixture of experts) over divisors of DP x CP that divide the expert count;
// virtual pipeline degrees that give every model chunk a layer; every micro-batch size that
// splits the per-replica batch; GPipe, 1F1B and interleaved 1F1B; sequence parallelism
// (TP > 1); recompute none / selective / full; ZeRO 0-3 (DP > 1). Keys fixed in the scenario
// (parallelism.*, training.micro_batch_size) pin their dimension. Degenerate duplicates are
// not enumerated: one schedule when PP = 1, ZeRO 0 when DP = 1, no SP when TP = 1.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// What the search needs from a cost model for one plan.
struct PlanEstimate {
  double iteration_time_s = 0;  // 0 for a misfit the evaluator left untimed
  double peak_memory_gib = 0;
  bool fits = false;
  std::string reject_reason;  // why it does not fit / cannot run; empty when it fits
  // Objective time_to_train: expected wall time to train training.total_tokens with failures
  // and checkpoints (core/goodput.h); 0 otherwise.
  double time_to_train_s = 0;
  // iteration_time_s is only a lower bound, above the bound a BoundedPlanEvaluator was given:
  // the plan fits but is slower than every plan the search keeps.
  bool time_is_lower_bound = false;
};
using PlanEvaluator = std::function<PlanEstimate(const Scenario&, const Plan&)>;
// An evaluator told that only plans faster than `time_bound_s` matter: for a fitting plan it
// may return a lower bound on the iteration time above that bound (time_is_lower_bound) instead
// of the whole estimate. Everything else as PlanEvaluator.
using BoundedPlanEvaluator = std::function<PlanEstimate(const Scenario&, const Plan&, double time_bound_s)>;

struct SearchOptions {
  PlanEvaluator evaluate;           // required: the analytical quick estimate in the app
  // Optional, for the iteration_time objective: once the search keeps its full set of best plans,
  // it hands this evaluator the slowest kept plan's time, so plans that cannot beat it are not
  // timed in full. The ranking is the same as with `evaluate` alone. Unused when `estimated` is
  // set (it wants every plan's time).
  BoundedPlanEvaluator evaluate_within;
  int64_t top_k = 0;                // 0 = scenario.search.top_k
  bool balance_pipeline = true;     // re-split the layers of the ranked plans (partition.h)
  int64_t max_rejected_listed = 100;  // above this, rejected plans are listed one per reason
  // Polled every few thousand plans; returning true stops the search (Ctrl-C).
  std::function<bool()> cancelled;
  // Called every few thousand plans with (plans done, plans in the space).
  std::function<void(int64_t, int64_t)> progress;
  // Threads evaluating plans (0 = one per hardware thread). Plans are enumerated in batches,
  // evaluated concurrently and then ranked in enumeration order, so the result is the same for
  // any count. With more than one, `evaluate` is called from several threads at once.
  int64_t jobs = 1;
  // Called for every plan the cost model estimated (fitting or not), in enumeration order on
  // the calling thread, whatever `jobs`: the plan-space view of the GUI draws them all.
  std::function<void(const Plan&, const PlanEstimate&)> estimated;
};

struct RankedPlan {
  Plan plan;
  PlanEstimate estimate;
};

// Rejected plans that share a kind of reason.
struct RejectionGroup {
  std::string kind;       // "memory", "tp-heads", "tp-node", "batch", ... (stable keys)
  int64_t count = 0;
  RejectedPlan example;   // for memory: the plan closest to fitting
  double example_memory_gib = 0;
};

struct SearchResult {
  std::vector<RankedPlan> ranked;        // best first, at most top_k
  std::vector<RejectionGroup> rejection_groups;  // largest first
  int64_t plans_in_space = 0;            // plans enumerated; a branch pruned early counts once
  int64_t plans_evaluated = 0;           // plans handed to the cost model
  int64_t plans_fitting = 0;
  bool cancelled = false;
  // The FSDP / ZeRO-3 baseline (DP over all GPUs, micro-batch 1, the least recompute that
  // fits), estimated with the same model; absent when the batch cannot be split that way.
  std::optional<RankedPlan> baseline;
  std::string baseline_note;             // how the baseline was formed, or why there is none
  // When nothing fits: the plan with the smallest memory need, and a one-line message.
  std::optional<RankedPlan> closest_miss;
  std::string no_fit_message;

  bool any_fits() const { return !ranked.empty(); }
  // The "rejected" list of the result file: every rejected plan when there are few, else one
  // entry per kind of reason, the reason ending in "(and N more like it)".
  std::vector<RejectedPlan> rejected_for_report(int64_t max_listed) const;
  // Individual rejected plans kept while searching (at most a few per kind).
  std::vector<RejectedPlan> rejected_examples;
  int64_t plans_rejected = 0;
};


SearchResult search_plans(const Scenario& scenario, const SearchOptions& options);

}  // namespace monarch
