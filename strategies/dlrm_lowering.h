// Lowering of a DLRM embedding sharding plan (strategies/dlrm_sharding.h) to the per-rank task
// graph of core/plan_ir.h, so the SimGrid backend (and core/graph_time) can run it.
//
// One iteration per rank, every duration, FLOP count and size from core/dlrm_model (nothing
// invented here). Streams: compute, ep (embedding collectives over all GPUs and the all-reduce):
//
//   compute  lookup fwd ─┐            bottom fwd, interaction fwd, top fwd,      lookup bwd ─┐    optimizer
//                        │            top bwd, interaction bwd, bottom bwd ┐     (+ fused    │    (dense)
//   ep                   └ pooled a2a, rw reduce-scatter ┘ ids a2a ┐       └ pooled a2a bwd, │
//                                                                  └─────── rw all-gather ───┘
//   (ep, after the ids a2a: the DDP all-reduce, from the top fwd, beside the dense backward)
//
//   - lookups: HBM-bound TBE gathers (forward) and gather + fused optimizer update (backward)
//     of this rank's shards, each rank with its own load (table-wise imbalance shows);
//   - pooled all-to-all forward (embeddings) and backward (their gradients), NCCL size = the
//     busiest port's bytes (largest send buffer or receive total; all-to-alls are synchronous,
//     so it sets the pace, as in the analytical model); when ranks send unequal amounts each
//     task also carries its per-peer row (Task::send_bytes), which SimGrid sends;
//     row-wise tables: reduce-scatter of the B x dim partial sums forward and
//     all-gather of the gradients backward (TorchRec's RW sharding);
//   - the ids all-to-all (input dist) of the next batch runs beside the dense compute, as
//     TorchRec's TrainPipelineSparseDist does; the embedding backward waits for it;
//   - data-parallel all-reduce of the MLP (and data-parallel tables') gradients from the start
//     of the backward (DDP buckets), queued on the embedding stream after the input dist (the
//     same links), beside the dense backward; then the dense optimizer step.
// Memory: weights, gradients, optimizer state and buffers allocated at the start, activations
// freed after the backward (core/dlrm_model's dlrm_rank_memory of each rank).
//
// Uncontended (core/graph_time), the graph's makespan equals estimate_dlrm's iteration time.
#pragma once

#include "core/dlrm_model.h"
#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

// Problems when the plan does not fit the scenario (check_dlrm_plan's message, at "/plan").
Expected<PlanGraph> lower_dlrm(const Scenario& scenario, const DlrmShardingPlan& plan);

}  // namespace monarch
