#include "realrt/cpu_runtime.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <thread>

#include "core/cost_model.h"
#include "core/placement.h"
#include "core/units.h"
#include "realrt/run_io.h"
#include "realrt/span_recorder.h"
#include "strategies/lowering.h"
#include "core/pipeline_schedule.h"

namespace monarch::realrt {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int64_t kMaxTag = 32767;  // smallest MPI_TAG_UB the MPI standard allows

using StatMap = std::map<std::pair<std::string, std::string>, CommStat>;

// A process group with timed, counted collectives (fp32).
class Group final : public TpCollectives<float>, public EpCollectives<float>, public EtpCollectives<float> {
 public:
  Group(MPI_Comm comm, const char* name, StatMap* stats, Watchdog* wd, SpanRecorder* spans = nullptr)
      : comm_(comm), name_(name), stats_(stats), wd_(wd), spans_(spans) {
    if (comm_ != MPI_COMM_NULL) {
      MPI_Comm_size(comm_, &size_);
      MPI_Comm_rank(comm_, &rank_);
    }
  }
  ~Group() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  bool valid() const { return comm_ != MPI_COMM_NULL; }
  int size() const { return size_; }
  int rank() const { return rank_; }
  double time_s() const { return time_s_; }

  void all_reduce_sum(float* buf, int64_t n) override {
    timed(CollectiveKind::kAllReduce, n,
          [&](MPI_Request* r) { MPI_Iallreduce(MPI_IN_PLACE, buf, count(n), MPI_FLOAT, MPI_SUM, comm_, r); });
  }
  void all_reduce_max(float* buf, int64_t n) override {
    timed(CollectiveKind::kAllReduce, n,
          [&](MPI_Request* r) { MPI_Iallreduce(MPI_IN_PLACE, buf, count(n), MPI_FLOAT, MPI_MAX, comm_, r); });
  }
  void all_gather(const float* in, float* out, int64_t n) override {
    timed(CollectiveKind::kAllGather, n * size_,
          [&](MPI_Request* r) { MPI_Iallgather(in, count(n), MPI_FLOAT, out, count(n), MPI_FLOAT, comm_, r); });
  }
  // In place: out holds this rank's piece at rank * n.
  void all_gather_in_place(float* out, int64_t n) {
    timed(CollectiveKind::kAllGather, n * size_,
          [&](MPI_Request* r) { MPI_Iallgather(MPI_IN_PLACE, 0, MPI_FLOAT, out, count(n), MPI_FLOAT, comm_, r); });
  }
  // In place: buf[size * n] in, this rank's reduced piece out at buf[0 .. n).
  void reduce_scatter_in_place(float* buf, int64_t n) {
    timed(CollectiveKind::kReduceScatter, n * size_, [&](MPI_Request* r) {
      MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, count(n), MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }
  void reduce_scatter(const float* in, float* out, int64_t n) override {
    timed(CollectiveKind::kReduceScatter, n * size_,
          [&](MPI_Request* r) { MPI_Ireduce_scatter_block(in, out, count(n), MPI_FLOAT, MPI_SUM, comm_, r); });
  }
  // MoE token dispatch / combine: n elements to every member (size: the whole send buffer).
  void all_to_all(const float* in, float* out, int64_t n) override {
    timed(CollectiveKind::kAllToAll, n * size_,
          [&](MPI_Request* r) { MPI_Ialltoall(in, count(n), MPI_FLOAT, out, count(n), MPI_FLOAT, comm_, r); });
  }

 private:
  static int count(int64_t n) {
    assert(n <= INT32_MAX);
    return static_cast<int>(n);
  }
  // Starts the non-blocking collective `start` and waits for it (polling, see wait_request).
  template <typename F>
  void timed(CollectiveKind kind, int64_t elems, F&& start) {
    const auto t0 = Clock::now();
    if (wd_) {
      const std::string label = std::string(to_string(kind)) + " " + name_;
      wd_->enter(label.c_str(), true);
    }
    MPI_Request request = MPI_REQUEST_NULL;
    start(&request);
    wait_request(&request, wd_);
    if (wd_) wd_->leave_wait();
    const auto t1 = Clock::now();
    if (spans_) spans_->collective(kind, name_, t0, t1);
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    time_s_ += dt;
    CommStat& s = (*stats_)[{to_string(kind), name_}];
    s.bytes += elems * static_cast<int64_t>(sizeof(float));
    s.wire_bytes += collective_wire_bytes(kind, elems * static_cast<int64_t>(sizeof(float)), size_);
    s.count += 1;
    s.time_s += dt;
  }

  MPI_Comm comm_;
  const char* name_;
  StatMap* stats_;
  Watchdog* wd_;
  SpanRecorder* spans_;  // the timeline of the recorded step (may be null)
  int size_ = 1, rank_ = 0;
  double time_s_ = 0;
};

// A parameter segment of a chunk's flat buffer, split evenly over the data-parallel group (the
// expert segment of an MoE chunk over the expert-data-parallel group).
struct Segment {
  int64_t offset = 0;        // in the chunk's flat layout
  int64_t size = 0;
  int64_t shard = 0;         // size / dp (size / expert-dp)
  int64_t shard_offset = 0;  // in the chunk's shard buffers
  bool expert = false;       // the rank's experts: sharded over the expert-DP group
};


struct PendingSend {
  Buf<float> data;
  MPI_Request request = MPI_REQUEST_NULL;
};

}  // namespace

struct CpuRuntime::Impl {
  RuntimeConfig cfg;
  MPI_Comm world = MPI_COMM_NULL;  // duplicate for bookkeeping (losses, checkpoints); not measured
  MPI_Comm p2p = MPI_COMM_NULL;    // duplicate for the pipeline's point-to-point messages
  int64_t rank = 0;
  RankCoords me;
  int64_t num_mb = 0;
  int64_t num_vstages = 0;
  StatMap stats;
  SpanRecorder spans;  // timeline of the recorded step (realrt/span_recorder.h)
  Watchdog* wd = nullptr;
  std::unique_ptr<Group> tp, dp, pp_embed;
  std::unique_ptr<Group> ep, etp;  // MoE: expert-parallel and expert-tensor-parallel groups (when > 1 rank)
  std::unique_ptr<Group> edp;      // MoE: expert-data-parallel group (may be 1 rank)

  struct Chunk {
    ChunkSpec spec;
    int64_t vstage = 0;
    std::unique_ptr<GptChunk<float>> model;
    std::vector<Segment> segs;
    int64_t shard_total = 0;
    Buf<float> params;  // [total] full parameters (ZeRO 0-2)
    Buf<float> grads;   // [total] full gradients (ZeRO 0-1)
    Buf<float> pshard;  // [shard_total] parameter shard (ZeRO 3)
    Buf<float> gshard;  // [shard_total] gradient shard (ZeRO 2-3; ZeRO 1 uses its slice of grads)
    Buf<float> m, v;    // Adam moments: [total] (ZeRO 0) or [shard_total]
  };
  std::vector<Chunk> chunks;
  std::vector<PipeOp> schedule;
  std::vector<PendingSend> sends;
  double compute_time_s = 0;
  std::vector<double> losses, step_times_s;
  double step_aux_loss = 0;  // MoE: weighted aux losses of this rank's forward passes in the step

  ~Impl() {
    if (world != MPI_COMM_NULL) MPI_Comm_free(&world);
    if (p2p != MPI_COMM_NULL) MPI_Comm_free(&p2p);
  }

  int64_t zero() const { return cfg.plan.zero_stage; }
  // The group a ZeRO segment is sharded over, this rank's index in it, and whether the group has
  // more than one rank (a 1-rank expert-DP group needs no collective).
  Group& seg_group(const Segment& s) const { return s.expert ? *edp : *dp; }
  int64_t seg_index(const Segment& s) const { return s.expert ? me.edp : me.dp; }
  bool seg_comm(const Segment& s) const { return !s.expert || edp->size() > 1; }
  int64_t peer_rank(int64_t stage) const { return rank_of(cfg.plan, {me.tp, me.dp, stage}); }
  // Same numbering as the plan graph (strategies/lowering.cc): (mb * vstages + receiver) * 2 + dir.
  int tag(int dir, int64_t vstage, int64_t mb) const {
    return static_cast<int>((mb * num_vstages + vstage) * 2 + dir);
  }

  void reap_sends(bool wait_all) {
    for (auto& s : sends) {
      if (s.request == MPI_REQUEST_NULL) continue;
      if (wait_all) {
        if (wd) wd->enter("waiting for pipeline sends to complete", true);
        wait_request(&s.request, wd);
        if (wd) wd->leave_wait();
      } else {
        int done = 0;
        MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
      }
    }
    std::erase_if(sends, [](const PendingSend& s) { return s.request == MPI_REQUEST_NULL; });
  }

  // Sends a copy of data[n] (an activation gradient: compute workspace until the send completes).
  void send(const float* data, int64_t n, int64_t dst, int tag_value) {
    Buf<float> copy(n, kWorkspace);
    std::memcpy(copy.data(), data, sizeof(float) * n);
    send(std::move(copy), dst, tag_value);
  }
  // Sends `data`, which is kept until the send completes and then freed.
  void send(Buf<float> data, int64_t dst, int tag_value) {
    const auto t0 = Clock::now();
    const int64_t n = data.size();
    PendingSend s{std::move(data), MPI_REQUEST_NULL};
    MPI_Isend(s.data.data(), static_cast<int>(n), MPI_FLOAT, static_cast<int>(dst), tag_value, p2p,
              &s.request);
    sends.push_back(std::move(s));
    spans.p2p(true, dst, tag_value, t0, Clock::now());
    CommStat& st = stats[{to_string(CollectiveKind::kSendRecv), "pp"}];
    st.bytes += n * static_cast<int64_t>(sizeof(float));
    st.wire_bytes += static_cast<double>(n * static_cast<int64_t>(sizeof(float)));
    st.count += 1;
    st.time_s += seconds_since(t0);
  }

  void recv(float* data, int64_t n, int64_t src, int tag_value) {
    const auto t0 = Clock::now();
    if (wd) {
      const std::string label = "receive from rank " + std::to_string(src);
      wd->enter(label.c_str(), true);
    }
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, static_cast<int>(src), tag_value, p2p, &request);
    wait_request(&request, wd);
    if (wd) wd->leave_wait();
    spans.p2p(false, src, tag_value, t0, Clock::now());
    CommStat& st = stats[{to_string(CollectiveKind::kSendRecv), "pp"}];  // "send-recv" counts messages sent and received
    st.bytes += n * static_cast<int64_t>(sizeof(float));
    st.wire_bytes += static_cast<double>(n * static_cast<int64_t>(sizeof(float)));
    st.count += 1;
    st.time_s += seconds_since(t0);
  }

  // This rank's reduced gradients of segment s: ZeRO 1 keeps them in its slice of the full
  // gradient buffer (as Megatron's distributed optimizer), ZeRO 2/3 in the shard buffer.
  float* grad_shard(Chunk& c, const Segment& s) {
    return zero() == 1 ? c.grads.data() + s.offset + seg_index(s) * s.shard : c.gshard.data() + s.shard_offset;
  }

  // ZeRO 3: the chunk's full parameters gathered from the shards, [total] (communication buffer).
  Buf<float> gather_params(Chunk& c) {
    Buf<float> full(c.model->layout().total, MemCategory::kBuffers);
    for (const Segment& s : c.segs) {
      if (seg_comm(s))
        seg_group(s).all_gather(c.pshard.data() + s.shard_offset, full.data() + s.offset, s.shard);
      else
        std::memcpy(full.data() + s.offset, c.pshard.data() + s.shard_offset, sizeof(float) * s.shard);
    }
    return full;
  }

  // ZeRO 2/3: reduce-scatter one micro-batch's gradients (in place in its buffer) and add this
  // rank's part to the shard.
  void reduce_scatter_into_shard(Chunk& c, float* grads) {
    for (const Segment& s : c.segs) {
      if (seg_comm(s)) seg_group(s).reduce_scatter_in_place(grads + s.offset, s.shard);
      float* g = c.gshard.data() + s.shard_offset;
      for (int64_t i = 0; i < s.shard; ++i) g[i] += grads[s.offset + i];
    }
  }

  // Seconds spent so far in the collectives the model calls itself (TP, EP all-to-all).
  double model_comm_s() const {
    return (tp ? tp->time_s() : 0) + (ep ? ep->time_s() : 0) + (etp ? etp->time_s() : 0);
  }

  double run_op(const PipeOp& op, int64_t step) {
    Chunk& c = chunks[static_cast<size_t>(op.chunk)];
    if (wd) {
      const std::string label = "step " + std::to_string(step) + " " + to_string(op);
      wd->enter(label.c_str(), false);
    }
    const int64_t n_act = c.model->activation_elems();
    const int64_t vs = c.vstage;
    const int64_t nt = cfg.model.seq * cfg.train.micro_batch_size;
    double loss = 0;
    Buf<float> full_params;
    if (zero() == 3) full_params = gather_params(c);
    if (op.forward) {
      // The pipeline's input is received straight into the chunk's input activation.
      if (vs > 0) recv(c.model->prepare_input(op.mb), n_act, peer_rank((vs - 1) % cfg.plan.pp), tag(0, vs, op.mb));
      std::vector<int32_t> tokens(static_cast<size_t>(nt)), targets(tokens.size());
      const int64_t sample0 = first_sample(cfg.train, cfg.plan.dp, step, me.dp, op.mb);
      synthetic_batch(tokens.data(), targets.data(), cfg.train.seed, sample0, cfg.train.micro_batch_size,
                      cfg.model.seq, cfg.model.vocab);
      // The forward pass writes no gradient: under ZeRO 2/3 the gradient pointer is a placeholder.
      if (zero() == 3) c.model->bind(full_params.data(), full_params.data());
      if (zero() == 2) c.model->bind(c.params.data(), c.params.data());
      const float scale = 1.0f / static_cast<float>(cfg.model.seq * cfg.train.global_batch_size);
      const double tp_before = model_comm_s();
      const auto t0 = Clock::now();
      loss = c.model->forward(op.mb, tokens.data(), targets.data(), nullptr, scale, {cfg.train.seed, sample0});
      step_aux_loss += c.model->aux_loss();
      spans.compute(SpanWhat::kForward, op.chunk, op.mb, t0, Clock::now());
      compute_time_s += seconds_since(t0) - (model_comm_s() - tp_before);
      if (vs + 1 < num_vstages) {  // the output itself is sent, then freed (Megatron's deallocate_output_tensor)
        Buf<float> out = c.model->take_output(op.mb);
        if (out.empty())
          send(c.model->output(op.mb), n_act, peer_rank((vs + 1) % cfg.plan.pp), tag(0, vs + 1, op.mb));
        else
          send(std::move(out), peer_rank((vs + 1) % cfg.plan.pp), tag(0, vs + 1, op.mb));
      }
    } else {
      Buf<float> dout;
      if (vs + 1 < num_vstages) {
        dout = Buf<float>(n_act, kWorkspace);  // the output's gradient
        recv(dout.data(), n_act, peer_rank((vs + 1) % cfg.plan.pp), tag(1, vs, op.mb));
      }
      Buf<float> mb_grads;
      if (zero() >= 2) {
        mb_grads = Buf<float>(c.model->layout().total, MemCategory::kBuffers);
        c.model->bind(zero() == 3 ? full_params.data() : c.params.data(), mb_grads.data());
      }
      const double tp_before = model_comm_s();
      const auto t0 = Clock::now();
      const float* din = c.model->backward(op.mb, dout.data());
      spans.compute(SpanWhat::kBackward, op.chunk, op.mb, t0, Clock::now());
      compute_time_s += seconds_since(t0) - (model_comm_s() - tp_before);
      dout.release();
      if (vs > 0) send(din, n_act, peer_rank((vs - 1) % cfg.plan.pp), tag(1, vs - 1, op.mb));
      if (zero() >= 2) reduce_scatter_into_shard(c, mb_grads.data());
    }
    reap_sends(false);
    return loss;
  }

  // Gradient reductions after the last micro-batch, then Adam and the parameter all-gather.
  void finish_step(int64_t step) {
    const bool sp = cfg.plan.sequence_parallel && cfg.plan.tp > 1;
    for (Chunk& c : chunks) {
      const ParamLayout& lay = c.model->layout();
      // Dense gradients over DP, the rank's experts (MoE, from expert_offset on) over expert-DP;
      // with SP the TP-replicated dense parameters (norms, row-parallel biases, positions, the
      // MoE router) over TP. Experts are never reduced over TP: expert-TP ranks hold different
      // shards, and each computes its replicated proj bias's whole gradient (realrt/moe.h).
      const int64_t dense = lay.expert_offset;
      if (zero() == 0) {
        if (cfg.plan.dp > 1) dp->all_reduce_sum(c.grads.data(), dense);
        if (edp && edp->size() > 1 && lay.total > dense) edp->all_reduce_sum(c.grads.data() + dense, lay.total - dense);
        if (sp) tp->all_reduce_sum(c.grads.data() + lay.replicated_offset, dense - lay.replicated_offset);
        continue;
      }
      if (zero() == 1)
        for (const Segment& s : c.segs) {  // in place in the gradient buffer, as Megatron's distributed optimizer
          if (!seg_comm(s)) continue;
          seg_group(s).reduce_scatter_in_place(c.grads.data() + s.offset, s.shard);
          if (seg_index(s) > 0) std::memcpy(grad_shard(c, s), c.grads.data() + s.offset, sizeof(float) * s.shard);
        }
      if (sp) {  // the replicated parameters this rank owns, segment by segment
        for (const Segment& s : c.segs) {
          if (s.expert) continue;
          const int64_t lo = std::max(s.offset + me.dp * s.shard, lay.replicated_offset);
          const int64_t hi = std::min(s.offset + (me.dp + 1) * s.shard, dense);
          if (hi > lo) tp->all_reduce_sum(grad_shard(c, s) + (lo - s.offset - me.dp * s.shard), hi - lo);
        }
      }
    }
    if (pp_embed) {  // tied embedding: first chunk's and last chunk's wte gradients summed
      for (Chunk& c : chunks) {
        if (!(c.spec.has_embedding || c.spec.has_head)) continue;
        const ParamInfo* w = c.model->layout().find("wte");
        if (zero() == 0)
          pp_embed->all_reduce_sum(c.grads.data() + w->offset, w->size);
        else
          pp_embed->all_reduce_sum(grad_shard(c, c.segs[0]), c.segs[0].shard);
      }
    }
    const auto t0 = Clock::now();
    for (Chunk& c : chunks) {
      if (zero() == 0) {
        adam_update(c.params.data(), c.grads.data(), c.m.data(), c.v.data(), c.model->layout().total, step + 1);
        continue;
      }
      for (const Segment& s : c.segs) {
        float* p = zero() == 3 ? c.pshard.data() + s.shard_offset : c.params.data() + s.offset + seg_index(s) * s.shard;
        adam_update(p, grad_shard(c, s), c.m.data() + s.shard_offset, c.v.data() + s.shard_offset, s.shard, step + 1);
      }
    }
    spans.compute(SpanWhat::kOptimizer, 0, -1, t0, Clock::now());
    compute_time_s += seconds_since(t0);
    if (zero() == 1 || zero() == 2)
      for (Chunk& c : chunks)
        for (const Segment& s : c.segs)
          if (seg_comm(s)) seg_group(s).all_gather_in_place(c.params.data() + s.offset, s.shard);
  }

  double run_step(int64_t step) {
    for (Chunk& c : chunks) {
      if (zero() <= 1) {
        c.grads.zero();
        c.model->bind(c.params.data(), c.grads.data());
      }
      if (zero() >= 2) c.gshard.zero();
    }
    double loss = 0;
    step_aux_loss = 0;
    for (const PipeOp& op : schedule) loss += run_op(op, step);
    reap_sends(true);
    finish_step(step);
    // Mean loss of the step over the whole batch: the last virtual stage's TP rank 0 of every
    // data-parallel replica holds its share, and with MoE every stage's TP rank 0 the aux losses
    // of its layers; under TP (sequence parallel) every TP rank routes its own sequence shard, so
    // every TP rank adds its shard's aux losses (bookkeeping communicator, not measured).
    const bool holder = me.tp == 0;
    double contribution = holder ? loss : (cfg.model.moe() ? step_aux_loss : 0.0), total = 0;
    MPI_Allreduce(&contribution, &total, 1, MPI_DOUBLE, MPI_SUM, world);
    return total;
  }
};

Problems check_runtime_config(const RuntimeConfig& cfg) {
  Problems pr;
  const Plan& p = cfg.plan;
  const GptConfig& m = cfg.model;
  auto bad = [&](const char* where, const std::string& what) { pr.push_back({where, what}); };
  if (p.cp != 1) bad("/plan/cp", "the CPU runtime has no context parallelism; cp must be 1");
  if (p.ep_comm_overlap)
    bad("/plan/ep_comm_overlap", "the CPU runtime runs each micro-batch's passes in turn, not Megatron-Core's combined 1F1B; "
                                 "ep_comm_overlap must be false");
  if (p.activation_offload_layers > 0)
    bad("/plan/activation_offload_layers",
        "the CPU runtime keeps every activation in memory (it has no host copies to offload to); "
        "activation_offload_layers must be 0");
  if (m.moe()) {
    // Expert layout (core/placement.h): etp x ep must divide the tp x cp x dp ranks of a stage.
    const int64_t etp = p.expert_tp(), stage = p.tp * p.cp * p.dp;
    if (p.ep < 1 || etp < 1) {
      bad("/plan/ep", "ep and etp must be positive");
    } else if (stage % (etp * p.ep) != 0) {
      bad("/plan/ep", "etp x ep (" + std::to_string(etp) + " x " + std::to_string(p.ep) +
                          ") must divide the ranks of a pipeline stage, tp x cp x dp (" + std::to_string(stage) + ")");
    } else if (m.experts % p.ep != 0) {
      bad("/plan/ep", "must divide num_experts (" + std::to_string(m.experts) + ")");
    }
    if (etp >= 1 && m.moe_ffn % etp != 0)
      bad("/plan/etp", "must divide moe_ffn_hidden_size (" + std::to_string(m.moe_ffn) + ")");
    // Megatron-Core's MoE layer with tensor parallelism takes the sequence-parallel hidden states.
    if (p.tp > 1 && !p.sequence_parallel)
      bad("/plan/sequence_parallel", "mixture of experts with tp > 1 needs sequence parallelism (Megatron-Core)");
  } else {
    if (p.ep != 1) bad("/plan/ep", "expert parallelism needs a mixture-of-experts model (num_experts > 1); ep must be 1");
    if (p.etp > 0 && p.etp != p.tp)
      bad("/plan/etp", "expert tensor parallelism needs a mixture-of-experts model (num_experts > 1)");
  }
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.vpp < 1 || p.micro_batch_size < 1) {
    bad("/plan", "tp, pp, dp, vpp and micro_batch_size must be positive");
    return pr;
  }
  if (m.heads % p.tp != 0) bad("/plan/tp", "must divide num_attention_heads (" + std::to_string(m.heads) + ")");
  if (m.ffn % p.tp != 0) bad("/plan/tp", "must divide ffn_hidden_size (" + std::to_string(m.ffn) + ")");
  if (m.vocab % p.tp != 0) bad("/plan/tp", "must divide vocab_size (" + std::to_string(m.vocab) + ")");
  if (p.sequence_parallel && m.seq % p.tp != 0) bad("/plan/tp", "must divide seq_length with sequence parallelism");
  if (p.zero_stage < 0 || p.zero_stage > 3) bad("/plan/zero_stage", "must be 0, 1, 2 or 3");
  const int64_t per_replica = cfg.train.global_batch_size / p.dp;
  if (cfg.train.global_batch_size % (p.dp * p.micro_batch_size) != 0)
    bad("/training/global_batch_size", "must be a multiple of dp x micro_batch_size");
  const int64_t num_mb = per_replica / p.micro_batch_size;
  if (p.vpp > 1) {
    if (p.pp < 2) bad("/plan/vpp", "interleaving needs pp >= 2");
    if (p.schedule != Schedule::kInterleaved) bad("/plan/schedule", "vpp > 1 needs the interleaved-1f1b schedule");
    if (num_mb % p.pp != 0) bad("/plan/vpp", "interleaved 1F1B needs micro-batches per step divisible by pp");
  } else if (p.schedule == Schedule::kInterleaved && p.pp > 1) {
    bad("/plan/schedule", "interleaved-1f1b needs vpp > 1");
  }
  const int64_t nv = p.pp * p.vpp;
  if (auto layers = chunk_layers(p, m.num_layers); !layers)
    for (const auto& q : layers.problems()) pr.push_back({"/plan/" + q.where, q.message});
  if (2 * nv * std::max<int64_t>(num_mb, 1) > kMaxTag) bad("/plan", "too many micro-batches x stages for MPI tags");
  return pr;
}

RankCoords rank_coords(const Plan& plan, int64_t rank) {
  // core/placement: dense tp-cp-dp-pp, expert layout etp-ep-edp inside each stage.
  const monarch::RankCoords c = rank_to_coords(rank, plan);
  return {c.tp, c.dp, c.pp, c.ep, c.edp, c.etp};
}

int64_t rank_of(const Plan& plan, const RankCoords& c) {
  monarch::RankCoords full;
  full.tp = c.tp;
  full.dp = c.dp;
  full.pp = c.pp;
  return coords_to_rank(full, plan);
}

CpuRuntime::CpuRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuRuntime::~CpuRuntime() = default;

std::string to_string(const PipeOp& op) {
  return std::string(op.forward ? "F" : "B") + "(c" + std::to_string(op.chunk) + ",mb" + std::to_string(op.mb) + ")";
}

std::vector<PipeOp> schedule_from_program(const RankProgram& program) {
  std::vector<PipeOp> ops;
  std::set<std::tuple<bool, int64_t, int64_t>> seen;
  for (const Task& t : program.tasks) {
    if (t.kind != TaskKind::kCompute || t.micro_batch < 0) continue;
    if (t.phase != Phase::kForward && t.phase != Phase::kBackward && t.phase != Phase::kRecompute) continue;
    const bool fwd = t.phase == Phase::kForward;
    if (seen.insert({fwd, t.chunk, t.micro_batch}).second) ops.push_back({fwd, t.chunk, t.micro_batch});
  }
  return ops;
}

namespace {
// Checks a rank program against what the runtime will do: the same passes, and sends and
// receives with the peers and tags the runtime uses.
Problems check_program(const RankProgram& prog, const std::vector<PipeOp>& ops, const RuntimeConfig& cfg,
                       int64_t rank, int64_t num_mb) {
  Problems pr;
  const std::string where = "/ranks/" + std::to_string(rank);
  const Plan& p = cfg.plan;
  const int64_t nv = p.pp * p.vpp;
  std::set<std::tuple<bool, int64_t, int64_t>> all;
  for (const PipeOp& op : ops) all.insert({op.forward, op.chunk, op.mb});
  if (static_cast<int64_t>(all.size()) != 2 * p.vpp * num_mb || static_cast<int64_t>(ops.size()) != 2 * p.vpp * num_mb)
    pr.push_back({where, "has " + std::to_string(ops.size()) + " forward/backward passes, expected 2 x " +
                             std::to_string(p.vpp) + " chunks x " + std::to_string(num_mb) + " micro-batches"});
  const RankCoords me = rank_coords(p, rank);
  for (const Task& t : prog.tasks) {
    if (t.kind != TaskKind::kSend && t.kind != TaskKind::kRecv) continue;
    const bool fwd = t.phase == Phase::kForward;
    const int64_t vs = t.chunk * p.pp + me.pp;
    const bool send = t.kind == TaskKind::kSend;
    // forward: receive from vs-1, send to vs+1; backward: receive from vs+1, send to vs-1.
    const int64_t other = (fwd == send) ? vs + 1 : vs - 1;
    const int64_t receiver = send ? other : vs;
    const int64_t want_peer = rank_of(p, {me.tp, me.dp, ((other % p.pp) + p.pp) % p.pp});
    const int64_t want_tag = (t.micro_batch * nv + receiver) * 2 + (fwd ? 0 : 1);
    if (other < 0 || other >= nv || t.peer != want_peer || t.tag != want_tag)
      pr.push_back({where, std::string(send ? "send" : "receive") + " of " + (fwd ? "forward" : "backward") +
                               " chunk " + std::to_string(t.chunk) + " micro-batch " + std::to_string(t.micro_batch) +
                               " names peer " + std::to_string(t.peer) + " tag " + std::to_string(t.tag) +
                               ", the runtime exchanges it with rank " + std::to_string(want_peer) + " tag " +
                               std::to_string(want_tag)});
    if (pr.size() > 5) break;
  }
  return pr;
}
}  // namespace

Expected<std::unique_ptr<CpuRuntime>> CpuRuntime::create(MPI_Comm world, const RuntimeConfig& cfg, Watchdog* wd,
                                                         const RankProgram* program) {
  Problems pr = check_runtime_config(cfg);
  int size = 0, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  if (size != cfg.plan.world_size())
    pr.push_back({"/plan", "needs " + std::to_string(cfg.plan.world_size()) + " ranks (tp x pp x dp), launched with " +
                               std::to_string(size)});
  if (!pr.empty()) return pr;
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->wd = wd;
  const Plan& p = cfg.plan;
  MPI_Comm_dup(world, &impl->world);
  MPI_Comm_dup(world, &impl->p2p);
  impl->rank = rank;
  impl->me = rank_coords(p, rank);
  impl->num_mb = cfg.train.global_batch_size / (p.dp * p.micro_batch_size);
  impl->num_vstages = p.pp * p.vpp;
  const RankCoords& me = impl->me;
  auto split = [&](int color, int key, const char* name) {
    MPI_Comm c;
    MPI_Comm_split(world, color, key, &c);
    return std::make_unique<Group>(c, name, &impl->stats, impl->wd, &impl->spans);
  };
  // Groups: TP (same dp, pp), DP (same tp, pp), embedding (first and last stage, same tp, dp).
  impl->tp = split(static_cast<int>(me.dp + p.dp * me.pp), static_cast<int>(me.tp), "tp");
  impl->dp = split(static_cast<int>(me.tp + p.tp * me.pp), static_cast<int>(me.dp), "dp");
  const bool end_stage = me.pp == 0 || me.pp == p.pp - 1;
  auto embed = split(p.pp > 1 && end_stage ? static_cast<int>(me.tp + p.tp * me.dp) : MPI_UNDEFINED,
                     static_cast<int>(me.pp), "embedding");
  if (embed->valid()) impl->pp_embed = std::move(embed);
  if (cfg.model.moe()) {
    // EP, expert-TP and expert-DP groups of core/placement's expert layout: colour = the group's
    // first rank.
    const int64_t etp = p.expert_tp();
    auto split_group = [&](GroupKind kind, bool needed, const char* name) {
      const std::vector<int32_t> ranks = group_ranks(kind, rank, p);
      const int key = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
      return split(needed ? ranks.front() : MPI_UNDEFINED, key, name);
    };
    auto ep = split_group(GroupKind::kEp, p.ep > 1, "ep");
    if (ep->valid()) impl->ep = std::move(ep);
    auto etpg = split_group(GroupKind::kExpertTp, etp > 1, "etp");
    if (etpg->valid()) impl->etp = std::move(etpg);
    impl->edp = split_group(GroupKind::kExpertDp, true, "edp");
  }
  Problems late;  // found after the groups exist: every rank must agree before returning
  // Model chunks of this stage.
  auto layers = chunk_layers(p, cfg.model.num_layers);  // the strategy engine's split
  if (!layers) return layers.problems();
  for (int64_t v = 0; v < p.vpp; ++v) {
    Impl::Chunk c;
    c.vstage = v * p.pp + me.pp;
    c.spec.first_layer = (*layers)[static_cast<size_t>(me.pp)][static_cast<size_t>(v)].first_layer;
    c.spec.num_layers = (*layers)[static_cast<size_t>(me.pp)][static_cast<size_t>(v)].num_layers;
    c.spec.has_embedding = c.vstage == 0;
    c.spec.has_head = c.vstage == impl->num_vstages - 1;
    c.spec.tp_rank = me.tp;
    c.spec.tp_size = p.tp;
    c.spec.sequence_parallel = p.sequence_parallel && p.tp > 1;
    c.spec.recompute = p.recompute;
    c.spec.micro_batch_size = p.micro_batch_size;
    if (cfg.model.moe()) {
      c.spec.ep_rank = me.ep;
      c.spec.ep_size = p.ep;
      c.spec.etp_rank = me.etp;
      c.spec.etp_size = p.expert_tp();
    }
    c.model = std::make_unique<GptChunk<float>>(cfg.model, c.spec, p.tp > 1 ? impl->tp.get() : nullptr, impl->ep.get(),
                                                impl->etp.get());
    const ParamLayout& lay = c.model->layout();
    const ParamInfo* wte = lay.find("wte");
    const int64_t w = wte ? wte->size : 0, eo = lay.expert_offset;
    // ZeRO segments: the tied embedding and the other dense parameters over DP, the rank's
    // experts over expert-DP.
    const int64_t edp_n = impl->edp ? impl->edp->size() : 1;
    for (auto [off, n, expert] : {std::tuple<int64_t, int64_t, bool>{0, w, false}, {w, eo - w, false},
                                  {eo, lay.total - eo, true}}) {
      if (n == 0) continue;
      const int64_t parts = expert ? edp_n : p.dp;
      if (p.zero_stage >= 1 && n % parts != 0 && late.empty())
        late.push_back({"/plan/zero_stage", std::string("ZeRO needs every parameter segment divisible by ") +
                                                (expert ? "the expert-data-parallel size" : "dp") + "; rank " +
                                                std::to_string(rank) + " chunk " + std::to_string(v) +
                                                " has a segment of " + std::to_string(n) + " elements"});
      c.segs.push_back({off, n, n / parts, c.shard_total, expert});
      c.shard_total += n / parts;
    }
    // Buffers by ZeRO stage (see the header).
    Buf<float> init(lay.total, MemCategory::kBuffers);
    init_params(init.data(), lay, cfg.model, c.spec, cfg.train.seed);
    if (p.zero_stage <= 2) {
      c.params = Buf<float>(lay.total, MemCategory::kWeights);
      std::memcpy(c.params.data(), init.data(), sizeof(float) * lay.total);
    } else {
      c.pshard = Buf<float>(c.shard_total, MemCategory::kWeights);
      for (const Segment& s : c.segs)
        std::memcpy(c.pshard.data() + s.shard_offset, init.data() + s.offset + impl->seg_index(s) * s.shard,
                    sizeof(float) * s.shard);
    }
    init.release();
    if (p.zero_stage <= 1) c.grads = Buf<float>(lay.total, MemCategory::kGradients);
    if (p.zero_stage >= 2) c.gshard = Buf<float>(c.shard_total, MemCategory::kGradients);
    const int64_t opt = p.zero_stage == 0 ? lay.total : c.shard_total;
    c.m = Buf<float>(opt, MemCategory::kOptimizer);
    c.v = Buf<float>(opt, MemCategory::kOptimizer);
    impl->chunks.push_back(std::move(c));
  }
  if (program) {
    impl->schedule = schedule_from_program(*program);
    if (Problems bad = check_program(*program, impl->schedule, cfg, rank, impl->num_mb); !bad.empty())
      late.insert(late.end(), bad.begin(), bad.end());
  } else {
    // Without a plan file: the schedule the lowering uses (core/pipeline_schedule.h).
    const Schedule schedule = p.pp > 1 ? p.schedule : Schedule::kOneFOneB;
    for (const PipelineStep& st : pipeline_order(schedule, p.pp, me.pp, impl->num_mb, p.vpp))
      impl->schedule.push_back({st.forward, st.chunk, st.micro_batch});
  }
  int ok = late.empty() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world);
  if (!ok) {
    if (late.empty()) late.push_back({"/plan", "another rank cannot run its part of the plan (see its message)"});
    return late;
  }
  reset_memory_peaks();
  return std::unique_ptr<CpuRuntime>(new CpuRuntime(std::move(impl)));
}

std::vector<double> CpuRuntime::train(int64_t last_step) {
  std::vector<double> out;
  for (; step_ < last_step; ++step_) {
    if (impl_->wd) {
      const std::string label = "start of step " + std::to_string(step_);
      impl_->wd->enter(label.c_str(), false);
    }
    if (step_ == fault_step_) {
      std::fprintf(stderr, "monarch-run: rank %lld: injected fault '%s' at step %lld\n",
                   static_cast<long long>(impl_->rank), fault_kind_.c_str(), static_cast<long long>(step_));
      if (fault_kind_ == "crash") std::abort();
      if (fault_kind_ == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const bool record = step_ == record_step_;
    if (record) {  // a common origin for every rank's spans (outside the measured step time)
      if (impl_->wd) impl_->wd->enter("barrier before the recorded step", true);
      MPI_Request barrier = MPI_REQUEST_NULL;
      MPI_Ibarrier(impl_->world, &barrier);
      wait_request(&barrier, impl_->wd);  // a waiting rank, for the watchdog: it blames the late one
      if (impl_->wd) impl_->wd->leave_wait();
      impl_->spans.start();
    }
    const auto t0 = Clock::now();
    const double loss = impl_->run_step(step_);
    impl_->step_times_s.push_back(seconds_since(t0));
    if (record) impl_->spans.stop();
    impl_->losses.push_back(loss);
    out.push_back(loss);
  }
  return out;
}

const SpanRecorder& CpuRuntime::spans() const { return impl_->spans; }

RankReport CpuRuntime::report() const {
  RankReport r;
  r.rank = impl_->rank;
  r.stage = impl_->me.pp;
  r.losses = impl_->losses;
  r.step_times_s = impl_->step_times_s;
  r.compute_time_s = impl_->compute_time_s;
  r.comm = impl_->stats;
  r.memory = memory_counters();
  r.steps = static_cast<int64_t>(impl_->losses.size());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints: dir/rank-R.bin = magic, format version, world size, rank, step, then per chunk the
// element counts and data of parameters (full or shard), Adam m and v. Written to a temporary
// file and renamed, so a crash never leaves a half-written checkpoint under the final name.

namespace {
constexpr char kCkptMagic[8] = {'M', 'N', 'R', 'C', 'K', 'P', 'T', '1'};

bool all_ok(MPI_Comm world, bool mine) {
  int ok = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
  return all == 1;
}
}  // namespace

Problems CpuRuntime::save_checkpoint(const std::string& dir) const {
  Problems pr;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/rank-" + std::to_string(impl_->rank) + ".bin";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    auto put = [&](const void* p, size_t n) { f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); };
    auto put64 = [&](int64_t v) { put(&v, sizeof v); };
    put(kCkptMagic, sizeof kCkptMagic);
    put64(impl_->cfg.plan.world_size());
    put64(impl_->rank);
    put64(step_);
    for (const auto& c : impl_->chunks) {
      const Buf<float>& p = impl_->zero() == 3 ? c.pshard : c.params;
      for (const Buf<float>* b : {&p, &c.m, &c.v}) {
        put64(b->size());
        put(b->data(), static_cast<size_t>(b->bytes()));
      }
    }
    if (!f) pr.push_back({"--checkpoint-dir", "cannot write " + tmp});
  }
  if (pr.empty()) {
    std::filesystem::rename(tmp, path, ec);
    if (ec) pr.push_back({"--checkpoint-dir", "cannot rename " + tmp + ": " + ec.message()});
  }
  if (!all_ok(impl_->world, pr.empty()) && pr.empty())
    pr.push_back({"--checkpoint-dir", "another rank failed to write its checkpoint"});
  return pr;
}

Problems CpuRuntime::load_checkpoint(const std::string& dir) {
  Problems pr;
  const std::string path = dir + "/rank-" + std::to_string(impl_->rank) + ".bin";
  std::ifstream f(path, std::ios::binary);
  int64_t step = 0;
  if (!f) {
    pr.push_back({"--resume", "no checkpoint " + path});
  } else {
    auto get = [&](void* p, size_t n) { f.read(static_cast<char*>(p), static_cast<std::streamsize>(n)); return bool(f); };
    auto get64 = [&]() { int64_t v = -1; get(&v, sizeof v); return v; };
    char magic[8] = {};
    get(magic, sizeof magic);
    const int64_t world = get64(), rank = get64();
    step = get64();
    if (std::memcmp(magic, kCkptMagic, sizeof magic) != 0 || world != impl_->cfg.plan.world_size() ||
        rank != impl_->rank || step < 0) {
      pr.push_back({"--resume", path + " is not a checkpoint of this plan and rank"});
    } else {
      for (auto& c : impl_->chunks) {
        Buf<float>& p = impl_->zero() == 3 ? c.pshard : c.params;
        for (Buf<float>* b : {&p, &c.m, &c.v}) {
          if (get64() != b->size() || !get(b->data(), static_cast<size_t>(b->bytes()))) {
            pr.push_back({"--resume", path + " does not match this plan's model (sizes differ or file truncated)"});
            break;
          }
        }
        if (!pr.empty()) break;
      }
    }
  }
  if (!all_ok(impl_->world, pr.empty()) && pr.empty())
    pr.push_back({"--resume", "another rank could not read its checkpoint"});
  int64_t min_step = step, max_step = step;
  MPI_Allreduce(MPI_IN_PLACE, &min_step, 1, MPI_INT64_T, MPI_MIN, impl_->world);
  MPI_Allreduce(MPI_IN_PLACE, &max_step, 1, MPI_INT64_T, MPI_MAX, impl_->world);
  if (pr.empty() && min_step != max_step) pr.push_back({"--resume", "ranks' checkpoints are from different steps"});
  if (pr.empty()) step_ = step;
  return pr;
}

// ---------------------------------------------------------------------------------------------
// Result: every rank's report packed into a fixed vector of doubles and gathered on rank 0.

namespace {
constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                                     CollectiveKind::kSendRecv, CollectiveKind::kAllToAll};
constexpr GroupKind kGroups[] = {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp, GroupKind::kEmbedding,
                                 GroupKind::kEp, GroupKind::kExpertDp, GroupKind::kExpertTp};
constexpr int kNumKinds = 5, kNumGroups = 7, kPerEntry = 4;  // size bytes, wire bytes, count, time
constexpr int kPackSize = 4 + kNumKinds * kNumGroups * kPerEntry + 3 * kNumMemCategories + 1;

std::vector<double> pack(const RankReport& r) {
  std::vector<double> v;
  const int64_t measured = static_cast<int64_t>(r.step_times_s.size());
  // Step time: mean over the steps after the first (warm-up) when there are several.
  double st = 0;
  int64_t ns = 0;
  for (int64_t i = measured > 1 ? 1 : 0; i < measured; ++i, ++ns) st += r.step_times_s[static_cast<size_t>(i)];
  v.push_back(static_cast<double>(r.rank));
  v.push_back(static_cast<double>(r.stage));
  v.push_back(ns ? st / static_cast<double>(ns) : 0);
  v.push_back(measured ? r.compute_time_s / static_cast<double>(measured) : 0);
  for (CollectiveKind k : kKinds)
    for (GroupKind g : kGroups) {
      auto it = r.comm.find({to_string(k), to_string(g)});
      const CommStat s = it == r.comm.end() ? CommStat{} : it->second;
      const double d = measured ? static_cast<double>(measured) : 1;
      v.push_back(static_cast<double>(s.bytes) / d);
      v.push_back(s.wire_bytes / d);
      v.push_back(static_cast<double>(s.count) / d);
      v.push_back(s.time_s / d);
    }
  for (int i = 0; i < kNumMemCategories; ++i) v.push_back(static_cast<double>(r.memory.peak_bytes[i]));
  for (int i = 0; i < kNumMemCategories; ++i) v.push_back(static_cast<double>(r.memory.at_peak_bytes[i]));
  v.push_back(static_cast<double>(r.memory.peak_bytes[kWorkspaceSlot]));
  for (int i = 1; i < kNumMemCategories; ++i) v.push_back(0);
  v.push_back(static_cast<double>(r.memory.peak_total_bytes));
  assert(static_cast<int>(v.size()) == kPackSize);
  return v;
}

// Floating-point operations of one training step (forward + backward = 3 x forward), Megatron's
// accounting with the MLP width F: per layer forward 2 B s h (3h + h + 2F) + 4 B s^2 h, plus the
// output layer 2 B s h V; B here is the global batch.
double step_flops(const GptConfig& m, int64_t batch, Recompute r, bool hardware) {
  const double b = static_cast<double>(batch), s = static_cast<double>(m.seq), h = static_cast<double>(m.hidden);
  const double f = static_cast<double>(m.ffn), v = static_cast<double>(m.vocab), l = static_cast<double>(m.num_layers);
  const double layer_fwd = 2 * b * s * h * (4 * h + 2 * f) + 4 * b * s * s * h;
  double flops = 3 * (l * layer_fwd + 2 * b * s * h * v);
  if (hardware && r == Recompute::kFull) flops += l * layer_fwd;
  if (hardware && r == Recompute::kSelective) flops += l * 2 * b * s * s * h;  // Q K^T again
  return flops;
}
}  // namespace

BackendResult gather_result(MPI_Comm world, const RuntimeConfig& cfg, const RankReport& mine,
                            std::vector<RankSummary>* per_rank) {
  int size = 0, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  const std::vector<double> packed = pack(mine);
  std::vector<double> all(rank == 0 ? static_cast<size_t>(kPackSize) * size : 0);
  MPI_Gather(packed.data(), kPackSize, MPI_DOUBLE, all.data(), kPackSize, MPI_DOUBLE, 0, world);
  BackendResult res;
  res.backend = "real-cpu";
  res.plan = cfg.plan;
  res.measured = true;
  res.losses = mine.losses;
  if (rank != 0) return res;
  double iter = 0, compute = 0;
  std::array<double, kNumKinds * kNumGroups> bytes{}, counts{}, times{};  // bytes: on the wire
  std::map<int64_t, StageMemory> stages;
  for (int r = 0; r < size; ++r) {
    const double* v = all.data() + static_cast<size_t>(r) * kPackSize;
    iter = std::max(iter, v[2]);
    compute = std::max(compute, v[3]);
    for (int i = 0; i < kNumKinds * kNumGroups; ++i) {
      bytes[i] = std::max(bytes[i], v[4 + kPerEntry * i + 1]);
      counts[i] = std::max(counts[i], v[4 + kPerEntry * i + 2]);
      times[i] = std::max(times[i], v[4 + kPerEntry * i + 3]);
    }
    const double* mem = v + 4 + kNumKinds * kNumGroups * kPerEntry;
    if (per_rank) {
      RankSummary rs;
      rs.rank = static_cast<int64_t>(v[0]);
      rs.stage = static_cast<int64_t>(v[1]);
      rs.step_time_s = v[2];
      rs.compute_time_s = v[3];
      for (int k = 0; k < kNumKinds; ++k)
        for (int g = 0; g < kNumGroups; ++g) {
          const double* e = v + 4 + kPerEntry * (k * kNumGroups + g);
          if (e[2] > 0) {
            rs.communication.push_back({kKinds[k], kGroups[g], std::llround(e[1]), std::llround(e[2]), e[3],
                                        group_size(kGroups[g], cfg.plan)});
            rs.size_bytes.push_back(std::llround(e[0]));
          }
        }
      rs.peak_bytes.assign(mem, mem + kNumMemCategories);
      rs.peak_total_bytes = mem[3 * kNumMemCategories];
      rs.peak_workspace_bytes = mem[2 * kNumMemCategories];
      per_rank->push_back(std::move(rs));
    }
    StageMemory sm;
    sm.stage = static_cast<int64_t>(v[1]);
    sm.weights_gib = bytes_to_gib(mem[0]);
    sm.gradients_gib = bytes_to_gib(mem[1]);
    sm.optimizer_gib = bytes_to_gib(mem[2]);
    sm.activations_gib = bytes_to_gib(mem[3]);
    sm.buffers_gib = bytes_to_gib(mem[4]);
    sm.total_gib = bytes_to_gib(mem[3 * kNumMemCategories]);
    auto it = stages.find(sm.stage);
    if (it == stages.end() || sm.total_gib > it->second.total_gib) stages[sm.stage] = sm;
  }
  res.iteration_time_s = iter;
  const double tokens = static_cast<double>(cfg.train.global_batch_size * cfg.model.seq);
  res.tokens_per_s = iter > 0 ? tokens / iter : 0;
  res.model_flops_per_iteration = step_flops(cfg.model, cfg.train.global_batch_size, cfg.plan.recompute, false);
  res.hardware_flops_per_iteration = step_flops(cfg.model, cfg.train.global_batch_size, cfg.plan.recompute, true);
  if (iter > 0) {
    res.model_tflops_per_gpu = res.model_flops_per_iteration / iter / size / kTera;
    res.hardware_tflops_per_gpu = res.hardware_flops_per_iteration / iter / size / kTera;
  }
  // mfu / hfu stay 0: a CPU core has no GPU peak to divide by.
  for (auto& [s, sm] : stages) {
    res.memory.stages.push_back(sm);
    res.memory.peak_gib = std::max(res.memory.peak_gib, sm.total_gib);
  }
  res.time_breakdown_s.compute = compute;
  for (int k = 0; k < kNumKinds; ++k)
    for (int g = 0; g < kNumGroups; ++g) {
      const int i = k * kNumGroups + g;
      if (counts[i] == 0) continue;
      CommEntry e;
      e.kind = kKinds[k];
      e.group = kGroups[g];
      e.group_size = group_size(kGroups[g], cfg.plan);
      e.bytes = std::llround(bytes[i]);
      e.count = std::llround(counts[i]);
      e.time_s = times[i];
      res.communication.push_back(e);
      res.time_breakdown_s.*comm_time_term(kGroups[g]) += times[i];
    }
  return res;
}

}  // namespace monarch::realrt
