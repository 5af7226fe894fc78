#include "measured/nccl_tests_io.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

namespace monarch::measured {
namespace {

using nlohmann::json;

// nccl-tests program names (src/*.cu, built as <name>_perf) for the collectives a profile holds.
std::optional<CollectiveKind> kind_from_program(const std::string& text) {
  std::string n;
  for (char c : text) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.find("all_reduce") != std::string::npos || n.find("allreduce") != std::string::npos) return CollectiveKind::kAllReduce;
  if (n.find("reduce_scatter") != std::string::npos || n.find("reducescatter") != std::string::npos)
    return CollectiveKind::kReduceScatter;
  if (n.find("all_gather") != std::string::npos || n.find("allgather") != std::string::npos) return CollectiveKind::kAllGather;
  if (n.find("alltoall") != std::string::npos || n.find("all_to_all") != std::string::npos) return CollectiveKind::kAllToAll;
  if (n.find("broadcast") != std::string::npos) return CollectiveKind::kBroadcast;
  return std::nullopt;
}

// nccl-tests type names (src/common.cu test_typenames).
std::optional<DType> dtype_from_name(const std::string& t) {
  if (t == "float" || t == "float32") return DType::kFp32;
  if (t == "bfloat16") return DType::kBf16;
  if (t == "half" || t == "float16") return DType::kFp16;
  if (t == "f8e4m3" || t == "f8e5m2" || t == "fp8_e4m3" || t == "fp8_e5m2") return DType::kFp8;
  return std::nullopt;
}

std::optional<double> to_number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

bool is_integer(const std::string& s) {
  return !s.empty() && std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

Problems add_sample(NcclTestsResult& r, int64_t bytes, const std::string& type, double time_us, const std::string& where) {
  std::optional<DType> dt = dtype_from_name(type);
  if (!dt || bytes <= 0) return {};
  if (!(time_us > 0)) return {Problem{where, "time " + std::to_string(time_us) + " us is not positive"}};
  r.samples.push_back(make_collective_sample(r.kind, r.ranks, bytes, *dt, time_us));
  return {};
}

Expected<NcclTestsResult> parse_json(const json& j, const std::string& source) {
  NcclTestsResult r;
  r.source = source;
  std::optional<CollectiveKind> kind;
  if (j.contains("args") && j["args"].is_array() && !j["args"].empty() && j["args"][0].is_string())
    kind = kind_from_program(std::filesystem::path(j["args"][0].get<std::string>()).filename().string());
  if (!kind) kind = kind_from_program(std::filesystem::path(source).filename().string());
  if (!kind) return Expected<NcclTestsResult>::fail(source + ":/args/0", "cannot tell which collective this is (expected a program name such as all_reduce_perf)");
  r.kind = *kind;
  const json* devices = nullptr;
  if (j.contains("config") && j["config"].is_object() && j["config"].contains("devices")) devices = &j["config"]["devices"];
  else if (j.contains("devices")) devices = &j["devices"];
  if (devices && devices->is_array()) {
    r.ranks = static_cast<int32_t>(devices->size());
    if (!devices->empty() && (*devices)[0].contains("device_info") && (*devices)[0]["device_info"].is_string())
      r.device_name = (*devices)[0]["device_info"].get<std::string>();
  }
  if (r.ranks < 2) return Expected<NcclTestsResult>::fail(source + ":/config/devices", "found " + std::to_string(r.ranks) + " ranks, expected at least 2");
  if (!j.contains("results") || !j["results"].is_array())
    return Expected<NcclTestsResult>::fail(source + ":/results", "missing: expected the list of size rows");
  Problems problems;
  for (size_t i = 0; i < j["results"].size(); ++i) {
    const json& row = j["results"][i];
    const std::string where = source + ":/results/" + std::to_string(i);
    if (!row.is_object() || !row.contains("size") || !row["size"].is_number_integer() || !row.contains("type") ||
        !row["type"].is_string() || !row.contains("out_of_place") || !row["out_of_place"].is_object()) {
      problems.push_back({where, "expected size, type and out_of_place.time"});
      continue;
    }
    const json& oop = row["out_of_place"];
    const char* time_key = oop.contains("time") ? "time" : "cpu_time";
    if (!oop.contains(time_key) || !oop[time_key].is_number()) {
      problems.push_back({where + "/out_of_place/time", "missing or not a number"});
      continue;
    }
    Problems p = add_sample(r, row["size"].get<int64_t>(), row["type"].get<std::string>(), oop[time_key].get<double>(), where);
    problems.insert(problems.end(), p.begin(), p.end());
  }
  if (!problems.empty()) return problems;
  if (r.samples.empty()) return Expected<NcclTestsResult>::fail(source + ":/results", "no row of a type a profile holds (float, bfloat16, half, fp8)");
  return r;
}

}  // namespace

bool looks_like_nccl_tests(const std::string& text) {
  return text.find("# nThread") != std::string::npos || text.find("out-of-place") != std::string::npos ||
         (text.find("\"nccl_version\"") != std::string::npos && text.find("\"results\"") != std::string::npos);
}

Expected<NcclTestsResult> parse_nccl_tests(const std::string& text, const std::string& source) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Expected<NcclTestsResult>::fail(source, "not valid JSON (a truncated nccl-tests -J file?)");
    return parse_json(j, source);
  }
  static const std::regex kStarting(R"(#\s*Collective test starting:\s*(\S+))");
  static const std::regex kRank(R"(^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$)");
  NcclTestsResult r;
  r.source = source;
  std::optional<CollectiveKind> kind;
  std::smatch m;
  if (std::regex_search(text, m, kStarting)) kind = kind_from_program(m[1].str());
  if (!kind) kind = kind_from_program(std::filesystem::path(source).filename().string());
  if (!kind)
    return Expected<NcclTestsResult>::fail(source, "cannot tell which collective this is: no \"# Collective test starting: ...\" line, "
                                                   "and the file name does not name one (all_reduce_perf.txt, ...)");
  r.kind = *kind;
  std::istringstream in(text);
  std::string line;
  std::vector<std::pair<int, std::string>> rows;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::regex_match(line, m, kRank)) {
      ++r.ranks;
      if (r.device_name.empty()) r.device_name = m[1].str();
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    rows.emplace_back(line_no, line);
  }
  if (r.ranks < 2) return Expected<NcclTestsResult>::fail(source, "found " + std::to_string(r.ranks) + " \"#  Rank N ...\" device lines, expected at least 2");
  Problems problems;
  for (const auto& [no, row] : rows) {
    std::istringstream fields(row);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    const std::string where = source + ":" + std::to_string(no);
    if (f.size() < 7 || !is_integer(f[0]) || !is_integer(f[1])) continue;  // not a size row (a message line)
    // size count type redop [root] time algbw busbw #wrong ...; the root column is an integer.
    const size_t time_at = is_integer(f[4]) ? 5 : 4;
    std::optional<double> t = time_at < f.size() ? to_number(f[time_at]) : std::nullopt;
    if (!t) {
      problems.push_back({where, "cannot read the out-of-place time \"" + (time_at < f.size() ? f[time_at] : "") + "\""});
      continue;
    }
    Problems p = add_sample(r, std::stoll(f[0]), f[2], *t, where);
    problems.insert(problems.end(), p.begin(), p.end());
  }
  if (!problems.empty()) return problems;
  if (r.samples.empty()) return Expected<NcclTestsResult>::fail(source, "no size row of a type a profile holds (float, bfloat16, half, fp8)");
  return r;
}

Expected<NcclTestsResult> read_nccl_tests(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Expected<NcclTestsResult>::fail(path, "cannot open the file");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_nccl_tests(text.str(), path);
}

void merge_collectives(CalibrationProfile& profile, const NcclTestsResult& result) {
  auto replaced = [&](const CollectiveSample& s) {
    return std::any_of(result.samples.begin(), result.samples.end(), [&](const CollectiveSample& n) {
      return n.kind == s.kind && n.ranks == s.ranks && n.dtype == s.dtype;
    });
  };
  profile.collectives.erase(std::remove_if(profile.collectives.begin(), profile.collectives.end(), replaced),
                            profile.collectives.end());
  profile.collectives.insert(profile.collectives.end(), result.samples.begin(), result.samples.end());
  std::stable_sort(profile.collectives.begin(), profile.collectives.end(), [](const CollectiveSample& a, const CollectiveSample& b) {
    return std::tie(a.kind, a.ranks, a.dtype, a.bytes) < std::tie(b.kind, b.ranks, b.dtype, b.bytes);
  });
}

}  // namespace monarch::measured
