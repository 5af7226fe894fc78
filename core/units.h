// Units used throughout monarch-sim. Every quantity carries its unit in its name
// (`_bytes`, `_s`, `_GBps`, `_tflops`); these constants convert between them.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace monarch {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // bytes in a GiB (2^30)
inline constexpr double kGB = 1e9;                        // bytes in a GB (SI)
inline constexpr double kTera = 1e12;                     // FLOP/s in a TFLOP/s
inline constexpr double kMicro = 1e-6;                    // seconds in a microsecond

inline constexpr double gib_to_bytes(double gib) { return gib * kGiB; }
inline constexpr double bytes_to_gib(double bytes) { return bytes / kGiB; }
inline constexpr double gbps_to_bytes_per_s(double GBps) { return GBps * kGB; }
inline constexpr double us_to_s(double us) { return us * kMicro; }

// A memory size in GiB as messages print it: one decimal, what printf's "%.1f" gives
// (std::to_chars with a precision is specified as printf in the C locale), without printf's
// cost: the search writes one for every plan that does not fit.
inline std::string gib_text(double gib) {
  char buf[48];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, gib, std::chars_format::fixed, 1);
  if (r.ec != std::errc()) r = std::to_chars(buf, buf + sizeof buf, gib);  // too long for fixed: shortest form
  return std::string(buf, r.ptr);
}

}  // namespace monarch
