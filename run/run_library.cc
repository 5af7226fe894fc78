#include "run/run_library.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/goodput.h"
#include "core/model_math.h"
#include "core/plan_io.h"
#include "core/result_io.h"
#include "core/scenario_io.h"
#include "sim/chrome_trace_io.h"
#include "strategies/dlrm_sharding.h"
#include "strategies/plan_costs.h"

namespace monarch::run {
namespace {

bool has_backend(const std::vector<Backend>& v, Backend b) { return std::find(v.begin(), v.end(), b) != v.end(); }

RunOutcome stop(RunOutcome out, RunEnd end, Problems problems) {
  out.end = end;
  out.problems = std::move(problems);
  return out;
}

// Problems prefixed with where they arose ("lowering tp2 pp1 ...: ..."); a problem that
// already names that place (a real runtime's "--backend real-cpu") keeps its own form.
Problems prefixed(const std::string& where, const Problems& problems) {
  Problems out;
  for (const Problem& p : problems) out.push_back(p.where == where ? p : Problem{where, p.to_string()});
  return out;
}

// A backend the request selected (or that a trace needs); nullptr when this build lacks it.
std::unique_ptr<ExecutionBackend> backend_or_null(Backend kind, const RunRequest& request) {
  auto b = make_backend(kind, request.settings, "");
  return b ? std::move(b).value() : nullptr;
}

// A failed real run: the problems, and the entry to record as failed.
RunOutcome real_run_failed(RunOutcome out, Backend backend, const Plan& plan, const Problems& problems) {
  BackendResult failed;
  failed.backend = to_string(backend);
  failed.plan = plan;
  failed.measured = true;
  out.failed_run = failed;
  return stop(std::move(out), RunEnd::kFailed, prefixed(std::string("--backend ") + to_string(backend), problems));
}

// Ranks counted from 1, one per plan: consecutive entries of the same plan share it.
void number_by_plan(std::vector<RunEntry>& entries) {
  int64_t rank = 0;
  const Plan* last = nullptr;
  for (RunEntry& e : entries) {
    if (!last || !(*last == e.result.plan)) ++rank;
    last = &e.result.plan;
    e.rank = rank;
  }
}

// The reliability figures of a result (the scenario's reliability block): the closed form, and
// the Monte Carlo for the chosen plan.
void attach_reliability(const Scenario& s, BackendResult& r, bool monte_carlo) {
  r.reliability = predict_reliability(s, r.plan, r.iteration_time_s, monte_carlo);
}

// --- transformer plans (dense and MoE)

RunOutcome run_transformer(const Scenario& s, const RunRequest& request, const RunEvents& events) {
  RunOutcome out;
  RunReport& report = out.report;
  report.scenario = s;
  const RunControl& control = events.control;
  const bool want_simgrid = has_backend(request.backends, Backend::kSimgrid);
  const bool want_real_cpu = has_backend(request.backends, Backend::kRealCpu);

  SearchOptions so;
  so.top_k = s.search.top_k;
  so.jobs = request.search_jobs;
  so.cancelled = [&control] { return control.is_cancelled(); };
  so.progress = [&control](int64_t done, int64_t total) { control.report("searching plans", done, total); };
  so.estimated = events.estimated;
  report.search = search_plans_analytical(s, so);
  const SearchResult& sr = report.search;
  if (sr.cancelled || control.is_cancelled()) return stop(std::move(out), RunEnd::kCancelled, {});
  if (!sr.any_fits()) return stop(std::move(out), RunEnd::kNoPlanFits, {{"", sr.no_fit_message}});

  const std::unique_ptr<ExecutionBackend> analytical_backend = backend_or_null(Backend::kAnalytical, request);
  assert(analytical_backend);  // always built; the settings were checked by run_scenario
  std::vector<BackendResult> analytical;
  for (const auto& rp : sr.ranked) {
    analytical.push_back(*analytical_backend->run(s, Candidate{rp.plan}, control));
    attach_reliability(s, analytical.back(), analytical.size() == 1);
  }
  if (sr.baseline) {
    report.baseline = *analytical_backend->run(s, Candidate{sr.baseline->plan}, control);
    attach_reliability(s, *report.baseline, false);
  }
  report.rejected = sr.rejected_for_report(100);
  report.parameters = parameter_counts(model_shape(s.model)).total;
  for (const auto& r : analytical) report.entries.push_back({0, r, ""});
  number_by_plan(report.entries);
  if (events.ranked) events.ranked(report);

  // SimGrid re-ranks the best few (or simulates the best one for the trace).
  std::map<size_t, BackendResult> simgrid_results;  // index into analytical
  if (want_simgrid || (request.want_trace && !want_real_cpu)) {
    if (auto simgrid = backend_or_null(Backend::kSimgrid, request)) {
      const size_t n = want_simgrid ? std::min(kRerankTopPlans, analytical.size()) : 1;
      for (size_t i = 0; i < n; ++i) {
        control.report("simulating plan " + std::to_string(i + 1) + " of " + std::to_string(n) + " with SimGrid", 0, 0);
        // The backend lowers the plan itself: one data-parallel replica when that is all it
        // simulates (the chosen plan's whole graph, for --emit-plan, is lowered below).
        Candidate c{analytical[i].plan};
        auto r = simgrid->run(s, c, control);
        if (control.is_cancelled()) return stop(std::move(out), RunEnd::kCancelled, {});
        if (!r) return stop(std::move(out), RunEnd::kInvalid, r.problems());
        attach_reliability(s, *r, i == 0);
        if (want_simgrid && events.entry) events.entry({static_cast<int64_t>(i + 1), *r, ""});
        simgrid_results.emplace(i, std::move(r).value());
      }
    }
  }

  // The re-ranked plans by their SimGrid time first, then the rest; analytical first per plan.
  std::vector<size_t> order(analytical.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (want_simgrid && !simgrid_results.empty() && s.search.objective == Objective::kIterationTime) {
    std::stable_sort(order.begin(), order.begin() + static_cast<long>(simgrid_results.size()), [&](size_t a, size_t b) {
      return simgrid_results.at(a).iteration_time_s < simgrid_results.at(b).iteration_time_s;
    });
  }
  std::vector<BackendResult> results;
  for (size_t i : order) {
    results.push_back(analytical[i]);
    if (want_simgrid && simgrid_results.count(i)) results.push_back(simgrid_results.at(i));
  }
  if (report.chosen_graph && !(report.chosen_graph->plan == results.front().plan)) report.chosen_graph.reset();

  // The real runtimes train the chosen plan.
  for (Backend real : {Backend::kRealCpu, Backend::kRealGpu}) {
    if (!has_backend(request.backends, real)) continue;
    auto backend = backend_or_null(real, request);
    if (!backend) continue;  // refused by check_request already
    Candidate c{results.front().plan};
    auto g = lower_candidate(s, c);
    if (!g) return stop(std::move(out), RunEnd::kFailed, prefixed("lowering " + describe(c.plan), g.problems()));
    c.graph = &*g;
    control.report(std::string("training the chosen plan on ") + std::to_string(c.plan.world_size()) +
                       (real == Backend::kRealGpu ? " GPU" : " CPU") + " processes",
                   0, 0);
    auto r = backend->run(s, c, control);
    if (!r) return real_run_failed(std::move(out), real, c.plan, r.problems());
    attach_reliability(s, *r, true);
    if (events.entry) events.entry({1, *r, ""});
    results.insert(results.begin() + 1, std::move(r).value());
  }

  if (request.lower_chosen_plan && !report.chosen_graph) {
    auto g = lower_candidate(s, Candidate{results.front().plan});
    if (!g) return stop(std::move(out), RunEnd::kFailed, prefixed("--emit-plan", g.problems()));
    report.chosen_graph = std::move(g).value();
  }
  if (request.want_trace) {
    // The measured step of the real CPU run when there is one, else the SimGrid simulation of
    // the chosen plan, else the first simulated one.
    const BackendResult* traced = nullptr;
    for (const auto& r : results)
      if (r.backend == "real-cpu" && !r.timeline.empty()) traced = &r;
    if (!traced)
      for (const auto& [i, r] : simgrid_results)
        if (analytical[i].plan == results.front().plan) traced = &r;
    if (!traced && !simgrid_results.empty()) traced = &simgrid_results.begin()->second;
    if (!traced) return stop(std::move(out), RunEnd::kFailed, {{"--trace", "no backend of this run recorded a timeline"}});
    report.traced = *traced;
  }
  report.entries.clear();
  for (auto& r : results) report.entries.push_back({0, std::move(r), ""});
  number_by_plan(report.entries);
  return out;
}

// --- recommendation models (DLRM): embedding-table sharding plans

RunOutcome run_recommendation(const Scenario& s, const RunRequest& request, const RunEvents& events) {
  RunOutcome out;
  RunReport& report = out.report;
  report.scenario = s;
  report.recommendation = true;
  const RunControl& control = events.control;
  if (request.lower_chosen_plan)
    return stop(std::move(out), RunEnd::kInvalid,
                {{"--emit-plan", "plan files are for transformer plans; dlrm sharding plans have none in this version"}});
  const bool want_simgrid = has_backend(request.backends, Backend::kSimgrid);
  DlrmSearchResult dr = search_dlrm_sharding(s);
  if (!dr.any_fits()) return stop(std::move(out), RunEnd::kNoPlanFits, {{"", dr.no_fit_message}});

  struct Row {
    size_t ranked = 0;               // index into dr.ranked
    std::vector<RunEntry> entries;   // analytical first, then the other backends
  };
  std::vector<Row> rows;
  auto add_row = [&](size_t k) {
    const auto& rp = dr.ranked[k];
    rows.push_back({k, {{0, rp.result, rp.sharding.name + ": " + describe(rp.sharding)}}});
  };
  for (size_t k = 0; k < dr.ranked.size() && static_cast<int64_t>(k) < s.search.top_k; ++k) add_row(k);
  for (const auto& t : s.model.dlrm.tables) report.parameters += t.rows * t.dim;
  report.parameters += dlrm_dense_shape(s.model.dlrm).dense_params();
  report.rejected = dr.rejected;
  auto flatten = [&] {
    report.entries.clear();
    for (size_t i = 0; i < rows.size(); ++i)
      for (const RunEntry& e : rows[i].entries) report.entries.push_back({static_cast<int64_t>(i + 1), e.result, e.sharding});
  };
  flatten();
  if (events.ranked) events.ranked(report);

  // SimGrid re-ranks the best few (or simulates the best one for the trace).
  if (want_simgrid || request.want_trace) {
    if (auto simgrid = backend_or_null(Backend::kSimgrid, request)) {
      const size_t n = want_simgrid ? std::min(kRerankTopPlans, rows.size()) : 1;
      for (size_t i = 0; i < n; ++i) {
        control.report("simulating sharding plan " + std::to_string(i + 1) + " of " + std::to_string(n) + " with SimGrid",
                       0, 0);
        Candidate c{dr.ranked[i].result.plan, dr.ranked[i].sharding};
        auto g = lower_candidate(s, c);
        if (!g) return stop(std::move(out), RunEnd::kFailed, prefixed("lowering " + rows[i].entries.front().sharding, g.problems()));
        c.graph = &*g;
        auto r = simgrid->run(s, c, control);
        if (control.is_cancelled()) return stop(std::move(out), RunEnd::kCancelled, {});
        if (!r) return stop(std::move(out), RunEnd::kInvalid, r.problems());
        if (i == 0 && request.want_trace) report.traced = *r;
        if (!want_simgrid) break;
        RunEntry e{static_cast<int64_t>(i + 1), std::move(r).value(), rows[i].entries.front().sharding};
        if (events.entry) events.entry(e);
        rows[i].entries.push_back(std::move(e));
      }
      if (want_simgrid && s.search.objective == Objective::kIterationTime)
        std::stable_sort(rows.begin(), rows.begin() + static_cast<long>(std::min(kRerankTopPlans, rows.size())),
                         [](const Row& a, const Row& b) {
                           return a.entries.back().result.iteration_time_s < b.entries.back().result.iteration_time_s;
                         });
    }
  }

  // The CPU runtime trains the best plan it can run (no column-wise tables).
  if (has_backend(request.backends, Backend::kRealCpu)) {
    if (auto real = backend_or_null(Backend::kRealCpu, request)) {
      size_t k = 0;
      auto column_wise = [](const TablePlacement& p) { return p.kind == TableSharding::kColumnWise; };
      while (k < dr.ranked.size() &&
             std::any_of(dr.ranked[k].sharding.tables.begin(), dr.ranked[k].sharding.tables.end(), column_wise))
        ++k;
      if (k == dr.ranked.size())
        return stop(std::move(out), RunEnd::kInvalid,
                    {{"--backend real-cpu", "every fitting sharding plan has column-wise tables, which the CPU runtime does not run"}});
      auto row = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.ranked == k; });
      if (row == rows.end()) {
        add_row(k);
        row = rows.end() - 1;
      }
      control.report("training sharding plan " + describe(dr.ranked[k].sharding) + " on " +
                         std::to_string(s.cluster.num_gpus) + " CPU processes",
                     0, 0);
      auto r = real->run(s, Candidate{dr.ranked[k].result.plan, dr.ranked[k].sharding}, control);
      if (!r) return real_run_failed(std::move(out), Backend::kRealCpu, dr.ranked[k].result.plan, r.problems());
      RunEntry e{static_cast<int64_t>(row - rows.begin() + 1), std::move(r).value(), row->entries.front().sharding};
      if (events.entry) events.entry(e);
      row->entries.insert(row->entries.begin() + 1, std::move(e));
    }
  }
  flatten();
  return out;
}

// Writes `text` to `path` through a temporary file renamed into place.
Problems write_file_atomically(const std::string& path, const std::string& text, const std::string& option) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return {{option, "cannot write " + path + " (check the directory exists and is writable)"}};
    out << text;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      return {{option, "writing " + path + " failed (disk full?)"}};
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    return {{option, "cannot write " + path + ": " + ec.message()}};
  }
  return {};
}

// Problems with an empty JSON path named after the file's option.
Problems named(const std::string& option, Problems problems) {
  for (Problem& p : problems)
    if (p.where.empty()) p.where = option;
  return problems;
}

}  // namespace

Problems check_request(const RunRequest& request, const std::string& backends_where) {
  Problems problems;
  for (Backend b : request.backends) {
    auto made = make_backend(b, BackendSettings{}, backends_where);
    if (!made) problems.insert(problems.end(), made.problems().begin(), made.problems().end());
  }
  if (!problems.empty()) return problems;
  return check_settings(request.settings);
}

RunOutcome run_scenario(const Scenario& scenario, const RunRequest& request, const RunEvents& events) {
  Problems bad = check_settings(request.settings);
  if (!bad.empty()) {
    RunOutcome out;
    out.report.scenario = scenario;
    return stop(std::move(out), RunEnd::kInvalid, std::move(bad));
  }
  if (scenario.model.architecture == Architecture::kDlrm) return run_recommendation(scenario, request, events);
  return run_transformer(scenario, request, events);
}

Expected<BackendResult> run_plan(const Scenario& scenario, const Candidate& candidate, Backend backend,
                                 const BackendSettings& settings, const RunControl& control) {
  auto b = make_backend(backend, settings, "backend");
  if (!b) return b.problems();
  return (*b)->run(scenario, candidate, control);
}

std::string result_file_text(const RunReport& report) {
  ResultFile file;
  file.scenario = scenario_to_json(report.scenario);
  file.parameters = report.parameters;
  for (const RunEntry& e : report.entries) file.results.push_back({&e.result, e.rank, e.sharding});
  file.rejected = report.rejected;
  if (!report.recommendation) {
    if (report.baseline) {
      file.baseline = &*report.baseline;
      file.baseline_note = report.search.baseline_note;
    }
    const SearchResult& sr = report.search;
    file.search = ResultFileSearch{sr.plans_in_space, sr.plans_evaluated, sr.plans_fitting, sr.plans_rejected};
  }
  return result_file_to_json(file).dump(2) + "\n";
}

Problems write_outputs(const RunReport& report, const OutputPaths& paths) {
  if (!paths.plan_file.empty()) {
    assert(report.chosen_graph);
    const Problems pr = write_plan_file(paths.plan_file, *report.chosen_graph, &report.scenario);
    if (!pr.empty()) return named("--emit-plan", pr);
  }
  if (!paths.trace_file.empty() && report.traced) {
    TraceMetadata meta;
    meta.scenario = report.scenario.name;
    meta.world_size = report.recommendation ? report.scenario.cluster.num_gpus : report.traced->plan.world_size();
    const Problems pr = write_chrome_trace(paths.trace_file, *report.traced, meta);
    if (!pr.empty()) return named("--trace", pr);
  }
  if (!paths.result_file.empty()) return write_file_atomically(paths.result_file, result_file_text(report), "--output");
  return {};
}

std::vector<RunRecord> run_records(const RunReport& report, TimePoint started_at) {
  const std::string scenario_json = scenario_to_json(report.scenario).dump();
  std::vector<RunRecord> records;
  for (const RunEntry& e : report.entries) {
    RunRecord rec;
    rec.scenario_name = report.scenario.name;
    rec.scenario_json = scenario_json;
    rec.parameters = report.parameters;
    rec.result = e.result;
    rec.started_at = started_at;
    rec.ended_at = std::chrono::system_clock::now();
    records.push_back(std::move(rec));
  }
  return records;
}

Expected<std::vector<int64_t>> record_runs(Store& store, const RunReport& report, TimePoint started_at) {
  std::vector<int64_t> ids;
  for (RunRecord& rec : run_records(report, started_at)) {
    rec.ended_at = std::chrono::system_clock::now();
    auto id = store.record_run(rec);
    if (!id) return prefixed("--db " + store.path(), id.problems());
    ids.push_back(*id);
  }
  return ids;
}

Expected<int64_t> record_failed_run(Store& store, const Scenario& scenario, const BackendResult& failed,
                                    const std::string& why, TimePoint started_at) {
  RunRecord rec;
  rec.scenario_name = scenario.name;
  rec.scenario_json = scenario_to_json(scenario).dump();
  rec.result = failed;
  rec.started_at = started_at;
  rec.ended_at = std::chrono::system_clock::now();
  rec.status = RunStatus::kFailed;
  rec.error_message = why;
  return store.record_run(rec);
}

}  // namespace monarch::run
