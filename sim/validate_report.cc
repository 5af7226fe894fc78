#include "sim/validate_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/scenario_io.h"

namespace monarch {

namespace {

using nlohmann::json;

// The terms of the predicted time, as the report names them.
constexpr const char* kTermKeys[] = {"compute", "exposed_comm", "bubble", "optimizer", "host"};
constexpr const char* kTermNames[] = {"compute", "exposed comm", "bubble", "optimizer", "host floor"};
constexpr size_t kTerms = 5;

std::array<double, kTerms> term_seconds(const ValidationRow& r) {
  const TimeShares& s = r.shares;
  const double t = r.iteration_time_s;
  return {s.compute * t, s.exposed_comm * t, s.bubble * t, s.optimizer * t, s.host * t};
}

json stats_json(const ErrorStats& g) {
  return json{{"group", g.group},
              {"cases", g.cases},
              {"mape_pct", g.mape_pct},
              {"median_error_pct", g.median_error_pct},
              {"mean_signed_error_pct", g.mean_signed_error_pct},
              {"max_abs_error_pct", g.max_abs_error_pct},
              {"worst_case", g.worst_id}};
}

// One case of a report; `at` is its JSON path for problems.
Expected<ValidationRow> row_from_json(const json& c, const std::string& at) {
  if (!c.is_object()) return Expected<ValidationRow>::fail(at, "expected an object");
  ValidationRow r;
  auto text = [&](const char* key, std::string* out, bool required) -> std::string {
    const auto it = c.find(key);
    if (it == c.end()) return required ? "missing" : "";
    if (!it->is_string()) return "expected a string";
    *out = it->get<std::string>();
    return "";
  };
  auto number = [&](const json& o, const char* key, double* out) -> std::string {
    const auto it = o.find(key);
    if (it == o.end()) return "missing";
    if (!it->is_number() || !std::isfinite(it->get<double>())) return "expected a number";
    *out = it->get<double>();
    return "";
  };
  for (const auto& [key, out, required] : {std::tuple{"id", &r.id, true}, std::tuple{"group", &r.group, false},
                                           std::tuple{"metric", &r.metric, true}, std::tuple{"plan", &r.plan, false}})
    if (std::string why = text(key, out, required); !why.empty()) return Expected<ValidationRow>::fail(at + "/" + key, why);
  double gpus = 0;
  for (const auto& [key, out] : {std::pair{"gpus", &gpus}, std::pair{"predicted", &r.predicted}, std::pair{"measured", &r.measured},
                                 std::pair{"error_pct", &r.error_pct}, std::pair{"iteration_time_s", &r.iteration_time_s}})
    if (std::string why = number(c, key, out); !why.empty()) return Expected<ValidationRow>::fail(at + "/" + key, why);
  if (!(r.iteration_time_s >= 0)) return Expected<ValidationRow>::fail(at + "/iteration_time_s", "expected a number >= 0");
  r.gpus = static_cast<int64_t>(gpus);
  if (const auto fits = c.find("fits"); fits != c.end()) {
    if (!fits->is_boolean()) return Expected<ValidationRow>::fail(at + "/fits", "expected true or false");
    r.fits = fits->get<bool>();
  }
  const auto t = c.find("time_s");
  if (t == c.end() || !t->is_object()) return Expected<ValidationRow>::fail(at + "/time_s", "missing, expected {compute, ...}");
  std::array<double, kTerms> secs{};
  for (size_t i = 0; i < kTerms; ++i)
    if (std::string why = number(*t, kTermKeys[i], &secs[i]); !why.empty())
      return Expected<ValidationRow>::fail(at + "/time_s/" + kTermKeys[i], why);
  if (r.iteration_time_s > 0) {
    const double it_s = r.iteration_time_s;
    r.shares = TimeShares{secs[0] / it_s, secs[1] / it_s, secs[2] / it_s, secs[3] / it_s, secs[4] / it_s};
  }
  return r;
}

}  // namespace

std::string validation_report_json(const ValidationReport& report, const std::string& cases_file,
                                   const std::string& backend) {
  json cases = json::array();
  for (const ValidationRow& r : report.rows) {
    const auto secs = term_seconds(r);
    json t = json::object();
    for (size_t i = 0; i < kTerms; ++i) t[kTermKeys[i]] = secs[i];
    cases.push_back(json{{"id", r.id},
                         {"group", r.group},
                         {"metric", r.metric},
                         {"gpus", r.gpus},
                         {"predicted", r.predicted},
                         {"measured", r.measured},
                         {"error_pct", r.error_pct},
                         {"fits", r.fits},
                         {"iteration_time_s", r.iteration_time_s},
                         {"time_s", t},
                         {"plan", r.plan}});
  }
  json groups = json::array();
  for (const ErrorStats& g : report.groups) groups.push_back(stats_json(g));
  const json j{{"format", kValidationReportFormat}, {"cases_file", cases_file}, {"backend", backend},
               {"cases", cases},  {"groups", groups},                      {"overall", stats_json(report.overall)}};
  return j.dump(1) + "\n";
}

Expected<SavedValidation> read_validation_report(const std::string& path) {
  Expected<json> parsed = read_json_file(path);
  if (!parsed) return parsed.problems();
  const json& j = *parsed;
  const std::string at = path + ": ";
  if (!j.is_object()) return Expected<SavedValidation>::fail(at + "/", "expected a validation report (an object)");
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kValidationReportFormat)
    return Expected<SavedValidation>::fail(at + "/format", std::string("expected \"") + kValidationReportFormat +
                                                               "\" (a file written by monarch-sim validate --save)");
  SavedValidation saved;
  for (const auto& [key, out] : {std::pair{"cases_file", &saved.cases_file}, std::pair{"backend", &saved.backend}}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Expected<SavedValidation>::fail(at + "/" + key, "missing, expected a string");
    *out = it->get<std::string>();
  }
  const auto cases = j.find("cases");
  if (cases == j.end() || !cases->is_array()) return Expected<SavedValidation>::fail(at + "/cases", "missing, expected an array");
  for (size_t i = 0; i < cases->size(); ++i) {
    Expected<ValidationRow> r = row_from_json((*cases)[i], at + "/cases/" + std::to_string(i));
    if (!r) return r.problems();
    const bool duplicate = std::any_of(saved.rows.begin(), saved.rows.end(), [&](const ValidationRow& x) { return x.id == r->id; });
    if (duplicate) return Expected<SavedValidation>::fail(at + "/cases/" + std::to_string(i) + "/id", "\"" + r->id + "\" appears twice");
    saved.rows.push_back(std::move(*r));
  }
  return saved;
}

ReportChange compare_reports(const std::vector<ValidationRow>& before, const std::vector<ValidationRow>& now) {
  ReportChange ch;
  std::map<std::string, const ValidationRow*> by_id;
  for (const ValidationRow& r : before) by_id[r.id] = &r;
  std::vector<ValidationRow> matched_before, matched_now;
  for (const ValidationRow& r : now) {
    const auto it = by_id.find(r.id);
    if (it == by_id.end()) {
      ch.added.push_back(r.id);
      continue;
    }
    const ValidationRow& b = *it->second;
    by_id.erase(it);
    matched_before.push_back(b);
    matched_before.back().group = r.group;  // figures by the current report's groups
    matched_now.push_back(r);
    CaseChange c;
    c.id = r.id;
    c.error_before_pct = b.error_pct;
    c.error_now_pct = r.error_pct;
    c.iteration_before_s = b.iteration_time_s;
    c.iteration_now_s = r.iteration_time_s;
    c.plan_before = b.plan;
    c.plan_now = r.plan;
    const auto sb = term_seconds(b), sn = term_seconds(r);
    for (size_t i = 0; i < kTerms; ++i)
      if (std::fabs(sn[i] - sb[i]) > std::fabs(c.moved_s)) {
        c.moved_s = sn[i] - sb[i];
        c.moved_term = kTermNames[i];
      }
    ch.cases.push_back(std::move(c));
  }
  for (const ValidationRow& r : before)
    if (by_id.count(r.id)) ch.removed.push_back(r.id);
  std::stable_sort(ch.cases.begin(), ch.cases.end(), [](const CaseChange& a, const CaseChange& b) {
    return std::fabs(a.error_now_pct - a.error_before_pct) > std::fabs(b.error_now_pct - b.error_before_pct);
  });
  ch.groups_before = group_stats(matched_before);
  ch.groups_now = group_stats(matched_now);
  ch.overall_before = error_stats(matched_before, std::nullopt);
  ch.overall_now = error_stats(matched_now, std::nullopt);
  return ch;
}

namespace {

void print_group_changes(const ReportChange& ch, std::ostream& out) {
  size_t width = 7;
  for (const ErrorStats& g : ch.groups_now) width = std::max(width, g.group.size());
  const int w = static_cast<int>(width);
  char line[768];
  std::snprintf(line, sizeof line, "%-*s  %5s %12s %12s %8s %12s %12s\n", w, "group", "cases", "MAPE before", "MAPE now",
                "change", "worst before", "worst now");
  out << line;
  auto row = [&](const ErrorStats& b, const ErrorStats& n) {
    std::snprintf(line, sizeof line, "%-*s  %5zu %11.2f%% %11.2f%% %+7.2f %11.1f%% %11.1f%%\n", w, n.group.c_str(), n.cases,
                  b.mape_pct, n.mape_pct, n.mape_pct - b.mape_pct, b.max_abs_error_pct, n.max_abs_error_pct);
    out << line;
  };
  // Both lists hold the matched cases' groups in the order of the current report's cases.
  for (size_t i = 0; i < ch.groups_now.size() && i < ch.groups_before.size(); ++i) row(ch.groups_before[i], ch.groups_now[i]);
  row(ch.overall_before, ch.overall_now);
}

}  // namespace

void print_report_change(const ReportChange& ch, const std::string& before_label, double min_change_pct, size_t max_cases,
                         std::ostream& out) {
  out << "\nagainst " << before_label << ": ";
  if (ch.cases.empty()) {
    out << "no case in common\n";
  } else {
    out << "the " << ch.cases.size() << " case(s) predicted in both\n";
    print_group_changes(ch, out);
  }
  std::vector<const CaseChange*> moved;
  for (const CaseChange& c : ch.cases)
    if (std::fabs(c.error_now_pct - c.error_before_pct) >= min_change_pct || c.plan_before != c.plan_now) moved.push_back(&c);
  char line[1024];
  std::snprintf(line, sizeof line, "\ncases whose error moved by %.2f points or more, or whose plan changed: %zu\n",
                min_change_pct, moved.size());
  out << line;
  for (size_t i = 0; i < moved.size() && i < max_cases; ++i) {
    const CaseChange& c = *moved[i];
    const double it_change_pct =
        c.iteration_before_s > 0 ? (c.iteration_now_s - c.iteration_before_s) / c.iteration_before_s * 100.0 : 0.0;
    std::snprintf(line, sizeof line, "  %-40s %+7.1f%% -> %+7.1f%%  iteration %+6.1f%%  moved most: %s %+.4g s\n",
                  c.id.c_str(), c.error_before_pct, c.error_now_pct, it_change_pct, c.moved_term, c.moved_s);
    out << line;
    if (c.plan_before != c.plan_now) out << "      plan " << c.plan_before << "\n        -> " << c.plan_now << "\n";
  }
  if (moved.size() > max_cases) out << "  ... and " << moved.size() - max_cases << " more\n";
  if (!ch.added.empty()) {
    out << "cases not in " << before_label << ":";
    for (const std::string& id : ch.added) out << " " << id;
    out << "\n";
  }
  if (!ch.removed.empty()) {
    out << "cases only in " << before_label << ":";
    for (const std::string& id : ch.removed) out << " " << id;
    out << "\n";
  }
}

}  // namespace monarch
