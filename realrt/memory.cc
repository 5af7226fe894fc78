#include "realrt/memory.h"

#include <algorithm>

namespace monarch::realrt {

MemoryCounters& memory_counters() {
  static MemoryCounters counters;
  return counters;
}

void reset_memory_peaks() {
  auto& c = memory_counters();
  c.peak_bytes = c.current_bytes;
  c.peak_total_bytes = c.current_total_bytes;
  c.at_peak_bytes = c.current_bytes;
}

void count_alloc(int i, int64_t bytes) {
  auto& c = memory_counters();
  c.current_bytes[i] += bytes;
  c.peak_bytes[i] = std::max(c.peak_bytes[i], c.current_bytes[i]);
  c.current_total_bytes += bytes;
  if (c.current_total_bytes > c.peak_total_bytes) {
    c.peak_total_bytes = c.current_total_bytes;
    c.at_peak_bytes = c.current_bytes;
  }
}

void count_free(int i, int64_t bytes) {
  auto& c = memory_counters();
  c.current_bytes[i] -= bytes;
  c.current_total_bytes -= bytes;
  assert(c.current_bytes[i] >= 0);
}

}  // namespace monarch::realrt
