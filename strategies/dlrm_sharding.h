// Embedding-table sharding search for recommendation models (architecture "dlrm").
//
// As TorchRec's planner (torchrec/distributed/planner: enumerators, greedy proposer, greedy
// partitioner with storage constraints): every table gets one of data-parallel, table-wise
// (on one GPU), column-wise (dim split over k GPUs) or row-wise (rows split over all GPUs).
// Tables are placed largest first; each takes the option and GPUs that keep the slowest GPU's
// embedding time (HBM-bound lookups + its share of the pooled all-to-all) and the global
// collectives (row-wise reduce-scatter/all-gather, data-parallel all-reduce) lowest, among
// the options whose memory still fits on every GPU; ties go to the lower peak memory. A table
// that fits nowhere in HBM is placed the same way in host memory with an HBM cache (UVM
// caching, TablePlacement::uvm_caching), paying the host link for the cache misses.
// Besides that mixed greedy plan the search evaluates the uniform plans a user would try
// first (all data-parallel, all table-wise, all column-wise, all row-wise) and ranks every
// plan that fits with core/dlrm_model's estimate; the others are rejected with a reason.
// A scenario that gives its sharding (parallelism.embedding_sharding) is not searched: that
// plan is the one result, or, when it does not fit, the reason why.
#pragma once

#include <string>
#include <vector>

#include "core/dlrm_model.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

struct DlrmRankedPlan {
  DlrmShardingPlan sharding;
  BackendResult result;
};

struct DlrmSearchResult {
  std::vector<DlrmRankedPlan> ranked;  // fitting plans, fastest first (duplicates removed)
  std::vector<RejectedPlan> rejected;  // reason starts with the plan's name
  std::string no_fit_message;          // when nothing fits: why, naming the table at fault

  std::vector<BackendResult> results() const;
  bool any_fits() const { return !ranked.empty(); }
};

DlrmSearchResult search_dlrm_sharding(const Scenario& scenario);

// Column shards narrower than this are not proposed: 32 fp32 elements = 128 bytes, the HBM
// access granularity of one warp's coalesced load (CUDA C++ Programming Guide, "Device Memory
// Accesses"); narrower rows waste bandwidth in every gather.
inline constexpr int64_t kMinColumnShardDim = 32;

}  // namespace monarch
