// The value readers of the scenario reader: each reports what it found, what it expected and
// where (the JSON path).
#include "core/scenario_io_detail.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace monarch::scenario_io_detail {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

// The value as the user wrote it, short enough for one line.
std::string show(const json& v) {
  std::string s;
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string fmt_int(int64_t v) { return std::to_string(v); }

std::string fmt_num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}


// A section that must be an object when present.
const json* section(Ctx& ctx, const json* v, const std::string& path) {
  if (!v) return nullptr;
  if (!v->is_object()) {
    ctx.found(path, *v, "an object");
    return nullptr;
  }
  return v;
}

std::string int_range(int64_t lo, int64_t hi) {
  if (lo == 1) return "a positive integer <= " + fmt_int(hi);
  if (lo == 0) return "an integer in 0.." + fmt_int(hi);
  return "an integer in " + fmt_int(lo) + ".." + fmt_int(hi);
}

// Integers: JSON integers, or numbers with no fraction (1e3). Range checked on the double
// first, so 1e30 never reaches an int64.
std::optional<int64_t> to_int(Ctx& ctx, const json& v, const std::string& where, int64_t lo, int64_t hi,
                              const std::string& what) {
  const std::string expected = what.empty() ? int_range(lo, hi) : what;
  if (!v.is_number()) {
    if (v.is_string()) ctx.add(where, "found " + show(v) + " (a string), expected " + expected + " (write it without quotes)");
    else ctx.add(where, "found " + show(v) + " (" + type_name(v) + "), expected " + expected);
    return std::nullopt;
  }
  double d = v.get<double>();
  if (v.is_number_float() && (!std::isfinite(d) || d != std::floor(d))) {
    ctx.found(where, v, expected + " (not a fraction)");
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<double>(u) < static_cast<double>(lo)) {
      ctx.found(where, v, expected);
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  int64_t i = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
  if (i < lo || i > hi) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  return i;
}

std::optional<int64_t> get_int(Ctx& ctx, Obj& o, const std::string& key, int64_t lo, int64_t hi,
                               const std::string& what) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_int(ctx, *v, o.at(key), lo, hi, what);
}

// Numbers: lo_open means the value must be strictly greater than lo.
std::optional<double> to_num(Ctx& ctx, const json& v, const std::string& where, double lo, double hi,
                             bool lo_open) {
  std::string expected = std::string("a number ") + (lo_open ? "> " : ">= ") + fmt_num(lo) + " and <= " + fmt_num(hi);
  if (!v.is_number()) {
    ctx.add(where, "found " + show(v) + " (" + type_name(v) + "), expected " + expected);
    return std::nullopt;
  }
  double d = v.get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  return d;
}

std::optional<double> get_num(Ctx& ctx, Obj& o, const std::string& key, double lo, double hi, bool lo_open) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_num(ctx, *v, o.at(key), lo, hi, lo_open);
}

std::optional<bool> get_bool(Ctx& ctx, Obj& o, const std::string& key) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    ctx.found(o.at(key), *v, "true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> to_str(Ctx& ctx, const json& v, const std::string& where) {
  if (!v.is_string()) {
    ctx.found(where, v, "a string");
    return std::nullopt;
  }
  return v.get<std::string>();
}

std::optional<std::string> get_str(Ctx& ctx, Obj& o, const std::string& key) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_str(ctx, *v, o.at(key));
}

std::optional<std::string> read_text_file(Ctx& ctx, const std::string& path, const std::string& where,
                                          const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    ctx.add(where, what + " \"" + path + "\" does not exist");
    return std::nullopt;
  }
  if (std::filesystem::is_directory(path, ec)) {
    ctx.add(where, what + " \"" + path + "\" is a directory, expected a JSON file");
    return std::nullopt;
  }
  // Bounded read: works for pipes (<(jq ...)) and refuses endless devices (/dev/zero).
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.add(where, what + " \"" + path + "\" cannot be read");
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxScenarioFileBytes) {
      ctx.add(where, what + " \"" + path + "\" is larger than " + std::to_string(kMaxScenarioFileBytes) +
                         " bytes, expected a JSON file of a few kB");
      return std::nullopt;
    }
  }
  return text;
}

}  // namespace monarch::scenario_io_detail
