#include "core/result.h"

#include "core/placement.h"

namespace monarch {

std::string group_name(const CommEntry& e) { return e.group ? to_string(*e.group) : e.group_label; }

int64_t comm_group_size(const CommEntry& e, const Plan& plan) {
  if (e.group_size > 0) return e.group_size;
  return e.group ? group_size(*e.group, plan) : 0;
}

const CommEntry* find_comm(const std::vector<CommEntry>& entries, CollectiveKind kind, GroupKind group) {
  for (const CommEntry& e : entries)
    if (e.kind == kind && e.group == group) return &e;
  return nullptr;
}

bool same_key(const CommEntry& a, const CommEntry& b) {
  return a.kind == b.kind && a.group == b.group && (a.group || a.group_label == b.group_label);
}

double TimeBreakdown::*comm_time_term(GroupKind group) {
  switch (group) {
    case GroupKind::kTp: return &TimeBreakdown::tp_comm;
    case GroupKind::kCp: return &TimeBreakdown::cp_comm;
    case GroupKind::kPp: return &TimeBreakdown::pp_comm;
    case GroupKind::kEp:
    case GroupKind::kExpertTp:
    case GroupKind::kWorld: return &TimeBreakdown::ep_comm;
    case GroupKind::kDp:
    case GroupKind::kDpCp:
    case GroupKind::kExpertDp:
    case GroupKind::kEmbedding: return &TimeBreakdown::dp_comm;
  }
  return &TimeBreakdown::dp_comm;
}

}  // namespace monarch
