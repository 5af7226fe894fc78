#include "core/collectives.h"

namespace monarch {

double collective_bus_factor(CollectiveKind kind, double n) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2.0 * (n - 1.0) / n;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return (n - 1.0) / n;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kSendRecv: return 1.0;
  }
  return 1.0;
}

std::optional<CollectiveKind> collective_kind_from_string(std::string_view name) {
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kSendRecv})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

}  // namespace monarch
