#include "sim/validate.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/scenario_io.h"
#include "sim/analytical_backend.h"
#include "strategies/dlrm_sharding.h"

namespace monarch {

namespace {

bool known_metric(const std::string& m) {
  return m == "iteration_time_s" || m == "tokens_per_s" || m == "samples_per_s" || m == "mfu" ||
         m == "model_tflops_per_gpu";
}

// A recommendation model's result counts samples where a transformer's counts tokens.
double metric_of(const BackendResult& r, const std::string& m) {
  if (m == "iteration_time_s") return r.iteration_time_s;
  if (m == "tokens_per_s" || m == "samples_per_s") return r.tokens_per_s;
  if (m == "mfu") return r.mfu;
  return r.model_tflops_per_gpu;
}

}  // namespace

Expected<ValidationReport> validate_cases(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Expected<ValidationReport>::fail(path, "cannot read: " + ec.message());
  if (size > static_cast<uintmax_t>(kMaxScenarioFileBytes))
    return Expected<ValidationReport>::fail(path, "larger than " + std::to_string(kMaxScenarioFileBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<ValidationReport>::fail(path, "cannot open");
  std::stringstream buf;
  buf << in.rdbuf();
  Expected<nlohmann::json> parsed = parse_json_text(buf.str(), path);
  if (!parsed) return parsed.problems();
  const nlohmann::json& j = *parsed;
  if (!j.is_array()) return Expected<ValidationReport>::fail(path + ": /", "expected an array of cases");
  if (j.empty()) return Expected<ValidationReport>::fail(path + ": /", "no cases");
  const std::string base_dir = std::filesystem::path(path).parent_path().string();

  ValidationReport report;
  Problems problems;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = path + ": /" + std::to_string(i);
    const nlohmann::json& c = j[i];
    if (!c.is_object()) {
      problems.push_back({at, "expected an object {id, scenario, target}"});
      continue;
    }
    ValidationRow row;
    row.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "#" + std::to_string(i);
    const auto target = c.find("target");
    if (target == c.end() || !target->is_object()) {
      problems.push_back({at + "/target", "missing, expected {metric, value}"});
      continue;
    }
    const auto metric = target->find("metric");
    const auto value = target->find("value");
    if (metric == target->end() || !metric->is_string() || !known_metric(metric->get<std::string>())) {
      problems.push_back({at + "/target/metric",
                          "expected \"iteration_time_s\", \"tokens_per_s\", \"samples_per_s\", \"mfu\" or "
                          "\"model_tflops_per_gpu\""});
      continue;
    }
    if (value == target->end() || !value->is_number() || !(value->get<double>() > 0) ||
        !std::isfinite(value->get<double>())) {
      problems.push_back({at + "/target/value", "expected a positive number"});
      continue;
    }
    row.metric = metric->get<std::string>();
    row.measured = value->get<double>();
    const auto sj = c.find("scenario");
    if (sj == c.end() || !sj->is_object()) {
      problems.push_back({at + "/scenario", "missing, expected a scenario object"});
      continue;
    }
    Expected<Scenario> sc = scenario_from_json(*sj, base_dir.empty() ? "." : base_dir);
    if (!sc) {
      for (const Problem& p : sc.problems()) problems.push_back({at + "/scenario" + p.where, p.message});
      continue;
    }
    BackendResult r;
    if (sc->model.architecture == Architecture::kDlrm) {
      // The best embedding sharding the planner finds, as `monarch-sim SCENARIO` reports it.
      const DlrmSearchResult dr = search_dlrm_sharding(*sc);
      if (!dr.any_fits()) {
        problems.push_back({at + "/scenario/model/embedding_tables", dr.no_fit_message});
        continue;
      }
      r = dr.ranked.front().result;
    } else {
      Expected<Plan> plan = resolve_plan(*sc);
      if (!plan) {
        for (const Problem& p : plan.problems()) problems.push_back({at + "/scenario" + p.where, p.message});
        continue;
      }
      r = run_analytical(*sc, *plan);
    }
    if (!(r.iteration_time_s > 0)) {
      problems.push_back({at + "/scenario/parallelism", "the plan cannot run"});
      continue;
    }
    row.predicted = metric_of(r, row.metric);
    row.fits = r.memory.fits;
    row.error_pct = (row.predicted - row.measured) / row.measured * 100.0;
    report.rows.push_back(row);
  }
  if (!problems.empty()) return problems;
  double sum = 0;
  for (const ValidationRow& row : report.rows) {
    sum += std::fabs(row.error_pct);
    if (std::fabs(row.error_pct) > report.max_abs_error_pct) {
      report.max_abs_error_pct = std::fabs(row.error_pct);
      report.worst_id = row.id;
    }
  }
  report.mape_pct = sum / static_cast<double>(report.rows.size());
  return report;
}

int run_validate(const std::string& cases_path, std::optional<double> max_mape_pct, std::ostream& out,
                 std::ostream& err) {
  if (max_mape_pct && !(*max_mape_pct >= 0 && std::isfinite(*max_mape_pct))) {
    err << "--max-mape: found " << *max_mape_pct << ", expected a percentage >= 0\n";
    return 2;
  }
  Expected<ValidationReport> rep = validate_cases(cases_path);
  if (!rep) {
    for (const Problem& p : rep.problems()) err << p.to_string() << "\n";
    return 2;
  }
  size_t width = 4;
  for (const ValidationRow& r : rep->rows) width = std::max(width, r.id.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-20s %12s %12s %9s\n", static_cast<int>(width), "case", "metric", "predicted",
                "measured", "error");
  out << line;
  for (const ValidationRow& r : rep->rows) {
    std::snprintf(line, sizeof line, "%-*s  %-20s %12.4g %12.4g %+8.1f%%%s\n", static_cast<int>(width), r.id.c_str(),
                  r.metric.c_str(), r.predicted, r.measured, r.error_pct, r.fits ? "" : "  (does not fit in memory)");
    out << line;
  }
  std::snprintf(line, sizeof line, "MAPE %.2f%% over %zu cases; worst %.1f%% (%s)\n", rep->mape_pct, rep->rows.size(),
                rep->max_abs_error_pct, rep->worst_id.c_str());
  out << line;
  if (max_mape_pct && rep->mape_pct > *max_mape_pct) {
    std::snprintf(line, sizeof line, "MAPE %.2f%% exceeds --max-mape %.2f%%\n", rep->mape_pct, *max_mape_pct);
    err << line;
    return 1;
  }
  return 0;
}

}  // namespace monarch
