#include "run/sweep.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/result_io.h"
#include "core/scenario_io.h"

namespace monarch::run {
namespace {

using nlohmann::json;

// The text of a file of at most kMaxScenarioFileBytes; problems name `where`.
Expected<std::string> read_small_file(const std::string& path, const std::string& where) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Expected<std::string>::fail(where, "cannot read " + path + ": " + ec.message());
  if (size > static_cast<uintmax_t>(kMaxScenarioFileBytes))
    return Expected<std::string>::fail(where, path + " is " + std::to_string(size) + " bytes, expected at most " +
                                                  std::to_string(kMaxScenarioFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<std::string>::fail(where, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string json_type(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

// A point's overrides from a JSON object (path -> value); problems at `where`.
void read_override_set(const json& set, const std::string& where, std::vector<SweepOverride>& out, Problems& problems) {
  if (!set.is_object() || set.empty()) {
    problems.push_back({where, "found " + json_type(set) + ", expected a non-empty object of scenario path -> value"});
    return;
  }
  for (const auto& [path, value] : set.items()) {
    if (path.empty()) problems.push_back({where, "found an empty path, expected one like cluster.num_gpus"});
    else if (value.is_null()) problems.push_back({where + "/" + path, "found null, expected a value for the scenario key"});
    else out.push_back({path, value.dump()});
  }
}

// The grid's cartesian product: paths in the object's (sorted) order, the last varying fastest.
void expand_grid(const json& grid, const std::string& where, std::vector<std::vector<SweepOverride>>& out,
                 Problems& problems) {
  if (!grid.is_object() || grid.empty()) {
    problems.push_back({where, "found " + json_type(grid) + ", expected a non-empty object of scenario path -> list of values"});
    return;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  int64_t total = 1;
  for (const auto& [path, values] : grid.items()) {
    const std::string at = where + "/" + path;
    if (path.empty()) problems.push_back({where, "found an empty path, expected one like cluster.num_gpus"});
    if (!values.is_array() || values.empty()) {
      problems.push_back({at, "found " + json_type(values) + ", expected a non-empty list of values"});
      continue;
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_null()) problems.push_back({at + "/" + std::to_string(i), "found null, expected a value"});
      texts.push_back(values[i].dump());
    }
    if (total <= kMaxSweepPoints) total *= static_cast<int64_t>(texts.size());
    axes.emplace_back(path, std::move(texts));
  }
  if (total > kMaxSweepPoints)
    problems.push_back({where, "the grid has more than " + std::to_string(kMaxSweepPoints) + " points; split the sweep"});
  if (!problems.empty()) return;
  std::vector<size_t> digit(axes.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    std::vector<SweepOverride> point;
    for (size_t a = 0; a < axes.size(); ++a) point.push_back({axes[a].first, axes[a].second[digit[a]]});
    out.push_back(std::move(point));
    for (size_t a = axes.size(); a-- > 0;) {
      if (++digit[a] < axes[a].second.size()) break;
      digit[a] = 0;
    }
  }
}

json overrides_object(const std::vector<SweepOverride>& overrides) {
  json o = json::object();
  for (const SweepOverride& ov : overrides) o[ov.path] = json::parse(ov.value_json);
  return o;
}


// The sweep's "backends": a non-empty list of backend names, duplicates dropped.
void read_backends(const json& b, const std::string& where, std::vector<Backend>& out, Problems& problems) {
  if (!b.is_array() || b.empty()) {
    problems.push_back({where, "found " + json_type(b) + ", expected a list of analytical, simgrid, real-cpu, real-gpu"});
    return;
  }
  for (size_t i = 0; i < b.size(); ++i) {
    Backend kind;
    if (!b[i].is_string() || !parse_backend(b[i].get<std::string>(), &kind))
      problems.push_back({where + "/" + std::to_string(i), "found " + b[i].dump() + ", expected analytical, simgrid, real-cpu or real-gpu"});
    else if (std::find(out.begin(), out.end(), kind) == out.end())
      out.push_back(kind);
  }
}

// Every point with its key; problems for two points with the same overrides. The base
// scenario's content (its JSON, normalized) is part of every key, so that an edited base is a
// different point; a base that is not JSON stops the sweep before any work.
Problems add_points(SweepSpec& spec, std::vector<std::vector<SweepOverride>> sets, const std::string& where,
                    bool from_grid) {
  auto base_text = read_small_file(spec.base_path, where + "/base");
  if (!base_text) return base_text.problems();
  auto base_json = parse_json_text(*base_text, spec.base_path);
  if (!base_json) return base_json.problems();
  json backends = json::array();
  for (Backend b : spec.backends) backends.push_back(to_string(b));
  const json base = json::parse(normalized_dump(*base_json));
  Problems problems;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < sets.size(); ++i) {
    SweepPointSpec p;
    p.overrides = std::move(sets[i]);
    p.key = sha256_hex(normalized_dump(json{{"base", base}, {"overrides", overrides_object(p.overrides)}, {"backends", backends}}));
    if (auto [it, fresh] = seen.emplace(p.key, i); !fresh)
      problems.push_back({where + (from_grid ? "/grid" : "/points/" + std::to_string(i)),
                          "repeats point " + std::to_string(it->second) + " (the same overrides)"});
    spec.points.push_back(std::move(p));
  }
  return problems;
}

}  // namespace

Expected<SweepSpec> read_sweep_file(const std::string& path) {
  auto text = read_small_file(path, path);
  if (!text) return text.problems();
  auto parsed = parse_json_text(*text, path);
  if (!parsed) return parsed.problems();
  const json& j = *parsed;
  Problems problems;
  auto at = [&](const std::string& pointer) { return path + ": " + pointer; };
  if (!j.is_object()) return Expected<SweepSpec>::fail(at("/"), "found " + json_type(j) + ", expected a sweep object {name, base, grid | points, backends}");
  static const std::set<std::string> kKeys = {"name", "description", "base", "grid", "points", "backends"};
  for (const auto& [k, v] : j.items())
    if (!kKeys.count(k))
      problems.push_back({at("/" + k), "unknown key; expected name, description, base, grid, points or backends"});

  SweepSpec spec;
  spec.path = path;
  const std::filesystem::path file(path);
  spec.name = file.stem().string();
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get<std::string>().empty())
      problems.push_back({at("/name"), "found " + json_type(j["name"]) + ", expected a non-empty string (the sweep id)"});
    else
      spec.name = j["name"].get<std::string>();
  }
  if (!j.contains("base") || !j["base"].is_string() || j["base"].get<std::string>().empty()) {
    problems.push_back({at("/base"), j.contains("base") ? "found " + json_type(j["base"]) + ", expected the base scenario's path"
                                                        : "missing; expected the base scenario's path (relative to the sweep file)"});
  } else {
    std::filesystem::path base(j["base"].get<std::string>());
    if (base.is_relative() && file.has_parent_path()) base = file.parent_path() / base;
    spec.base_path = base.lexically_normal().string();
  }
  if (j.contains("backends")) read_backends(j["backends"], at("/backends"), spec.backends, problems);
  std::vector<std::vector<SweepOverride>> sets;
  const bool has_grid = j.contains("grid"), has_points = j.contains("points");
  if (has_grid == has_points) {
    problems.push_back({at("/"), has_grid ? "has both \"grid\" and \"points\", expected one of them"
                                          : "has neither \"grid\" nor \"points\", expected one of them"});
  } else if (has_grid) {
    expand_grid(j["grid"], at("/grid"), sets, problems);
  } else if (!j["points"].is_array() || j["points"].empty()) {
    problems.push_back({at("/points"), "found " + json_type(j["points"]) + ", expected a non-empty list of override objects"});
  } else if (j["points"].size() > static_cast<size_t>(kMaxSweepPoints)) {
    problems.push_back({at("/points"), "has more than " + std::to_string(kMaxSweepPoints) + " points; split the sweep"});
  } else {
    for (size_t i = 0; i < j["points"].size(); ++i) {
      sets.emplace_back();
      read_override_set(j["points"][i], at("/points/" + std::to_string(i)), sets.back(), problems);
    }
  }
  if (!problems.empty()) return problems;
  problems = add_points(spec, std::move(sets), path + ": ", has_grid);
  if (!problems.empty()) return problems;
  return spec;
}

std::string overrides_json(const SweepPointSpec& point) { return normalized_dump(overrides_object(point.overrides)); }

std::string point_outcome_to_json(const PointOutcome& o) {
  json runs = json::array();
  for (const RunRecord& r : o.runs)
    runs.push_back({{"scenario_name", r.scenario_name},
                    {"scenario", r.scenario_json},
                    {"parameters", r.parameters},
                    {"started_at", format_utc(r.started_at)},
                    {"ended_at", format_utc(r.ended_at)},
                    {"result", result_to_json(r.result)}});
  return json({{"format", "monarch-sim-sweep-point/1"},
               {"key", o.key},
               {"status", to_string(o.status)},
               {"error", o.error},
               {"best_run", o.best_run},
               {"runs", runs}})
      .dump();
}

Expected<PointOutcome> point_outcome_from_json(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  auto bad = [&](const std::string& what) { return Expected<PointOutcome>::fail(where, "not a sweep point outcome: " + what); };
  if (!j.is_object() || j.value("format", "") != "monarch-sim-sweep-point/1") return bad("no monarch-sim-sweep-point/1 object");
  PointOutcome o;
  if (!j.contains("status") || !j["status"].is_string()) return bad("no status");
  auto status = parse_point_status(j["status"].get<std::string>());
  if (!status) return bad("unknown status");
  o.status = *status;
  if (!j.contains("key") || !j["key"].is_string()) return bad("no key");
  o.key = j["key"].get<std::string>();
  if (!j.contains("error") || !j["error"].is_string() || !j.contains("best_run") || !j["best_run"].is_number_integer() ||
      !j.contains("runs") || !j["runs"].is_array())
    return bad("missing error, best_run or runs");
  o.error = j["error"].get<std::string>();
  o.best_run = j["best_run"].get<int64_t>();
  for (size_t i = 0; i < j["runs"].size(); ++i) {
    const json& r = j["runs"][i];
    if (!r.is_object() || !r.contains("result") || !r.value("scenario", json()).is_string()) return bad("run " + std::to_string(i));
    auto result = result_from_json(r["result"], "/runs/" + std::to_string(i) + "/result");
    if (!result) return result.problems();
    auto started = parse_utc(r.value("started_at", "")), ended = parse_utc(r.value("ended_at", ""));
    if (!started || !ended) return bad("run " + std::to_string(i) + " times");
    RunRecord rec;
    rec.scenario_name = r.value("scenario_name", "");
    rec.scenario_json = r["scenario"].get<std::string>();
    rec.parameters = r.value("parameters", int64_t{0});
    rec.started_at = *started;
    rec.ended_at = *ended;
    rec.result = std::move(result).value();
    o.runs.push_back(std::move(rec));
  }
  if (o.best_run >= static_cast<int64_t>(o.runs.size())) return bad("best_run out of range");
  return o;
}

SweepPoint sweep_point(const SweepSpec& spec, size_t index, const PointOutcome& outcome) {
  SweepPoint p;
  p.sweep_id = spec.name;
  p.point_key = spec.points.at(index).key;
  p.position = static_cast<int64_t>(index);
  p.overrides_json = overrides_json(spec.points.at(index));
  p.status = outcome.status;
  p.error_message = outcome.error;
  p.best_run = outcome.best_run;
  p.recorded_at = std::chrono::system_clock::now();
  return p;
}

}  // namespace monarch::run
