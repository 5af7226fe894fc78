#include "sim/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/scenario_io.h"
#include "core/text_file.h"
#include "sim/analytical_backend.h"
#include "sim/validate_report.h"
#include "strategies/dlrm_sharding.h"
#include "strategies/plan_costs.h"

namespace monarch {

namespace {

constexpr const char* kInterruptedMessage = "interrupted before every case was predicted";

// The plan a case predicts: what the published run fixed is pinned in the scenario, the rest is
// searched, and the best plan of the search is compared with the measurement. The layers stay
// split as the run's framework splits them by default (Megatron-LM evenly, Megatron-DeepSpeed's
// PipelineModule by transformer layers), not re-balanced as a planning search may propose.
// Without a fitting plan, resolve_plan gives the pinned plan with Megatron's defaults (or the
// reason it cannot be formed).
Expected<Plan> case_plan(const Scenario& sc) {
  SearchOptions options;
  options.top_k = 1;
  options.balance_pipeline = false;
  const SearchResult found = search_plans_analytical(sc, options);
  if (found.any_fits()) return found.ranked.front().plan;
  return resolve_plan(sc);
}

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

TimeShares shares_of(const BackendResult& r) {
  TimeShares s;
  const double t = r.iteration_time_s;
  if (!(t > 0)) return s;
  const TimeBreakdown& b = r.time_breakdown_s;
  s.compute = b.compute / t;
  s.exposed_comm = b.exposed_comm / t;
  s.bubble = b.bubble / t;
  s.optimizer = b.optimizer / t;
  s.host = b.host / t;
  return s;
}

// The largest share other than compute: the term beside the GEMMs that shapes the case.
std::pair<const char*, double> leading_overhead(const TimeShares& s) {
  const std::pair<const char*, double> terms[] = {
      {"exposed comm", s.exposed_comm}, {"bubble", s.bubble}, {"optimizer", s.optimizer}, {"host floor", s.host}};
  const auto* best = &terms[0];
  for (const auto& t : terms)
    if (t.second > best->second) best = &t;
  return best->second > 0 ? *best : std::pair<const char*, double>{"-", 0.0};
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Expected<ValidationReport> validate_cases(const std::string& path, const ValidationSettings& settings) {
  Expected<nlohmann::json> parsed = read_json_file(path);
  if (!parsed) return parsed.problems();
  const nlohmann::json& j = *parsed;
  if (!j.is_array()) return Expected<ValidationReport>::fail(path + ": /", "expected an array of cases");
  if (j.empty()) return Expected<ValidationReport>::fail(path + ": /", "no cases");
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  const CasePredictor predict = settings.predictor
                                    ? settings.predictor
                                    : CasePredictor([](const Scenario& s, const Plan& p) -> Expected<BackendResult> {
                                        return run_analytical(s, p);
                                      });

  ValidationReport report;
  Problems problems;
  for (size_t i = 0; i < j.size(); ++i) {
    if (settings.cancelled && settings.cancelled()) return Expected<ValidationReport>::fail(path, kInterruptedMessage);
    if (settings.progress && i > 0) settings.progress(i, j.size());
    const std::string at = path + ": /" + std::to_string(i);
    const nlohmann::json& c = j[i];
    if (!c.is_object()) {
      problems.push_back({at, "expected an object {id, scenario, target}"});
      continue;
    }
    ValidationRow row;
    // A case without an id is named by its index ("#3"; appended, as operator+ trips GCC 12's
    // -Wrestrict false positive).
    row.id = "#";
    if (c.contains("id") && c["id"].is_string()) row.id = c["id"].get<std::string>();
    else row.id += std::to_string(i);
    if (c.contains("group")) {
      if (!c["group"].is_string()) {
        problems.push_back({at + "/group", "expected a string"});
        continue;
      }
      row.group = c["group"].get<std::string>();
    }
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
    Expected<BackendResult> r = BackendResult{};
    if (sc->model.architecture == Architecture::kDlrm) {
      // The best embedding sharding the planner finds, as `monarch-sim SCENARIO` reports it
      // (analytical: the case predictor applies to transformer plans).
      const DlrmSearchResult dr = search_dlrm_sharding(*sc);
      if (!dr.any_fits()) {
        problems.push_back({at + "/scenario/model/embedding_tables", dr.no_fit_message});
        continue;
      }
      row.gpus = sc->cluster.num_gpus;
      if (settings.max_gpus && row.gpus > *settings.max_gpus) {
        report.skipped.push_back(row.id);
        continue;
      }
      r = dr.ranked.front().result;
      row.plan = describe(dr.ranked.front().result.plan);
    } else {
      Expected<Plan> plan = case_plan(*sc);
      if (!plan) {
        for (const Problem& p : plan.problems()) problems.push_back({at + "/scenario" + p.where, p.message});
        continue;
      }
      row.gpus = plan->world_size();
      if (settings.max_gpus && row.gpus > *settings.max_gpus) {
        report.skipped.push_back(row.id);
        continue;
      }
      r = predict(*sc, *plan);
      row.plan = describe(*plan);
      if (!r) {
        for (const Problem& p : r.problems()) problems.push_back({at + "/scenario" + p.where, p.message});
        continue;
      }
    }
    if (!(r->iteration_time_s > 0)) {
      problems.push_back({at + "/scenario/parallelism", "the plan cannot run"});
      continue;
    }
    row.predicted = metric_of(*r, row.metric);
    row.fits = r->memory.fits;
    row.error_pct = (row.predicted - row.measured) / row.measured * 100.0;
    row.iteration_time_s = r->iteration_time_s;
    row.shares = shares_of(*r);
    report.rows.push_back(row);
  }
  if (!problems.empty()) return problems;
  if (report.rows.empty())
    return Expected<ValidationReport>::fail(path + ": /", "every case is above --max-gpus; nothing to compare");
  report.groups = group_stats(report.rows);
  report.overall = error_stats(report.rows, std::nullopt);
  report.mape_pct = report.overall.mape_pct;
  report.max_abs_error_pct = report.overall.max_abs_error_pct;
  report.worst_id = report.overall.worst_id;
  return report;
}

ErrorStats error_stats(const std::vector<ValidationRow>& rows, const std::optional<std::string>& group) {
  ErrorStats st;
  st.group = group ? (group->empty() ? "(no group)" : *group) : "overall";
  std::vector<double> signed_errors;
  double abs_sum = 0, signed_sum = 0;
  for (const ValidationRow& r : rows) {
    if (group && r.group != *group) continue;
    signed_errors.push_back(r.error_pct);
    abs_sum += std::fabs(r.error_pct);
    signed_sum += r.error_pct;
    if (std::fabs(r.error_pct) > st.max_abs_error_pct || st.worst_id.empty()) {
      st.max_abs_error_pct = std::fabs(r.error_pct);
      st.worst_id = r.id;
    }
  }
  st.cases = signed_errors.size();
  if (st.cases == 0) return st;
  st.mape_pct = abs_sum / static_cast<double>(st.cases);
  st.mean_signed_error_pct = signed_sum / static_cast<double>(st.cases);
  st.median_error_pct = median_of(signed_errors);
  return st;
}

std::vector<ErrorStats> group_stats(const std::vector<ValidationRow>& rows) {
  std::vector<ErrorStats> groups;
  std::vector<std::string> seen;
  for (const ValidationRow& r : rows) {
    if (std::find(seen.begin(), seen.end(), r.group) != seen.end()) continue;
    seen.push_back(r.group);
    groups.push_back(error_stats(rows, r.group));
  }
  return groups;
}

namespace {

void print_rows(const ValidationReport& rep, std::ostream& out) {
  size_t width = 4;
  for (const ValidationRow& r : rep.rows) width = std::max(width, r.id.size());
  const int w = static_cast<int>(width);
  char line[768];
  std::snprintf(line, sizeof line, "%-*s  %-20s %6s %12s %12s %9s  %7s %6s %6s %6s %6s\n", w, "case", "metric", "gpus",
                "predicted", "measured", "error", "compute", "comm", "bubble", "optim", "host");
  out << line;
  for (const ValidationRow& r : rep.rows) {
    const TimeShares& s = r.shares;
    std::snprintf(line, sizeof line, "%-*s  %-20s %6lld %12.4g %12.4g %+8.1f%%  %6.0f%% %5.0f%% %5.0f%% %5.0f%% %5.0f%%%s\n", w,
                  r.id.c_str(), r.metric.c_str(), static_cast<long long>(r.gpus), r.predicted, r.measured, r.error_pct,
                  100 * s.compute, 100 * s.exposed_comm, 100 * s.bubble, 100 * s.optimizer, 100 * s.host,
                  r.fits ? "" : "  (does not fit in memory)");
    out << line;
  }
}

void print_stats(const ValidationReport& rep, std::ostream& out) {
  size_t width = 7;
  for (const ErrorStats& g : rep.groups) width = std::max(width, g.group.size());
  const int w = static_cast<int>(width);
  char line[768];
  std::snprintf(line, sizeof line, "\n%-*s  %5s %8s %8s %8s %8s  %s\n", w, "group", "cases", "MAPE", "median", "mean", "worst",
                "worst case");
  out << line;
  auto row = [&](const ErrorStats& g) {
    std::snprintf(line, sizeof line, "%-*s  %5zu %7.2f%% %+7.1f%% %+7.1f%% %7.1f%%  %s\n", w, g.group.c_str(), g.cases,
                  g.mape_pct, g.median_error_pct, g.mean_signed_error_pct, g.max_abs_error_pct, g.worst_id.c_str());
    out << line;
  };
  for (const ErrorStats& g : rep.groups) row(g);
  row(rep.overall);
}

void print_worst(const ValidationReport& rep, size_t n, std::ostream& out) {
  std::vector<const ValidationRow*> order;
  for (const ValidationRow& r : rep.rows) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const ValidationRow* a, const ValidationRow* b) {
    return std::fabs(a->error_pct) > std::fabs(b->error_pct);
  });
  order.resize(std::min(n, order.size()));
  out << "\nworst cases (error; the largest term beside compute, its share of the predicted time):\n";
  char line[512];
  for (const ValidationRow* r : order) {
    const auto [term, share] = leading_overhead(r->shares);
    std::snprintf(line, sizeof line, "  %-40s %+7.1f%%  %s %.0f%%\n", r->id.c_str(), r->error_pct, term, 100 * share);
    out << line;
  }
}

// The plan behind each prediction: what the search chose for what the case leaves open.
void print_plans(const ValidationReport& rep, std::ostream& out) {
  size_t width = 4;
  for (const ValidationRow& r : rep.rows) width = std::max(width, r.id.size());
  out << "\nplans predicted:\n";
  for (const ValidationRow& r : rep.rows) out << "  " << r.id << std::string(width - r.id.size() + 2, ' ') << r.plan << "\n";
}

}  // namespace

int run_validate(const std::string& cases_path, const ValidationSettings& settings, std::ostream& out, std::ostream& err) {
  if (settings.max_mape_pct && !(*settings.max_mape_pct >= 0 && std::isfinite(*settings.max_mape_pct))) {
    err << "--max-mape: found " << *settings.max_mape_pct << ", expected a percentage >= 0\n";
    return 2;
  }
  if (settings.max_gpus && *settings.max_gpus < 1) {
    err << "--max-gpus: found " << *settings.max_gpus << ", expected at least 1\n";
    return 2;
  }
  std::error_code same_ec;
  if (!settings.save_path.empty() && std::filesystem::equivalent(settings.save_path, cases_path, same_ec)) {
    err << "--save: " << settings.save_path << " is the cases file; the report would replace it\n";
    return 2;
  }
  std::optional<SavedValidation> against;
  if (!settings.against_path.empty()) {
    Expected<SavedValidation> saved = read_validation_report(settings.against_path);
    if (!saved) {
      for (const Problem& p : saved.problems()) err << "--against: " << p.to_string() << "\n";
      return 2;
    }
    against = std::move(*saved);
  }
  Expected<ValidationReport> rep = validate_cases(cases_path, settings);
  if (settings.progress) settings.progress(0, 0);  // the end: the caller clears its line
  if (!rep) {
    for (const Problem& p : rep.problems()) err << p.to_string() << "\n";
    return settings.cancelled && settings.cancelled() ? kValidateInterrupted : 2;
  }
  if (!settings.save_path.empty()) {
    const std::string why = write_text_file_atomically(settings.save_path,
                                                       validation_report_json(*rep, cases_path, settings.backend_name));
    if (!why.empty()) {
      err << "--save: " << settings.save_path << ": " << why << "\n";
      return 2;
    }
  }
  print_rows(*rep, out);
  if (settings.show_plans) print_plans(*rep, out);
  print_stats(*rep, out);
  print_worst(*rep, settings.worst_cases, out);
  if (against) {
    const std::string label = settings.against_path + " (" + against->backend + " on " + against->cases_file + ")";
    ReportChange change = compare_reports(against->rows, rep->rows);
    // A case skipped by --max-gpus this time is not one the saved report alone holds.
    std::erase_if(change.removed, [&](const std::string& id) {
      return std::find(rep->skipped.begin(), rep->skipped.end(), id) != rep->skipped.end();
    });
    print_report_change(change, label, settings.min_change_pct, settings.changed_cases, out);
  }
  char line[512];
  if (!rep->skipped.empty()) {
    std::snprintf(line, sizeof line, "skipped %zu case(s) above --max-gpus %lld\n", rep->skipped.size(),
                  static_cast<long long>(*settings.max_gpus));
    out << line;
  }
  std::snprintf(line, sizeof line, "MAPE %.2f%% over %zu cases; worst %.1f%% (%s)\n", rep->mape_pct, rep->rows.size(),
                rep->max_abs_error_pct, rep->worst_id.c_str());
  out << line;
  if (settings.max_mape_pct && rep->mape_pct > *settings.max_mape_pct) {
    std::snprintf(line, sizeof line, "MAPE %.2f%% exceeds --max-mape %.2f%%\n", rep->mape_pct, *settings.max_mape_pct);
    err << line;
    return 1;
  }
  return 0;
}

int run_validate(const std::string& cases_path, std::optional<double> max_mape_pct, std::ostream& out,
                 std::ostream& err) {
  ValidationSettings settings;
  settings.max_mape_pct = max_mape_pct;
  return run_validate(cases_path, settings, out, err);
}

}  // namespace monarch
