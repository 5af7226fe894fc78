// The bridge between the analytical cost model (core/cost_model.h, core/model_math.h) and the
// strategy engine: per-task costs for lowering, and the plan evaluator the search uses.
#pragma once

#include "core/cost_model.h"
#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/scenario.h"
#include "strategies/lowering.h"
#include "strategies/search.h"

namespace monarch {

// Costs of every task of `plan` from the cost model: layer compute (layer_costs), TP/EP
// collectives with their per-layer counts, the context-parallel ring, pipeline messages,
// data-parallel gradient reductions and ZeRO parameter gathers (one bucket per layer, sized
// from the parameters a rank holds), the optimizer step per stage, and the memory the
// allocation events carry (model states after ZeRO sharding, activations per layer).
LoweringCosts lowering_costs(const Scenario& scenario, const Plan& plan);

// Lower `plan` with the cost model's costs. When plan.layers_per_stage is empty it is filled
// with the cost model's split (core/model_math virtual_stage_layers) so both see the same
// model chunks. `only`: the ranks to lower (strategies/lowering.h), empty for every rank.
Expected<PlanGraph> lower_plan(const Scenario& scenario, const Plan& plan, const std::vector<char>& only = {});

// quick_estimate as a search evaluator; `misfits` says whether it times plans that do not fit.
PlanEvaluator analytical_evaluator(MisfitTime misfits = MisfitTime::kEstimate);
// The same, stopping at a lower bound for fitting plans that cannot beat the bound it is given
// (SearchOptions::evaluate_within, quick_estimate's time_bound_s).
BoundedPlanEvaluator analytical_bounded_evaluator(MisfitTime misfits = MisfitTime::kEstimate);

// search_plans with the analytical evaluator (options.evaluate may stay empty; then the bounded
// one runs beside it). It times the plans that do not fit only where options.estimated wants
// every plan.
SearchResult search_plans_analytical(const Scenario& scenario, SearchOptions options = {});

}  // namespace monarch
