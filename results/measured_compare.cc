#include "results/measured_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace monarch {

double DifferenceRow::error_pct() const {
  if (measured == 0) return std::numeric_limits<double>::quiet_NaN();
  return (predicted - measured) / std::fabs(measured) * 100.0;
}

std::vector<DifferenceRow> largest_differences(const BackendResult& m, const BackendResult& p) {
  std::vector<DifferenceRow> rows;
  auto add = [&](std::string label, double a, double b) {
    if (!std::isfinite(a) || !std::isfinite(b) || (a == 0 && b == 0)) return;
    rows.push_back({std::move(label), a, b});
  };
  add("iteration_time_s", m.iteration_time_s, p.iteration_time_s);
  const TimeBreakdown& x = m.time_breakdown_s;
  const TimeBreakdown& y = p.time_breakdown_s;
  add("compute_s", x.compute, y.compute);
  add("exposed_comm_s", x.exposed_comm, y.exposed_comm);
  add("bubble_s", x.bubble, y.bubble);
  add("tp_comm_s", x.tp_comm, y.tp_comm);
  add("cp_comm_s", x.cp_comm, y.cp_comm);
  add("pp_comm_s", x.pp_comm, y.pp_comm);
  add("dp_comm_s", x.dp_comm, y.dp_comm);
  add("ep_comm_s", x.ep_comm, y.ep_comm);
  add("peak_gib", m.memory.peak_gib, p.memory.peak_gib);
  std::map<std::pair<std::string, std::string>, std::pair<const CommEntry*, const CommEntry*>> comm;
  for (const CommEntry& c : m.communication) comm[{to_string(c.kind), group_name(c)}].first = &c;
  for (const CommEntry& c : p.communication) comm[{to_string(c.kind), group_name(c)}].second = &c;
  for (const auto& [key, pair] : comm) {
    const std::string label = key.first + " " + key.second;
    const double mb = pair.first ? static_cast<double>(pair.first->bytes) : 0;
    const double pb = pair.second ? static_cast<double>(pair.second->bytes) : 0;
    add(label + " bytes", mb, pb);
    add(label + " time_s", pair.first ? pair.first->time_s : 0, pair.second ? pair.second->time_s : 0);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const DifferenceRow& a, const DifferenceRow& b) {
    const double ea = a.error_pct(), eb = b.error_pct();
    if (std::isnan(ea) != std::isnan(eb)) return !std::isnan(ea);
    if (std::isnan(ea)) return false;
    return std::fabs(ea) > std::fabs(eb);
  });
  return rows;
}

void print_largest_differences(std::ostream& out, const BackendResult& m, const BackendResult& p) {
  const std::vector<DifferenceRow> rows = largest_differences(m, p);
  size_t w = 6;
  for (const auto& r : rows) w = std::max(w, r.label.size());
  char line[256];
  out << "\nLargest differences first ((predicted - measured) / measured):\n";
  std::snprintf(line, sizeof line, "  %-*s %16s %16s %10s\n", static_cast<int>(w), "figure", "measured", "predicted", "error");
  out << line;
  for (const auto& r : rows) {
    const double e = r.error_pct();
    char err[32];
    if (std::isnan(e)) std::snprintf(err, sizeof err, "%s", "n/a");
    else std::snprintf(err, sizeof err, "%+.1f%%", e);
    std::snprintf(line, sizeof line, "  %-*s %16.6g %16.6g %10s\n", static_cast<int>(w), r.label.c_str(), r.measured,
                  r.predicted, err);
    out << line;
  }
}

int run_compare_validate(const Store& store, const std::vector<int64_t>& ids, std::ostream& out, std::ostream& err) {
  Expected<std::vector<StoredRun>> all = store.list_runs();
  if (!all) {
    for (const Problem& p : all.problems()) err << "error: " << p.to_string() << "\n";
    return 2;
  }
  std::vector<const StoredRun*> measured;
  for (int64_t id : ids) {
    auto it = std::find_if(all->begin(), all->end(), [&](const StoredRun& r) { return r.id == id; });
    if (it == all->end()) {
      err << "error: runs compare --validate: " << store.path() << " has no run with id " << id << "\n";
      return 2;
    }
    if (!it->record.result.measured) {
      err << "error: runs compare --validate: run " << id << " is a prediction (" << it->record.result.backend
          << "), expected a measured run\n";
      return 2;
    }
    measured.push_back(&*it);
  }
  if (ids.empty())
    for (const StoredRun& r : *all)
      if (r.record.result.measured && r.record.status == RunStatus::kOk) measured.push_back(&r);
  if (measured.empty()) {
    err << "error: runs compare --validate: no measured run in " << store.path()
        << " (import one with `monarch-sim runs import`)\n";
    return 2;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %-11s %-20s %12s %12s %9s\n", "case", "backend", "metric", "predicted",
                "measured", "error");
  out << line;
  std::map<std::string, std::pair<double, int>> mape;  // backend -> (sum |error|, cases)
  std::map<std::string, std::pair<double, std::string>> worst;
  int without = 0;
  for (const StoredRun* m : measured) {
    // The newest prediction of each backend on the same plan (list_runs is newest first).
    std::map<std::string, const StoredRun*> newest;
    for (const StoredRun& r : *all)
      if (!r.record.result.measured && r.record.status == RunStatus::kOk && r.plan_hash == m->plan_hash &&
          !newest.count(r.record.result.backend))
        newest[r.record.result.backend] = &r;
    const std::string name = "run " + std::to_string(m->id) + " " + m->record.scenario_name;
    if (newest.empty()) {
      ++without;
      std::snprintf(line, sizeof line, "%-34.34s %-11s %-20s %12s %12.4g %9s\n", name.c_str(), "-", "iteration_time_s",
                    "no prediction", m->record.result.iteration_time_s, "");
      out << line;
      continue;
    }
    for (const auto& [backend, p] : newest) {
      const double meas = m->record.result.iteration_time_s, pred = p->record.result.iteration_time_s;
      const double e = meas != 0 ? (pred - meas) / meas * 100.0 : std::numeric_limits<double>::quiet_NaN();
      std::snprintf(line, sizeof line, "%-34.34s %-11s %-20s %12.4g %12.4g %+8.1f%%\n", name.c_str(), backend.c_str(),
                    "iteration_time_s", pred, meas, e);
      out << line;
      if (std::isfinite(e)) {
        mape[backend].first += std::fabs(e);
        mape[backend].second += 1;
        if (std::fabs(e) >= worst[backend].first) worst[backend] = {std::fabs(e), name};
      }
    }
  }
  for (const auto& [backend, acc] : mape) {
    std::snprintf(line, sizeof line, "%s: MAPE %.2f%% over %d measured runs; worst %.1f%% (%s)\n", backend.c_str(),
                  acc.first / acc.second, acc.second, worst[backend].first, worst[backend].second.c_str());
    out << line;
  }
  if (without > 0)
    out << without << " measured run(s) have no prediction of the same plan; run `monarch-sim SCENARIO.json` on "
                       "the scenario (or `--plan`) they were imported with\n";
  return 0;
}

}  // namespace monarch
