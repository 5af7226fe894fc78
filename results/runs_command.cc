#include "results/runs_command.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/result_io.h"
#include "results/measured_compare.h"

namespace monarch {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;  // spec/cli.md: invalid scenario or option

void print_problems(std::ostream& err, const Problems& problems) {
  for (const Problem& p : problems) err << "error: " << p.to_string() << "\n";
}

// Shortest text that reads back to the same double; "" for non-finite values.
std::string exact(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string();
}

std::string fmt(const char* format, double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// One line per run: control characters in names must not break the line.
std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20) out += '?';
    else out += c;
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::optional<int64_t> parse_id(const std::string& text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

// Relative difference of b against a, in percent: "+4.2%", "0.0%", "n/a" when a is 0 or unknown.
std::string percent(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return "n/a";
  if (a == b) return "0.0%";
  if (a == 0) return "n/a";
  return fmt("%+.1f%%", (b - a) / std::fabs(a) * 100.0);
}

class Table {
 public:
  void row(std::string label, std::string a, std::string b, std::string diff) {
    rows_.push_back({std::move(label), std::move(a), std::move(b), std::move(diff)});
  }
  void numbers(const std::string& label, double a, double b, const char* format = "%.6g") {
    row(label, fmt(format, a), fmt(format, b), percent(a, b));
  }
  void print(std::ostream& out) const {
    size_t w0 = 0;
    for (const auto& r : rows_) w0 = std::max(w0, r[0].size());
    for (const auto& r : rows_) {
      char buf[64];
      out << "  " << r[0] << std::string(w0 - r[0].size() + 2, ' ');
      std::snprintf(buf, sizeof buf, "%16s %16s %10s", r[1].c_str(), r[2].c_str(), r[3].c_str());
      out << buf << "\n";
    }
  }

 private:
  std::vector<std::array<std::string, 4>> rows_;
};

std::string short_hash(const std::string& h) { return h.substr(0, 12); }

Expected<Store> open_store(const std::string& db_path) {
  return Store::open(db_path.empty() ? default_store_path() : db_path, /*create=*/false);
}

int cmd_list(Store& store, const RunFilter& filter, std::ostream& out, std::ostream& err) {
  Expected<std::vector<StoredRun>> runs = store.list_runs(filter);
  if (!runs) {
    print_problems(err, runs.problems());
    return kExitBadInput;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-6s %-20s %-11s %-7s %-13s %-30s %12s %12s %7s %9s  %s\n", "ID", "STARTED (UTC)",
                "BACKEND", "STATUS", "PLAN", "DEGREES", "ITER_S", "TOKENS/S", "MFU", "PEAK_GIB", "SCENARIO");
  out << buf;
  for (const StoredRun& r : *runs) {
    const BackendResult& b = r.record.result;
    std::string started = format_utc(r.record.started_at).substr(0, 19);
    started[10] = ' ';
    std::snprintf(buf, sizeof buf, "%-6lld %-20s %-11s %-7s %-13s %-30s %12s %12s %7s %9s  ",
                  static_cast<long long>(r.id), started.c_str(), one_line(b.backend).c_str(),
                  to_string(r.record.status), short_hash(r.plan_hash).c_str(), describe(b.plan, PlanDetail::kDegrees).c_str(),
                  fmt("%.4g", b.iteration_time_s).c_str(), fmt("%.6g", b.tokens_per_s).c_str(),
                  fmt("%.3f", b.mfu).c_str(), fmt("%.2f", b.memory.peak_gib).c_str());
    out << buf << one_line(r.record.scenario_name) << "\n";
  }
  if (runs->empty()) err << "no runs " << (filter.scenario_name || filter.backend ? "match" : "recorded") << " in "
                         << store.path() << "\n";
  return kExitOk;
}

Expected<StoredRun> load(Store& store, const std::string& id_text, const std::string& what) {
  std::optional<int64_t> id = parse_id(id_text);
  if (!id)
    return Expected<StoredRun>::fail(what, "found \"" + one_line(id_text) +
                                               "\", expected a run id (a positive integer from `runs list`)");
  return store.load_run(*id);
}

void compare_time(Table& t, const BackendResult& a, const BackendResult& b) {
  t.numbers("iteration_time_s", a.iteration_time_s, b.iteration_time_s);
  const std::pair<const char*, double TimeBreakdown::*> parts[] = {
      {"compute", &TimeBreakdown::compute},     {"tp_comm", &TimeBreakdown::tp_comm},
      {"cp_comm", &TimeBreakdown::cp_comm},     {"pp_comm", &TimeBreakdown::pp_comm},
      {"dp_comm", &TimeBreakdown::dp_comm},     {"ep_comm", &TimeBreakdown::ep_comm},
      {"bubble", &TimeBreakdown::bubble},       {"optimizer", &TimeBreakdown::optimizer},
      {"exposed_comm", &TimeBreakdown::exposed_comm}, {"host", &TimeBreakdown::host}};
  for (const auto& [name, field] : parts)
    t.numbers(std::string("  ") + name, a.time_breakdown_s.*field, b.time_breakdown_s.*field);
  t.numbers("tokens_per_s", a.tokens_per_s, b.tokens_per_s);
  t.numbers("model_tflops_per_gpu", a.model_tflops_per_gpu, b.model_tflops_per_gpu);
  t.numbers("mfu", a.mfu, b.mfu, "%.4f");
  t.numbers("hfu", a.hfu, b.hfu, "%.4f");
}

void compare_memory(Table& t, const BackendResult& a, const BackendResult& b) {
  t.numbers("peak_gib", a.memory.peak_gib, b.memory.peak_gib, "%.3f");
  t.row("fits", a.memory.fits ? "yes" : "no", b.memory.fits ? "yes" : "no", "");
  std::map<int64_t, std::pair<const StageMemory*, const StageMemory*>> stages;
  for (const StageMemory& s : a.memory.stages) stages[s.stage].first = &s;
  for (const StageMemory& s : b.memory.stages) stages[s.stage].second = &s;
  const std::pair<const char*, double StageMemory::*> cats[] = {
      {"weights", &StageMemory::weights_gib},     {"gradients", &StageMemory::gradients_gib},
      {"optimizer", &StageMemory::optimizer_gib}, {"activations", &StageMemory::activations_gib},
      {"buffers", &StageMemory::buffers_gib},     {"total", &StageMemory::total_gib}};
  const double kAbsent = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [stage, pair] : stages) {
    for (const auto& [name, field] : cats) {
      double x = pair.first ? pair.first->*field : kAbsent;
      double y = pair.second ? pair.second->*field : kAbsent;
      std::string label = "stage " + std::to_string(stage) + " " + name;
      if (!pair.first || !pair.second)
        t.row(label, pair.first ? fmt("%.3f", x) : "-", pair.second ? fmt("%.3f", y) : "-", "");
      else
        t.numbers(label, x, y, "%.3f");
    }
  }
}

void compare_comm(Table& t, const BackendResult& a, const BackendResult& b) {
  std::vector<std::pair<std::string, std::string>> keys;
  std::map<std::pair<std::string, std::string>, std::pair<const CommEntry*, const CommEntry*>> entries;
  auto add = [&](const CommEntry& c, bool first) {
    auto key = std::make_pair(std::string(to_string(c.kind)), group_name(c));
    if (!entries.count(key)) keys.push_back(key);
    (first ? entries[key].first : entries[key].second) = &c;
  };
  for (const CommEntry& c : a.communication) add(c, true);
  for (const CommEntry& c : b.communication) add(c, false);
  for (const auto& key : keys) {
    auto [x, y] = entries[key];
    std::string label = one_line(key.first) + " " + one_line(key.second);
    if (x && y) {
      t.numbers(label + " bytes", static_cast<double>(x->bytes), static_cast<double>(y->bytes), "%.0f");
      t.numbers(label + " time_s", x->time_s, y->time_s);
    } else {
      t.row(label + " bytes", x ? std::to_string(x->bytes) : "-", y ? std::to_string(y->bytes) : "-", "");
      t.row(label + " time_s", x ? fmt("%.6g", x->time_s) : "-", y ? fmt("%.6g", y->time_s) : "-", "");
    }
  }
}

std::string run_title(const StoredRun& r) {
  const RunRecord& rec = r.record;
  return "run " + std::to_string(r.id) + ": " + one_line(rec.result.backend) + (rec.result.measured ? " (measured)" : " (predicted)") +
         ", scenario \"" + one_line(rec.scenario_name) + "\", " + to_string(rec.status) + ", started " +
         format_utc(rec.started_at) + ", plan " + short_hash(r.plan_hash);
}

int cmd_compare(Store& store, const std::vector<std::string>& ids, std::ostream& out, std::ostream& err) {
  Expected<StoredRun> a = load(store, ids[0], "runs compare (first ID)");
  Expected<StoredRun> b = load(store, ids[1], "runs compare (second ID)");
  if (!a || !b) {
    if (!a) print_problems(err, a.problems());
    if (!b) print_problems(err, b.problems());
    return kExitBadInput;
  }
  const BackendResult& x = a->record.result;
  const BackendResult& y = b->record.result;
  out << "A = " << run_title(*a) << "\n";
  out << "B = " << run_title(*b) << "\n";
  if (a->plan_hash == b->plan_hash) {
    out << "Both runs use the same plan (" << short_hash(a->plan_hash) << "): " << describe(x.plan, PlanDetail::kFull) << "\n";
    if (x.measured != y.measured) {
      const StoredRun& sim = x.measured ? *b : *a;
      const StoredRun& real = x.measured ? *a : *b;
      const BackendResult& p = sim.record.result;
      const BackendResult& m = real.record.result;
      out << "Prediction error of " << one_line(p.backend) << " (run " << sim.id << ") against the measured "
          << one_line(m.backend) << " run " << real.id << " ((predicted - measured) / measured):\n";
      out << "  iteration time  " << percent(m.iteration_time_s, p.iteration_time_s) << "  (predicted "
          << fmt("%.6g", p.iteration_time_s) << " s, measured " << fmt("%.6g", m.iteration_time_s) << " s)\n";
      out << "  tokens/s        " << percent(m.tokens_per_s, p.tokens_per_s) << "  (predicted "
          << fmt("%.6g", p.tokens_per_s) << ", measured " << fmt("%.6g", m.tokens_per_s) << ")\n";
      out << "  peak memory     " << percent(m.memory.peak_gib, p.memory.peak_gib) << "  (predicted "
          << fmt("%.3f", p.memory.peak_gib) << " GiB, measured " << fmt("%.3f", m.memory.peak_gib) << " GiB)\n";
      print_largest_differences(out, m, p);
      if (a->scenario_hash != b->scenario_hash)
        out << "Note: the two runs come from different scenarios (" << short_hash(a->scenario_hash) << " vs "
            << short_hash(b->scenario_hash) << "), so this error compares different setups.\n";
    } else if (x.measured) {
      out << "Both runs are measured: the differences below are run-to-run variation of one plan.\n";
    } else {
      out << "Neither run is measured, so there is no prediction error: the differences below are between two "
             "predictions of one plan.\n";
    }
  } else {
    out << "Different plans:\n  A: " << describe(x.plan, PlanDetail::kFull) << "\n  B: " << describe(y.plan, PlanDetail::kFull) << "\n";
  }
  for (const StoredRun* r : {&*a, &*b})
    if (r->record.status == RunStatus::kFailed)
      out << "Note: run " << r->id << " failed: " << one_line(r->record.error_message) << "\n";
  for (const auto& [name, r] : {std::pair{"A", &*a}, std::pair{"B", &*b}})
    for (const std::string& w : r->record.result.warnings)
      out << "Warning (" << name << ", run " << r->id << "): " << one_line(w) << "\n";

  auto section = [&](const char* title, auto fill) {
    Table t;
    t.row(title, "A", "B", "B vs A");
    fill(t);
    out << "\n";
    t.print(out);
  };
  section("time (s)", [&](Table& t) { compare_time(t, x, y); });
  section("memory (GiB, busiest rank per stage)", [&](Table& t) { compare_memory(t, x, y); });
  section("communication per rank per iteration", [&](Table& t) { compare_comm(t, x, y); });
  return kExitOk;
}

int cmd_export(Store& store, const RunFilter& filter, const std::string& format, std::ostream& out,
               std::ostream& err) {
  Expected<std::vector<StoredRun>> runs = store.list_runs(filter);
  if (!runs) {
    print_problems(err, runs.problems());
    return kExitBadInput;
  }
  if (format == "json") {
    json all = json::array();
    for (const StoredRun& summary : *runs) {
      Expected<StoredRun> r = store.load_run(summary.id);
      if (!r) {
        print_problems(err, r.problems());
        return kExitBadInput;
      }
      all.push_back(stored_run_to_json(*r));
    }
    out << json({{"format", "monarch-sim-runs/1"}, {"runs", all}}).dump(2, ' ', false, json::error_handler_t::replace)
        << "\n";
    return kExitOk;
  }
  // CSV: one row per run, the headline figures, plan and time breakdown as columns.
  const std::vector<std::string> header = {
      "id", "started_at", "ended_at", "scenario_name", "backend", "status", "measured", "host",
      "software_version", "scenario_hash", "plan_hash", "tensor_parallel_degree", "pipeline_parallel_degree",
      "data_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "virtual_pipeline_degree",
      "micro_batch_size", "pipeline_schedule", "sequence_parallel", "activation_recompute", "zero_stage",
      "iteration_time_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu",
      "model_flops_per_iteration", "hardware_flops_per_iteration", "memory_fits", "peak_gib", "capacity_gib",
      "compute_s", "tp_comm_s", "cp_comm_s", "pp_comm_s", "dp_comm_s", "ep_comm_s", "bubble_s", "optimizer_s",
      "exposed_comm_s", "error_message", "expert_tensor_parallel_degree", "host_s"};
  for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << header[i];
  out << "\n";
  for (const StoredRun& r : *runs) {
    const RunRecord& rec = r.record;
    const BackendResult& b = rec.result;
    const Plan& p = b.plan;
    const TimeBreakdown& t = b.time_breakdown_s;
    std::vector<std::string> row = {
        std::to_string(r.id), format_utc(rec.started_at), format_utc(rec.ended_at), rec.scenario_name, b.backend,
        to_string(rec.status), b.measured ? "true" : "false", rec.host, rec.software_version, r.scenario_hash,
        r.plan_hash, std::to_string(p.tp), std::to_string(p.pp), std::to_string(p.dp), std::to_string(p.cp),
        std::to_string(p.ep), std::to_string(p.vpp), std::to_string(p.micro_batch_size), to_string(p.schedule),
        p.sequence_parallel ? "true" : "false", to_string(p.recompute), std::to_string(p.zero_stage),
        exact(b.iteration_time_s), exact(b.tokens_per_s), exact(b.model_tflops_per_gpu),
        exact(b.hardware_tflops_per_gpu), exact(b.mfu), exact(b.hfu), exact(b.model_flops_per_iteration),
        exact(b.hardware_flops_per_iteration), b.memory.fits ? "true" : "false", exact(b.memory.peak_gib),
        exact(b.memory.capacity_gib), exact(t.compute), exact(t.tp_comm), exact(t.cp_comm), exact(t.pp_comm),
        exact(t.dp_comm), exact(t.ep_comm), exact(t.bubble), exact(t.optimizer), exact(t.exposed_comm),
        rec.error_message, std::to_string(p.expert_tp()), exact(t.host)};  // appended: earlier columns keep their positions
    for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(row[i]);
    out << "\n";
  }
  return kExitOk;
}

// Text of one override value in a CSV cell: strings as they are, other values as JSON.
std::string cell_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// `runs export --sweep ID`: one row per point, by position: its overrides (one column per
// path), status, the chosen plan and its headline figures (SimGrid when it was simulated).
int cmd_export_sweep(Store& store, const std::string& sweep_id, const std::string& format, std::ostream& out,
                     std::ostream& err) {
  auto points = store.list_sweep_points(sweep_id);
  if (!points) {
    print_problems(err, points.problems());
    return kExitBadInput;
  }
  if (points->empty()) {
    err << "error: runs export --sweep: no points of sweep \"" << one_line(sweep_id) << "\" in " << store.path() << "\n";
    return kExitBadInput;
  }
  std::vector<std::string> paths;  // override paths in order of first appearance
  std::vector<json> overrides;
  std::vector<std::optional<StoredRun>> best;
  for (const StoredSweepPoint& p : *points) {
    overrides.push_back(json::parse(p.point.overrides_json, nullptr, false));
    if (overrides.back().is_object())
      for (const auto& [k, v] : overrides.back().items())
        if (std::find(paths.begin(), paths.end(), k) == paths.end()) paths.push_back(k);
    best.emplace_back();
    if (p.best_run_id) {
      auto r = store.load_run(*p.best_run_id, false);
      if (!r) {
        print_problems(err, r.problems());
        return kExitBadInput;
      }
      best.back() = std::move(r).value();
    }
  }
  if (format == "json") {
    json rows = json::array();
    for (size_t i = 0; i < points->size(); ++i) {
      const SweepPoint& p = (*points)[i].point;
      json row = {{"position", p.position}, {"overrides", overrides[i]}, {"status", to_string(p.status)},
                  {"point_key", p.point_key}};
      if (!p.error_message.empty()) row["error"] = p.error_message;
      if (best[i]) {
        const BackendResult& b = best[i]->record.result;
        row["run_id"] = best[i]->id;
        row["plan"] = describe(b.plan);
        row["backend"] = b.backend;
        row["iteration_time_s"] = b.iteration_time_s;
        row["tokens_per_s"] = b.tokens_per_s;
        row["mfu"] = b.mfu;
        row["peak_gib"] = b.memory.peak_gib;
        row["memory_fits"] = b.memory.fits;
      }
      rows.push_back(std::move(row));
    }
    out << json({{"format", "monarch-sim-sweep/1"}, {"sweep", sweep_id}, {"points", rows}})
               .dump(2, ' ', false, json::error_handler_t::replace)
        << "\n";
    return kExitOk;
  }
  std::vector<std::string> header = {"sweep", "position", "status"};
  header.insert(header.end(), paths.begin(), paths.end());
  for (const char* h : {"plan", "backend", "iteration_time_s", "tokens_per_s", "mfu", "peak_gib", "memory_fits",
                        "run_id", "error_message"})
    header.push_back(h);
  for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(header[i]);
  out << "\n";
  for (size_t i = 0; i < points->size(); ++i) {
    const SweepPoint& p = (*points)[i].point;
    std::vector<std::string> row = {sweep_id, std::to_string(p.position), to_string(p.status)};
    for (const std::string& path : paths)
      row.push_back(overrides[i].is_object() && overrides[i].contains(path) ? cell_of(overrides[i][path]) : "");
    if (best[i]) {
      const BackendResult& b = best[i]->record.result;
      for (const std::string& v : {describe(b.plan), b.backend, exact(b.iteration_time_s), exact(b.tokens_per_s),
                                   exact(b.mfu), exact(b.memory.peak_gib), std::string(b.memory.fits ? "true" : "false"),
                                   std::to_string(best[i]->id)})
        row.push_back(v);
    } else {
      row.insert(row.end(), 8, "");
    }
    row.push_back(p.error_message);
    for (size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_field(row[c]);
    out << "\n";
  }
  return kExitOk;
}

}  // namespace

json stored_run_to_json(const StoredRun& r) {
  const RunRecord& rec = r.record;
  json run = {{"id", r.id},
              {"scenario_name", rec.scenario_name},
              {"status", to_string(rec.status)},
              {"started_at", format_utc(rec.started_at)},
              {"ended_at", format_utc(rec.ended_at)},
              {"host", rec.host},
              {"software_version", rec.software_version},
              {"scenario_hash", r.scenario_hash},
              {"plan_hash", r.plan_hash}};
  if (!rec.error_message.empty()) run["error"] = rec.error_message;
  json scenario = json::parse(rec.scenario_json, nullptr, false);
  ResultFile file;
  file.run = std::move(run);
  file.scenario = scenario.is_discarded() ? json(rec.scenario_json) : std::move(scenario);
  file.parameters = rec.parameters;
  file.results.push_back({&rec.result, std::nullopt, ""});
  return result_file_to_json(file);
}

int run_runs_command(const std::vector<std::string>& args, const std::string& db_path, std::ostream& out,
                     std::ostream& err) {
  CLI::App app{"Look into the results store (every recorded run).", "monarch-sim runs"};
  app.require_subcommand(1, 1);
  app.fallthrough();
  std::string db = db_path;
  app.add_option("--db", db, "the results store (default: " + default_store_path() + ")");

  RunFilter filter;
  std::string scenario, backend;
  auto add_filters = [&](CLI::App* sub) {
    sub->add_option("--scenario", scenario, "only runs of this scenario name");
    sub->add_option("--backend", backend, "only runs of this backend (analytical, simgrid, real-cpu, real-gpu)");
  };
  CLI::App* list = app.add_subcommand("list", "one line per run, newest first");
  add_filters(list);
  CLI::App* show = app.add_subcommand("show", "the whole run as JSON (the result file's fields)");
  std::string show_id;
  show->add_option("ID", show_id, "run id (from `runs list`)")->required();
  CLI::App* compare = app.add_subcommand("compare", "two runs side by side, differences in percent");
  std::vector<std::string> compare_ids;
  bool validate = false;
  compare->add_option("IDS", compare_ids, "two run ids (with --validate: measured run ids, none = all)")
      ->expected(0, 1 << 20);
  compare->add_flag("--validate", validate,
                    "every measured run against the newest prediction of its plan, as a validation table");
  CLI::App* exp = app.add_subcommand("export", "all runs as CSV or JSON, for notebooks and spreadsheets");
  std::string format = "csv";
  exp->add_option("--format", format, "csv (one row per run) or json (everything)")
      ->check(CLI::IsMember({"csv", "json"}));
  add_filters(exp);
  std::string sweep_id;
  exp->add_option("--sweep", sweep_id, "one row per point of this sweep (its \"name\"): overrides, status, chosen plan, figures");

  // CLI11 reads an unknown word as a stray argument ("A subcommand is required"); say what it is.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--db") {
      ++i;
      continue;
    }
    if (args[i].empty() || args[i][0] == '-') continue;
    if (args[i] != "list" && args[i] != "show" && args[i] != "compare" && args[i] != "export") {
      err << "error: monarch-sim runs: unknown subcommand \"" << one_line(args[i])
          << "\", expected list, show, compare or export\n";
      return kExitBadInput;
    }
    break;
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e, out, err);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "error: monarch-sim runs: " << e.what() << "\n";
    err << "usage: monarch-sim runs list [--scenario NAME] [--backend B] | show ID | compare ID ID | export "
           "[--format csv|json] [--sweep NAME]\n";
    return kExitBadInput;
  }
  if (!scenario.empty()) filter.scenario_name = scenario;
  if (!backend.empty()) filter.backend = backend;

  Expected<Store> store = open_store(db);
  if (!store) {
    print_problems(err, store.problems());
    return kExitBadInput;
  }
  if (list->parsed()) return cmd_list(*store, filter, out, err);
  if (show->parsed()) {
    Expected<StoredRun> r = load(*store, show_id, "runs show ID");
    if (!r) {
      print_problems(err, r.problems());
      return kExitBadInput;
    }
    out << stored_run_to_json(*r).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  if (compare->parsed()) {
    if (validate) {
      std::vector<int64_t> ids;
      for (const std::string& t : compare_ids) {
        std::optional<int64_t> id = parse_id(t);
        if (!id) {
          err << "error: runs compare --validate: found \"" << one_line(t) << "\", expected run ids\n";
          return kExitBadInput;
        }
        ids.push_back(*id);
      }
      return run_compare_validate(*store, ids, out, err);
    }
    if (compare_ids.size() != 2) {
      err << "error: monarch-sim runs compare: IDS: expected two run ids, found " << compare_ids.size() << "\n";
      return kExitBadInput;
    }
    return cmd_compare(*store, compare_ids, out, err);
  }
  if (!sweep_id.empty()) {
    if (filter.scenario_name || filter.backend) {
      err << "error: runs export: --sweep takes no --scenario or --backend (a sweep's rows are its points)\n";
      return kExitBadInput;
    }
    return cmd_export_sweep(*store, sweep_id, format, out, err);
  }
  return cmd_export(*store, filter, format, out, err);
}

}  // namespace monarch
