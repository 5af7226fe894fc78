// Rank placement: which global rank holds which coordinates of the parallel plan, which ranks
// form each process group, and which links a group crosses.
//
// Order tp-cp-ep-dp-pp, as Megatron-Core's RankGenerator (megatron/core/parallel_state.py,
// order="tp-cp-ep-dp-pp"): TP is innermost (consecutive ranks, so a TP group of <= 8 sits on
// one NVLink domain), then CP, then DP, then PP outermost:
//
//   rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))
//
// Expert parallelism does not add GPUs: the experts are laid out over the S = tp*cp*dp ranks of
// one pipeline stage by a separate expert layout, Megatron-Core's expert RankGenerator (order
// "tp-ep-dp-pp", "MoE parallel folding"). With the stage-local index L = rank - pp_i * S:
//
//   etp_i = L % etp ;  ep_i = (L / etp) % ep ;  edp_i = L / (etp * ep)
//
// so the expert-TP group is `etp` consecutive ranks (stride 1), the EP group strides by etp and
// the expert-data-parallel group by etp * ep (S / (etp * ep) members). With etp == tp (Megatron's
// default) the EP group is `ep` members of one (tp_i, pp_i) dp x cp slice, stride tp.
// Requires S % (etp * ep) == 0 (checked by check_plan).
//
// Every process group is a strided range: base + i * stride, i in [0, size).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch {

// Why `plan` cannot place one rank on each of `num_gpus` GPUs (tp x pp x dp x cp must equal
// the GPU count), or "" when it can. The one statement of the rule: check_plan, the analytical
// model's own plan check and a fixed plan's completion call it.
std::string world_size_problem(const Plan& plan, int64_t num_gpus);

// Coordinates of one rank in the plan.
struct RankCoords {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
  int64_t ep = 0;   // expert-parallel index, in [0, plan.ep)
  int64_t edp = 0;  // expert-data-parallel index, in [0, tp * cp * dp / (etp * ep))
  int64_t etp = 0;  // expert-tensor-parallel index, in [0, plan.expert_tp())
  bool operator==(const RankCoords&) const = default;
};

// Coordinates of `rank` (0 <= rank < plan.world_size()).
RankCoords rank_to_coords(int64_t rank, const Plan& plan);
// Global rank of the dense coordinates tp, cp, dp, pp (ep/edp/etp are derived, ignored here).
int64_t coords_to_rank(const RankCoords& c, const Plan& plan);

// Number of ranks in a group of `kind`. kDpCp is the gradient-reduction group (dp x cp):
// with context parallelism every CP rank holds the same weights, so gradients are reduced
// over dp * cp ranks (Megatron's data_parallel_group with_context_parallel=True).
// kEmbedding: the first and last stage (2 ranks when pp > 1); group_ranks of it is meaningful
// for ranks of those two stages only. kEp, kExpertDp, kExpertTp follow the expert layout above.
int64_t group_size(GroupKind kind, const Plan& plan);
// The group the dense gradients are reduced over: kDpCp with context parallelism, else kDp
// (the same ranks when cp = 1; results name it "dp" then).
GroupKind dense_gradient_group(const Plan& plan);
// Distance between consecutive members of a group of `kind`.
int64_t group_stride(GroupKind kind, const Plan& plan);

// Global ranks of the group of `kind` that contains `rank`, in ring order (ascending).
std::vector<int32_t> group_ranks(GroupKind kind, int32_t rank, const Plan& plan);

// Which link a group crosses, for the cost model: the shape of the group of `kind` that
// contains rank 0 when all groups of the kind share it (the stride divides gpus_per_node and
// a group's block fits a node or covers whole ones, or gpus_per_node divides the stride:
// every power-of-two layout on 8-GPU nodes); else the shape of the group spanning the most
// nodes (groups straddling the 72-GPU NVLink domains of GB200 NVL72, a partly used last node).
struct GroupSpan {
  int64_t size = 1;            // ranks in the group
  int64_t nodes = 1;           // nodes the group spans
  int64_t ranks_per_node = 1;  // most group members on one node
  bool rail_aligned = false;   // one member per node, all at the same local index (same NIC rail)
  int64_t fewest_ranks_per_node = 1;  // fewest group members on one of its nodes (a partly used last node)

  bool crosses_nodes() const { return nodes > 1; }
};

GroupSpan group_span(GroupKind kind, const Plan& plan, int64_t gpus_per_node);
// Whether every TP group sits inside one NVLink domain (gpus_per_node GPUs), which TP
// communication overlap needs: its kernels write into the peers' buffers through memory handles
// that only an NVLink domain shares (Transformer Engine's userbuffers map CUDA IPC or multicast
// handles per "TP domain", initialize_ub in transformer_engine/pytorch/module/base.py;
// torchtitan's async TP rendezvous its symmetric memory among CUDA peer-accessible GPUs).
bool tp_group_in_nvlink_domain(const Plan& plan, int64_t gpus_per_node);
// Span of an arbitrary strided group (first rank `base`, `size` members `stride` apart).
GroupSpan strided_span(int64_t base, int64_t size, int64_t stride, int64_t gpus_per_node);

// GPUs used on each node, rank r on node r / gpus_per_node: gpus_per_node on every node but the
// last, which holds the rest (128 GPUs on GB200 NVL72: 72 + 56).
std::vector<int64_t> gpus_on_each_node(const ClusterConfig& cluster);

// Whether the message from pipeline stage `from` to stage `to` leaves the node in some pipeline
// of the plan (stage s of the pipeline whose first stage is rank b sits on rank b + s x S,
// S = tp x cp x dp ranks per stage). With S smaller than a node, neighbouring stages share
// nodes and only some hops cross: TP 1 x DP 4 x PP 4 on 8-GPU nodes crosses 1 -> 2 and 3 -> 0.
bool pp_hop_crosses_nodes(const Plan& plan, int64_t gpus_per_node, int64_t from, int64_t to);

}  // namespace monarch
