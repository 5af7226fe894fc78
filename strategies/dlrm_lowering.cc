#include "strategies/dlrm_lowering.h"

#include <algorithm>
#include <cmath>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/placement.h"

namespace monarch {

namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

DType dtype_of(Precision p) {
  switch (p) {
    case Precision::kFp32: return DType::kFp32;
    case Precision::kFp16: return DType::kFp16;
    case Precision::kFp8: return DType::kFp8;
    case Precision::kBf16: return DType::kBf16;
  }
  return DType::kBf16;
}

// Appends tasks to one rank's program; returns their indices.
struct RankBuilder {
  RankProgram& prog;
  int32_t next_buffer = 0;

  int32_t push(Task t) {
    prog.tasks.push_back(std::move(t));
    return static_cast<int32_t>(prog.tasks.size() - 1);
  }
  int32_t compute(OpKind op, Phase phase, double flops, double mem_bytes, double duration_s, std::vector<int32_t> deps) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.phase = phase;
    t.op = op;
    t.flops = flops;
    t.mem_bytes = mem_bytes;
    t.duration_s = duration_s;
    t.deps = std::move(deps);
    return push(std::move(t));
  }
  int32_t collective(Stream stream, Phase phase, CollectiveKind kind, int32_t group, int32_t seq, int64_t bytes,
                     DType dtype, double duration_s, std::vector<int32_t> deps) {
    Task t;
    t.kind = TaskKind::kCollective;
    t.stream = stream;
    t.phase = phase;
    t.collective = kind;
    t.group = group;
    t.seq = seq;
    t.bytes = bytes;
    t.dtype = dtype;
    t.duration_s = duration_s;
    t.deps = std::move(deps);
    return push(std::move(t));
  }
  // Returns the buffer id.
  int32_t alloc(MemCategory cat, double gib) {
    Task t;
    t.kind = TaskKind::kAlloc;
    t.category = cat;
    t.bytes = static_cast<int64_t>(std::llround(gib * kBytesPerGib));
    t.buffer = next_buffer++;
    push(std::move(t));
    return next_buffer - 1;
  }
  void free_buffer(int32_t buffer, MemCategory cat, double gib, std::vector<int32_t> deps) {
    Task t;
    t.kind = TaskKind::kFree;
    t.category = cat;
    t.bytes = static_cast<int64_t>(std::llround(gib * kBytesPerGib));
    t.buffer = buffer;
    t.deps = std::move(deps);
    push(std::move(t));
  }
};

}  // namespace

Expected<PlanGraph> lower_dlrm(const Scenario& sc, const DlrmShardingPlan& plan) {
  if (const std::string why = check_dlrm_plan(sc, plan); !why.empty()) return Expected<PlanGraph>::fail("/plan", why);
  const ClusterConfig& c = sc.cluster;
  const int64_t n = std::max<int64_t>(1, c.num_gpus);
  const std::vector<DlrmRankLoad> loads = dlrm_rank_loads(sc, plan);
  const DlrmDenseCosts dense = dlrm_dense_costs(sc);
  const DlrmCommSizes sizes = dlrm_comm_sizes(sc, loads);
  const double dense_params = static_cast<double>(dlrm_dense_shape(sc.model.dlrm).dense_params());
  const double opt_s = optimizer_step_time_s(sc, dense_params, dense_params);
  const GroupSpan world = strided_span(0, n, 1, c.gpus_per_node > 0 ? c.gpus_per_node : n);
  const DType dtype = dtype_of(sc.training.precision);

  PlanGraph g;
  g.plan = dlrm_plan(sc, plan);
  g.world_size = static_cast<int32_t>(n);
  g.num_micro_batches = 1;
  ProcessGroup all;
  for (int32_t r = 0; r < static_cast<int32_t>(n); ++r) all.ranks.push_back(r);
  all.kind = GroupKind::kEp;  // embedding collectives: every GPU (TorchRec's sharding group)
  g.groups.push_back(all);
  all.kind = GroupKind::kDp;  // the dense part is data-parallel over every GPU
  g.groups.push_back(all);
  constexpr int32_t kEmbGroup = 0, kDpGroup = 1;

  // A collective exists when it moves data (every rank sees the same sizes).
  auto time_of = [&](CollectiveKind k, int64_t bytes) { return collective_time_s(k, bytes, world, c); };
  const bool multi = n > 1;
  const bool pooled = multi && sizes.pooled_a2a_bytes > 0;
  const bool rw = multi && sizes.rw_bytes > 0;
  const bool ids = multi && sizes.id_a2a_bytes > 0;
  const bool allreduce = multi && sizes.dp_grad_bytes > 0;

  // The all-to-alls' send matrices, kept only where some pair differs from the uniform
  // bytes / n of NCCL's all-to-all (table-wise sharding; column-wise over all GPUs is even).
  DlrmAllToAllMatrices uneven = dlrm_all_to_all_matrices(sc, plan);
  auto keep_if_uneven = [](std::vector<std::vector<int64_t>>& m) {
    const int64_t even = m.empty() || m[0].empty() ? 0 : m[0][0];
    for (const auto& row : m)
      for (int64_t v : row)
        if (v != even) return;
    m.clear();
  };
  keep_if_uneven(uneven.pooled_forward);
  keep_if_uneven(uneven.pooled_backward);
  keep_if_uneven(uneven.ids);

  for (int32_t r = 0; r < static_cast<int32_t>(n); ++r) {
    RankProgram& prog = g.ranks.emplace_back();
    prog.rank = r;
    RankBuilder rb{prog};
    const DlrmRankLoad& L = loads[static_cast<size_t>(r)];
    const StageMemory m = dlrm_rank_memory(sc, L);
    rb.alloc(MemCategory::kWeights, m.weights_gib);
    rb.alloc(MemCategory::kGradients, m.gradients_gib);
    rb.alloc(MemCategory::kOptimizer, m.optimizer_gib);
    rb.alloc(MemCategory::kBuffers, m.buffers_gib);
    const int32_t act = rb.alloc(MemCategory::kActivations, m.activations_gib);

    int32_t seq = 0;
    std::vector<int32_t> last_emb;  // the latest embedding collective (ep stream), if any
    // `matrix`: [src][dst] bytes of an all-to-all whose members send unequal sizes; this rank's
    // row goes with its task (the SimGrid backend sends it), `bytes` stays the busiest port's.
    auto emb = [&](Phase ph, CollectiveKind k, int64_t bytes, std::vector<int32_t> deps,
                   const std::vector<std::vector<int64_t>>* matrix = nullptr) {
      const int32_t id = rb.collective(Stream::kEpComm, ph, k, kEmbGroup, seq++, bytes, dtype, time_of(k, bytes), std::move(deps));
      if (matrix != nullptr && !matrix->empty()) prog.tasks[static_cast<size_t>(id)].send_bytes = (*matrix)[static_cast<size_t>(r)];
      last_emb = {id};
      return id;
    };

    // ---- forward: lookups, then their exchange, then the dense part.
    const int32_t lf = rb.compute(OpKind::kEmbedding, Phase::kForward, 0, L.lookup_forward_bytes,
                                  dlrm_lookup_forward_s(sc, L), {});
    if (pooled) emb(Phase::kForward, CollectiveKind::kAllToAll, sizes.pooled_a2a_bytes, {lf}, &uneven.pooled_forward);
    if (rw) emb(Phase::kForward, CollectiveKind::kReduceScatter, sizes.rw_bytes, {lf});
    int32_t prev = rb.compute(OpKind::kMlp, Phase::kForward, dense.fwd_flops[0], 0, dense.fwd_s[0], last_emb);
    // Input dist of the next batch beside the dense compute (TrainPipelineSparseDist).
    if (ids) emb(Phase::kOther, CollectiveKind::kAllToAll, sizes.id_a2a_bytes, {prev}, &uneven.ids);
    prev = rb.compute(OpKind::kOther, Phase::kForward, dense.fwd_flops[1], 0, dense.fwd_s[1], {});
    const int32_t top_fwd = rb.compute(OpKind::kMlp, Phase::kForward, dense.fwd_flops[2], 0, dense.fwd_s[2], {});
    prev = top_fwd;
    // DDP all-reduces gradient buckets as the backward fills them (the first, 1 MiB, with the
    // top MLP's last layer), so the all-reduce starts with the backward. It shares the links
    // with the embedding collectives, so it is queued on their stream: after the input dist,
    // before the gradients' all-to-all.
    int32_t all_reduce = -1;
    if (allreduce)
      all_reduce = rb.collective(Stream::kEpComm, Phase::kBackward, CollectiveKind::kAllReduce, kDpGroup, 0,
                                 sizes.dp_grad_bytes, dtype, time_of(CollectiveKind::kAllReduce, sizes.dp_grad_bytes),
                                 {top_fwd});
    // ---- backward: dense (two GEMMs per forward GEMM), the embedding gradients' exchange,
    // then the lookups' backward with the fused optimizer update.
    prev = rb.compute(OpKind::kMlp, Phase::kBackward, 2 * dense.fwd_flops[2], 0, dense.bwd_s[2], {});
    prev = rb.compute(OpKind::kOther, Phase::kBackward, 2 * dense.fwd_flops[1], 0, dense.bwd_s[1], {});
    const int32_t bb = rb.compute(OpKind::kMlp, Phase::kBackward, 2 * dense.fwd_flops[0], 0, dense.bwd_s[0], {});
    if (pooled) emb(Phase::kBackward, CollectiveKind::kAllToAll, sizes.pooled_a2a_backward_bytes, {bb}, &uneven.pooled_backward);
    if (rw) emb(Phase::kBackward, CollectiveKind::kAllGather, sizes.rw_bytes, {bb});
    const int32_t lb = rb.compute(OpKind::kEmbedding, Phase::kBackward, 0, L.lookup_backward_bytes,
                                  dlrm_lookup_backward_s(sc, L), last_emb);
    rb.free_buffer(act, MemCategory::kActivations, m.activations_gib, {lb});
    // ---- data-parallel gradients and the dense optimizer step.
    std::vector<int32_t> opt_deps = {lb};
    if (all_reduce >= 0) opt_deps.push_back(all_reduce);
    rb.compute(OpKind::kOptimizerStep, Phase::kOptimizer, 0, 0, opt_s, opt_deps);
    (void)prev;
  }
  return g;
}

}  // namespace monarch
