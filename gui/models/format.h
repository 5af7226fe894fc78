// Text for numbers and plans as the GUI shows them (units always printed).
#pragma once

#include <QString>
#include <cstdint>
#include <string_view>

#include "core/scenario.h"

namespace monarch::gui {

// "13.8 s", "412 ms", "35.2 us", "0 s".
QString format_seconds(double s);
// "1.50 GiB", "12.0 MiB", "512 B" (binary prefixes, 2^10).
QString format_bytes(double bytes);
// "tp=8 pp=8 dp=1 cp=1 ep=1 vpp=3 mbs=1 interleaved-1f1b sp recompute=selective zero=0".
QString plan_summary(const Plan& plan);

// Ranks in one process group of `group` ("tp", "cp", "ep", "dp", "pp", "edp", "etp", "world") under
// `plan`; 0 when the group name is not known. "pp" is point-to-point between two neighbours.
int64_t group_size(const Plan& plan, std::string_view group);

// nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md in NVIDIA/nccl-tests): busbw = algbw x
// factor, with factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
// all-to-all, 1 for broadcast, reduce and send-recv. 0 when the kind is unknown or n < 1.
double bus_bandwidth_factor(std::string_view kind, int64_t n);

}  // namespace monarch::gui
