// monarch-sim export RESULT.json|PLAN.json --to FORMAT [--rank N] [--output FILE]: the chosen
// (or N-th ranked) plan in a training framework's own configuration (core/framework_bridge.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "app/commands.h"
#include "core/framework_bridge.h"
#include "core/plan_io.h"
#include "core/result_io.h"
#include "core/scenario_io.h"
#include "core/text_file.h"
#include "strategies/plan_check.h"

namespace monarch::app {
namespace {

using nlohmann::json;

struct Chosen {
  Scenario scenario;
  Plan plan;
};

void print_problems(const Problems& problems) {
  for (const auto& p : problems) print_error(p.where, p.message);
}

// The scenario and the plan of rank `rank` (1 = best) of a result file, or the plan of a
// self-contained plan file.
Expected<Chosen> read_chosen(const std::string& path, int64_t rank) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<Chosen>::fail(path, "cannot be read (no such file, or no permission)");
  std::ostringstream text;
  text << in.rdbuf();
  auto j = parse_json_text(text.str(), path);
  if (!j) return j.problems();
  const std::string format = j->is_object() ? j->value("format", "") : "";
  if (format.rfind("monarch-plan/", 0) == 0) {
    if (rank != 1) return Expected<Chosen>::fail("--rank", "a plan file holds one plan; --rank applies to result files");
    auto plan = read_plan_file_full(path);
    if (!plan) return plan.problems();
    if (!plan->scenario)
      return Expected<Chosen>::fail(path, "is a " + format + " file without its scenario; write it with --emit-plan "
                                          "(monarch-plan/2) or export from the result file");
    return Chosen{*plan->scenario, plan->graph.plan};
  }
  if (format != "monarch-sim-result/1")
    return Expected<Chosen>::fail(path + ": /format", "found \"" + format +
                                                           "\", expected a result file (monarch-sim-result/1, --output) "
                                                           "or a plan file (monarch-plan/2, --emit-plan)");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  auto scenario = scenario_from_json(j->value("scenario", json::object()), dir.empty() ? "." : dir);
  if (!scenario) {
    Problems p = scenario.problems();
    for (auto& x : p) x.where = path + ": /scenario" + x.where;
    return p;
  }
  const json& results = (*j)["results"];
  if (!results.is_array() || results.empty())
    return Expected<Chosen>::fail(path + ": /results", "holds no ranked plan (no plan fitted?)");
  for (size_t i = 0; i < results.size(); ++i) {
    const int64_t r = results[i].is_object() && results[i].contains("rank") && results[i]["rank"].is_number_integer()
                          ? results[i]["rank"].get<int64_t>()
                          : static_cast<int64_t>(i) + 1;
    if (r != rank) continue;
    const std::string where = path + ": /results/" + std::to_string(i) + "/plan";
    if (!results[i].is_object() || !results[i].contains("plan")) return Expected<Chosen>::fail(where, "missing");
    auto plan = plan_from_json(results[i]["plan"], "/results/" + std::to_string(i) + "/plan");
    if (!plan) {
      Problems p = plan.problems();
      for (auto& x : p) x.where = path + ": " + x.where;
      return p;
    }
    // A hand-edited plan that cannot run the scenario: the plan's place, then the rule it
    // breaks at the scenario key it reads.
    if (scenario->model.architecture != Architecture::kDlrm)
      if (const Problems bad = check_plan(*scenario, *plan); !bad.empty()) return Expected<Chosen>::fail(where, bad.front().to_string());
    return Chosen{*scenario, *plan};
  }
  return Expected<Chosen>::fail("--rank", "found " + std::to_string(rank) + ", but " + path + " ranks " +
                                              std::to_string(results.size()) + " results");
}

}  // namespace


int cmd_export(const ExportOptions& opts) {
  ConfigFormat format;
  if (!parse_config_format(opts.to, &format)) {
    print_error("--to", "found \"" + opts.to + "\", expected one of " + kConfigFormatNames);
    return kExitInvalid;
  }
  auto chosen = read_chosen(opts.input_path, opts.rank.value_or(1));
  if (!chosen) {
    print_problems(chosen.problems());
    return kExitInvalid;
  }
  auto exported = export_plan(chosen->scenario, chosen->plan, format);
  if (!exported) {
    for (const auto& p : exported.problems())
      print_error(p.where, "the plan cannot be expressed: " + p.message);
    return kExitInvalid;
  }
  for (const auto& w : exported->warnings) std::cerr << "monarch-sim: warning: " << w << "\n";
  if (opts.output_path.empty()) {
    std::cout << exported->text;
    return kExitOk;
  }
  if (std::string e = write_text_file_atomically(opts.output_path, exported->text); !e.empty()) {
    print_error(opts.output_path, e);
    return kExitInvalid;
  }
  return kExitOk;
}

}  // namespace monarch::app
