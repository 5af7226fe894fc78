#include "strategies/lowering.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <string>
#include <unordered_map>

#include "core/model_math.h"
#include "core/placement.h"
#include "strategies/partition.h"
#include "strategies/plan_check.h"
#include "strategies/schedule.h"

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

}  // namespace

Expected<PlanGraph> lower_plan(const Scenario& sc, const Plan& plan, const LoweringCosts& costs, const std::vector<char>& only) {
  if (Problems bad = check_plan(sc, plan); !bad.empty()) return bad;
  if (!only.empty() && static_cast<int64_t>(only.size()) != plan.world_size())
    return Expected<PlanGraph>::fail("/parallelism", "the rank filter has " + std::to_string(only.size()) +
                                                         " entries for " + std::to_string(plan.world_size()) + " ranks");
  const int64_t m = num_micro_batches(sc, plan);
  auto layers_or = chunk_layers(plan, sc.model.num_layers);
  if (!layers_or) return layers_or.problems();
  const auto& layers = *layers_or;

  const int64_t P = plan.pp, V = plan.vpp, num_vstages = P * V;
  PlanGraph g;
  g.plan = plan;
  g.world_size = static_cast<int32_t>(plan.world_size());
  g.num_micro_batches = m;
  g.ranks.resize(static_cast<size_t>(g.world_size));
  GroupTable groups(plan, g);

  auto tag_of = [&](int64_t mb, int64_t receiver_vstage, bool backward) {
    return static_cast<int32_t>((mb * num_vstages + receiver_vstage) * 2 + (backward ? 1 : 0));
  };
  const bool zero3 = plan.zero_stage == 3;
  const bool zero2 = plan.zero_stage == 2;  // reduce-scatter per micro-batch (DeepSpeed stage 2)
  const bool zero12 = plan.zero_stage == 1 || plan.zero_stage == 2;

  for (int32_t r = 0; r < g.world_size; ++r) {
    RankProgram& prog = g.ranks[static_cast<size_t>(r)];
    prog.rank = r;
    const RankCoords rc = rank_to_coords(r, plan);
    const int64_t s = rc.pp;
    prog.stage = static_cast<int32_t>(s);
    if (!only.empty() && !only[static_cast<size_t>(r)]) continue;  // left empty: not simulated
    RankBuilder b(prog, groups);
    RankCoords prev_c = rc, next_c = rc;
    prev_c.pp = (s + P - 1) % P;
    next_c.pp = (s + 1) % P;
    const auto prev_rank = static_cast<int32_t>(coords_to_rank(prev_c, plan));
    const auto next_rank = static_cast<int32_t>(coords_to_rank(next_c, plan));

    auto chunk_info = [&](int64_t k) {
      const ChunkLayers& cl = layers[static_cast<size_t>(s)][static_cast<size_t>(k)];
      const int64_t vst = k * P + s;
      return std::tuple{cl.first_layer, cl.num_layers, vst == 0, vst == num_vstages - 1, vst};
    };

    // Persistent state of every chunk.
    for (int64_t k = 0; k < V; ++k) {
      auto [first_layer, n, first, last, vst] = chunk_info(k);
      MemoryBytes mem{costs.layer_memory.weights * n, costs.layer_memory.gradients * n, costs.layer_memory.optimizer * n};
      if (first) mem = {mem.weights + costs.embedding_memory.weights, mem.gradients + costs.embedding_memory.gradients,
                        mem.optimizer + costs.embedding_memory.optimizer};
      if (last) mem = {mem.weights + costs.output_memory.weights, mem.gradients + costs.output_memory.gradients,
                       mem.optimizer + costs.output_memory.optimizer};
      const auto c32 = static_cast<int32_t>(k);
      b.alloc(MemCategory::kWeights, mem.weights, Stream::kCompute, c32, -1, {});
      b.alloc(MemCategory::kGradients, mem.gradients, Stream::kCompute, c32, -1, {});
      b.alloc(MemCategory::kOptimizer, mem.optimizer, Stream::kCompute, c32, -1, {});
    }

    // Parameter all-gather of a whole chunk (ZeRO-1/2 once per iteration; ZeRO-3 per use).
    auto gather_chunk = [&](int64_t k, Phase phase, int32_t mb, const Deps& deps) {
      auto [first_layer, n, first, last, vst] = chunk_info(k);
      Deps out;
      const auto c32 = static_cast<int32_t>(k);
      for (const CommOp& op : costs.layer_param_gather)
        out.push_back(b.collective(op, n, phase, first_layer, n, c32, mb, deps));
      if (first)
        for (const CommOp& op : costs.embedding_param_gather) out.push_back(b.collective(op, 1, phase, -1, 0, c32, mb, deps));
      if (last)
        for (const CommOp& op : costs.output_param_gather) out.push_back(b.collective(op, 1, phase, -1, 0, c32, mb, deps));
      return out;
    };
    // ZeRO-3: the embedding / output layer parameters chunk k holds, gathered per use.
    auto gather_extras = [&](int64_t k, Phase phase, int32_t mb) {
      auto [first_layer, n, first, last, vst] = chunk_info(k);
      Deps out;
      const auto c32 = static_cast<int32_t>(k);
      if (first)
        for (const CommOp& op : costs.embedding_param_gather) out.push_back(b.collective(op, 1, phase, -1, 0, c32, mb, {}));
      if (last)
        for (const CommOp& op : costs.output_param_gather) out.push_back(b.collective(op, 1, phase, -1, 0, c32, mb, {}));
      return out;
    };
    // Gradient reduction of chunk k: its layers (unless they were reduced layer by layer) and
    // the embedding / output layer it holds.
    auto reduce_chunk = [&](int64_t k, int32_t mb, const Deps& deps, bool with_layers) {
      auto [first_layer, n, first, last, vst] = chunk_info(k);
      Deps out;
      const auto c32 = static_cast<int32_t>(k);
      if (with_layers)
        for (const CommOp& op : costs.layer_grad_reduce)
          out.push_back(b.collective(op, n, Phase::kBackward, first_layer, n, c32, mb, deps));
      if (first)
        for (const CommOp& op : costs.embedding_grad_reduce)
          out.push_back(b.collective(op, 1, Phase::kBackward, -1, 0, c32, mb, deps));
      if (last)
        for (const CommOp& op : costs.output_grad_reduce)
          out.push_back(b.collective(op, 1, Phase::kBackward, -1, 0, c32, mb, deps));
      return out;
    };

    // Overlapped data-parallel communication works bucket by bucket (a bucket per layer):
    // the first forward of each chunk runs layer by layer, each layer waiting only for its
    // own parameter all-gather (ZeRO-1/2 with overlap_param_gather), and the last backward of
    // each chunk runs layer by layer, each layer's gradient reduction starting as soon as
    // that layer is done (overlap_grad_reduce). Every other step is one task per chunk.
    const bool split_first_fwd = zero12 && plan.overlap_param_gather && !costs.layer_param_gather.empty();
    const bool split_last_bwd = !zero3 && plan.overlap_grad_reduce && !costs.layer_grad_reduce.empty();
    Deps reduce_hold;  // ZeRO-2: the next step waits for the previous micro-batch's reductions
    std::vector<std::vector<Deps>> layer_gather(static_cast<size_t>(V));  // [chunk][layer in chunk]
    std::vector<Deps> start_gather(static_cast<size_t>(V));               // embedding / output gathers
    if (zero12 && plan.overlap_param_gather)
      for (int64_t k = 0; k < V; ++k) {
        auto [first_layer, n, first, last, vst] = chunk_info(k);
        const auto c32 = static_cast<int32_t>(k);
        if (first)
          for (const CommOp& op : costs.embedding_param_gather)
            start_gather[static_cast<size_t>(k)].push_back(b.collective(op, 1, Phase::kForward, -1, 0, c32, -1, {}));
        if (last)
          for (const CommOp& op : costs.output_param_gather)
            start_gather[static_cast<size_t>(k)].push_back(b.collective(op, 1, Phase::kForward, -1, 0, c32, -1, {}));
        layer_gather[static_cast<size_t>(k)].resize(static_cast<size_t>(n));
        for (int64_t l = 0; l < n; ++l)
          for (const CommOp& op : costs.layer_param_gather)
            layer_gather[static_cast<size_t>(k)][static_cast<size_t>(l)].push_back(
                b.collective(op, 1, Phase::kForward, first_layer + l, 1, c32, -1, {}));
      }
    std::vector<char> forward_seen(static_cast<size_t>(V), 0);

    const std::vector<PipelineStep> order = pipeline_order(plan.schedule, P, s, m, V, sc.training.framework);
    std::vector<size_t> last_bwd_of_chunk(static_cast<size_t>(V), 0);
    for (size_t i = 0; i < order.size(); ++i)
      if (!order[i].forward) last_bwd_of_chunk[static_cast<size_t>(order[i].chunk)] = i;

    // Activation buffer of (micro-batch, chunk), allocated by the forward, freed by the backward.
    std::unordered_map<int64_t, int32_t> act_buffer;
    Deps grad_reduces, end_deps;

    // Runs `ops` (per layer x n) beside or after compute task `t`; returns what consumers wait on.
    auto layer_comm = [&](const std::vector<CommOp>& ops, int64_t n, Phase phase, int64_t first_layer, int32_t chunk,
                          int32_t mb, int32_t t, const Deps& before) {
      // Overlapped ones first: on a shared stream they must not queue behind the blocking ones.
      Deps out{t};
      for (const CommOp& op : ops)
        if (!op.blocking) out.push_back(b.collective(op, n, phase, first_layer, n, chunk, mb, before));
      for (const CommOp& op : ops)
        if (op.blocking) out.push_back(b.collective(op, n, phase, first_layer, n, chunk, mb, {t}));
      return out;
    };
    // Collectives of the embedding / output layer (not per layer): `pre` ones before the
    // compute task (it waits for them), the rest after it (blocking) or beside it.
    auto pre_comm = [&](const std::vector<CommOp>& ops, Phase phase, int32_t chunk, int32_t mb, Deps cur) {
      for (const CommOp& op : ops) {
        const int32_t t = b.collective(op, 1, phase, -1, 0, chunk, mb, cur);
        if (t >= 0) cur.push_back(t);
      }
      return cur;
    };
    auto post_comm = [&](const std::vector<CommOp>& ops, Phase phase, int32_t chunk, int32_t mb, int32_t t,
                         const Deps& before) {
      Deps out{t};
      for (const CommOp& op : ops)
        if (!op.blocking) out.push_back(b.collective(op, 1, phase, -1, 0, chunk, mb, before));
      for (const CommOp& op : ops)
        if (op.blocking) out.push_back(b.collective(op, 1, phase, -1, 0, chunk, mb, {t}));
      return out;
    };
    int32_t last_layer_compute = -1;  // the latest layer compute task emitted (ZeRO-3 prefetch)
    // MoE layers with expert (tensor) parallelism: attention (with its TP collectives and the
    // router), dispatch all-to-all (kEp), ETP all-gather (kExpertTp), experts, ETP
    // reduce-scatter, combine all-to-all (see lowering.h); the backward mirrors it. The EP
    // all-to-alls of a layer come as one CommOp per direction pair (forward: dispatch +
    // combine = 2 calls; backward: their gradients); each half becomes its own task.
    const auto is_ep = [](const CommOp& op) { return op.group == GroupKind::kEp && op.kind == CollectiveKind::kAllToAll; };
    const auto is_etp = [](const CommOp& op) { return op.group == GroupKind::kExpertTp; };
    const auto is_expert_comm = [&](const CommOp& op) { return is_ep(op) || is_etp(op); };
    const bool moe_split = !empty_cost(costs.moe_fwd) &&
                           std::any_of(costs.layer_fwd_comm.begin(), costs.layer_fwd_comm.end(), is_expert_comm);
    auto emit_moe = [&](Phase phase, int64_t layer, int64_t count, int32_t chunk, int32_t mb, const Deps& deps,
                        int32_t& first_compute) {
      const bool fwd = phase == Phase::kForward;
      const ComputeCost& whole = fwd ? costs.layer_fwd : costs.layer_bwd;
      const ComputeCost& moe = fwd ? costs.moe_fwd : costs.moe_bwd;
      const ComputeCost attn{whole.flops - moe.flops, whole.mem_bytes - moe.mem_bytes, whole.duration_s - moe.duration_s};
      std::vector<CommOp> dense_ops, ep_halves, etp_gather, etp_scatter;
      for (const CommOp& op : fwd ? costs.layer_fwd_comm : costs.layer_bwd_comm) {
        if (is_etp(op)) {
          // Forward: gather the dispatched rows, scatter the fc2 partial sums. Backward: gather
          // the output gradients (of the scatter), scatter the input gradients (of the gather).
          (op.kind == CollectiveKind::kAllGather ? etp_gather : etp_scatter).push_back(op);
          continue;
        }
        if (!is_ep(op)) {
          dense_ops.push_back(op);
          continue;
        }
        assert(op.count % 2 == 0);  // dispatch and combine (or their gradients) per layer
        CommOp half = op;
        half.count = op.count / 2;
        ep_halves.push_back(half);
      }
      const double n = static_cast<double>(count);
      auto a2a = [&](const Deps& d) {
        Deps out;
        for (const CommOp& op : ep_halves) out.push_back(b.collective(op, count, phase, layer, count, chunk, mb, d));
        return out;
      };
      auto attention = [&](const Deps& d) {
        const int32_t t = b.compute(phase, OpKind::kAttention, scaled(attn, n), layer, count, chunk, mb, d);
        if (first_compute < 0) first_compute = t;
        last_layer_compute = t;
        return layer_comm(dense_ops, count, phase, layer, chunk, mb, t, d);
      };
      // The ETP collectives, one task each per chunk step (count: per layer x layers), in a
      // chain: each waits for what came before.
      auto chain = [&](const std::vector<CommOp>& ops, const Deps& d) {
        if (ops.empty()) return d;
        Deps cur = d;
        for (const CommOp& op : ops)
          if (const int32_t t = b.collective(op, count, phase, layer, count, chunk, mb, cur); t >= 0) cur = Deps{t};
        return cur;
      };
      auto experts = [&](const Deps& d) {
        const int32_t t = b.compute(phase, OpKind::kMlp, scaled(moe, n), layer, count, chunk, mb, chain(etp_gather, d));
        if (first_compute < 0) first_compute = t;
        last_layer_compute = t;
        return chain(etp_scatter, Deps{t});
      };
      if (fwd) {
        // Overlapped dense collectives (returned with the attention) are waited on at the end.
        Deps after_attn = attention(deps);
        Deps cur = a2a(after_attn);
        cur = a2a(experts(cur));
        append(cur, after_attn);
        return cur;
      }
      Deps cur = a2a(deps);
      cur = a2a(experts(cur));
      return attention(cur);
    };
    // Runs n layers from first_layer as one compute task with its collectives, or layer by
    // layer when `split` (backward: last layer first; recomputation, when the plan has it,
    // right before each layer's backward). extra_deps(i, j) adds what the i-th layer of the
    // chunk (the j-th to run) waits for; after(i, deps) runs after it. Returns what follows
    // waits on.
    auto run_layers = [&](Phase ph, int64_t first_layer, int64_t n, int32_t chunk, int32_t mb, Deps cur, bool split,
                          int32_t& first_compute, const auto& extra_deps, const auto& after) {
      if (n <= 0) return cur;
      const bool fwd = ph == Phase::kForward;
      const ComputeCost& per_layer = fwd ? costs.layer_fwd : costs.layer_bwd;
      const std::vector<CommOp>& comm = fwd ? costs.layer_fwd_comm : costs.layer_bwd_comm;
      const bool recompute = !fwd && !empty_cost(costs.layer_recompute);
      auto emit = [&](Phase phase, const ComputeCost& c, int64_t layer, int64_t count, const Deps& deps) {
        if (phase != Phase::kRecompute && moe_split) return emit_moe(phase, layer, count, chunk, mb, deps, first_compute);
        const int32_t t = b.compute(phase, OpKind::kLayer, scaled(c, static_cast<double>(count)), layer, count, chunk, mb, deps);
        if (first_compute < 0) first_compute = t;
        last_layer_compute = t;
        return layer_comm(phase == Phase::kRecompute ? costs.layer_recompute_comm : comm, count, phase, layer, chunk, mb, t, deps);
      };
      if (!split) {
        if (recompute) cur = emit(Phase::kRecompute, costs.layer_recompute, first_layer, n, cur);
        return emit(ph, per_layer, first_layer, n, cur);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = fwd ? j : n - 1 - j;
        Deps d = cur;
        append(d, extra_deps(i, j));
        if (recompute) d = emit(Phase::kRecompute, costs.layer_recompute, first_layer + i, 1, d);
        cur = emit(ph, per_layer, first_layer + i, 1, d);
        after(i, cur);
      }
      return cur;
    };

    // ZeRO-3 (FSDP): every layer's parameters are all-gathered into a buffer of their own
    // just before use, one layer ahead (the gather of the next layer starts when the layer
    // before the current one has finished, so at most two layers are gathered at a time),
    // and freed after use; each layer's gradients are reduce-scattered after its backward.
    struct Gathered {
      int32_t buffer = -1;
      Deps tasks;
    };
    std::unordered_map<int64_t, Gathered> z3;  // key: step * (layers + 1) + layer in chunk
    const int64_t z3_stride = sc.model.num_layers + 1;
    auto z3_gather = [&](size_t step, int64_t l) {
      const PipelineStep& ps = order[step];
      auto [fl, nl, f0, l0, v0] = chunk_info(ps.chunk);
      const Phase ph = ps.forward ? Phase::kForward : Phase::kBackward;
      Gathered gth;
      auto [a, buf] = b.alloc(MemCategory::kWeights, costs.layer_gathered_param_bytes, Stream::kDpComm, ps.chunk, ps.micro_batch,
                              {last_layer_compute});
      gth.buffer = buf;
      gth.tasks.push_back(a);
      for (const CommOp& op : costs.layer_param_gather)
        gth.tasks.push_back(b.collective(op, 1, ph, fl + l, 1, ps.chunk, ps.micro_batch, {a}));
      z3[static_cast<int64_t>(step) * z3_stride + l] = std::move(gth);
    };
    auto z3_before = [&](size_t step, int64_t n, int64_t i, int64_t j) {
      if (!z3.count(static_cast<int64_t>(step) * z3_stride + i)) z3_gather(step, i);
      const bool fwd = order[step].forward;
      if (j + 1 < n) {
        z3_gather(step, fwd ? i + 1 : i - 1);
      } else if (step + 1 < order.size()) {
        const int64_t nn = std::get<1>(chunk_info(order[step + 1].chunk));
        if (nn > 0) z3_gather(step + 1, order[step + 1].forward ? 0 : nn - 1);
      }
      return z3[static_cast<int64_t>(step) * z3_stride + i].tasks;
    };
    auto z3_after = [&](size_t step, int64_t i, const Deps& d) {
      auto it = z3.find(static_cast<int64_t>(step) * z3_stride + i);
      b.free_buffer(it->second.buffer, d);
      z3.erase(it);
    };
    const auto no_deps = [](int64_t, int64_t) { return Deps{}; };
    int32_t sent = -1;  // the previous step's send
    const auto nothing = [](int64_t, const Deps&) {};

    for (size_t i = 0; i < order.size(); ++i) {
      const PipelineStep& st = order[i];
      const int64_t k = st.chunk;
      const int32_t mb = st.micro_batch;
      const auto c32 = static_cast<int32_t>(k);
      auto [first_layer, n, first, last, vst] = chunk_info(k);
      // Megatron's pipeline communication is synchronous (batched isend/irecv, then wait):
      // the next step's compute starts after the previous step's send has completed.
      Deps in{sent};
      sent = -1;
      append(in, reduce_hold);
      reduce_hold.clear();
      int32_t first_compute = -1;
      auto note = [&](int32_t t) {
        if (first_compute < 0) first_compute = t;
        return t;
      };
      if (st.forward) {
        const bool split = split_first_fwd && !forward_seen[static_cast<size_t>(k)];
        forward_seen[static_cast<size_t>(k)] = 1;
        if (!first)
          in.push_back(b.p2p(TaskKind::kRecv, Stream::kPpRecv, prev_rank, tag_of(mb, vst, false), costs.pp_activation_bytes,
                             costs.pp_p2p_time_s, Phase::kForward, c32, mb, {}));
        if (zero3) append(in, gather_extras(k, Phase::kForward, mb));
        if (!start_gather[static_cast<size_t>(k)].empty()) {
          append(in, start_gather[static_cast<size_t>(k)]);
          start_gather[static_cast<size_t>(k)].clear();
        }
        double act = costs.layer_activation_bytes * n;
        if (first) act += costs.embedding_activation_bytes;
        if (last) act += costs.output_activation_bytes;
        auto [a, buf] = b.alloc(MemCategory::kActivations, act, Stream::kCompute, c32, mb, {});
        act_buffer[mb * V + k] = buf;
        in.push_back(a);
        Deps cur = in;
        if (first) {
          const int32_t t = note(b.compute(Phase::kForward, OpKind::kEmbedding, costs.embedding_fwd, -1, 0, c32, mb, cur));
          cur = post_comm(costs.embedding_fwd_comm, Phase::kForward, c32, mb, t, cur);
        }
        const auto& gathers = layer_gather[static_cast<size_t>(k)];
        if (zero3)
          cur = run_layers(Phase::kForward, first_layer, n, c32, mb, cur, true, first_compute,
                           [&](int64_t l, int64_t j) { return z3_before(i, n, l, j); },
                           [&](int64_t l, const Deps& d) { z3_after(i, l, d); });
        else
          cur = run_layers(Phase::kForward, first_layer, n, c32, mb, cur, split, first_compute,
                           [&](int64_t l, int64_t) {
                             return static_cast<size_t>(l) < gathers.size() ? gathers[static_cast<size_t>(l)] : Deps{};
                           },
                           nothing);
        if (last) {
          cur = pre_comm(costs.output_fwd_comm_pre, Phase::kForward, c32, mb, cur);
          const int32_t t = note(b.compute(Phase::kForward, OpKind::kOutputLoss, costs.output_fwd, -1, 0, c32, mb, cur));
          cur = post_comm(costs.output_fwd_comm, Phase::kForward, c32, mb, t, cur);
        }
        if (!last)
          sent = b.p2p(TaskKind::kSend, Stream::kPpSend, next_rank, tag_of(mb, vst + 1, false), costs.pp_activation_bytes,
                       costs.pp_p2p_time_s, Phase::kForward, c32, mb, cur);
        end_deps = cur;
      } else {
        const bool last_of_chunk = i == last_bwd_of_chunk[static_cast<size_t>(k)];
        const bool split = split_last_bwd && (last_of_chunk || zero2);
        if (!last)
          in.push_back(b.p2p(TaskKind::kRecv, Stream::kPpRecv, next_rank, tag_of(mb, vst, true), costs.pp_activation_bytes,
                             costs.pp_p2p_time_s, Phase::kBackward, c32, mb, {}));
        if (zero3) append(in, gather_extras(k, Phase::kBackward, mb));
        Deps cur = in;
        if (last) {
          const int32_t t = note(b.compute(Phase::kBackward, OpKind::kOutputLoss, costs.output_bwd, -1, 0, c32, mb, cur));
          cur = post_comm(costs.output_bwd_comm, Phase::kBackward, c32, mb, t, cur);
        }
        const size_t reduces_before = grad_reduces.size();  // this micro-batch's reductions follow
        if (zero3)
          cur = run_layers(Phase::kBackward, first_layer, n, c32, mb, cur, true, first_compute,
                           [&](int64_t l, int64_t j) { return z3_before(i, n, l, j); },
                           [&](int64_t l, const Deps& d) {
                             z3_after(i, l, d);
                             for (const CommOp& op : costs.layer_grad_reduce)
                               grad_reduces.push_back(b.collective(op, 1, Phase::kBackward, first_layer + l, 1, c32, mb, d));
                           });
        else
          cur = run_layers(Phase::kBackward, first_layer, n, c32, mb, cur, split, first_compute, no_deps,
                           [&](int64_t l, const Deps& d) {
                             for (const CommOp& op : costs.layer_grad_reduce)
                               grad_reduces.push_back(
                                   b.collective(op, 1, Phase::kBackward, first_layer + l, 1, c32, zero2 ? mb : -1, d));
                           });
        if (first) {
          cur = pre_comm(costs.embedding_bwd_comm_pre, Phase::kBackward, c32, mb, cur);
          cur = {note(b.compute(Phase::kBackward, OpKind::kEmbedding, costs.embedding_bwd, -1, 0, c32, mb, cur))};
        }
        b.free_buffer(act_buffer[mb * V + k], cur);
        if (zero3) append(grad_reduces, reduce_chunk(k, mb, cur, false));
        if (!first)
          sent = b.p2p(TaskKind::kSend, Stream::kPpSend, prev_rank, tag_of(mb, vst - 1, true), costs.pp_activation_bytes,
                       costs.pp_p2p_time_s, Phase::kBackward, c32, mb, cur);
        if (zero2) {
          const Deps r = reduce_chunk(k, mb, cur, !split);
          append(grad_reduces, r);
          // DeepSpeed stage 2 waits for a micro-batch's reductions at the end of its backward
          // (independent_gradient_partition_epilogue synchronizes the reduction stream), so they
          // overlap that backward only, as the cost model counts them: the next step waits.
          reduce_hold.assign(grad_reduces.begin() + static_cast<std::ptrdiff_t>(reduces_before), grad_reduces.end());
        } else if (!zero3 && plan.overlap_grad_reduce && last_of_chunk) {
          append(grad_reduces, reduce_chunk(k, -1, cur, !split));
        }
        end_deps = cur;
      }
    }
    if (!zero3 && !zero2 && !plan.overlap_grad_reduce)
      for (int64_t k = 0; k < V; ++k) append(grad_reduces, reduce_chunk(k, -1, end_deps, true));
    // After the gradient reduction (Megatron finalize_model_grads): the sequence-parallel
    // replicated gradients over TP, then the tied embedding between the first and last stage.
    {
      Deps reduced = grad_reduces;
      append(reduced, end_deps);
      append(reduced, reduce_hold);
      for (int64_t k = 0; k < V; ++k) {
        const size_t idx = static_cast<size_t>(s * V + k);
        if (idx < costs.chunk_sp_grad_reduce.size())
          grad_reduces.push_back(b.collective(costs.chunk_sp_grad_reduce[idx], 1, Phase::kBackward, -1, 0,
                                              static_cast<int32_t>(k), -1, reduced));
      }
      for (int64_t k = 0; k < V; ++k) {
        auto [first_layer, n, first, last, vst] = chunk_info(k);
        if (first || last)
          for (const CommOp& op : costs.tied_embedding_grad_reduce)
            grad_reduces.push_back(b.collective(op, 1, Phase::kBackward, -1, 0, static_cast<int32_t>(k), -1, reduced));
      }
    }

    ComputeCost opt;
    int64_t total_layers = 0;
    for (int64_t k = 0; k < V; ++k) total_layers += std::get<1>(chunk_info(k));
    if (static_cast<int64_t>(costs.optimizer_per_stage.size()) == P) opt = costs.optimizer_per_stage[static_cast<size_t>(s)];
    Deps opt_deps = grad_reduces;
    append(opt_deps, end_deps);
    const int32_t opt_task = b.compute(Phase::kOptimizer, OpKind::kOptimizerStep, opt, layers[static_cast<size_t>(s)][0].first_layer,
                                       total_layers, 0, -1, opt_deps);
    if (zero12 && !plan.overlap_param_gather)
      for (int64_t k = 0; k < V; ++k) gather_chunk(k, Phase::kOptimizer, -1, {opt_task});
  }
  return g;
}

}  // namespace monarch
