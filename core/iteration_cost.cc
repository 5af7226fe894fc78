// One training iteration of a plan: pipeline schedule, overlap, memory, the analytical result.
#include "core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/collectives.h"
#include "core/framework_rules.h"
#include "core/pipeline_bubble.h"
#include "core/pipeline_schedule.h"
#include "core/placement.h"
#include "core/plan_warnings.h"
#include "core/profile.h"
#include "core/units.h"
#include "core/cost_model_internal.h"

namespace monarch {

using namespace cost_detail;

// ============================================================================ iteration

namespace {

// Reason the plan cannot run at all, or empty.
std::string plan_problem(const Scenario& sc, const Plan& p, const ModelShape& m) {
  char buf[200];
  if (sc.model.architecture == Architecture::kDlrm)
    return "the analytical model covers transformer models (gpt, llama); dlrm is not modelled";
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1 || p.ep < 1 || p.vpp < 1 || p.micro_batch_size < 1)
    return "every parallel degree and the micro-batch size must be at least 1";
  if (sc.cluster.num_gpus > 0)
    if (std::string w = world_size_problem(p, sc.cluster.num_gpus); !w.empty()) return w;
  if (m.heads % p.tp != 0 || m.kv_heads % p.tp != 0) return "tensor parallel degree must divide the attention and key/value heads";
  if (p.layers_per_stage.empty()) {
    if (m.layers < p.pp * p.vpp) return "fewer layers than pipeline stages x virtual stages";
  } else {
    const auto n = static_cast<int64_t>(p.layers_per_stage.size());
    if (n != p.pp && n != p.pp * p.vpp) return "layers_per_stage needs one entry per pipeline stage or per model chunk";
    int64_t sum = 0;
    for (int64_t l : p.layers_per_stage) {
      if (l < 0) return "layers_per_stage has a negative entry";
      sum += l;
    }
    if (sum != m.layers) return "layers_per_stage does not sum to the model's layers";
  }
  if (m.seq % p.cp != 0) return "context parallel degree must divide the sequence length";
  if (p.etp < 0) return "expert tensor parallel degree must be at least 1";
  if ((p.tp * p.dp * p.cp) % (p.expert_tp() * p.ep) != 0) {
    std::snprintf(buf, sizeof buf, "etp x ep = %lld x %lld must divide the ranks of a pipeline stage (tp x cp x dp = %lld)",
                  static_cast<long long>(p.expert_tp()), static_cast<long long>(p.ep),
                  static_cast<long long>(p.tp * p.cp * p.dp));
    return buf;
  }
  if (!m.moe() && p.expert_tp() != p.tp) return "expert tensor parallelism needs a mixture-of-experts model";
  if (m.moe() && m.expert_ffn % p.expert_tp() != 0) {
    std::snprintf(buf, sizeof buf, "expert tensor parallel degree %lld must divide the expert FFN size %lld",
                  static_cast<long long>(p.expert_tp()), static_cast<long long>(m.expert_ffn));
    return buf;
  }
  if (m.moe() && p.tp > 1 && !p.sequence_parallel)
    return "MoE with tensor parallelism needs sequence parallelism (Megatron's MoELayer: \"During training, performance may "
           "degrade if MoE and tensor parallelism are enabled without also enabling sequence parallelism\")";
  if (m.moe() && m.experts % p.ep != 0) return "expert parallel degree must divide the number of experts";
  if (!m.moe() && p.ep > 1) return "expert parallelism needs a mixture-of-experts model";
  if (sc.training.global_batch_size % (p.micro_batch_size * p.dp) != 0)
    return "global batch size is not a multiple of micro_batch_size x dp";
  if (p.vpp > 1 && p.schedule != Schedule::kInterleaved) return "virtual stages need the interleaved schedule";
  if (p.pp > 1) {
    if (std::string why = pipeline_length_problem(p.pp, p.chunks_per_stage()); !why.empty())
      return why;
    if (std::string why = schedule_problem(p.schedule, p.pp, num_micro_batches(sc, p), p.vpp, sc.training.framework);
        !why.empty())
      return why;
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) return "zero stage must be 0..3";
  if (sc.training.cuda_graphs)
    if (std::string why = cuda_graph_problem(sc.model, p.recompute); !why.empty()) return why;
  if (std::string why = async_tp_problem(sc.training.framework, sc.training.compile, p.tp_comm_overlap); !why.empty())
    return why;
  if (std::string why = ep_overlap_problem(sc.training, sc.model, p); !why.empty()) return why;
  if (std::string why = activation_offload_problem(sc, p); !why.empty()) return why;
  return framework_problem(sc.training.framework, p);
}

// ZeRO-3 / FSDP: the NCCL calls one pass over a stage takes, by framework.
// - torchtitan: FSDP2 `fully_shard` on every transformer block and on the root module
//   (embedding, final norm, output layer): one all-gather per block and pass, one
//   reduce-scatter per block and backward (torchtitan parallelize.py `apply_fsdp`; FSDP2
//   reshards after the forward and gathers again for the backward).
// - megatron: Megatron-Core's FSDP shards by TransformerLayer (`fsdp_unit_modules`), one
//   all-gather and one reduce-scatter per layer and pass, as FSDP2.
// - deepspeed: ZeRO-3's PartitionedParameterCoordinator gathers each submodule that owns
//   partitioned parameters when its forward (or backward) hook fires; gradients leave in reduce
//   buckets of `reduce_bucket_size` elements (deepspeed/runtime/zero/stage3.py, the stage-2
//   bucket default kZeroReduceBucketElements). Parameters of at most
//   `stage3_param_persistence_threshold` elements are never partitioned ("Do not partition
//   parameters smaller than this threshold", deepspeed/runtime/zero/config.py, default 1e5;
//   parameter_offload.py mark_persistent_parameters), so a Megatron-DeepSpeed GPT layer's two
//   LayerNorms (h elements per tensor) and every bias stay whole on each rank and only its
//   linear weights are gathered: QKV, projection, fc1 and fc2 where each rank's weight is larger
//   (`deepspeed_gathered_submodules`).
constexpr double kDeepspeedParamPersistenceElements = 1.0e5;

// Submodules of one layer whose weights a ZeRO-3 rank gathers under DeepSpeed: the norms and the
// linears whose per-rank weight is above the persistence threshold (an MoE layer's MLP linears
// are one expert's, split by the expert TP degree).
double deepspeed_gathered_submodules(const ModelShape& m, const Plan& p) {
  const double h = static_cast<double>(m.hidden), t = static_cast<double>(p.tp);
  const double qkv = h * static_cast<double>(qkv_width(m)) / t;
  const double proj = static_cast<double>(m.heads * m.head_dim) * h / t;
  const double mlp_t = static_cast<double>(m.moe() ? p.expert_tp() : p.tp);
  const double fc1 = static_cast<double>(layer_fc1_params(m)) / mlp_t;
  const double fc2 = static_cast<double>(layer_ffn(m)) * h / mlp_t;
  double n = 0;
  for (double numel : {h, qkv, proj, h, fc1, fc2})
    if (numel > kDeepspeedParamPersistenceElements) n += 1.0;
  return n;
}
// Megatron-Core DDP's default bucket: max(40,000,000, 1,000,000 x dp) parameters
// (DistributedDataParallelConfig.bucket_size: "larger DP sizes need larger buckets to ensure
// collectives do not become latency-bound").
constexpr double kMegatronMinBucketParams = 4.0e7;
constexpr double kMegatronBucketParamsPerDpRank = 1.0e6;
struct Zero3Calls {
  double gathers = 1, reduce_scatters = 1;  // per pass over the stage
};
Zero3Calls zero3_calls(Framework f, const ModelShape& m, const Plan& p, double layers, double params) {
  Zero3Calls z;
  if (f == Framework::kDeepspeed) {
    z.gathers = layers * deepspeed_gathered_submodules(m, p) + 1.0;  // + the embedding / output
    z.reduce_scatters = std::max(1.0, std::ceil(params / kZeroReduceBucketElements));
  } else {
    z.gathers = z.reduce_scatters = layers + 1.0;  // + the root module
  }
  return z;
}

// A pipeline message that leaves the node shares the receiving GPU's NIC with that stage's own
// inter-node layer traffic (an expert all-to-all over several nodes, a TP group or a CP ring
// across nodes), which runs while the message is in flight: the stages work on different
// micro-batches. The sending stage's own traffic has ended: it sends after its chunk's last
// layer and waits for the send.
// NCCL's send and the collective's many peer flows share the NIC about equally per flow, so a
// message that arrives while a collective holds the NIC gets a small share of it and in effect
// waits for the collective to end. Arriving at a random point of the receiving stage's steady
// state (its pace, the slowest stage's time per micro-batch), it finds the NIC busy with
// probability f = busy / pace and then waits on average for half of the busy phase it fell in
// (the residual of a renewal process, weighted by phase length: sum n D^2 / sum n D). So the
// mean wait per message is sum n D^2 / (2 pace) per stage, n the collectives of length D a
// micro-batch runs on the stage. On Qwen3-235B on 256 H100 (EP 32 over four nodes, pp 8) this
// gives 1.04 ms per pipeline message, 0.38 ms alone; SimGrid, which shares the links flow by
// flow, 1.03 ms (docs/simgrid_backend.md).
std::vector<double> nic_wait_s(const Plan& p, int64_t gpn, const LayerCosts& L, const std::vector<int64_t>& chunk_layers,
                               const PipelineShape& sh) {
  std::vector<double> wait(static_cast<size_t>(p.pp), 0.0);
  if (p.pp <= 1) return wait;
  double busy_s = 0, busy_sq_s2 = 0;  // one layer, one micro-batch: sum n D and sum n D^2
  for (const LayerCosts::Collective& col : L.collectives) {
    if (!group_span(col.group, p, gpn).crosses_nodes()) continue;
    const double count = static_cast<double>(col.forward_count + col.backward_count + col.recompute_count);
    busy_s += count * col.time_s;
    busy_sq_s2 += count * col.time_s * col.time_s;
  }
  // Context parallelism's ring attention sends K and V (and their gradients) to the next CP
  // rank, cp - 1 hops of one length per pass, beside the attention kernel.
  if (p.cp > 1 && L.cp_total_s > 0 && group_span(GroupKind::kCp, p, gpn).crosses_nodes()) {
    const double hop_s = L.cp_time_forward_s / static_cast<double>(p.cp - 1);
    busy_s += L.cp_total_s;
    busy_sq_s2 += L.cp_total_s * hop_s;
  }
  if (!(busy_s > 0)) return wait;
  std::vector<double> stage_s(wait.size(), 0.0), stage_layers(wait.size(), 0.0);
  for (size_t i = 0; i < chunk_layers.size(); ++i) {
    stage_s[i % wait.size()] += sh.forward_s[i] + sh.backward_s[i];
    stage_layers[i % wait.size()] += static_cast<double>(chunk_layers[i]);
  }
  const double pace_s = *std::max_element(stage_s.begin(), stage_s.end());
  if (!(pace_s > 0)) return wait;
  const double phase_s = busy_sq_s2 / busy_s;  // mean phase length seen by a random arrival
  for (size_t st = 0; st < wait.size(); ++st)
    wait[st] = std::min(1.0, stage_layers[st] * busy_s / pace_s) * 0.5 * phase_s;
  return wait;
}

// One micro-batch's forward and backward time per model chunk, for the pipeline's fill and
// drain: compute and host time by pass; the exposed TP / CP / EP time of a layer split by the
// share of its collectives' time each pass issues (recomputation's in the backward); the
// embedding's exposed collectives in the forward, the output layer's in the backward (its
// input-gradient all-reduce and, with SP, the gather beside the backward GEMM).
PipelineShape pipeline_shape(const Scenario& sc, const Plan& p, const ModelShape& m, const LayerCompute& lc,
                             const LayerCosts& L) {
  PipelineShape sh;
  sh.schedule = p.schedule;
  sh.framework = sc.training.framework;
  sh.pp = p.pp;
  sh.vpp = p.chunks_per_stage();
  sh.extra_warmup = extra_warmup_forwards(p);
  sh.micro_batches = std::max<int64_t>(num_micro_batches(sc, p), 1);
  double forward_comm_s = 0, all_comm_s = 0;
  for (const LayerCosts::Collective& col : L.collectives) {
    forward_comm_s += col.forward_count * col.time_s;
    all_comm_s += (col.forward_count + col.backward_count + col.recompute_count) * col.time_s;
  }
  const double forward_share = all_comm_s > 0 ? forward_comm_s / all_comm_s : 0.5;
  const double exposed_s = L.tp_exposed_s + L.cp_exposed_s + L.ep_exposed_s;
  const double layer_forward_s = lc.fwd.s + L.host_forward_s + forward_share * exposed_s;
  const double layer_backward_s = lc.bwd.s + lc.recompute.s + L.host_backward_s + L.host_recompute_s +
                                  (1.0 - forward_share) * exposed_s;
  // Chunks as the schedule runs them: with one chunk per stage (1F1B, GPipe) the stage's layers.
  const std::vector<int64_t> layers = sh.vpp == 1 ? stage_layers(m, p) : virtual_stage_layers(m.layers, p);
  const size_t n = layers.size();
  sh.forward_s.resize(n);
  sh.backward_s.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double nl = static_cast<double>(layers[i]);
    sh.forward_s[i] = nl * layer_forward_s;
    sh.backward_s[i] = nl * layer_backward_s;
  }
  sh.forward_s.front() += L.embedding_forward_s + L.embedding_tp_exposed_s;
  sh.backward_s.front() += L.embedding_backward_s;
  sh.forward_s.back() += L.output_forward_s;
  sh.backward_s.back() += L.output_backward_s + L.output_tp_exposed_s;
  // Megatron's and DeepSpeed's pipeline sends are blocking (the next step waits for them; see
  // the lowering), so each stage pays for the messages it sends: per micro-batch one activation
  // per model chunk to the next stage (with interleaving the last stage's chunks send to stage
  // 0; the last chunk sends nothing) and one gradient per chunk to the previous stage (chunk 0
  // sends nothing). A hop whose stages share a node is an NVLink message, one that leaves it a
  // NIC message, which also waits for the receiving stage's own traffic on that NIC
  // (`nic_wait_s`).
  const int64_t gpn = sc.cluster.gpus_per_node;
  const double hop_s[2] = {p2p_time_s(L.pp_message_bytes, false, sc.cluster),
                           p2p_time_s(L.pp_message_bytes, true, sc.cluster)};
  const std::vector<double> wait_s = nic_wait_s(p, gpn, L, layers, sh);
  sh.forward_send_s.assign(n, 0.0);
  sh.backward_send_s.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    const auto st = static_cast<int64_t>(i) % p.pp;
    const int64_t next = (st + 1) % p.pp, prev = (st + p.pp - 1) % p.pp;
    if (i + 1 < n && pp_hop_crosses_nodes(p, gpn, st, next)) sh.forward_send_s[i] = hop_s[1] + wait_s[next];
    else if (i + 1 < n) sh.forward_send_s[i] = hop_s[0];
    if (i > 0 && pp_hop_crosses_nodes(p, gpn, st, prev)) sh.backward_send_s[i] = hop_s[1] + wait_s[prev];
    else if (i > 0) sh.backward_send_s[i] = hop_s[0];
  }
  return sh;
}

// One micro-batch's pipeline messages on stage `st`'s own timeline: its chunks' sends.
double stage_sends_s(const PipelineShape& sh, int64_t st) {
  double sends_s = 0;
  for (size_t i = static_cast<size_t>(st); i < sh.forward_send_s.size(); i += static_cast<size_t>(sh.pp))
    sends_s += sh.forward_send_s[i] + sh.backward_send_s[i];
  return sends_s;
}

struct IterationModel {
  TimeBreakdown breakdown;
  double iteration_s = 0;
  std::vector<CommEntry> comm;  // only filled when `detail`
  int64_t critical_stage = 0;
  bool lower_bound = false;  // iteration_s is only a lower bound, above the caller's time bound
};

void add_comm(std::vector<CommEntry>& v, CollectiveKind kind, GroupKind group, int64_t group_size, double bytes,
              int64_t count, double time_s) {
  if (count <= 0 || bytes <= 0) return;
  for (CommEntry& c : v) {
    if (c.kind == kind && c.group == group) {
      c.bytes += static_cast<int64_t>(bytes);
      c.count += count;
      c.time_s += time_s;
      return;
    }
  }
  v.push_back(CommEntry{kind, group, static_cast<int64_t>(bytes), count, time_s, group_size});
}

// The iteration of `p`. `time_bound_s`: a pipeline plan whose time without its bubble already
// exceeds it gets that sum as a lower bound (IterationModel::lower_bound), and the schedule that
// would give the bubble is not run.
IterationModel iteration(const Scenario& sc, const Plan& p, const ModelShape& m, const Ctx& c,
                         const LayerCompute& lc, const LayerCosts& L, const std::vector<int64_t>& layers,
                         bool detail, double time_bound_s = kNoTimeBound) {
  IterationModel it;
  const int64_t nmb = std::max<int64_t>(num_micro_batches(sc, p), 1);
  const double mb = static_cast<double>(nmb);
  const int64_t pp = p.pp;
  const auto v = static_cast<double>(p.chunks_per_stage());
  const ClusterConfig& cl = sc.cluster;
  const int64_t gpn = cl.gpus_per_node;

  const double layer_compute_s = lc.fwd.s + lc.bwd.s + lc.recompute.s;
  const double layer_host_s = L.host_forward_s + L.host_backward_s + L.host_recompute_s;
  const double layer_exposed_s =
      L.tp_exposed_s + L.cp_exposed_s + L.ep_exposed_s + L.offload_forward_s + L.offload_backward_s;
  // The schedule's chunks with their times and sends (pipeline plans only).
  const PipelineShape shape = pp > 1 ? pipeline_shape(sc, p, m, lc, L) : PipelineShape{};

  // Slowest stage per micro-batch, its pipeline messages included.
  double worst = -1, worst_compute = 0, worst_exposed = 0, worst_host = 0, pp_per_mb = 0;
  int64_t worst_stage = 0;
  for (int64_t st = 0; st < pp; ++st) {
    const double nl = static_cast<double>(layers[static_cast<size_t>(st)]);
    double comp = nl * layer_compute_s;
    const double host = nl * layer_host_s;
    if (st == 0) comp += L.embedding_forward_s + L.embedding_backward_s;
    if (st == pp - 1) comp += L.output_forward_s + L.output_backward_s;
    double exp = nl * layer_exposed_s;
    if (st == 0) exp += L.embedding_tp_exposed_s;
    if (st == pp - 1) exp += L.output_tp_exposed_s;
    const double p2p = pp > 1 ? stage_sends_s(shape, st) : 0.0;
    if (comp + exp + host + p2p > worst) {
      worst = comp + exp + host + p2p;
      worst_compute = comp;
      worst_exposed = exp;
      worst_host = host;
      worst_stage = st;
      pp_per_mb = p2p;
    }
  }
  it.critical_stage = worst_stage;
  const double nl_w = static_cast<double>(layers[static_cast<size_t>(worst_stage)]);

  TimeBreakdown& b = it.breakdown;
  b.compute = mb * worst_compute;
  b.host = mb * worst_host;
  b.tp_comm = mb * (nl_w * L.tp_total_s + (worst_stage == 0 ? L.embedding_tp_total_s : 0.0) +
                    (worst_stage == pp - 1 ? L.output_tp_total_s : 0.0));
  b.cp_comm = mb * nl_w * L.cp_total_s;
  b.ep_comm = mb * nl_w * L.ep_total_s;
  b.pp_comm = mb * pp_per_mb;
  double exposed = mb * (worst_exposed + pp_per_mb);
  // Sequence parallelism: the replicated parameters' gradient all-reduce after the backward,
  // once per step on every rank (the stage with the most of them paces it).
  if (p.tp > 1 && p.sequence_parallel) {
    const GroupSpan tspan = group_span(GroupKind::kTp, p, gpn);
    int64_t most_bytes = 0;
    for (int64_t st = 0; st < pp; ++st)
      most_bytes = std::max(most_bytes, sp_grad_reduce_bytes(L, layers[static_cast<size_t>(st)], st == 0, st == pp - 1));
    const double sp_ar = collective_time_s(CollectiveKind::kAllReduce, most_bytes, tspan, cl);
    b.tp_comm += sp_ar;
    exposed += sp_ar;
  }

  // --- data parallel gradient reduction and parameter gathers
  // Megatron's DDP reduces the gradients bucket by bucket as the backward produces them, in
  // buckets of max(40M, 1M x dp) parameters filled in backward order, a parameter never split
  // (megatron/core/distributed/distributed_data_parallel.py, DistributedDataParallelConfig
  // bucket_size). The last bucket holds the first parameters, the word embedding among them:
  // its gradients are ready when the first stage's backward ends, so its reduction cannot hide
  // behind compute, and with overlap_param_gather the forward waits for that same bucket's
  // gather before its first layer. The first stage is the one whose backward ends the step.
  const StageParameters first_stage = stage_parameters(m, p, 0, layers[0]);
  const double megatron_last_bucket_params = [&] {
    if (sc.training.framework != Framework::kMegatron) return 0.0;
    const double bucket = std::max(kMegatronMinBucketParams, kMegatronBucketParamsPerDpRank * static_cast<double>(p.dp * p.cp));
    const double embedding = static_cast<double>(m.vocab * m.hidden) / static_cast<double>(p.tp);
    return std::min(first_stage.dense, std::max(bucket, embedding));
  }();
  const int64_t dense_group = p.dp * p.cp;
  double dp_total = 0, dp_exposed = 0;
  const bool ds_after_backward = reduces_gradients_after_backward(sc.training.framework, p.zero_stage, pp);
  const bool overlap_grads = p.overlap_grad_reduce && !ds_after_backward;
  const bool sharded_states = shards_optimizer_states(sc.training.framework, sc.training.precision, p.zero_stage);
  const bool overlap_gathers = p.overlap_param_gather && !gathers_parameters_in_step(sc.training.framework);
  double opt_params = 0, grad_params = 0;
  {
    // The rank with the most parameters (first or last stage) paces the reduction.
    StageParameters most = first_stage;
    for (int64_t st : {pp - 1, worst_stage}) {
      if (st == 0) continue;
      const StageParameters sp = stage_parameters(m, p, st, layers[static_cast<size_t>(st)]);
      if (sp.total() > most.total()) most = sp;
    }
    const GroupSpan dspan = group_span(GroupKind::kDpCp, p, gpn);
    const GroupSpan espan = group_span(GroupKind::kExpertDp, p, gpn);
    const double w_bytes = c.e;  // weights are gathered in the compute precision (16-bit; fp32 training 4)
    const double bwd_window = nl_w * (lc.bwd.s + lc.recompute.s + L.host_backward_s + L.host_recompute_s);
    const double fwd_window = nl_w * (lc.fwd.s + L.host_forward_s);
    const int64_t sms = c.prof->sm_count;
    // Fp8 primary weights (see stage_memory): the linear layers' weights are gathered in fp8.
    const bool fp8_params = sc.training.precision == Precision::kFp8;
    auto group_cost = [&](double params, double gemm_params, const GroupSpan& span, GroupKind group) {
      if (span.size <= 1 || params <= 0) return;
      const int64_t g_bytes = static_cast<int64_t>(grad_reduce_bytes_per_param(sc.training) * params);
      const int64_t w_all = static_cast<int64_t>(gathered_weight_bytes(w_bytes, fp8_params, params, gemm_params));
      // The part of the stage's gradients (and gathered weights) in Megatron's last bucket.
      const double last = group == GroupKind::kExpertDp ? 0.0 : std::min(1.0, megatron_last_bucket_params / params);
      auto hidden_but_last = [&](CollectiveKind kind, int64_t bytes, double window) {
        if (last <= 0) return overlapped_comm_cost_s(collective_time_s(kind, bytes, span, cl), window, kNcclOverlapSms, sms);
        const auto tail = static_cast<int64_t>(last * static_cast<double>(bytes));
        return collective_time_s(kind, tail, span, cl) +
               overlapped_comm_cost_s(collective_time_s(kind, bytes - tail, span, cl), window, kNcclOverlapSms, sms);
      };
      if (p.zero_stage == 0) {
        const double ar = collective_time_s(CollectiveKind::kAllReduce, g_bytes, span, cl);
        dp_total += ar;
        dp_exposed += overlap_grads ? hidden_but_last(CollectiveKind::kAllReduce, g_bytes, bwd_window) : ar;
        if (detail) add_comm(it.comm, CollectiveKind::kAllReduce, group, span.size, collective_wire_bytes(CollectiveKind::kAllReduce, g_bytes, span.size), 1, ar);
        if (sharded_states) {
          // DeepSpeed's BF16_Optimizer (shards_optimizer_states): each rank updates its
          // partition and the step ends by all-gathering the updated weights.
          const double ag = collective_time_s(CollectiveKind::kAllGather, w_all, span, cl);
          dp_total += ag;
          dp_exposed += ag;
          if (detail) add_comm(it.comm, CollectiveKind::kAllGather, group, span.size, collective_wire_bytes(CollectiveKind::kAllGather, w_all, span.size), 1, ag);
        }
      } else if (!gathers_every_micro_batch(sc.training.framework, p.zero_stage)) {
        // ZeRO-1 (Megatron's distributed optimizer): one reduce-scatter per step, after the
        // last micro-batch. ZeRO-2 (DeepSpeed stage 2) keeps only the gradient shard, so it
        // reduce-scatters every micro-batch's gradients as its backward produces them
        // (deepspeed/runtime/zero/stage_1_and_2.py: with partition_gradients the backward hooks
        // call reduce_independent_p_g_buckets_and_remove_grads on every backward, gradient
        // accumulation does not defer them): m reduce-scatters per step.
        const double rs = collective_time_s(CollectiveKind::kReduceScatter, g_bytes, span, cl);
        const double ag = collective_time_s(CollectiveKind::kAllGather, w_all, span, cl);
        const int64_t n_rs = p.zero_stage == 2 ? nmb : 1;
        const double rs_n = static_cast<double>(n_rs);
        dp_total += rs_n * rs + ag;
        // ZeRO-2's earlier reduce-scatters hide behind the next micro-batch; the step's last one
        // pays its last bucket.
        dp_exposed += (rs_n - 1.0) * (overlap_grads ? overlapped_comm_cost_s(rs, bwd_window, kNcclOverlapSms, sms) : rs);
        dp_exposed += overlap_grads ? hidden_but_last(CollectiveKind::kReduceScatter, g_bytes, bwd_window) : rs;
        dp_exposed += overlap_gathers ? hidden_but_last(CollectiveKind::kAllGather, w_all, fwd_window) : ag;
        if (detail) {
          add_comm(it.comm, CollectiveKind::kReduceScatter, group, span.size,
                   rs_n * collective_wire_bytes(CollectiveKind::kReduceScatter, g_bytes, span.size), n_rs, rs_n * rs);
          add_comm(it.comm, CollectiveKind::kAllGather, group, span.size, collective_wire_bytes(CollectiveKind::kAllGather, w_all, span.size), 1, ag);
        }
      } else {
        // ZeRO-3 / FSDP: per micro-batch the weights are gathered before the forward and again
        // before the backward (not under torchtitan's ZeRO-2, which keeps the forward's; see
        // gathers_every_micro_batch), and the gradients reduce-scattered, module by module, the next
        // module's gather prefetched beside the current module's compute. Each module is its
        // own NCCL call and pays its own ring latency (n - 1 steps over hundreds of ranks).
        const Zero3Calls z = zero3_calls(sc.training.framework, m, p, nl_w, params);
        const double ag_one = collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(static_cast<double>(w_all) / z.gathers), span, cl);
        const double rs_one = collective_time_s(CollectiveKind::kReduceScatter, static_cast<int64_t>(static_cast<double>(g_bytes) / z.reduce_scatters), span, cl);
        const double ag = z.gathers * ag_one;           // one pass over the stage's modules
        const double rs = z.reduce_scatters * rs_one;
        const double backward_gathers = backward_gather_passes(sc.training.framework, p.recompute, p.zero_stage);
        const double per_mb = (1.0 + backward_gathers) * ag + rs;
        dp_total += mb * per_mb;
        if (p.overlap_param_gather || p.overlap_grad_reduce) {
          // Forward gathers hide behind the forward, backward gathers and reduce-scatters
          // behind the backward (and its recompute). Not hidden: the first module's gather of
          // the step (nothing runs before it) and the last module's reduce-scatter (nothing
          // runs after it; the optimizer waits for it).
          const double fwd_exp = overlapped_comm_cost_s(ag, fwd_window, kNcclOverlapSms, sms);
          const double bwd_exp = overlapped_comm_cost_s(backward_gathers * ag + rs, bwd_window, kNcclOverlapSms, sms);
          dp_exposed += mb * (fwd_exp + bwd_exp) + ag_one + rs_one;
        } else {
          dp_exposed += mb * per_mb;
        }
        if (detail) {
          // Bytes of the whole stage per pass (the calls split them; the bus factor is linear).
          const double n_rs = mb * z.reduce_scatters, n_ag = (1.0 + backward_gathers) * mb * z.gathers;
          add_comm(it.comm, CollectiveKind::kReduceScatter, group, span.size,
                   mb * collective_wire_bytes(CollectiveKind::kReduceScatter, g_bytes, span.size),
                   static_cast<int64_t>(n_rs), mb * rs);
          add_comm(it.comm, CollectiveKind::kAllGather, group, span.size,
                   (1.0 + backward_gathers) * mb * collective_wire_bytes(CollectiveKind::kAllGather, w_all, span.size),
                   static_cast<int64_t>(n_ag), (1.0 + backward_gathers) * mb * ag);
        }
      }
    };
    group_cost(most.dense, most.gemm_dense, dspan, dense_gradient_group(p));
    group_cost(most.expert, most.gemm_expert, espan, GroupKind::kExpertDp);
    // Tied embeddings over a pipeline: the first and last stage all-reduce the word
    // embedding gradient after the backward (Megatron's embedding group).
    if (m.tied_embeddings && pp > 1) {
      const GroupSpan two = group_span(GroupKind::kEmbedding, p, gpn);
      const int64_t bytes = static_cast<int64_t>(grad_reduce_bytes_per_param(sc.training) * static_cast<double>(m.vocab * m.hidden) / static_cast<double>(p.tp));
      const double ar = collective_time_s(CollectiveKind::kAllReduce, bytes, two, cl);
      dp_total += ar;
      dp_exposed += ar;
      if (detail) add_comm(it.comm, CollectiveKind::kAllReduce, GroupKind::kEmbedding, 2, collective_wire_bytes(CollectiveKind::kAllReduce, bytes, 2), 1, ar);
    }
    const double shards_dense = sharded_states ? static_cast<double>(dense_group) : 1.0;
    const double shards_expert = sharded_states ? static_cast<double>(group_size(GroupKind::kExpertDp, p)) : 1.0;
    opt_params = most.dense / shards_dense + most.expert / shards_expert;
    grad_params = p.zero_stage >= 2 ? opt_params : most.total();
  }
  b.dp_comm = dp_total;
  exposed += dp_exposed;

  // --- optimizer step (memory bound)
  b.optimizer = optimizer_step_time_s(sc, opt_params, grad_params);

  b.exposed_comm = exposed;
  // The pipeline beyond m micro-batches at the slowest stage's pace (its sends included): the
  // fill and drain, and the waits of the schedule's warm-up and cool-down. Running the schedule
  // is most of a pipeline plan's estimate; the bubble is never negative (the slowest stage runs
  // all m micro-batches one after another), so the rest is a lower bound.
  const double without_bubble_s = b.compute + b.host + b.optimizer + b.exposed_comm;
  if (pp > 1 && without_bubble_s > time_bound_s) {
    it.iteration_s = without_bubble_s;
    it.lower_bound = true;
    return it;
  }
  b.bubble = pp > 1 ? std::max(0.0, pipeline_makespan_s(shape) - mb * worst) : 0.0;
  it.iteration_s = without_bubble_s + b.bubble;

  if (detail) {
    const double nl_mb = mb * nl_w;
    // TP and EP collectives: per (kind, group) the busiest stage's figures, as a measurement
    // reports the busiest rank.
    std::vector<CommEntry> busiest;
    for (int64_t st = 0; st < pp; ++st) {
      std::vector<CommEntry> mine;
      auto add = [&](const LayerCosts::Collective& col, int64_t count) {
        if (count <= 0) return;
        const GroupSpan span = group_span(col.group, p, gpn);
        add_comm(mine, col.kind, col.group, span.size,
                 static_cast<double>(count) * collective_wire_bytes(col.kind, col.bytes, span.size), count,
                 static_cast<double>(count) * col.time_s);
      };
      const int64_t layers_mb = nmb * layers[static_cast<size_t>(st)];
      for (const LayerCosts::Collective& col : L.collectives)
        add(col, layers_mb * (col.forward_count + col.backward_count + col.recompute_count));
      if (st == 0)
        for (const LayerCosts::Collective& col : L.embedding_collectives) add(col, nmb * (col.forward_count + col.backward_count));
      if (st == pp - 1)
        for (const LayerCosts::Collective& col : L.output_collectives) add(col, nmb * (col.forward_count + col.backward_count));
      if (p.tp > 1 && p.sequence_parallel) {
        const int64_t bytes = sp_grad_reduce_bytes(L, layers[static_cast<size_t>(st)], st == 0, st == pp - 1);
        add_comm(mine, CollectiveKind::kAllReduce, GroupKind::kTp, p.tp, collective_wire_bytes(CollectiveKind::kAllReduce, bytes, p.tp), 1,
                 collective_time_s(CollectiveKind::kAllReduce, bytes, group_span(GroupKind::kTp, p, gpn), cl));
      }
      for (const CommEntry& e : mine) {
        auto it_b = std::find_if(busiest.begin(), busiest.end(),
                                 [&](const CommEntry& x) { return same_key(x, e); });
        if (it_b == busiest.end()) busiest.push_back(e);
        else if (e.bytes > it_b->bytes) *it_b = e;
      }
    }
    for (const CommEntry& e : busiest) add_comm(it.comm, e.kind, *e.group, e.group_size, static_cast<double>(e.bytes), e.count, e.time_s);
    if (p.cp > 1) {
      const double fwd_mult = p.recompute == Recompute::kFull ? 2.0 : 1.0;
      const int64_t count = static_cast<int64_t>(nl_mb * (fwd_mult + 2.0) * static_cast<double>(p.cp - 1));
      add_comm(it.comm, CollectiveKind::kSendRecv, GroupKind::kCp, p.cp,
               nl_mb * (fwd_mult * static_cast<double>(L.cp_send_bytes_forward) + static_cast<double>(L.cp_send_bytes_backward)),
               count, b.cp_comm);
    }
    if (pp > 1) {
      const int64_t count = static_cast<int64_t>(2.0 * v * mb);
      add_comm(it.comm, CollectiveKind::kSendRecv, GroupKind::kPp, pp, static_cast<double>(count) * static_cast<double>(L.pp_message_bytes), count, b.pp_comm);
    }
  }
  return it;
}

}  // namespace

QuickEstimate quick_estimate(const Scenario& sc, const Plan& p, MisfitTime misfits, double time_bound_s) {
  QuickEstimate q;
  const ModelShape m = model_shape(sc.model);
  q.reject_reason = plan_problem(sc, p, m);
  if (!q.reject_reason.empty()) return q;
  const std::vector<int64_t> layers = stage_layers(m, p);

  // Peak memory: the first stage (most activations in flight, embedding), the last (output
  // and logits) and the stage with the most layers.
  int64_t most = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] > layers[static_cast<size_t>(most)]) most = static_cast<int64_t>(i);
  double peak = 0;
  for (int64_t st : {int64_t{0}, p.pp - 1, most}) {
    const MemoryBreakdown mem = stage_memory(m, sc, p, st, layers[static_cast<size_t>(st)]);
    peak = std::max(peak, bytes_to_gib(mem.total_bytes()));
  }
  q.peak_memory_gib = peak;
  const double usable = usable_memory_gib(sc.cluster.gpu);
  q.fits = peak <= usable;
  if (!q.fits) {
    q.reject_reason = "needs " + gib_text(peak) + " GiB per GPU, " + sc.cluster.gpu.name + " has " +
                      gib_text(usable) + " GiB usable (" + gib_text(sc.cluster.gpu.memory_gib) +
                      " minus the framework reserve)";
    if (misfits == MisfitTime::kSkip) return q;
  }
  const Ctx c = make_ctx(sc);
  const LayerCompute lc = layer_compute(c, m, p);
  const double bound_s = q.fits ? time_bound_s : kNoTimeBound;
  // The stage with the most layers computes them for every micro-batch, one after another: a
  // lower bound that needs neither the layer's collectives nor the pipeline.
  const double compute_floor_s = static_cast<double>(std::max<int64_t>(num_micro_batches(sc, p), 1)) *
                                 static_cast<double>(layers[static_cast<size_t>(most)]) * (lc.fwd.s + lc.bwd.s + lc.recompute.s);
  if (compute_floor_s > bound_s) {
    q.iteration_time_s = compute_floor_s;
    q.time_is_lower_bound = true;
    return q;
  }
  const LayerCosts L = layer_costs_impl(sc, p, m, c, lc);
  const IterationModel it = iteration(sc, p, m, c, lc, L, layers, false, bound_s);
  q.iteration_time_s = it.iteration_s;
  q.time_is_lower_bound = it.lower_bound;
  return q;
}

int64_t fewest_offload_layers_to_fit(const Scenario& sc, const Plan& plan) {
  Plan p = plan;
  p.activation_offload_layers = 1;
  if (!activation_offload_problem(sc, p).empty()) return -1;
  p.activation_offload_layers = 0;
  const ModelShape m = model_shape(sc.model);
  const double usable_bytes = usable_memory_gib(sc.cluster.gpu) * kGiB;
  const double over = stage_memory(m, sc, p, 0, m.layers).total_bytes() - usable_bytes;
  if (over <= 0) return 0;
  const double per_layer = plan_layer_activation_bytes(m, sc, p);
  if (per_layer <= 0) return -1;
  // The smallest n with n x per_layer >= over; one more where rounding left it a byte short.
  auto n = static_cast<int64_t>(std::ceil(over / per_layer));
  for (int tries = 0; tries < 2 && n < m.layers; ++tries, ++n) {
    p.activation_offload_layers = n;
    if (stage_memory(m, sc, p, 0, m.layers).total_bytes() <= usable_bytes) return n;
  }
  return -1;
}

BackendResult estimate_plan(const Scenario& sc, const Plan& p) {
  BackendResult r;
  r.backend = "analytical";
  r.plan = p;
  r.warnings = plan_warnings(sc, p);
  const ModelShape m = model_shape(sc.model);
  const std::string problem = plan_problem(sc, p, m);
  const double usable = usable_memory_gib(sc.cluster.gpu);
  r.memory.capacity_gib = usable;
  if (!problem.empty()) {
    r.memory.fits = false;
    return r;
  }
  const std::vector<int64_t> layers = stage_layers(m, p);
  const Ctx c = make_ctx(sc);
  const LayerCompute lc = layer_compute(c, m, p);
  const LayerCosts L = layer_costs_impl(sc, p, m, c, lc);
  const IterationModel it = iteration(sc, p, m, c, lc, L, layers, true);

  r.iteration_time_s = it.iteration_s;
  r.time_breakdown_s = it.breakdown;
  r.communication = it.comm;
  const double tokens = static_cast<double>(sc.training.global_batch_size) * static_cast<double>(m.seq);
  r.tokens_per_s = tokens / it.iteration_s;
  const FlopsPerIteration f = flops_per_iteration(m, sc.training, p.recompute);
  r.model_flops_per_iteration = f.model;
  r.hardware_flops_per_iteration = f.hardware;
  const double gpus = static_cast<double>(p.world_size());
  r.model_tflops_per_gpu = f.model / it.iteration_s / gpus / kTera;
  r.hardware_tflops_per_gpu = f.hardware / it.iteration_s / gpus / kTera;
  const double peak = peak_tflops(sc.cluster.gpu, sc.training.precision);
  r.mfu = peak > 0 ? r.model_tflops_per_gpu / peak : 0;
  r.hfu = peak > 0 ? r.hardware_tflops_per_gpu / peak : 0;

  double peak_gib = 0;
  for (int64_t st = 0; st < p.pp; ++st) {
    const MemoryBreakdown mem = stage_memory(m, sc, p, st, layers[static_cast<size_t>(st)]);
    StageMemory sm;
    sm.stage = st;
    sm.layers = layers[static_cast<size_t>(st)];
    sm.weights_gib = bytes_to_gib(mem.weights_bytes);
    sm.gradients_gib = bytes_to_gib(mem.gradients_bytes);
    sm.optimizer_gib = bytes_to_gib(mem.optimizer_bytes);
    sm.activations_gib = bytes_to_gib(mem.activations_bytes);
    sm.buffers_gib = bytes_to_gib(mem.buffers_bytes);
    sm.total_gib = bytes_to_gib(mem.total_bytes());
    peak_gib = std::max(peak_gib, sm.total_gib);
    r.memory.stages.push_back(sm);
  }
  r.memory.peak_gib = peak_gib;
  r.memory.fits = peak_gib <= usable;
  return r;
}

}  // namespace monarch
