#include "core/plan_ir.h"
#include "core/scenario.h"

namespace monarch {

const char* to_string(Architecture a) {
  switch (a) {
    case Architecture::kGpt: return "gpt";
    case Architecture::kLlama: return "llama";
    case Architecture::kDlrm: return "dlrm";
  }
  return "?";
}
const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp8: return "fp8";
  }
  return "?";
}
const char* to_string(Optimizer o) { return o == Optimizer::kAdam ? "adam" : "sgd"; }
const char* to_string(Topology t) {
  switch (t) {
    case Topology::kFatTree: return "fat-tree";
    case Topology::kRailOptimized: return "rail-optimized";
    case Topology::kStar: return "star";
  }
  return "?";
}
const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "interleaved-1f1b";
  }
  return "?";
}
const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}
const char* to_string(Objective o) {
  switch (o) {
    case Objective::kIterationTime: return "iteration_time";
    case Objective::kMemory: return "memory";
    case Objective::kTimeToTrain: return "time_to_train";
  }
  return "iteration_time";
}
const char* to_string(Backend b) {
  switch (b) {
    case Backend::kAnalytical: return "analytical";
    case Backend::kSimgrid: return "simgrid";
    case Backend::kRealCpu: return "real-cpu";
    case Backend::kRealGpu: return "real-gpu";
  }
  return "?";
}

const char* to_string(Activation a) {
  switch (a) {
    case Activation::kGelu: return "gelu";
    case Activation::kSwiglu: return "swiglu";
    case Activation::kSquaredRelu: return "squared-relu";
  }
  return "?";
}
const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kFlash: return "flash";
    case AttentionKernel::kFlash1: return "flash1";
    case AttentionKernel::kFlash1Triton: return "flash1-triton";
    case AttentionKernel::kFlash2: return "flash2";
    case AttentionKernel::kMaterialized: return "materialized";
  }
  return "?";
}
const char* to_string(Framework f) {
  switch (f) {
    case Framework::kMegatron: return "megatron";
    case Framework::kDeepspeed: return "deepspeed";
    case Framework::kTorchtitan: return "torchtitan";
  }
  return "?";
}

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed: return "delayed";
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kMxfp8: return "mxfp8";
    case Fp8Recipe::kBlockwise: return "blockwise";
  }
  return "?";
}

double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kFp32: return 4;
    case Precision::kBf16:
    case Precision::kFp16:
    case Precision::kFp8: return 2;
  }
  return 2;
}

double peak_tflops(const GpuSpec& g, Precision p) {
  switch (p) {
    case Precision::kFp32: return g.peak_tflops.tf32 > 0 ? g.peak_tflops.tf32 : g.peak_tflops.fp32;
    case Precision::kBf16: return g.peak_tflops.bf16;
    case Precision::kFp16: return g.peak_tflops.fp16;
    case Precision::kFp8: return g.peak_tflops.fp8 > 0 ? g.peak_tflops.fp8 : g.peak_tflops.bf16;
  }
  return 0;
}

const char* to_string(TaskKind k) {
  static const char* n[] = {"compute", "collective", "send", "recv", "alloc", "free"};
  return n[static_cast<int>(k)];
}
const char* to_string(Stream s) {
  static const char* n[] = {"compute", "tp", "cp", "ep", "dp", "pp-send", "pp-recv"};
  return n[static_cast<int>(s)];
}
const char* to_string(Phase p) {
  static const char* n[] = {"forward", "backward", "recompute", "optimizer", "other"};
  return n[static_cast<int>(p)];
}
const char* to_string(CollectiveKind k) {
  static const char* n[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send-recv"};
  return n[static_cast<int>(k)];
}
const char* nccl_name(CollectiveKind k) {
  static const char* n[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclAllToAll",
                            "ncclBroadcast", "ncclSendRecv"};
  return n[static_cast<int>(k)];
}
const char* to_string(GroupKind k) {
  static const char* n[] = {"tp", "cp", "ep", "dp", "pp", "edp", "world", "dp-cp", "embedding", "etp"};
  return n[static_cast<int>(k)];
}
std::optional<GroupKind> group_kind_from_string(std::string_view name) {
  for (GroupKind k : {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp, GroupKind::kDp, GroupKind::kPp, GroupKind::kExpertDp,
                      GroupKind::kWorld, GroupKind::kDpCp, GroupKind::kEmbedding, GroupKind::kExpertTp})
    if (name == to_string(k)) return k;
  return std::nullopt;
}
const char* to_string(DType d) {
  static const char* n[] = {"fp32", "bf16", "fp16", "fp8"};
  return n[static_cast<int>(d)];
}
const char* to_string(MemCategory c) {
  static const char* n[] = {"weights", "gradients", "optimizer", "activations", "buffers"};
  return n[static_cast<int>(c)];
}
const char* to_string(OpKind o) {
  static const char* n[] = {"embedding", "layer", "attention", "mlp", "output_loss", "optimizer_step", "other"};
  return n[static_cast<int>(o)];
}

std::string describe(const Plan& p, PlanDetail detail) {
  std::string s = "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp) + " cp" +
                  std::to_string(p.cp) + " ep" + std::to_string(p.ep) +
                  (p.expert_tp() != p.tp ? " etp" + std::to_string(p.expert_tp()) : "") + " vpp" + std::to_string(p.vpp) +
                  " mbs" + std::to_string(p.micro_batch_size);
  const std::string tables = p.embedding_sharding.empty() ? "" : " tables=[" + p.embedding_sharding + "]";
  if (detail == PlanDetail::kDegrees) return s + tables;
  s += std::string(" ") + to_string(p.schedule) + (p.sequence_parallel ? " sp" : "") +
       (p.tp_comm_overlap && p.tp > 1 ? " tp-overlap" : "") + (p.ep_comm_overlap && p.ep > 1 ? " ep-overlap" : "") +
       " recompute=" + to_string(p.recompute) +
       (p.activation_offload_layers > 0 ? " offload=" + std::to_string(p.activation_offload_layers) : "") +
       " zero" + std::to_string(p.zero_stage);
  if (detail == PlanDetail::kWithLayers && !p.layers_per_stage.empty()) {
    s += " layers=[";
    for (size_t i = 0; i < p.layers_per_stage.size(); ++i) s += (i ? " " : "") + std::to_string(p.layers_per_stage[i]);
    s += "]";
  }
  return s + tables;
}

}  // namespace monarch
