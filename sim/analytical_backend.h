// The analytical backend: closed-form iteration time, FLOPs and memory of a plan
// (core/cost_model.h), as a result entry of the result file (backend "analytical").
#pragma once

#include <vector>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// Result entry for one fully specified plan.
BackendResult run_analytical(const Scenario& scenario, const Plan& plan);

// The plan a scenario pins down: every degree and switch the scenario fixes, the spec's
// defaults for absent degrees (tp, pp, cp, ep, vpp = 1; dp = num_gpus / (tp pp cp); schedule
// 1f1b, interleaved when vpp > 1; overlap switches as Plan's defaults). For the open ones of
// micro_batch_size, zero_stage, activation_recompute and sequence_parallel: Megatron-LM's
// defaults (smallest micro-batch, ZeRO 0, no recompute, no sequence parallelism; with it for
// MoE with tp > 1, which Megatron requires; expert TP = tp when etp is absent) when that
// plan fits in memory, else the fitting choice with the shortest predicted iteration (the
// least memory when none fits); an open activation_offload_layers is 0, or where a plan fits
// only with it, the fewest layers that make it fit. Only plans that keep the plan rules (strategies/plan_check.h)
// are candidates. Problems name the parallelism key at fault.
Expected<Plan> resolve_plan(const Scenario& scenario);

}  // namespace monarch
