#include "core/collectives.h"

namespace monarch {

double collective_bus_factor(CollectiveKind kind, double n) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2.0 * (n - 1.0) / n;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return (n - 1.0) / n;
    case CollectiveKind::kBroadcast: return 1.0;
  }
  return 1.0;
}

std::optional<CollectiveKind> collective_kind_from_string(std::string_view name) {
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllToAll, CollectiveKind::kBroadcast})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

double collective_bus_factor(std::string_view kind, int64_t ranks) {
  if (ranks < 1) return 0;
  if (const auto k = collective_kind_from_string(kind)) return collective_bus_factor(*k, static_cast<double>(ranks));
  if (kind == "reduce" || kind == "send-recv" || kind == "p2p") return 1.0;  // one copy of the buffer moves
  return 0;
}

}  // namespace monarch
