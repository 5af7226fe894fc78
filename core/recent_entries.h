// The last few entries of a per-thread memo: a search asks the same question of many plans in a
// row (one layout, one pipeline shape), and the answers are kept in a small ring, the oldest
// replaced first. Entries are found by a predicate, so a key is whatever the caller compares.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace monarch {

template <typename Entry, size_t kSize>
class RecentEntries {
 public:
  // The kept entry for which `matches` holds, or null.
  template <typename Pred>
  const Entry* find(Pred&& matches) const {
    for (const Entry& e : entries_)
      if (matches(e)) return &e;
    return nullptr;
  }
  void add(Entry e) {
    if (entries_.size() < kSize) {
      entries_.push_back(std::move(e));
      return;
    }
    entries_[next_] = std::move(e);
    next_ = (next_ + 1) % kSize;
  }

 private:
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

}  // namespace monarch
