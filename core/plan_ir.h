// The plan IR: a per-rank task graph that both the simulators and the real runtime execute.
//
// Each rank has an ordered list of tasks. Tasks on one stream run in list order; a task may
// also wait on earlier tasks of the same rank on other streams (`deps`). Collectives name a
// process group; every member rank has a matching collective task (same group, same
// `seq` within that group). Point-to-point sends and receives pair by (src, dst, tag).
// Memory events allocate and free named buffers so a backend can track memory over time.
//
// The JSON form ("monarch-plan/2"; "monarch-plan/1" without the scenario is still read) is documented in docs/plan_format.md and read/written by
// plan_io. The strategy engine (strategies/) lowers a Plan to this graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/scenario.h"

namespace monarch {

enum class TaskKind : uint8_t { kCompute, kCollective, kSend, kRecv, kAlloc, kFree };
enum class Stream : uint8_t { kCompute, kTpComm, kCpComm, kEpComm, kDpComm, kPpSend, kPpRecv };
enum class Phase : uint8_t { kForward, kBackward, kRecompute, kOptimizer, kOther };
// kSendRecv: point-to-point sends and receives (pipeline and context-parallel ring messages) as a
// result's communication entry names them; the plan IR carries them as kSend / kRecv tasks, never
// as a CommOp (nccl-tests measures them as sendrecv_perf, busbw = algbw).
enum class CollectiveKind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };
// kDpCp: data x context parallel ranks, the group over which gradients are reduced when cp > 1.
// kEmbedding: the first and the last pipeline stage's ranks of one (tp, cp, dp) position, which
// all-reduce the tied word-embedding gradient (Megatron's embedding group).
// kExpertTp: expert tensor parallel ranks (Plan::expert_tp() of them, consecutive), which split
// each expert's FFN; with etp == tp it holds the same ranks as kTp (docs/analytical_model.md, MoE).
enum class GroupKind : uint8_t { kTp, kCp, kEp, kDp, kPp, kExpertDp, kWorld, kDpCp, kEmbedding, kExpertTp };
enum class DType : uint8_t { kFp32, kBf16, kFp16, kFp8 };
enum class MemCategory : uint8_t { kWeights, kGradients, kOptimizer, kActivations, kBuffers };

// What a compute task computes (for the runtime to execute and for naming).
enum class OpKind : uint8_t {
  kEmbedding,      // token (+ position) embedding
  kLayer,          // a whole transformer layer (attention + MLP)
  kAttention,      // attention block of a layer
  kMlp,            // MLP (or MoE expert) block of a layer
  kOutputLoss,     // final norm, output projection and cross-entropy
  kOptimizerStep,  // optimizer update of this rank's shard
  kOther
};

struct ProcessGroup {
  GroupKind kind = GroupKind::kTp;
  std::vector<int32_t> ranks;  // global ranks, in ring order
};

struct Task {
  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kOther;
  OpKind op = OpKind::kOther;
  int32_t layer = -1;        // first layer covered, -1 when none
  int32_t num_layers = 0;    // layers covered by a compute task
  int32_t chunk = 0;         // virtual pipeline chunk (model chunk) on this rank
  int32_t micro_batch = -1;  // -1 when not per micro-batch
  // kCompute
  double flops = 0;          // floating-point operations
  double mem_bytes = 0;      // bytes moved to/from HBM (for the roofline)
  double duration_s = 0;     // predicted duration, filled by the cost model at lowering;
                             // collective / send: all `count` calls, uncontended
  // kCollective
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int32_t group = -1;        // index into PlanGraph::groups
  int32_t seq = 0;           // n-th collective of this group; matches across members
  DType dtype = DType::kBf16;
  int64_t bytes = 0;         // collective: buffer size per rank (NCCL "size"); p2p: message size;
                             // alloc/free: buffer size
  int32_t count = 1;         // collective: back-to-back calls of `bytes` each this task stands for
  // kAllToAll only, optional: bytes this rank sends to each member of the group, in group
  // order (its own entry stays local), when the exchange is uneven (DLRM table-wise sharding).
  // Empty: bytes / group size to every member (NCCL all-to-all; MoE pads to the capacity).
  // `bytes` is then the size every member's call uses (the busiest port's: the largest send
  // or receive total, the padded size a real runtime exchanges).
  std::vector<int64_t> send_bytes;
  // kSend / kRecv
  int32_t peer = -1;         // global rank of the other side
  int32_t tag = 0;
  // kAlloc / kFree
  MemCategory category = MemCategory::kActivations;
  int32_t buffer = -1;       // buffer id, unique on this rank
  // Same-rank tasks (indices into RankProgram::tasks, all smaller than this task's index)
  // that must finish before this one starts.
  std::vector<int32_t> deps;
};

struct RankProgram {
  int32_t rank = 0;
  int32_t stage = 0;  // pipeline stage
  std::vector<Task> tasks;
};

struct PlanGraph {
  // Written with the scenario the plan was made for (self-contained; core/plan_io.h).
  static constexpr const char* kFormat = "monarch-plan/2";
  // Version 1: the same graph without the scenario. Still read; written when no scenario is given.
  static constexpr const char* kFormatV1 = "monarch-plan/1";
  // Version 3: version 2 plus the optional per-peer `send_bytes` of uneven all-to-alls; written
  // (with the scenario) only when some task carries them, so other plans stay version 2.
  static constexpr const char* kFormatV3 = "monarch-plan/3";
  Plan plan;
  int32_t world_size = 0;
  int64_t num_micro_batches = 0;
  std::vector<ProcessGroup> groups;
  std::vector<RankProgram> ranks;
};

const char* to_string(TaskKind);
const char* to_string(Stream);
const char* to_string(Phase);
const char* to_string(CollectiveKind);
const char* to_string(GroupKind);
// "tp" -> kTp, ... (the names of to_string(GroupKind)); nullopt otherwise.
std::optional<GroupKind> group_kind_from_string(std::string_view name);
const char* to_string(DType);
const char* to_string(MemCategory);
const char* to_string(OpKind);

// NCCL-style name of a collective, e.g. "ncclAllReduce".
const char* nccl_name(CollectiveKind);

}  // namespace monarch
