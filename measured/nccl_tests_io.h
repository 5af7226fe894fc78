// Reader of nccl-tests results (github.com/NVIDIA/nccl-tests): the text table the *_perf
// binaries print and the JSON file they write with `-J FILE.json`. Each size row becomes a
// CollectiveSample of a calibration profile (core/profile.h) from its out-of-place time; algbw
// and busbw follow from the time (nccl-tests' own definitions, doc/PERFORMANCE.md).
//
// The collective comes from the "# Collective test starting: all_reduce_perf" line (text), the
// program name in "args" (JSON), or the file name ("all_reduce_perf.txt"); the rank count from
// the "#  Rank N ..." lines (text) or "devices" (JSON). Rows of element types a profile does not
// hold (int8, double, ...) are skipped; a file with no usable row is a problem.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/profile.h"

namespace monarch::measured {

struct NcclTestsResult {
  std::string source;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int32_t ranks = 0;
  std::string device_name;  // from the device lines, e.g. "NVIDIA H100 80GB HBM3"; may be empty
  std::vector<CollectiveSample> samples;
};

// True when the text looks like nccl-tests output (either form).
bool looks_like_nccl_tests(const std::string& text);

Expected<NcclTestsResult> parse_nccl_tests(const std::string& text, const std::string& source);
Expected<NcclTestsResult> read_nccl_tests(const std::string& path);

// `profile` with the samples of `result` in place of any of the same kind, rank count and
// dtype; the others are kept.
void merge_collectives(CalibrationProfile& profile, const NcclTestsResult& result);

}  // namespace monarch::measured
