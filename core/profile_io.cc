#include "core/profile_io.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/text_file.h"

namespace monarch {

using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

namespace {

// Measured values must agree with the values derived from them (tflops from time, busbw from
// algbw) to this relative tolerance: the writer derives them exactly, so a mismatch means the
// file was edited inconsistently. Rounding in other writers stays far below 1%.
constexpr double kConsistencyRelTol = 0.01;

const char* kind_name(CollectiveKind k) { return to_string(k); }

template <typename E, size_t N>
std::optional<E> parse_enum(const std::string& s, const E (&values)[N]) {
  for (E v : values) {
    if (s == to_string(v)) return v;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string enum_list(const E (&values)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    out += (i ? ", \"" : "\"") + std::string(to_string(values[i])) + "\"";
  }
  return out;
}

constexpr MatmulPrecision kMatmulPrecisions[] = {MatmulPrecision::kFp32, MatmulPrecision::kTf32,
                                                 MatmulPrecision::kBf16, MatmulPrecision::kFp16,
                                                 MatmulPrecision::kFp8};
constexpr CollectiveKind kCollectiveKinds[] = {
    CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
    CollectiveKind::kAllToAll, CollectiveKind::kBroadcast};
constexpr DType kDTypes[] = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kFp8};
constexpr DeviceKind kDeviceKinds[] = {DeviceKind::kCpu, DeviceKind::kGpu};

std::string describe(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Reads fields of one JSON object, collecting problems with their paths.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string path, Problems& problems)
      : obj_(obj), path_(std::move(path)), problems_(problems) {}

  std::string at(const std::string& key) const { return path_ + "/" + key; }

  const json* find(const std::string& key, bool required) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) fail(at(key), "missing");
      return nullptr;
    }
    return &*it;
  }

  std::string string(const std::string& key, bool required, bool non_empty = false) {
    const json* v = find(key, required);
    if (!v) return {};
    if (!v->is_string()) {
      fail(at(key), "found " + describe(*v) + ", expected a string");
      return {};
    }
    std::string s = v->get<std::string>();
    if (non_empty && s.empty()) fail(at(key), "is empty, expected a name");
    return s;
  }

  int64_t integer(const std::string& key, bool required, int64_t min) {
    const json* v = find(key, required);
    if (!v) return 0;
    if (!v->is_number_integer()) {
      fail(at(key), "found " + describe(*v) + ", expected an integer >= " + std::to_string(min));
      return 0;
    }
    const int64_t i = v->get<int64_t>();
    if (i < min) fail(at(key), "found " + std::to_string(i) + ", expected an integer >= " + std::to_string(min));
    return i;
  }

  // A finite number; positive when `positive`, else >= 0.
  double number(const std::string& key, bool required, bool positive) {
    const json* v = find(key, required);
    if (!v) return 0;
    const char* want = positive ? "a positive number" : "a number >= 0";
    if (!v->is_number()) {
      fail(at(key), "found " + describe(*v) + ", expected " + want);
      return 0;
    }
    const double d = v->get<double>();
    if (!std::isfinite(d) || (positive ? d <= 0 : d < 0)) {
      fail(at(key), "found " + describe(*v) + ", expected " + want);
      return 0;
    }
    return d;
  }

  bool boolean(const std::string& key, bool required) {
    const json* v = find(key, required);
    if (!v) return false;
    if (!v->is_boolean()) {
      fail(at(key), "found " + describe(*v) + ", expected true or false");
      return false;
    }
    return v->get<bool>();
  }

  template <typename E, size_t N>
  E enumeration(const std::string& key, const E (&values)[N]) {
    const json* v = find(key, true);
    if (!v) return values[0];
    if (v->is_string()) {
      if (auto e = parse_enum(v->get<std::string>(), values)) return *e;
    }
    fail(at(key), "found " + describe(*v) + ", expected one of " + enum_list(values));
    return values[0];
  }

  // Reports keys this reader never asked for (typos, fields of another format version).
  void reject_unknown_keys() {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!seen_.count(it.key())) fail(at(it.key()), "unknown key");
    }
  }

  void fail(std::string where, std::string message) {
    problems_.push_back(Problem{std::move(where), std::move(message)});
  }

 private:
  const json& obj_;
  std::string path_;
  Problems& problems_;
  std::set<std::string> seen_;
};

bool close_enough(double a, double b) {
  return std::abs(a - b) <= kConsistencyRelTol * std::max(std::abs(a), std::abs(b));
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string profile_to_json(const CalibrationProfile& p) {
  ordered_json j;
  j["format"] = CalibrationProfile::kFormat;
  j["device"] = {{"kind", to_string(p.device_kind)}, {"name", p.device_name}, {"count", p.device_count}};
  j["host"] = p.host;
  j["created_utc"] = p.created_utc;
  j["tool"] = p.tool;
  j["quick"] = p.quick;
  j["notes"] = p.notes;
  j["memory"] = {{"method", p.memory_method},
                 {"bytes", p.memory_bytes},
                 {"bandwidth_GBps", p.memory_bandwidth_GBps}};
  ordered_json mm = ordered_json::array();
  for (const MatmulSample& s : p.matmul) {
    mm.push_back({{"precision", to_string(s.precision)},
                  {"m", s.m},
                  {"n", s.n},
                  {"k", s.k},
                  {"time_us", s.time_us},
                  {"tflops", s.tflops}});
  }
  j["matmul"] = std::move(mm);
  ordered_json cc = ordered_json::array();
  for (const CollectiveSample& s : p.collectives) {
    cc.push_back({{"kind", kind_name(s.kind)},
                  {"ranks", s.ranks},
                  {"bytes", s.bytes},
                  {"dtype", to_string(s.dtype)},
                  {"time_us", s.time_us},
                  {"algbw_GBps", s.algbw_GBps},
                  {"busbw_GBps", s.busbw_GBps}});
  }
  j["collectives"] = std::move(cc);
  return j.dump(2) + "\n";
}

Expected<CalibrationProfile> profile_from_json(std::string_view text) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return Expected<CalibrationProfile>::fail("", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) return Expected<CalibrationProfile>::fail("/", "expected a JSON object");

  Problems problems;
  CalibrationProfile p;
  ObjectReader r(root, "", problems);
  {
    const std::string format = r.string("format", true);
    if (!format.empty() && format != CalibrationProfile::kFormat) {
      r.fail("/format", "found \"" + format + "\", expected \"" + CalibrationProfile::kFormat + "\"");
    }
  }
  if (const json* d = r.find("device", true)) {
    if (!d->is_object()) {
      r.fail("/device", "expected an object {\"kind\", \"name\", \"count\"}");
    } else {
      ObjectReader dr(*d, "/device", problems);
      p.device_kind = dr.enumeration("kind", kDeviceKinds);
      p.device_name = dr.string("name", true, true);
      p.device_count = static_cast<int32_t>(dr.integer("count", true, 1));
      dr.reject_unknown_keys();
    }
  }
  p.host = r.string("host", false);
  p.created_utc = r.string("created_utc", false);
  p.tool = r.string("tool", false);
  p.notes = r.string("notes", false);
  p.quick = r.boolean("quick", false);
  if (const json* m = r.find("memory", false)) {
    if (!m->is_object()) {
      r.fail("/memory", "expected an object {\"method\", \"bytes\", \"bandwidth_GBps\"}");
    } else {
      ObjectReader mr(*m, "/memory", problems);
      p.memory_method = mr.string("method", false);
      p.memory_bytes = mr.integer("bytes", false, 0);
      p.memory_bandwidth_GBps = mr.number("bandwidth_GBps", true, false);
      mr.reject_unknown_keys();
    }
  }
  if (const json* mm = r.find("matmul", false)) {
    if (!mm->is_array()) {
      r.fail("/matmul", "expected an array of matrix-product samples");
    } else {
      for (size_t i = 0; i < mm->size(); ++i) {
        const std::string at = "/matmul/" + std::to_string(i);
        const json& e = (*mm)[i];
        if (!e.is_object()) {
          r.fail(at, "expected an object {\"precision\", \"m\", \"n\", \"k\", \"time_us\", \"tflops\"}");
          continue;
        }
        ObjectReader er(e, at, problems);
        MatmulSample s;
        s.precision = er.enumeration("precision", kMatmulPrecisions);
        s.m = er.integer("m", true, 1);
        s.n = er.integer("n", true, 1);
        s.k = er.integer("k", true, 1);
        s.time_us = er.number("time_us", true, true);
        s.tflops = er.number("tflops", true, true);
        er.reject_unknown_keys();
        if (s.m > 0 && s.n > 0 && s.k > 0 && s.time_us > 0 && s.tflops > 0) {
          const double derived = 2.0 * double(s.m) * double(s.n) * double(s.k) / (s.time_us * 1e-6) / 1e12;
          if (!close_enough(derived, s.tflops)) {
            er.fail(at + "/tflops", "found " + fmt(s.tflops) + ", but 2*m*n*k/time_us gives " + fmt(derived));
          }
        }
        p.matmul.push_back(s);
      }
    }
  }
  if (const json* cc = r.find("collectives", false)) {
    if (!cc->is_array()) {
      r.fail("/collectives", "expected an array of collective samples");
    } else {
      for (size_t i = 0; i < cc->size(); ++i) {
        const std::string at = "/collectives/" + std::to_string(i);
        const json& e = (*cc)[i];
        if (!e.is_object()) {
          r.fail(at, "expected an object {\"kind\", \"ranks\", \"bytes\", \"dtype\", \"time_us\", "
                     "\"algbw_GBps\", \"busbw_GBps\"}");
          continue;
        }
        ObjectReader er(e, at, problems);
        CollectiveSample s;
        s.kind = er.enumeration("kind", kCollectiveKinds);
        s.ranks = static_cast<int32_t>(er.integer("ranks", true, 2));
        s.bytes = er.integer("bytes", true, 1);
        s.dtype = er.enumeration("dtype", kDTypes);
        s.time_us = er.number("time_us", true, true);
        s.algbw_GBps = er.number("algbw_GBps", true, true);
        s.busbw_GBps = er.number("busbw_GBps", true, false);
        er.reject_unknown_keys();
        if (s.bytes > 0 && s.time_us > 0 && s.algbw_GBps > 0) {
          const double algbw = double(s.bytes) / (s.time_us * 1e-6) / 1e9;
          if (!close_enough(algbw, s.algbw_GBps)) {
            er.fail(at + "/algbw_GBps", "found " + fmt(s.algbw_GBps) + ", but bytes/time_us gives " + fmt(algbw));
          } else if (s.ranks >= 2) {
            const double busbw = s.algbw_GBps * collective_bus_factor(s.kind, s.ranks);
            if (!close_enough(busbw, s.busbw_GBps)) {
              er.fail(at + "/busbw_GBps", "found " + fmt(s.busbw_GBps) + ", but algbw x bus factor (" +
                                              fmt(collective_bus_factor(s.kind, s.ranks)) + " for " +
                                              kind_name(s.kind) + " over " + std::to_string(s.ranks) +
                                              " ranks) gives " + fmt(busbw));
            }
          }
        }
        p.collectives.push_back(s);
      }
    }
  }
  r.reject_unknown_keys();
  if (!problems.empty()) return problems;
  return p;
}

Expected<CalibrationProfile> read_profile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Expected<CalibrationProfile>::fail(path, "is a directory, expected a profile file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<CalibrationProfile>::fail(path, "cannot open the profile file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Expected<CalibrationProfile>::fail(path, "cannot read the profile file");
  auto parsed = profile_from_json(text.str());
  if (parsed) return parsed;
  Problems problems = parsed.problems();
  for (Problem& pr : problems) pr.where = path + (pr.where.empty() ? "" : ":" + pr.where);
  return problems;
}

Problems write_profile(const std::string& path, const CalibrationProfile& profile) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.filename().empty()) return {Problem{path, "expected a file name"}};
  std::error_code ec;
  if (fs::is_directory(target, ec)) return {Problem{path, "is a directory, expected a file name"}};
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return {Problem{path, "folder " + dir.string() + " does not exist"}};

  if (std::string why = write_text_file_atomically(path, profile_to_json(profile)); !why.empty())
    return {Problem{path, why}};
  return {};
}

}  // namespace monarch
