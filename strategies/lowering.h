// Lowering: turn a Plan (and its Scenario) into the per-rank task graph of core/plan_ir.h.
//
// Granularity (chosen so big runs stay tractable; bench/search_bench.cc measures them:
// Llama-3 405B on 16384 GPUs, TP 8 PP 16 DP 128, 16 micro-batches: 276 tasks per rank,
// 4.5M tasks; GPT-3 175B on 1024 GPUs, 64 micro-batches, interleaved x2: 1843 per rank):
//   - one compute task per (model chunk, micro-batch, phase) for the transformer layers of
//     the chunk (`num_layers` > 1), plus separate tasks for the embedding (first virtual
//     stage), the output layer and loss (last virtual stage), recomputation, and one
//     optimizer step per rank;
//   - one collective task per (chunk, micro-batch, phase, kind of collective): the `count`
//     field says how many back-to-back calls of `bytes` each it stands for (e.g. TP
//     all-reduce: 2 per layer in the forward pass x 8 layers = count 16);
//   - data-parallel gradient reduction, one bucket per layer: with overlap_grad_reduce the
//     last backward of each chunk runs layer by layer and each layer's reduction starts when
//     that layer is done; without, one task per chunk (count = layers) after the last
//     backward of the iteration. ZeRO-1/2 parameter all-gathers: with overlap_param_gather
//     one per layer at the start of the iteration, the chunk's first forward running layer by
//     layer behind them; without, one per chunk after the optimizer step. ZeRO-3 (FSDP) runs
//     every step layer by layer: each layer's parameters are gathered one layer ahead (at
//     most two gathered at a time), freed after use, and its gradients reduce-scattered
//     after each backward (more tasks: meant for the FSDP-sized runs ZeRO-3 is used for);
//   - pipeline sends and receives one per (micro-batch, chunk, direction), on the pp-send
//     and pp-recv streams; sends are eager (they never wait for the receiver), and the next
//     step's compute waits for the previous step's send, as Megatron's synchronous batched
//     p2p does;
//   - memory: persistent weights/gradients/optimizer states allocated at the start (never
//     freed), activations stashed by each forward and freed by the matching backward,
//     ZeRO-3 gathered parameters allocated before the gather and freed after use.
//   - mixture-of-experts layers with expert parallelism or expert tensor parallelism (EP
//     all-to-alls or ETP gathers in the layer's collectives): the layer compute splits into an
//     attention task (OpKind kAttention: the attention block, its TP collectives, the router)
//     and an expert task (kMlp: expert GEMMs). Forward: attention -> dispatch all-to-all (EP
//     group, GroupKind kEp) -> [ETP all-gather (kExpertTp) when etp > 1] -> experts -> [ETP
//     reduce-scatter] -> combine all-to-all. Backward mirrors it: combine's gradient
//     all-to-all -> ETP all-gather of the output gradients -> expert backward -> ETP
//     reduce-scatter of the input gradients -> dispatch's gradient all-to-all -> attention
//     backward. A chunk's n layers stay one task of each (count n per collective). Expert
//     weights' gradients are reduced over the expert-data-parallel group (kExpertDp: stride
//     etp x ep, core/placement.h), dense ones over the data-parallel group. Recomputation
//     stays one whole-layer task (its collectives after it, as for dense layers).
// Blocking collectives (TP, EP all-to-all) delay the next compute task of the same chunk
// step; overlapped ones (context-parallel ring exchange, the SP weight-gradient all-gather,
// everything TP with tp_comm_overlap) run beside the compute and delay only what consumes
// the chunk's output. Outside the layers: the embedding's and the output layer's TP
// collectives per micro-batch (vocabulary-parallel embedding and cross-entropy, sequence-parallel
// gathers), and once per step before the optimizer the sequence-parallel all-reduce of the
// replicated parameters' gradients and the tied-embedding gradient all-reduce between the first
// and last pipeline stage. ZeRO-2 reduce-scatters every micro-batch's gradients after its
// backward (DeepSpeed stage 2), layer by layer with overlap_grad_reduce.
//
// Per-task durations, FLOPs and byte counts come from LoweringCosts: strategies/plan_costs.h
// fills them from the analytical cost model. Nothing here invents a number.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan_ir.h"
#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

struct ComputeCost {
  double flops = 0;
  double mem_bytes = 0;
  double duration_s = 0;
};

// `count` back-to-back collectives of `bytes` each (NCCL size, see docs/plan_format.md) on
// the group of `group` kind; time_s is the predicted time of one call.
struct CommOp {
  GroupKind group = GroupKind::kTp;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t bytes = 0;
  int32_t count = 1;
  double time_s = 0;
  DType dtype = DType::kBf16;
  bool blocking = true;  // the next compute waits for it (false: overlapped with compute)
};

struct MemoryBytes {
  double weights = 0, gradients = 0, optimizer = 0;  // per rank, after sharding
};

// Costs for one rank. "Per layer" means one transformer layer, one micro-batch, already
// divided by tp / cp / ep as the plan places it.
struct LoweringCosts {
  ComputeCost layer_fwd, layer_bwd, layer_recompute;  // recompute all zero when none
  // Of layer_fwd / layer_bwd: the MoE block (router, expert GEMMs with the expert-TP split,
  // activation, token permutation); all zero for dense layers. With EP all-to-alls in the
  // layer's collectives the layer lowers as attention -> dispatch -> experts -> combine. Under
  // EP communication overlap (Plan::ep_comm_overlap) a paired step (every step but the warm-up
  // forwards and cool-down backwards, core/pipeline_schedule.h ep_overlap_unpaired_passes) runs
  // each all-to-all beside the compute after it, which does not wait for it; the step's end
  // (its pipeline send, the next step) waits for all of them, so a step takes the longer of its
  // compute and its all-to-alls, as the combined 1F1B hides one micro-batch's all-to-alls
  // behind another's compute.
  ComputeCost moe_fwd, moe_bwd;
  ComputeCost embedding_fwd, embedding_bwd;           // first virtual stage
  ComputeCost output_fwd, output_bwd;                 // last virtual stage (norm, projection, loss)
  std::vector<ComputeCost> optimizer_per_stage;      // one optimizer step of a rank of each stage

  std::vector<CommOp> layer_fwd_comm;        // per layer, per micro-batch (counts per layer)
  std::vector<CommOp> layer_bwd_comm;
  std::vector<CommOp> layer_recompute_comm;  // collectives re-run by recomputation
  std::vector<CommOp> layer_grad_reduce;     // per layer, per iteration (ZeRO-2/3: per micro-batch)
  std::vector<CommOp> layer_param_gather;    // per layer: ZeRO-1/2 once, ZeRO-3 before fwd and bwd
  std::vector<CommOp> embedding_grad_reduce, output_grad_reduce;
  std::vector<CommOp> embedding_param_gather, output_param_gather;
  // Tensor-parallel collectives outside the layers, per micro-batch: `_pre` ones run before the
  // compute task (it consumes their result), the others after it (blocking) or beside it.
  std::vector<CommOp> embedding_fwd_comm, embedding_bwd_comm_pre;                 // first virtual stage
  std::vector<CommOp> output_fwd_comm_pre, output_fwd_comm, output_bwd_comm;     // last virtual stage
  // Once per step, after the gradient reduction and before the optimizer: the sequence-parallel
  // all-reduce of the replicated parameters' gradients of each (stage, chunk), indexed
  // stage * vpp + chunk (empty: none), and the tied word-embedding gradient all-reduce
  // between the first and last pipeline stage (GroupKind::kEmbedding).
  std::vector<CommOp> chunk_sp_grad_reduce;
  std::vector<CommOp> tied_embedding_grad_reduce;

  int64_t pp_activation_bytes = 0;  // one micro-batch's boundary activation (and its gradient)
  // One send of pp_activation_bytes between stages on one node (NVLink) and across nodes (NIC).
  double pp_p2p_intra_node_s = 0, pp_p2p_inter_node_s = 0;

  MemoryBytes layer_memory, embedding_memory, output_memory;
  double layer_activation_bytes = 0;       // stashed per layer per micro-batch
  double embedding_activation_bytes = 0;   // stashed on the first virtual stage
  double output_activation_bytes = 0;      // logits etc. on the last virtual stage
  double layer_gathered_param_bytes = 0;   // ZeRO-3: one layer's full parameters
};

// First layer and layer count of every (stage, chunk), from core/model_math.h
// virtual_stage_layers: plan.layers_per_stage per model chunk (pp x vpp entries) or per stage
// (pp entries, split over the stage's chunks, earlier chunks take the remainder), else the
// default split. Virtual stage c*pp + s follows c*pp + s - 1 in model order.
struct ChunkLayers {
  int64_t first_layer = 0;
  int64_t num_layers = 0;
};
// result[stage][chunk]
Expected<std::vector<std::vector<ChunkLayers>>> chunk_layers(const Plan& plan, int64_t num_layers);

// Lower `plan` for `scenario`. Problems (with the plan key as `where`) when the plan cannot
// be lowered: degrees that do not multiply to the GPU count, a batch that does not split
// into micro-batches, a schedule that cannot run them.
// `only` (empty: every rank) marks the ranks to lower (only[r] != 0, one entry per rank); the
// others keep an empty program (rank and stage set, no task), which no lowered rank has (each
// has at least its optimizer step). The SimGrid backend lowers one data-parallel replica this
// way; the graph's groups still list every member, and check_graph accepts the members left
// empty when the ranks lowered are one replica (core/graph_replica.h).
Expected<PlanGraph> lower_plan(const Scenario& scenario, const Plan& plan, const LoweringCosts& costs,
                               const std::vector<char>& only = {});

}  // namespace monarch
