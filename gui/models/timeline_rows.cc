#include "gui/models/timeline_rows.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace monarch::gui {

TimelineRows::TimelineRows(std::vector<TimelineSpan> spans) : spans_(std::move(spans)) {
  // Compute first, then the other streams by name.
  using Key = std::tuple<int32_t, bool, std::string>;
  std::map<Key, std::vector<int32_t>> by_row;
  for (size_t i = 0; i < spans_.size(); ++i) {
    const TimelineSpan& s = spans_[i];
    by_row[Key{s.rank, s.stream != "compute", s.stream}].push_back(static_cast<int32_t>(i));
    end_s_ = std::max(end_s_, s.end_s);
  }
  rows_.reserve(by_row.size());
  for (auto& [key, idx] : by_row) {
    Row row;
    row.rank = std::get<0>(key);
    row.stream = std::get<2>(key);
    std::stable_sort(idx.begin(), idx.end(),
                     [this](int32_t a, int32_t b) { return spans_[a].start_s < spans_[b].start_s; });
    row.spans = std::move(idx);
    row.max_end.resize(row.spans.size());
    double m = -1e300;
    for (size_t i = 0; i < row.spans.size(); ++i) {
      m = std::max(m, spans_[row.spans[i]].end_s);
      row.max_end[i] = m;
    }
    rows_.push_back(std::move(row));
  }
}

std::pair<int, int> TimelineRows::visible(int row, double t0_s, double t1_s) const {
  if (row < 0 || row >= row_count()) return {0, 0};
  const Row& r = rows_[static_cast<size_t>(row)];
  // First span whose running max end reaches t0: spans before it all end before t0.
  const auto first = std::lower_bound(r.max_end.begin(), r.max_end.end(), t0_s);
  const int f = static_cast<int>(first - r.max_end.begin());
  // First span starting after t1.
  const auto last = std::upper_bound(r.spans.begin() + f, r.spans.end(), t1_s,
                                     [this](double t, int32_t i) { return t < spans_[i].start_s; });
  return {f, static_cast<int>(last - r.spans.begin())};
}

int32_t TimelineRows::span_at(int row, double t_s) const {
  if (row < 0 || row >= row_count()) return -1;
  const auto [f, l] = visible(row, t_s, t_s);
  const Row& r = rows_[static_cast<size_t>(row)];
  for (int i = l - 1; i >= f; --i) {
    const TimelineSpan& s = spans_[r.spans[i]];
    if (s.start_s <= t_s && t_s <= s.end_s) return r.spans[i];
  }
  return -1;
}

}  // namespace monarch::gui
