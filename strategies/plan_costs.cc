#include "strategies/plan_costs.h"

#include <algorithm>

#include "core/cost_model.h"
#include "core/framework_rules.h"
#include "core/goodput.h"
#include "core/model_math.h"
#include "core/placement.h"

namespace monarch {

namespace {


DType dtype_of(Precision p) {
  switch (p) {
    case Precision::kFp32: return DType::kFp32;
    case Precision::kFp16: return DType::kFp16;
    case Precision::kFp8:
    case Precision::kBf16: return DType::kBf16;
  }
  return DType::kBf16;
}

}  // namespace

LoweringCosts lowering_costs(const Scenario& sc, const Plan& p) {
  LoweringCosts c;
  const ModelShape m = model_shape(sc.model);
  const LayerCosts L = layer_costs(sc, p);
  const ClusterConfig& cl = sc.cluster;
  const int64_t gpn = cl.gpus_per_node;
  const DType dt = dtype_of(sc.training.precision);
  const double e = bytes_per_element(sc.training.precision);

  // The host floor stretches each layer pass: the stream waits for the host's launches; so do
  // the waits for offloaded activations' copies.
  c.layer_fwd = {L.forward_flops, L.forward_mem_bytes, L.forward_s + L.host_forward_s + L.offload_forward_s};
  c.layer_bwd = {L.backward_flops, L.backward_mem_bytes, L.backward_s + L.host_backward_s + L.offload_backward_s};
  c.layer_recompute = {L.recompute_flops, L.recompute_mem_bytes, L.recompute_s + L.host_recompute_s};
  c.moe_fwd = {L.moe_forward_flops, L.moe_forward_mem_bytes, L.moe_forward_s};
  c.moe_bwd = {L.moe_backward_flops, L.moe_backward_mem_bytes, L.moe_backward_s};

  // TP and EP collectives; they sit between the layer's GEMMs, so the compute waits for them,
  // except what overlaps by construction: with sequence parallelism the backward all-gathers
  // the saved input again for the weight gradient while the input gradient GEMM runs
  // (Megatron LinearWithGradAccumulationAndAsyncCommunication), and with tp_comm_overlap
  // every TP collective is pipelined with its GEMM, except the backward reduce-scatters of the
  // blocks' input gradients where the stack cannot overlap them
  // (hides_tp_input_gradient_reduce_scatter).
  const bool input_grad_rs_hidden = hides_tp_input_gradient_reduce_scatter(sc.training.framework);
  for (const LayerCosts::Collective& col : L.collectives) {
    const bool overlap_all = p.tp_comm_overlap && col.group == GroupKind::kTp;
    // The backward's reduce-scatters are the input gradients'.
    const bool overlap_bwd = overlap_all && (input_grad_rs_hidden || !p.sequence_parallel ||
                                             col.kind != CollectiveKind::kReduceScatter);
    auto op = [&](int32_t count, bool blocking, bool overlap) {
      return CommOp{col.group, col.kind, col.bytes, count, col.time_s, dt, blocking && !overlap};
    };
    if (col.forward_count > 0) c.layer_fwd_comm.push_back(op(col.forward_count, true, overlap_all));
    if (col.recompute_count > 0) c.layer_recompute_comm.push_back(op(col.recompute_count, true, overlap_all));
    if (col.backward_count > 0) {
      int32_t hidden = 0;
      if (p.sequence_parallel && col.group == GroupKind::kTp && col.kind == CollectiveKind::kAllGather)
        hidden = std::max(0, col.backward_count - col.forward_count);
      if (col.backward_count > hidden) c.layer_bwd_comm.push_back(op(col.backward_count - hidden, true, overlap_bwd));
      if (hidden > 0) c.layer_bwd_comm.push_back(op(hidden, false, overlap_all));
    }
  }
  // Context parallelism: the ring exchange of K and V runs beside the attention steps; in the
  // graph it is one all-gather of the K/V shards per layer (the ring's total), and in the
  // backward the same again plus the reduce-scatter of dK/dV.
  if (p.cp > 1 && L.cp_send_bytes_forward > 0) {
    const int64_t shard = L.cp_send_bytes_forward / (p.cp - 1);
    const int64_t bytes = shard * p.cp;
    c.layer_fwd_comm.push_back({GroupKind::kCp, CollectiveKind::kAllGather, bytes, 1, L.cp_time_forward_s, dt, false});
    if (p.recompute == Recompute::kFull) c.layer_recompute_comm.push_back(c.layer_fwd_comm.back());
    c.layer_bwd_comm.push_back({GroupKind::kCp, CollectiveKind::kAllGather, bytes, 1, L.cp_time_backward_s / 2, dt, false});
    c.layer_bwd_comm.push_back({GroupKind::kCp, CollectiveKind::kReduceScatter, bytes, 1, L.cp_time_backward_s / 2, dt, false});
  }

  // TP collectives of the embedding and of the output layer and loss (core/cost_model.h): the
  // forward all-gather of the final norm output and the backward all-gather of the embedding's
  // output gradient feed the compute task; the output layer's backward re-gather runs beside
  // its input-gradient GEMM (as the layers' in sequence parallelism); the rest follow the
  // compute and block what comes next.
  {
    auto op = [&](const LayerCosts::Collective& col, int32_t count, bool blocking) {
      return CommOp{col.group, col.kind, col.bytes, count, col.time_s, col.fp32 ? DType::kFp32 : dt, blocking};
    };
    for (const LayerCosts::Collective& col : L.embedding_collectives) {
      if (col.forward_count > 0) c.embedding_fwd_comm.push_back(op(col, col.forward_count, true));
      if (col.backward_count > 0) c.embedding_bwd_comm_pre.push_back(op(col, col.backward_count, true));
    }
    for (const LayerCosts::Collective& col : L.output_collectives) {
      const bool gather = col.kind == CollectiveKind::kAllGather;
      if (col.forward_count > 0) (gather ? c.output_fwd_comm_pre : c.output_fwd_comm).push_back(op(col, col.forward_count, true));
      if (col.backward_count > 0) c.output_bwd_comm.push_back(op(col, col.backward_count, !gather));
    }
  }

  c.embedding_fwd = {0, L.embedding_forward_mem_bytes, L.embedding_forward_s};
  c.embedding_bwd = {0, L.embedding_backward_mem_bytes, L.embedding_backward_s};
  c.output_fwd = {L.output_forward_flops, L.output_forward_mem_bytes, L.output_forward_s};
  c.output_bwd = {L.output_backward_flops, L.output_backward_mem_bytes, L.output_backward_s};
  c.pp_activation_bytes = L.pp_message_bytes;
  c.pp_p2p_intra_node_s = p2p_time_s(L.pp_message_bytes, false, sc.cluster);
  c.pp_p2p_inter_node_s = p2p_time_s(L.pp_message_bytes, true, sc.cluster);

  // Parameters a rank holds: per layer, and what the first / last stage add.
  const StageParameters none = stage_parameters(m, p, std::min<int64_t>(1, p.pp - 1), 0);
  const StageParameters one = stage_parameters(m, p, std::min<int64_t>(1, p.pp - 1), 1);
  const double layer_dense = one.dense - none.dense, layer_expert = one.expert - none.expert;
  const double first_extra = stage_parameters(m, p, 0, 0).dense;
  const double last_extra = p.pp > 1 ? stage_parameters(m, p, p.pp - 1, 0).dense : 0.0;

  const int64_t dense_group = p.dp * p.cp;
  const int64_t expert_group = group_size(GroupKind::kExpertDp, p);  // tp x dp x cp / (etp x ep)
  const GroupKind dense_kind = dense_gradient_group(p);
  const GroupSpan dense_span = group_span(dense_kind, p, gpn);
  const GroupSpan expert_span = group_span(GroupKind::kExpertDp, p, gpn);
  const DType grad_dt = grad_reduce_dtype(sc.training);
  const double grad_bytes = grad_reduce_bytes_per_param(sc.training);
  auto comm = [&](GroupKind g, const GroupSpan& span, CollectiveKind kind, double bytes) {
    const auto b = static_cast<int64_t>(bytes);
    return CommOp{g, kind, b, 1, collective_time_s(kind, b, span, cl), kind == CollectiveKind::kAllGather ? dt : grad_dt, true};
  };
  const CollectiveKind reduce = p.zero_stage == 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  const bool sharded_states = shards_optimizer_states(sc.training.framework, sc.training.precision, p.zero_stage);
  auto add_dp = [&](std::vector<CommOp>& grads, std::vector<CommOp>& gathers, double dense, double expert) {
    if (dense_group > 1 && dense > 0) {
      grads.push_back(comm(dense_kind, dense_span, reduce, grad_bytes * dense));
      if (sharded_states) gathers.push_back(comm(dense_kind, dense_span, CollectiveKind::kAllGather, e * dense));
    }
    if (expert_group > 1 && expert > 0) {
      grads.push_back(comm(GroupKind::kExpertDp, expert_span, reduce, grad_bytes * expert));
      if (sharded_states) gathers.push_back(comm(GroupKind::kExpertDp, expert_span, CollectiveKind::kAllGather, e * expert));
    }
  };
  // Once per step: sequence-parallel replicated gradients per (stage, chunk), and the tied
  // word-embedding gradient between the first and last stage (in grad_reduce_dtype, as the DP reduction).
  if (p.tp > 1 && p.sequence_parallel) {
    if (auto chunks = chunk_layers(p, m.layers); chunks.ok()) {
      const GroupSpan tspan = group_span(GroupKind::kTp, p, gpn);
      const int64_t P = p.pp, V = p.vpp;
      c.chunk_sp_grad_reduce.resize(static_cast<size_t>(P * V));
      for (int64_t s = 0; s < P; ++s)
        for (int64_t k = 0; k < V; ++k) {
          const int64_t vst = k * P + s;
          const int64_t n = (*chunks)[static_cast<size_t>(s)][static_cast<size_t>(k)].num_layers;
          const int64_t bytes = sp_grad_reduce_bytes(L, n, vst == 0, vst == P * V - 1);
          c.chunk_sp_grad_reduce[static_cast<size_t>(s * V + k)] =
              CommOp{GroupKind::kTp, CollectiveKind::kAllReduce, bytes, 1,
                     collective_time_s(CollectiveKind::kAllReduce, bytes, tspan, cl), grad_dt, true};
        }
    }
  }
  if (m.tied_embeddings && p.pp > 1) {
    const int64_t bytes = static_cast<int64_t>(grad_bytes * static_cast<double>(m.vocab * m.hidden) / static_cast<double>(p.tp));
    c.tied_embedding_grad_reduce.push_back(CommOp{GroupKind::kEmbedding, CollectiveKind::kAllReduce, bytes, 1,
                                                  collective_time_s(CollectiveKind::kAllReduce, bytes,
                                                                    group_span(GroupKind::kEmbedding, p, gpn), cl),
                                                  grad_dt, true});
  }

  add_dp(c.layer_grad_reduce, c.layer_param_gather, layer_dense, layer_expert);
  add_dp(c.embedding_grad_reduce, c.embedding_param_gather, first_extra, 0);
  add_dp(c.output_grad_reduce, c.output_param_gather, last_extra, 0);

  // Model states per rank after ZeRO sharding (the cost model's stage_memory rules).
  const StateBytesPerParameter sb = state_bytes_per_parameter(sc.training, p.zero_stage);
  auto states = [&](double dense, double expert) {
    auto sharded = [&](double bytes_per_param, bool shard) {
      return bytes_per_param * (shard ? dense / static_cast<double>(dense_group) + expert / static_cast<double>(expert_group)
                                      : dense + expert);
    };
    return MemoryBytes{sharded(sb.weights, p.zero_stage >= 3), sharded(sb.gradients, p.zero_stage >= 2),
                       sharded(sb.optimizer, sharded_states)};
  };
  c.layer_memory = states(layer_dense, layer_expert);
  c.embedding_memory = states(first_extra, 0);
  c.output_memory = states(last_extra, 0);
  c.layer_gathered_param_bytes = sb.weights * (layer_dense + layer_expert);
  // With activation offloading (pp 1) the GPU keeps layers - n of the layers' sets at its peak
  // (stage_memory): per layer, that share.
  c.layer_activation_bytes = plan_layer_activation_bytes(m, sc, p) *
                             static_cast<double>(m.layers - std::min(p.activation_offload_layers, m.layers)) /
                             static_cast<double>(std::max<int64_t>(m.layers, 1));
  {
    // Korthikanti et al. 2022 section 4.3, as in stage_memory: final norm and output
    // projection inputs and the fp32 logits, per micro-batch on the last stage.
    const double t = static_cast<double>(p.tp);
    const double T = static_cast<double>(m.seq) / static_cast<double>(p.cp) * static_cast<double>(p.micro_batch_size);
    const double sp_div = p.sequence_parallel ? t : 1.0;
    c.output_activation_bytes = 2.0 * e * T * static_cast<double>(m.hidden) / sp_div + 4.0 * T * static_cast<double>(m.vocab) / t;
    if (m.dropout) c.embedding_activation_bytes = T * static_cast<double>(m.hidden) / sp_div;
  }

  // Optimizer step of each stage's rank.
  const std::vector<int64_t> layers = stage_layers(m, p);
  c.optimizer_per_stage.resize(static_cast<size_t>(p.pp));
  for (int64_t s = 0; s < p.pp; ++s) {
    const StageParameters sp = stage_parameters(m, p, s, layers[static_cast<size_t>(s)]);
    const double shards_dense = sharded_states ? static_cast<double>(dense_group) : 1.0;
    const double shards_expert = sharded_states ? static_cast<double>(expert_group) : 1.0;
    const double opt_params = sp.dense / shards_dense + sp.expert / shards_expert;
    const double grad_params = p.zero_stage >= 2 ? opt_params : sp.total();
    c.optimizer_per_stage[static_cast<size_t>(s)] = {0, 0, optimizer_step_time_s(sc, opt_params, grad_params)};
  }
  return c;
}

Expected<PlanGraph> lower_plan(const Scenario& sc, const Plan& plan, const std::vector<char>& only) {
  Plan p = plan;
  if (p.layers_per_stage.empty() && p.pp >= 1) p.layers_per_stage = virtual_stage_layers(sc.model.num_layers, p);
  return lower_plan(sc, p, lowering_costs(sc, p), only);
}

namespace {

PlanEstimate analytical_estimate(const Scenario& sc, const Plan& p, MisfitTime misfits, double time_bound_s) {
  QuickEstimate q = quick_estimate(sc, p, misfits, time_bound_s);
  PlanEstimate e{q.iteration_time_s, q.peak_memory_gib, q.fits, std::move(q.reject_reason)};
  e.time_is_lower_bound = q.time_is_lower_bound;
  if (sc.search.objective == Objective::kTimeToTrain && e.fits && !e.time_is_lower_bound)
    e.time_to_train_s = expected_time_to_train_s(sc, p, e.iteration_time_s);
  return e;
}

}  // namespace

PlanEvaluator analytical_evaluator(MisfitTime misfits) {
  return [misfits](const Scenario& sc, const Plan& p) { return analytical_estimate(sc, p, misfits, kNoTimeBound); };
}

BoundedPlanEvaluator analytical_bounded_evaluator(MisfitTime misfits) {
  return [misfits](const Scenario& sc, const Plan& p, double time_bound_s) {
    return analytical_estimate(sc, p, misfits, time_bound_s);
  };
}

SearchResult search_plans_analytical(const Scenario& sc, SearchOptions options) {
  const MisfitTime misfits = options.estimated ? MisfitTime::kEstimate : MisfitTime::kSkip;
  if (!options.evaluate) {
    options.evaluate = analytical_evaluator(misfits);
    if (!options.evaluate_within) options.evaluate_within = analytical_bounded_evaluator(misfits);
  }
  return search_plans(sc, options);
}

}  // namespace monarch
