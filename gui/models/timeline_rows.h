// A timeline's spans grouped into rows, one per (rank, stream), ordered by rank and then
// with the compute stream first. Each row keeps its spans sorted by start so that the spans
// of a time window are found by binary search: drawing cost follows what is visible, not
// the size of the timeline.
//
// Given the plan, rows are grouped by pipeline stage, and a rank that differs from the first
// rank of its stage slice only by its data-parallel replica (same tp, cp and pp coordinates)
// is folded into that rank's rows when its spans are the same: same streams, names, and starts
// and ends within a tolerance. The folded row says how many ranks it stands for.
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
    int32_t stage = -1;           // pipeline stage (grouped rows), else -1
    int32_t ranks = 1;            // ranks this row stands for (folded DP replicas)
    bool measured = false;        // a measured run's row, set above the simulated ones
  };
  // Consecutive rows of one pipeline stage: [first_row, end_row).
  struct StageBand {
    int32_t stage = 0;
    int first_row = 0, end_row = 0;
  };
  // Spans of two DP replicas are the same when starts and ends differ by at most this share of
  // the iteration (a simulator's contention jitter, far below what a pixel shows).
  static constexpr double kAlikeShareOfIteration = 1e-3;

  TimelineRows() = default;
  explicit TimelineRows(std::vector<TimelineSpan> spans);
  // Grouped by stage with alike DP replicas folded (see above); ungrouped when the spans name
  // ranks outside the plan.
  TimelineRows(std::vector<TimelineSpan> spans, const Plan& plan);

  const std::vector<TimelineSpan>& spans() const { return spans_; }
  const std::vector<Row>& rows() const { return rows_; }
  int row_count() const { return static_cast<int>(rows_.size()); }
  double end_s() const { return end_s_; }
  bool grouped() const { return !stages_.empty(); }
  const std::vector<StageBand>& stages() const { return stages_; }
  // Puts the rows of a measured run (spans from its own iteration start, as the simulated ones)
  // above the others, on the same time axis.
  void prepend_measured(std::vector<TimelineSpan> measured);
  int measured_rows() const { return measured_rows_; }
  // Ranks whose rows were folded into another rank's.
  int folded_ranks() const { return folded_ranks_; }

  // Half-open positions [first, last) into rows()[row].spans whose spans may intersect
  // [t0, t1]: every intersecting span is inside, and every span inside starts before t1.
  std::pair<int, int> visible(int row, double t0_s, double t1_s) const;
  // The span of `row` covering instant t, or -1.
  int32_t span_at(int row, double t_s) const;

 private:
  std::vector<TimelineSpan> spans_;
  std::vector<Row> rows_;
  std::vector<StageBand> stages_;
  double end_s_ = 0;
  int folded_ranks_ = 0;
  int measured_rows_ = 0;

  bool alike(const Row& a, const Row& b, double tolerance_s) const;
};

}  // namespace monarch::gui
