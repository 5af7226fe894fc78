#include "strategies/lowering.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <string>
#include <unordered_map>

#include "core/framework_rules.h"
#include "core/model_math.h"
#include "core/placement.h"
#include "strategies/partition.h"
#include "strategies/plan_check.h"
#include "core/pipeline_schedule.h"

namespace monarch {

Expected<std::vector<std::vector<ChunkLayers>>> chunk_layers(const Plan& plan, int64_t num_layers) {
  using Out = Expected<std::vector<std::vector<ChunkLayers>>>;
  const int64_t pp = plan.pp, vpp = plan.vpp;
  if (pp < 1 || vpp < 1) return Out::fail("/parallelism", "degrees must be positive");
  const auto given = static_cast<int64_t>(plan.layers_per_stage.size());
  if (given > 0) {
    if (given != pp && given != pp * vpp)
      return Out::fail("layers_per_stage", "has " + std::to_string(given) + " entries, expected one per pipeline stage (" +
                                               std::to_string(pp) + ")" +
                                               (vpp > 1 ? " or one per model chunk (" + std::to_string(pp * vpp) + ")" : ""));
    int64_t sum = 0;
    for (int64_t n : plan.layers_per_stage) {
      if (n < 0) return Out::fail("layers_per_stage", "has a negative entry");
      sum += n;
    }
    if (sum != num_layers)
      return Out::fail("layers_per_stage", "sums to " + std::to_string(sum) + " layers, the model has " + std::to_string(num_layers));
  }
  const std::vector<int64_t> per_chunk = virtual_stage_layers(num_layers, plan);  // model order
  std::vector<std::vector<ChunkLayers>> out(static_cast<size_t>(pp), std::vector<ChunkLayers>(static_cast<size_t>(vpp)));
  int64_t next = 0;
  for (int64_t c = 0; c < vpp; ++c)
    for (int64_t s = 0; s < pp; ++s) {
      ChunkLayers& cl = out[static_cast<size_t>(s)][static_cast<size_t>(c)];
      cl.num_layers = per_chunk[static_cast<size_t>(c * pp + s)];
      cl.first_layer = next;
      next += cl.num_layers;
    }
  return out;
}

namespace {

constexpr int kNumGroupKinds = static_cast<int>(GroupKind::kExpertTp) + 1;  // GroupKind values

Stream stream_for(GroupKind g) {
  switch (g) {
    case GroupKind::kTp: return Stream::kTpComm;
    case GroupKind::kCp: return Stream::kCpComm;
    case GroupKind::kEp: return Stream::kEpComm;
    case GroupKind::kExpertTp: return Stream::kEpComm;  // the expert block's token gather / scatter
    default: return Stream::kDpComm;
  }
}

ComputeCost scaled(const ComputeCost& c, double n) { return ComputeCost{c.flops * n, c.mem_bytes * n, c.duration_s * n}; }
bool empty_cost(const ComputeCost& c) { return c.flops == 0 && c.duration_s == 0 && c.mem_bytes == 0; }

// Process groups of the whole graph, created on first use.
class GroupTable {
 public:
  GroupTable(const Plan& plan, PlanGraph& g) : plan_(plan), g_(g) {}
  // Index of the group of `kind` containing `rank`, or -1 when that group has one member.
  int32_t index(GroupKind kind, int32_t rank) {
    if (group_size(kind, plan_) <= 1) return -1;
    std::vector<int32_t> ranks = group_ranks(kind, rank, plan_);
    const int64_t key = static_cast<int64_t>(kind) * plan_.world_size() + ranks.front();
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    const auto idx = static_cast<int32_t>(g_.groups.size());
    g_.groups.push_back(ProcessGroup{kind, std::move(ranks)});
    index_.emplace(key, idx);
    return idx;
  }

 private:
  const Plan& plan_;
  PlanGraph& g_;
  std::unordered_map<int64_t, int32_t> index_;
};

using Deps = std::vector<int32_t>;

class RankBuilder {
 public:
  RankBuilder(RankProgram& prog, GroupTable& groups) : prog_(prog), groups_(groups) {
    group_of_.fill(-2);
  }

  int32_t add(Task t, Deps deps) {
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    while (!deps.empty() && deps.front() < 0) deps.erase(deps.begin());
    t.deps = std::move(deps);
    prog_.tasks.push_back(std::move(t));
    return static_cast<int32_t>(prog_.tasks.size() - 1);
  }

  int32_t compute(Phase phase, OpKind op, const ComputeCost& c, int64_t layer, int64_t n, int32_t chunk, int32_t mb,
                  Deps deps) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.phase = phase;
    t.op = op;
    t.layer = static_cast<int32_t>(layer);
    t.num_layers = static_cast<int32_t>(n);
    t.chunk = chunk;
    t.micro_batch = mb;
    t.flops = c.flops;
    t.mem_bytes = c.mem_bytes;
    t.duration_s = c.duration_s;
    return add(std::move(t), std::move(deps));
  }

  // `repeat` x op.count calls; -1 when the group has a single member (nothing to do).
  int32_t collective(const CommOp& op, int64_t repeat, Phase phase, int64_t layer, int64_t n, int32_t chunk, int32_t mb,
                     Deps deps) {
    if (repeat <= 0 || op.count <= 0 || op.bytes <= 0) return -1;
    const int32_t g = group(op.group);
    if (g < 0) return -1;
    Task t;
    t.kind = TaskKind::kCollective;
    t.stream = stream_for(op.group);
    t.phase = phase;
    t.layer = static_cast<int32_t>(layer);
    t.num_layers = static_cast<int32_t>(n);
    t.chunk = chunk;
    t.micro_batch = mb;
    t.collective = op.kind;
    t.group = g;
    t.seq = seq_[static_cast<size_t>(op.group)]++;
    t.dtype = op.dtype;
    t.bytes = op.bytes;
    t.count = static_cast<int32_t>(op.count * repeat);
    t.duration_s = op.time_s * static_cast<double>(t.count);
    return add(std::move(t), std::move(deps));
  }

  int32_t p2p(TaskKind kind, Stream stream, int32_t peer, int32_t tag, int64_t bytes, double time_s, Phase phase,
              int32_t chunk, int32_t mb, Deps deps) {
    Task t;
    t.kind = kind;
    t.stream = stream;
    t.phase = phase;
    t.chunk = chunk;
    t.micro_batch = mb;
    t.peer = peer;
    t.tag = tag;
    t.bytes = bytes;
    t.duration_s = time_s;
    return add(std::move(t), std::move(deps));
  }

  // Allocate a buffer; returns {task, buffer id}. No task (and buffer -1) for zero bytes.
  std::pair<int32_t, int32_t> alloc(MemCategory cat, double bytes, Stream stream, int32_t chunk, int32_t mb, Deps deps) {
    if (bytes <= 0) return {-1, -1};
    Task t;
    t.kind = TaskKind::kAlloc;
    t.stream = stream;
    t.category = cat;
    t.chunk = chunk;
    t.micro_batch = mb;
    t.bytes = static_cast<int64_t>(bytes);
    t.buffer = next_buffer_++;
    const int32_t buf = t.buffer;
    const int32_t task = add(std::move(t), std::move(deps));
    alloc_task_.push_back(task);
    return {task, buf};
  }

  int32_t free_buffer(int32_t buffer, Deps deps) {
    if (buffer < 0) return -1;
    const Task& a = prog_.tasks[static_cast<size_t>(alloc_task_[static_cast<size_t>(buffer)])];
    Task t;
    t.kind = TaskKind::kFree;
    t.stream = Stream::kCompute;
    t.category = a.category;
    t.chunk = a.chunk;
    t.micro_batch = a.micro_batch;
    t.bytes = a.bytes;
    t.buffer = buffer;
    return add(std::move(t), std::move(deps));
  }

  int32_t group(GroupKind kind) {
    int32_t& g = group_of_[static_cast<size_t>(kind)];
    if (g == -2) g = groups_.index(kind, prog_.rank);
    return g;
  }

  size_t size() const { return prog_.tasks.size(); }

 private:
  RankProgram& prog_;
  GroupTable& groups_;
  std::array<int32_t, kNumGroupKinds> group_of_{};
  std::array<int32_t, kNumGroupKinds> seq_{};
  int32_t next_buffer_ = 0;
  std::vector<int32_t> alloc_task_;  // by buffer id
};

void append(Deps& to, const Deps& from) { to.insert(to.end(), from.begin(), from.end()); }

// What every rank's lowering shares: the plan, its costs and its layer split.
struct LoweringInput {
  const Scenario& sc;
  const Plan& plan;
  const LoweringCosts& costs;
  const std::vector<std::vector<ChunkLayers>>& layers;  // [stage][chunk]
  int64_t micro_batches = 0;
};

// The layers of one model chunk on this rank and its place in the pipeline.
struct ChunkInfo {
  int64_t first_layer = 0;
  int64_t n = 0;      // layers
  bool first = false;  // holds the embedding (the first virtual stage)
  bool last = false;   // holds the output layer and the loss (the last virtual stage)
  int64_t vst = 0;     // virtual stage: chunk * pp + stage
};

// One pipeline step being lowered: the i-th of the schedule, its chunk and micro-batch.
struct StepAt {
  size_t index = 0;
  int32_t chunk = 0;
  int32_t mb = -1;
  ChunkInfo info;
};

// A run of layers as one call site sees it: the phase, the first layer and how many.
struct LayerSpan {
  Phase phase = Phase::kForward;
  int64_t layer = 0;
  int64_t count = 0;
  int32_t chunk = 0;
  int32_t mb = -1;
};

// The collectives of an MoE layer's step, by where they run (lowering.h, MoE): the EP
// all-to-alls come as one CommOp per direction pair, each half becoming its own task.
struct MoeOps {
  std::vector<CommOp> dense, ep_halves, etp_gather, etp_scatter;
};

bool is_ep(const CommOp& op) { return op.group == GroupKind::kEp && op.kind == CollectiveKind::kAllToAll; }
bool is_etp(const CommOp& op) { return op.group == GroupKind::kExpertTp; }
bool is_expert_comm(const CommOp& op) { return is_ep(op) || is_etp(op); }

MoeOps moe_ops(const std::vector<CommOp>& layer_comm) {
  MoeOps out;
  for (const CommOp& op : layer_comm) {
    if (is_etp(op)) {
      // Forward: gather the dispatched rows, scatter the fc2 partial sums. Backward: gather
      // the output gradients (of the scatter), scatter the input gradients (of the gather).
      (op.kind == CollectiveKind::kAllGather ? out.etp_gather : out.etp_scatter).push_back(op);
      continue;
    }
    if (!is_ep(op)) {
      out.dense.push_back(op);
      continue;
    }
    assert(op.count % 2 == 0);  // dispatch and combine (or their gradients) per layer
    CommOp half = op;
    half.count = op.count / 2;
    out.ep_halves.push_back(half);
  }
  return out;
}

// Lowers one rank's program: persistent state, the pipeline steps of its schedule (each
// with its layers, collectives and pipeline messages), the gradient finalization and the
// optimizer step.
class RankLowering {
 public:
  RankLowering(const LoweringInput& in, RankProgram& prog, GroupTable& groups)
      : in_(in), costs_(in.costs), plan_(in.plan), b_(prog, groups), s_(prog.stage), P_(in.plan.pp), V_(in.plan.vpp) {
    const RankCoords rc = rank_to_coords(prog.rank, plan_);
    RankCoords prev_c = rc, next_c = rc;
    prev_c.pp = (s_ + P_ - 1) % P_;
    next_c.pp = (s_ + 1) % P_;
    prev_rank_ = static_cast<int32_t>(coords_to_rank(prev_c, plan_));
    next_rank_ = static_cast<int32_t>(coords_to_rank(next_c, plan_));
    // A message to or from a neighbouring stage costs its hop: NVLink when both stages share
    // a node, a NIC message when the hop leaves it.
    const int64_t gpn = in.sc.cluster.gpus_per_node;
    const auto hop_s = [&](int64_t other) {
      return pp_hop_crosses_nodes(plan_, gpn, s_, other) ? costs_.pp_p2p_inter_node_s : costs_.pp_p2p_intra_node_s;
    };
    prev_hop_s_ = hop_s(prev_c.pp);
    next_hop_s_ = hop_s(next_c.pp);
    // ZeRO-3, and torchtitan's ZeRO-2 (gathers_every_micro_batch): gathers per layer and
    // micro-batch; ZeRO-2 keeps the forward's gathered layer, held in full, for its backward.
    gather_every_mb_ = gathers_every_micro_batch(in.sc.training.framework, plan_.zero_stage);
    keep_gathered_ = gather_every_mb_ && plan_.zero_stage < 3;
    zero2_ = plan_.zero_stage == 2 && !gather_every_mb_;  // reduce-scatter per micro-batch (DeepSpeed stage 2)
    // A sharded optimizer (ZeRO-1/2, or DeepSpeed's BF16_Optimizer at stage 0) all-gathers its
    // updated weights: behind the next forward with overlap_param_gather where the framework
    // can, else at the end of the optimizer step (gathers_parameters_in_step).
    step_gathers_ = shards_optimizer_states(in.sc.training.framework, in.sc.training.precision, plan_.zero_stage) &&
                    !gather_every_mb_;
    overlap_gathers_ =
        step_gathers_ && plan_.overlap_param_gather && !gathers_parameters_in_step(in.sc.training.framework);
    // Overlapped data-parallel communication works bucket by bucket (a bucket per layer):
    // the first forward of each chunk runs layer by layer, each layer waiting only for its
    // own parameter all-gather (ZeRO-1/2 with overlap_param_gather), and the last backward of
    // each chunk runs layer by layer, each layer's gradient reduction starting as soon as
    // that layer is done (overlap_grad_reduce). Every other step is one task per chunk.
    split_first_fwd_ = overlap_gathers_ && !costs_.layer_param_gather.empty();
    overlap_grads_ = plan_.overlap_grad_reduce &&
                     !reduces_gradients_after_backward(in.sc.training.framework, plan_.zero_stage, plan_.pp);
    split_last_bwd_ = !gather_every_mb_ && overlap_grads_ && !costs_.layer_grad_reduce.empty();
    // MoE layers with expert (tensor) parallelism: attention (with its TP collectives and the
    // router), dispatch all-to-all (kEp), ETP all-gather (kExpertTp), experts, ETP
    // reduce-scatter, combine all-to-all (see lowering.h); the backward mirrors it.
    moe_split_ = !empty_cost(costs_.moe_fwd) &&
                 std::any_of(costs_.layer_fwd_comm.begin(), costs_.layer_fwd_comm.end(), is_expert_comm);
    order_ = pipeline_order(plan_.schedule, P_, s_, in.micro_batches, V_, in.sc.training.framework, extra_warmup_forwards(plan_));
    last_bwd_of_chunk_.assign(static_cast<size_t>(V_), 0);
    for (size_t i = 0; i < order_.size(); ++i)
      if (!order_[i].forward) last_bwd_of_chunk_[static_cast<size_t>(order_[i].chunk)] = i;
  }

  void run() {
    alloc_persistent_state();
    if (overlap_gathers_) issue_overlapped_gathers();
    forward_seen_.assign(static_cast<size_t>(V_), 0);
    // EP communication overlap pairs every step but the warm-up forwards and the cool-down
    // backwards (ep_overlap_unpaired_passes).
    const int64_t passes = in_.micro_batches * V_;
    const int64_t alone = plan_.ep_comm_overlap ? ep_overlap_unpaired_passes(plan_, s_, in_.micro_batches) : passes;
    int64_t forwards = 0, backwards = 0;
    for (size_t i = 0; i < order_.size(); ++i) {
      const PipelineStep& ps = order_[i];
      const StepAt st{i, static_cast<int32_t>(ps.chunk), ps.micro_batch, chunk(ps.chunk)};
      ep_beside_step_ = ps.forward ? forwards++ >= alone : backwards++ < passes - alone;
      if (ps.forward) forward_step(st);
      else backward_step(st);
    }
    finalize_grads();
    optimizer_step();
  }

 private:
  ChunkInfo chunk(int64_t k) const {
    const ChunkLayers& cl = in_.layers[static_cast<size_t>(s_)][static_cast<size_t>(k)];
    const int64_t vst = k * P_ + s_;
    return ChunkInfo{cl.first_layer, cl.num_layers, vst == 0, vst == P_ * V_ - 1, vst};
  }

  int32_t tag_of(int64_t mb, int64_t receiver_vstage, bool backward) const {
    return static_cast<int32_t>((mb * P_ * V_ + receiver_vstage) * 2 + (backward ? 1 : 0));
  }

  // Weights, gradients and optimizer state of every chunk, for the whole iteration.
  void alloc_persistent_state() {
    for (int64_t k = 0; k < V_; ++k) {
      const ChunkInfo c = chunk(k);
      const auto n = static_cast<double>(c.n);
      MemoryBytes mem{costs_.layer_memory.weights * n, costs_.layer_memory.gradients * n, costs_.layer_memory.optimizer * n};
      if (c.first) mem = {mem.weights + costs_.embedding_memory.weights, mem.gradients + costs_.embedding_memory.gradients,
                          mem.optimizer + costs_.embedding_memory.optimizer};
      if (c.last) mem = {mem.weights + costs_.output_memory.weights, mem.gradients + costs_.output_memory.gradients,
                         mem.optimizer + costs_.output_memory.optimizer};
      const auto c32 = static_cast<int32_t>(k);
      b_.alloc(MemCategory::kWeights, mem.weights, Stream::kCompute, c32, -1, {});
      b_.alloc(MemCategory::kGradients, mem.gradients, Stream::kCompute, c32, -1, {});
      b_.alloc(MemCategory::kOptimizer, mem.optimizer, Stream::kCompute, c32, -1, {});
    }
  }

  // ZeRO-1/2 with overlap_param_gather: every parameter all-gather is issued up front, one per
  // layer (and the embedding / output layer), and each first forward waits for its own.
  void issue_overlapped_gathers() {
    layer_gather_.assign(static_cast<size_t>(V_), {});
    start_gather_.assign(static_cast<size_t>(V_), {});
    for (int64_t k = 0; k < V_; ++k) {
      const ChunkInfo c = chunk(k);
      const auto c32 = static_cast<int32_t>(k);
      Deps& start = start_gather_[static_cast<size_t>(k)];
      if (c.first)
        for (const CommOp& op : costs_.embedding_param_gather) start.push_back(b_.collective(op, 1, Phase::kForward, -1, 0, c32, -1, {}));
      if (c.last)
        for (const CommOp& op : costs_.output_param_gather) start.push_back(b_.collective(op, 1, Phase::kForward, -1, 0, c32, -1, {}));
      auto& per_layer = layer_gather_[static_cast<size_t>(k)];
      per_layer.resize(static_cast<size_t>(c.n));
      for (int64_t l = 0; l < c.n; ++l)
        for (const CommOp& op : costs_.layer_param_gather)
          per_layer[static_cast<size_t>(l)].push_back(b_.collective(op, 1, Phase::kForward, c.first_layer + l, 1, c32, -1, {}));
    }
  }

  // Parameter all-gather of a whole chunk (ZeRO-1/2 once per iteration).
  void gather_chunk(int64_t k, Phase phase, const Deps& deps) {
    const ChunkInfo c = chunk(k);
    const auto c32 = static_cast<int32_t>(k);
    for (const CommOp& op : costs_.layer_param_gather) b_.collective(op, c.n, phase, c.first_layer, c.n, c32, -1, deps);
    if (c.first)
      for (const CommOp& op : costs_.embedding_param_gather) b_.collective(op, 1, phase, -1, 0, c32, -1, deps);
    if (c.last)
      for (const CommOp& op : costs_.output_param_gather) b_.collective(op, 1, phase, -1, 0, c32, -1, deps);
  }

  // ZeRO-3: the embedding / output layer parameters chunk k holds, gathered per use.
  Deps gather_extras(const StepAt& st, Phase phase) {
    Deps out;
    if (st.info.first)
      for (const CommOp& op : costs_.embedding_param_gather) out.push_back(b_.collective(op, 1, phase, -1, 0, st.chunk, st.mb, {}));
    if (st.info.last)
      for (const CommOp& op : costs_.output_param_gather) out.push_back(b_.collective(op, 1, phase, -1, 0, st.chunk, st.mb, {}));
    return out;
  }

  // Gradient reduction of chunk k: its layers (unless they were reduced layer by layer) and
  // the embedding / output layer it holds.
  Deps reduce_chunk(int64_t k, int32_t mb, const Deps& deps, bool with_layers) {
    const ChunkInfo c = chunk(k);
    Deps out;
    const auto c32 = static_cast<int32_t>(k);
    if (with_layers)
      for (const CommOp& op : costs_.layer_grad_reduce)
        out.push_back(b_.collective(op, c.n, Phase::kBackward, c.first_layer, c.n, c32, mb, deps));
    if (c.first)
      for (const CommOp& op : costs_.embedding_grad_reduce) out.push_back(b_.collective(op, 1, Phase::kBackward, -1, 0, c32, mb, deps));
    if (c.last)
      for (const CommOp& op : costs_.output_grad_reduce) out.push_back(b_.collective(op, 1, Phase::kBackward, -1, 0, c32, mb, deps));
    return out;
  }

  // Runs `ops` (per layer x span.count) beside or after compute task `t`; returns what
  // consumers wait on. Overlapped ones first: on a shared stream they must not queue behind
  // the blocking ones.
  Deps layer_comm(const std::vector<CommOp>& ops, const LayerSpan& sp, int32_t t, const Deps& before) {
    Deps out{t};
    for (const CommOp& op : ops)
      if (!op.blocking) out.push_back(b_.collective(op, sp.count, sp.phase, sp.layer, sp.count, sp.chunk, sp.mb, before));
    for (const CommOp& op : ops)
      if (op.blocking) out.push_back(b_.collective(op, sp.count, sp.phase, sp.layer, sp.count, sp.chunk, sp.mb, {t}));
    return out;
  }

  // Collectives of the embedding / output layer (not per layer): `pre` ones before the
  // compute task (it waits for them), the rest after it (blocking) or beside it.
  Deps pre_comm(const std::vector<CommOp>& ops, Phase phase, const StepAt& st, Deps cur) {
    for (const CommOp& op : ops) {
      const int32_t t = b_.collective(op, 1, phase, -1, 0, st.chunk, st.mb, cur);
      if (t >= 0) cur.push_back(t);
    }
    return cur;
  }
  Deps post_comm(const std::vector<CommOp>& ops, Phase phase, const StepAt& st, int32_t t, const Deps& before) {
    Deps out{t};
    for (const CommOp& op : ops)
      if (!op.blocking) out.push_back(b_.collective(op, 1, phase, -1, 0, st.chunk, st.mb, before));
    for (const CommOp& op : ops)
      if (op.blocking) out.push_back(b_.collective(op, 1, phase, -1, 0, st.chunk, st.mb, {t}));
    return out;
  }

  // The EP all-to-alls a paired step ran beside its compute: what ends the step waits for them.
  void join_beside_a2a(Deps& cur) {
    append(cur, ep_beside_);
    ep_beside_.clear();
  }

  // --- MoE layers -------------------------------------------------------------------------
  Deps moe_a2a(const std::vector<CommOp>& halves, const LayerSpan& sp, const Deps& d) {
    Deps out;
    for (const CommOp& op : halves) out.push_back(b_.collective(op, sp.count, sp.phase, sp.layer, sp.count, sp.chunk, sp.mb, d));
    return out;
  }
  // The ETP collectives, one task each per chunk step (count: per layer x layers), in a chain:
  // each waits for what came before.
  Deps moe_chain(const std::vector<CommOp>& ops, const LayerSpan& sp, const Deps& d) {
    Deps cur = d;
    for (const CommOp& op : ops)
      if (const int32_t t = b_.collective(op, sp.count, sp.phase, sp.layer, sp.count, sp.chunk, sp.mb, cur); t >= 0) cur = Deps{t};
    return cur;
  }
  Deps moe_attention(const ComputeCost& attn, const MoeOps& ops, const LayerSpan& sp, const Deps& d) {
    const int32_t t = b_.compute(sp.phase, OpKind::kAttention, scaled(attn, static_cast<double>(sp.count)), sp.layer, sp.count,
                                 sp.chunk, sp.mb, d);
    last_layer_compute_ = t;
    return layer_comm(ops.dense, sp, t, d);
  }
  Deps moe_experts(const ComputeCost& moe, const MoeOps& ops, const LayerSpan& sp, const Deps& d) {
    const int32_t t = b_.compute(sp.phase, OpKind::kMlp, scaled(moe, static_cast<double>(sp.count)), sp.layer, sp.count, sp.chunk,
                                 sp.mb, moe_chain(ops.etp_gather, sp, d));
    last_layer_compute_ = t;
    return moe_chain(ops.etp_scatter, sp, Deps{t});
  }
  Deps emit_moe(const LayerSpan& sp, const Deps& deps) {
    const bool fwd = sp.phase == Phase::kForward;
    const ComputeCost& whole = fwd ? costs_.layer_fwd : costs_.layer_bwd;
    const ComputeCost& moe = fwd ? costs_.moe_fwd : costs_.moe_bwd;
    const ComputeCost attn{whole.flops - moe.flops, whole.mem_bytes - moe.mem_bytes, whole.duration_s - moe.duration_s};
    const MoeOps ops = moe_ops(fwd ? costs_.layer_fwd_comm : costs_.layer_bwd_comm);
    if (ep_beside_step_) {
      // EP communication overlap, a paired step (lowering.h): each all-to-all starts when its
      // input is ready and runs beside the compute that follows, which does not wait for it;
      // the step's end does (ep_beside_).
      if (fwd) {
        Deps after_attn = moe_attention(attn, ops, sp, deps);
        append(ep_beside_, moe_a2a(ops.ep_halves, sp, after_attn));  // dispatch
        Deps cur = moe_experts(moe, ops, sp, after_attn);
        append(ep_beside_, moe_a2a(ops.ep_halves, sp, cur));  // combine
        append(cur, after_attn);
        return cur;
      }
      append(ep_beside_, moe_a2a(ops.ep_halves, sp, deps));  // combine's gradient
      Deps cur = moe_experts(moe, ops, sp, deps);
      append(ep_beside_, moe_a2a(ops.ep_halves, sp, cur));  // dispatch's gradient
      return moe_attention(attn, ops, sp, cur);
    }
    if (fwd) {
      // Overlapped dense collectives (returned with the attention) are waited on at the end.
      Deps after_attn = moe_attention(attn, ops, sp, deps);
      Deps cur = moe_a2a(ops.ep_halves, sp, after_attn);
      cur = moe_a2a(ops.ep_halves, sp, moe_experts(moe, ops, sp, cur));
      append(cur, after_attn);
      return cur;
    }
    Deps cur = moe_a2a(ops.ep_halves, sp, deps);
    cur = moe_a2a(ops.ep_halves, sp, moe_experts(moe, ops, sp, cur));
    return moe_attention(attn, ops, sp, cur);
  }

  // --- Layers ------------------------------------------------------------------------------
  // One compute task for `count` layers from `layer` with their collectives (MoE: the expert
  // block's tasks), in phase `phase` of a step of phase `step_phase`.
  Deps emit_layers(Phase step_phase, Phase phase, const ComputeCost& c, int64_t layer, int64_t count, const StepAt& st,
                   const Deps& deps) {
    const LayerSpan sp{phase, layer, count, st.chunk, st.mb};
    if (phase != Phase::kRecompute && moe_split_) return emit_moe(sp, deps);
    const int32_t t = b_.compute(phase, OpKind::kLayer, scaled(c, static_cast<double>(count)), layer, count, st.chunk, st.mb, deps);
    last_layer_compute_ = t;
    const std::vector<CommOp>& comm = phase == Phase::kRecompute     ? costs_.layer_recompute_comm
                                      : step_phase == Phase::kForward ? costs_.layer_fwd_comm
                                                                      : costs_.layer_bwd_comm;
    return layer_comm(comm, sp, t, deps);
  }

  // What the i-th layer of the step's chunk (the j-th to run) waits for when the step runs
  // layer by layer: ZeRO-3's gather of that layer (issuing the next one's), or ZeRO-1/2's
  // overlapped gather on the chunk's first forward.
  Deps layer_deps(const StepAt& st, bool fwd, int64_t i, int64_t j) {
    if (gather_every_mb_) return z3_before(st.index, st.info.n, i, j);
    if (!fwd || layer_gather_.empty()) return {};
    const std::vector<Deps>& gathers = layer_gather_[static_cast<size_t>(st.chunk)];
    return static_cast<size_t>(i) < gathers.size() ? gathers[static_cast<size_t>(i)] : Deps{};
  }

  // After the i-th layer of a step run layer by layer: ZeRO-3 frees the gathered parameters;
  // a backward reduces the layer's gradients (per micro-batch under ZeRO-2).
  void after_layer(const StepAt& st, bool fwd, int64_t i, const Deps& d) {
    if (gather_every_mb_) z3_after(st.index, i, d);
    if (fwd) return;
    const int32_t mb = gather_every_mb_ || zero2_ ? st.mb : -1;
    for (const CommOp& op : costs_.layer_grad_reduce)
      grad_reduces_.push_back(b_.collective(op, 1, Phase::kBackward, st.info.first_layer + i, 1, st.chunk, mb, d));
  }

  // Runs the step's layers as one compute task with their collectives, or layer by layer when
  // `split` (backward: last layer first; recomputation, when the plan has it, right before
  // each layer's backward). Returns what follows waits on.
  Deps run_layers(Phase ph, const StepAt& st, Deps cur, bool split) {
    const int64_t n = st.info.n;
    if (n <= 0) return cur;
    const bool fwd = ph == Phase::kForward;
    const ComputeCost& per_layer = fwd ? costs_.layer_fwd : costs_.layer_bwd;
    const bool recompute = !fwd && !empty_cost(costs_.layer_recompute);
    const int64_t first_layer = st.info.first_layer;
    if (!split) {
      if (recompute) cur = emit_layers(ph, Phase::kRecompute, costs_.layer_recompute, first_layer, n, st, cur);
      return emit_layers(ph, ph, per_layer, first_layer, n, st, cur);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = fwd ? j : n - 1 - j;
      Deps d = cur;
      append(d, layer_deps(st, fwd, i, j));
      if (recompute) d = emit_layers(ph, Phase::kRecompute, costs_.layer_recompute, first_layer + i, 1, st, d);
      cur = emit_layers(ph, ph, per_layer, first_layer + i, 1, st, d);
      after_layer(st, fwd, i, cur);
    }
    return cur;
  }

  // --- ZeRO-3 (FSDP) -----------------------------------------------------------------------
  // Every layer's parameters are all-gathered into a buffer of their own just before use, one
  // layer ahead (the gather of the next layer starts when the layer before the current one
  // has finished, so at most two layers are gathered at a time), and freed after use; each
  // layer's gradients are reduce-scattered after its backward.
  int64_t z3_key(size_t step, int64_t l) const { return static_cast<int64_t>(step) * (in_.sc.model.num_layers + 1) + l; }
  void z3_gather(size_t step, int64_t l) {
    const PipelineStep& ps = order_[step];
    const ChunkInfo c = chunk(ps.chunk);
    const Phase ph = ps.forward ? Phase::kForward : Phase::kBackward;
    const auto c32 = static_cast<int32_t>(ps.chunk);
    Gathered gth;
    const int64_t passes = ps.forward ? 1 : backward_gather_passes(in_.sc.training.framework, plan_.recompute, plan_.zero_stage);
    if (passes > 0) {
      // ZeRO-3 gathers into a buffer of the layer's own; ZeRO-2's weights are held in full
      // (alloc_persistent_state), so the gather waits only for the layer before.
      Deps after{last_layer_compute_};
      if (!keep_gathered_) {
        auto [a, buf] = b_.alloc(MemCategory::kWeights, costs_.layer_gathered_param_bytes, Stream::kDpComm, c32,
                                 ps.micro_batch, {last_layer_compute_});
        gth.buffer = buf;
        gth.tasks.push_back(a);
        after = {a};
      }
      for (const CommOp& op : costs_.layer_param_gather)
        gth.tasks.push_back(b_.collective(op, passes, ph, c.first_layer + l, 1, c32, ps.micro_batch, after));
    }
    z3_[z3_key(step, l)] = std::move(gth);
  }
  Deps z3_before(size_t step, int64_t n, int64_t i, int64_t j) {
    if (!z3_.count(z3_key(step, i))) z3_gather(step, i);
    const bool fwd = order_[step].forward;
    if (j + 1 < n) {
      z3_gather(step, fwd ? i + 1 : i - 1);
    } else if (step + 1 < order_.size()) {
      const int64_t nn = chunk(order_[step + 1].chunk).n;
      if (nn > 0) z3_gather(step + 1, order_[step + 1].forward ? 0 : nn - 1);
    }
    return z3_[z3_key(step, i)].tasks;
  }
  void z3_after(size_t step, int64_t i, const Deps& d) {
    auto it = z3_.find(z3_key(step, i));
    if (it->second.buffer >= 0) b_.free_buffer(it->second.buffer, d);
    z3_.erase(it);
  }

  // --- Pipeline steps ----------------------------------------------------------------------
  // What a step waits for first. Megatron's pipeline communication is synchronous (batched
  // isend/irecv, then wait): the next step's compute starts after the previous step's send
  // has completed.
  Deps step_inputs() {
    Deps in{sent_};
    sent_ = -1;
    append(in, reduce_hold_);
    reduce_hold_.clear();
    return in;
  }

  // The activation buffer of the step's micro-batch and chunk, allocated by the forward.
  void alloc_activations(const StepAt& st, Deps& in) {
    double act = costs_.layer_activation_bytes * static_cast<double>(st.info.n);
    if (st.info.first) act += costs_.embedding_activation_bytes;
    if (st.info.last) act += costs_.output_activation_bytes;
    auto [a, buf] = b_.alloc(MemCategory::kActivations, act, Stream::kCompute, st.chunk, st.mb, {});
    act_buffer_[st.mb * V_ + st.chunk] = buf;
    in.push_back(a);
  }

  void forward_step(const StepAt& st) {
    const ChunkInfo& c = st.info;
    Deps in = step_inputs();
    const bool split = split_first_fwd_ && !forward_seen_[static_cast<size_t>(st.chunk)];
    forward_seen_[static_cast<size_t>(st.chunk)] = 1;
    if (!c.first)
      in.push_back(b_.p2p(TaskKind::kRecv, Stream::kPpRecv, prev_rank_, tag_of(st.mb, c.vst, false), costs_.pp_activation_bytes,
                          prev_hop_s_, Phase::kForward, st.chunk, st.mb, {}));
    if (gather_every_mb_) append(in, gather_extras(st, Phase::kForward));
    if (!start_gather_.empty() && !start_gather_[static_cast<size_t>(st.chunk)].empty()) {
      append(in, start_gather_[static_cast<size_t>(st.chunk)]);
      start_gather_[static_cast<size_t>(st.chunk)].clear();
    }
    alloc_activations(st, in);
    Deps cur = in;
    if (c.first) {
      const int32_t t = b_.compute(Phase::kForward, OpKind::kEmbedding, costs_.embedding_fwd, -1, 0, st.chunk, st.mb, cur);
      cur = post_comm(costs_.embedding_fwd_comm, Phase::kForward, st, t, cur);
    }
    cur = run_layers(Phase::kForward, st, cur, gather_every_mb_ || split);
    if (c.last) {
      cur = pre_comm(costs_.output_fwd_comm_pre, Phase::kForward, st, cur);
      const int32_t t = b_.compute(Phase::kForward, OpKind::kOutputLoss, costs_.output_fwd, -1, 0, st.chunk, st.mb, cur);
      cur = post_comm(costs_.output_fwd_comm, Phase::kForward, st, t, cur);
    }
    join_beside_a2a(cur);
    if (!c.last)
      sent_ = b_.p2p(TaskKind::kSend, Stream::kPpSend, next_rank_, tag_of(st.mb, c.vst + 1, false), costs_.pp_activation_bytes,
                     next_hop_s_, Phase::kForward, st.chunk, st.mb, cur);
    end_deps_ = cur;
  }

  void backward_step(const StepAt& st) {
    const ChunkInfo& c = st.info;
    Deps in = step_inputs();
    const bool last_of_chunk = st.index == last_bwd_of_chunk_[static_cast<size_t>(st.chunk)];
    const bool split = split_last_bwd_ && (last_of_chunk || zero2_);
    if (!c.last)
      in.push_back(b_.p2p(TaskKind::kRecv, Stream::kPpRecv, next_rank_, tag_of(st.mb, c.vst, true), costs_.pp_activation_bytes,
                          next_hop_s_, Phase::kBackward, st.chunk, st.mb, {}));
    if (gather_every_mb_ && !keep_gathered_) append(in, gather_extras(st, Phase::kBackward));
    Deps cur = in;
    if (c.last) {
      const int32_t t = b_.compute(Phase::kBackward, OpKind::kOutputLoss, costs_.output_bwd, -1, 0, st.chunk, st.mb, cur);
      cur = post_comm(costs_.output_bwd_comm, Phase::kBackward, st, t, cur);
    }
    const size_t reduces_before = grad_reduces_.size();  // this micro-batch's reductions follow
    cur = run_layers(Phase::kBackward, st, cur, gather_every_mb_ || split);
    if (c.first) {
      cur = pre_comm(costs_.embedding_bwd_comm_pre, Phase::kBackward, st, cur);
      cur = {b_.compute(Phase::kBackward, OpKind::kEmbedding, costs_.embedding_bwd, -1, 0, st.chunk, st.mb, cur)};
    }
    join_beside_a2a(cur);
    b_.free_buffer(act_buffer_[st.mb * V_ + st.chunk], cur);
    if (gather_every_mb_) append(grad_reduces_, reduce_chunk(st.chunk, st.mb, cur, false));
    if (!c.first)
      sent_ = b_.p2p(TaskKind::kSend, Stream::kPpSend, prev_rank_, tag_of(st.mb, c.vst - 1, true), costs_.pp_activation_bytes,
                     prev_hop_s_, Phase::kBackward, st.chunk, st.mb, cur);
    if (zero2_) {
      append(grad_reduces_, reduce_chunk(st.chunk, st.mb, cur, !split));
      // DeepSpeed stage 2 waits for a micro-batch's reductions at the end of its backward
      // (independent_gradient_partition_epilogue synchronizes the reduction stream), so they
      // overlap that backward only, as the cost model counts them: the next step waits.
      reduce_hold_.assign(grad_reduces_.begin() + static_cast<std::ptrdiff_t>(reduces_before), grad_reduces_.end());
    } else if (!gather_every_mb_ && overlap_grads_ && last_of_chunk) {
      append(grad_reduces_, reduce_chunk(st.chunk, -1, cur, !split));
    }
    end_deps_ = cur;
  }

  // --- After the last step -----------------------------------------------------------------
  // The gradient reduction left for the end, then (Megatron finalize_model_grads) the
  // sequence-parallel replicated gradients over TP and the tied embedding between the first
  // and last stage.
  void finalize_grads() {
    if (!gather_every_mb_ && !zero2_ && !overlap_grads_)
      for (int64_t k = 0; k < V_; ++k) append(grad_reduces_, reduce_chunk(k, -1, end_deps_, true));
    Deps reduced = grad_reduces_;
    append(reduced, end_deps_);
    append(reduced, reduce_hold_);
    for (int64_t k = 0; k < V_; ++k) {
      const size_t idx = static_cast<size_t>(s_ * V_ + k);
      if (idx < costs_.chunk_sp_grad_reduce.size())
        grad_reduces_.push_back(
            b_.collective(costs_.chunk_sp_grad_reduce[idx], 1, Phase::kBackward, -1, 0, static_cast<int32_t>(k), -1, reduced));
    }
    for (int64_t k = 0; k < V_; ++k) {
      const ChunkInfo c = chunk(k);
      if (c.first || c.last)
        for (const CommOp& op : costs_.tied_embedding_grad_reduce)
          grad_reduces_.push_back(b_.collective(op, 1, Phase::kBackward, -1, 0, static_cast<int32_t>(k), -1, reduced));
    }
  }

  // The optimizer step of this rank's shard, then (a sharded optimizer without overlap) the parameter
  // all-gather of every chunk.
  void optimizer_step() {
    ComputeCost opt;
    int64_t total_layers = 0;
    for (int64_t k = 0; k < V_; ++k) total_layers += chunk(k).n;
    if (static_cast<int64_t>(costs_.optimizer_per_stage.size()) == P_) opt = costs_.optimizer_per_stage[static_cast<size_t>(s_)];
    Deps opt_deps = grad_reduces_;
    append(opt_deps, end_deps_);
    const int32_t opt_task = b_.compute(Phase::kOptimizer, OpKind::kOptimizerStep, opt,
                                        in_.layers[static_cast<size_t>(s_)][0].first_layer, total_layers, 0, -1, opt_deps);
    if (step_gathers_ && !overlap_gathers_)
      for (int64_t k = 0; k < V_; ++k) gather_chunk(k, Phase::kOptimizer, {opt_task});
  }

  struct Gathered {
    int32_t buffer = -1;
    Deps tasks;
  };

  const LoweringInput& in_;
  const LoweringCosts& costs_;
  const Plan& plan_;
  RankBuilder b_;
  const int64_t s_, P_, V_;  // stage, pipeline stages, chunks per rank
  int32_t prev_rank_ = 0, next_rank_ = 0;
  double prev_hop_s_ = 0, next_hop_s_ = 0;  // one pipeline message to or from that stage
  bool gather_every_mb_ = false, zero2_ = false, step_gathers_ = false, overlap_gathers_ = false;
  bool keep_gathered_ = false;  // torchtitan's ZeRO-2: the backward uses the forward's gathered layer
  bool overlap_grads_ = false;  // the DP gradient reduction runs beside the last backward
  bool split_first_fwd_ = false, split_last_bwd_ = false, moe_split_ = false;
  bool ep_beside_step_ = false;  // this step is paired under EP communication overlap
  Deps ep_beside_;               // its all-to-alls so far
  std::vector<PipelineStep> order_;
  std::vector<size_t> last_bwd_of_chunk_;
  std::vector<std::vector<Deps>> layer_gather_;  // [chunk][layer in chunk]: overlapped gathers
  std::vector<Deps> start_gather_;               // [chunk]: overlapped embedding / output gathers
  std::vector<char> forward_seen_;               // [chunk]
  std::unordered_map<int64_t, int32_t> act_buffer_;  // (micro-batch, chunk) -> activation buffer
  std::unordered_map<int64_t, Gathered> z3_;         // z3_key(step, layer in chunk) -> gathered layer
  Deps grad_reduces_, end_deps_;
  Deps reduce_hold_;                 // ZeRO-2: the next step waits for the previous micro-batch's reductions
  int32_t sent_ = -1;                // the previous step's send
  int32_t last_layer_compute_ = -1;  // the latest layer compute task emitted (ZeRO-3 prefetch)
};

}  // namespace

Expected<PlanGraph> lower_plan(const Scenario& sc, const Plan& plan, const LoweringCosts& costs, const std::vector<char>& only) {
  if (Problems bad = check_plan(sc, plan); !bad.empty()) return bad;
  if (!only.empty() && static_cast<int64_t>(only.size()) != plan.world_size())
    return Expected<PlanGraph>::fail("/parallelism", "the rank filter has " + std::to_string(only.size()) +
                                                         " entries for " + std::to_string(plan.world_size()) + " ranks");
  auto layers_or = chunk_layers(plan, sc.model.num_layers);
  if (!layers_or) return layers_or.problems();
  const LoweringInput in{sc, plan, costs, *layers_or, num_micro_batches(sc, plan)};

  PlanGraph g;
  g.plan = plan;
  g.world_size = static_cast<int32_t>(plan.world_size());
  g.num_micro_batches = in.micro_batches;
  g.ranks.resize(static_cast<size_t>(g.world_size));
  GroupTable groups(plan, g);
  for (int32_t r = 0; r < g.world_size; ++r) {
    RankProgram& prog = g.ranks[static_cast<size_t>(r)];
    prog.rank = r;
    prog.stage = static_cast<int32_t>(rank_to_coords(r, plan).pp);
    if (!only.empty() && !only[static_cast<size_t>(r)]) continue;  // left empty: not simulated
    RankLowering(in, prog, groups).run();
  }
  return g;
}

}  // namespace monarch
