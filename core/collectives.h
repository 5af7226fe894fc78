// The bus-bandwidth factor of each collective, the one statement of the rule that the cost
// model (bytes on the wire), the calibration profile (busbw of a measured collective) and the
// GUI's communication view (busbw of a result's entries) use.
//
// nccl-tests (doc/PERFORMANCE.md): busbw = algbw x factor, with factor 2(n-1)/n for all-reduce,
// (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and
// point-to-point (send-recv). For a ring this is also the fraction of the buffer each rank sends.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/plan_ir.h"

namespace monarch {

// `ranks` >= 1 (one rank gives 0 for all but broadcast and send-recv).
double collective_bus_factor(CollectiveKind kind, double ranks);

// NCCL's fixed cost of one ring or tree collective call, beside its hop latencies: the base
// latency of NCCL's tuning model with the LL protocol, the lowest of its protocols (NVIDIA/nccl
// src/graph/tuning.cc baseLat: Ring LL 6.6 us, LL128 14.0, Simple 8.4; Tree LL 6.8). The
// analytical model and SimGrid both add it; a profile's measured collectives include it.
inline constexpr double kNcclCollectiveBaseLatency_s = 6.6e-6;

// "all-reduce" -> kAllReduce, ..., "send-recv" (the names of to_string(CollectiveKind)); nullopt otherwise.
std::optional<CollectiveKind> collective_kind_from_string(std::string_view name);

}  // namespace monarch
