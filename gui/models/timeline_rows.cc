#include "gui/models/timeline_rows.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/placement.h"

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

TimelineRows::TimelineRows(std::vector<TimelineSpan> spans, const Plan& plan) : TimelineRows(std::move(spans)) {
  const int64_t world = plan.world_size();
  if (rows_.empty() || world <= 0) return;
  for (const Row& r : rows_)
    if (r.rank < 0 || r.rank >= world) return;  // not this plan's ranks: leave ungrouped
  const double tolerance_s = std::max(1e-12, kAlikeShareOfIteration * end_s_);
  std::map<std::pair<int32_t, std::string>, size_t> row_of;  // (rank, stream) -> row
  std::map<int32_t, std::vector<size_t>> rows_of_rank;
  for (size_t i = 0; i < rows_.size(); ++i) {
    row_of[{rows_[i].rank, rows_[i].stream}] = i;
    rows_of_rank[rows_[i].rank].push_back(i);
  }
  std::vector<bool> dropped(rows_.size(), false);
  for (const auto& [rank, own] : rows_of_rank) {
    const RankCoords c = rank_to_coords(rank, plan);
    for (size_t i : own) rows_[i].stage = static_cast<int32_t>(c.pp);
    if (c.dp == 0) continue;
    RankCoords first = c;
    first.dp = 0;
    const auto rep = static_cast<int32_t>(coords_to_rank(first, plan));
    const auto rep_rows = rows_of_rank.find(rep);
    if (rep_rows == rows_of_rank.end() || rep_rows->second.size() != own.size()) continue;
    bool same = true;
    for (size_t i : own) {
      const auto it = row_of.find({rep, rows_[i].stream});
      if (it == row_of.end() || !alike(rows_[i], rows_[it->second], tolerance_s)) {
        same = false;
        break;
      }
    }
    if (!same) continue;
    for (size_t i : own) {
      dropped[i] = true;
      ++rows_[row_of.at({rep, rows_[i].stream})].ranks;
    }
    ++folded_ranks_;
  }
  std::vector<Row> kept;
  for (size_t i = 0; i < rows_.size(); ++i)
    if (!dropped[i]) kept.push_back(std::move(rows_[i]));
  // Stage-major (pp is the outermost coordinate, so rank order already is), rank, compute first.
  std::stable_sort(kept.begin(), kept.end(), [](const Row& a, const Row& b) { return a.stage < b.stage; });
  rows_ = std::move(kept);
  for (int i = 0; i < row_count(); ++i) {
    const Row& r = rows_[static_cast<size_t>(i)];
    if (stages_.empty() || stages_.back().stage != r.stage) stages_.push_back({r.stage, i, i});
    stages_.back().end_row = i + 1;
  }
}

void TimelineRows::prepend_measured(std::vector<TimelineSpan> measured) {
  if (measured.empty()) return;
  const auto offset = static_cast<int32_t>(spans_.size());
  TimelineRows own(std::move(measured));
  std::vector<Row> rows = own.rows_;
  for (Row& r : rows) {
    r.measured = true;
    r.stage = -1;
    for (int32_t& i : r.spans) i += offset;
  }
  spans_.insert(spans_.end(), own.spans_.begin(), own.spans_.end());
  end_s_ = std::max(end_s_, own.end_s_);
  measured_rows_ = static_cast<int>(rows.size());
  for (StageBand& b : stages_) {
    b.first_row += measured_rows_;
    b.end_row += measured_rows_;
  }
  rows.insert(rows.end(), std::make_move_iterator(rows_.begin()), std::make_move_iterator(rows_.end()));
  rows_ = std::move(rows);
}

bool TimelineRows::alike(const Row& a, const Row& b, double tolerance_s) const {
  if (a.spans.size() != b.spans.size()) return false;
  for (size_t i = 0; i < a.spans.size(); ++i) {
    const TimelineSpan& x = spans_[static_cast<size_t>(a.spans[i])];
    const TimelineSpan& y = spans_[static_cast<size_t>(b.spans[i])];
    if (x.name != y.name || std::abs(x.start_s - y.start_s) > tolerance_s || std::abs(x.end_s - y.end_s) > tolerance_s)
      return false;
  }
  return true;
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
