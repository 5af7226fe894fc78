// Test helper: the rules Perfetto's JSON importer relies on, checked on a trace text.
// Returns an empty string when they hold, else the first violation.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace monarch::testing {

inline std::string check_chrome_trace_rules(const std::string& text) {
  const auto doc = nlohmann::json::parse(text);
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) return "no traceEvents array";
  double last_ts = -1;
  bool seen_timed = false;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> open;  // track -> stack of (start, end)
  std::map<int64_t, int> flow_starts, flow_ends;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (seen_timed) return "metadata event after timed events";
      continue;
    }
    seen_timed = true;
    const double ts = e.at("ts");
    if (ts < last_ts) return "times go backwards at ts " + std::to_string(ts);
    last_ts = ts;
    if (ph == "X") {
      const double dur = e.at("dur");
      if (dur < 0) return "negative duration";
      auto& stack = open[{e.at("pid").get<int>(), e.at("tid").get<int>()}];
      const double end = ts + dur;
      while (!stack.empty() && stack.back().second <= ts + 1e-9) stack.pop_back();
      if (!stack.empty() && end > stack.back().second + 1e-9)
        return "slice '" + e.at("name").get<std::string>() + "' at " + std::to_string(ts) + " overlaps its parent";
      stack.push_back({ts, end});
    } else if (ph == "s") {
      ++flow_starts[e.at("id").get<int64_t>()];
    } else if (ph == "f") {
      ++flow_ends[e.at("id").get<int64_t>()];
    } else if (ph != "C") {
      return "unexpected phase " + ph;
    }
  }
  if (flow_starts != flow_ends) return "flow starts and ends do not pair";
  return "";
}

}  // namespace monarch::testing
