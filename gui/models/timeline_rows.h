// A timeline's spans grouped into rows, one per (rank, stream), ordered by rank and then
// with the compute stream first. Each row keeps its spans sorted by start so that the spans
// of a time window are found by binary search: drawing cost follows what is visible, not
// the size of the timeline.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace monarch::gui {

class TimelineRows {
 public:
  struct Row {
    int32_t rank = 0;
    std::string stream;
    std::vector<int32_t> spans;   // indices into spans(), sorted by start
    std::vector<double> max_end;  // max_end[i] = max end of spans[0..i]
  };

  TimelineRows() = default;
  explicit TimelineRows(std::vector<TimelineSpan> spans);

  const std::vector<TimelineSpan>& spans() const { return spans_; }
  const std::vector<Row>& rows() const { return rows_; }
  int row_count() const { return static_cast<int>(rows_.size()); }
  double end_s() const { return end_s_; }

  // Half-open positions [first, last) into rows()[row].spans whose spans may intersect
  // [t0, t1]: every intersecting span is inside, and every span inside starts before t1.
  std::pair<int, int> visible(int row, double t0_s, double t1_s) const;
  // The span of `row` covering instant t, or -1.
  int32_t span_at(int row, double t_s) const;

 private:
  std::vector<TimelineSpan> spans_;
  std::vector<Row> rows_;
  double end_s_ = 0;
};

}  // namespace monarch::gui
