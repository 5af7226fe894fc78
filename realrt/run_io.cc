#include "realrt/run_io.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <optional>
#include <set>
#include <sstream>

#include "core/plan_io.h"
#include "core/result_io.h"
#include "core/scenario_io.h"
#include "core/placement.h"
#include "core/graph_check.h"
#include "strategies/lowering.h"
#include "strategies/plan_costs.h"

namespace monarch::realrt {

Expected<Plan> fixed_plan(const Scenario& s) {
  const ParallelismConstraints& c = s.parallelism;
  Plan p;
  p.tp = c.tp.value_or(1);
  p.pp = c.pp.value_or(1);
  p.cp = c.cp.value_or(1);
  p.ep = c.ep.value_or(1);
  p.etp = c.etp.value_or(0);  // 0: expert TP = tp
  p.vpp = c.vpp.value_or(1);
  const int64_t tpc = p.tp * p.pp * p.cp;
  p.dp = c.dp && *c.dp > 0 ? *c.dp : (tpc > 0 ? s.cluster.num_gpus / tpc : 1);
  p.schedule = c.schedule.value_or(p.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB);
  p.sequence_parallel = c.sequence_parallel.value_or(false);
  p.recompute = c.recompute.value_or(Recompute::kNone);
  p.zero_stage = c.zero_stage.value_or(0);
  p.overlap_grad_reduce = c.overlap_grad_reduce.value_or(false);
  p.overlap_param_gather = c.overlap_param_gather.value_or(false);
  p.tp_comm_overlap = false;
  if (!s.training.micro_batch_size || *s.training.micro_batch_size <= 0)
    return Expected<Plan>::fail("/training/micro_batch_size", "missing: the real runtime runs a fixed plan and needs it");
  p.micro_batch_size = *s.training.micro_batch_size;
  if (p.world_size() != s.cluster.num_gpus)
    return Expected<Plan>::fail("/parallelism", "tp x pp x dp x cp = " + std::to_string(p.world_size()) +
                                                    ", expected cluster.num_gpus (" + std::to_string(s.cluster.num_gpus) + ")");
  return p;
}

Expected<RunInput> run_input_from(const Scenario& s, const Plan& plan) {
  auto model = gpt_config_from(s.model);
  if (!model) return model.problems();
  RunInput in;
  in.scenario = s;
  in.model = *model;
  in.train.global_batch_size = s.training.global_batch_size;
  in.train.micro_batch_size = plan.micro_batch_size;
  in.train.seed = static_cast<uint64_t>(s.training.seed);
  in.train.steps = s.training.steps;
  if (s.training.optimizer != Optimizer::kAdam)
    return Expected<RunInput>::fail("/training/optimizer", "the real runtime trains with adam");
  // The same graph monarch-sim --emit-plan writes (costs from the analytical model); the runtime
  // takes its order of passes and point-to-point messages from it.
  auto g = lower_plan(s, plan);
  if (!g) return g.problems();
  in.graph = std::move(*g);
  return in;
}

namespace {
// Appends the leaves where a and b differ ("/model/hidden_size: the plan file has 128, --scenario
// has 256"), depth first in key order, at most kMaxDifferences; keys in `skip` (at any depth) are
// not compared.
constexpr size_t kMaxDifferences = 4;
void differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, const std::set<std::string>& skip,
                 std::vector<std::string>& out) {
  if (out.size() >= kMaxDifferences) return;
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    static const nlohmann::json kAbsent = "(absent)";
    for (const std::string& k : keys) {
      if (skip.count(k)) continue;
      const auto ia = a.find(k), ib = b.find(k);
      differences(ia == a.end() ? kAbsent : *ia, ib == b.end() ? kAbsent : *ib, path + "/" + k, skip, out);
    }
    return;
  }
  if (a != b) out.push_back(path + ": the plan file has " + a.dump() + ", --scenario has " + b.dump());
}
}  // namespace

std::optional<std::string> scenario_difference(const Scenario& planned, const Scenario& given) {
  const nlohmann::json a = scenario_to_json(planned), b = scenario_to_json(given);
  // The model's numbers decide; a preset is only the name they came from. Steps may differ
  // (as with --steps): they do not change what one step computes.
  std::vector<std::string> diff;
  for (const char* key : {"model", "training"})
    differences(a.value(key, nlohmann::json()), b.value(key, nlohmann::json()), std::string("/") + key, {"preset", "steps"},
                diff);
  if (diff.empty()) return std::nullopt;
  std::string text;
  for (const std::string& d : diff) text += (text.empty() ? "" : "; ") + d;
  return text;
}

Expected<RunInput> read_run_input(const std::string& path, int64_t steps, const std::string& scenario_path) {
  std::ifstream f(path);
  if (!f) return Expected<RunInput>::fail(path, "cannot read the file");
  std::stringstream text;
  text << f.rdbuf();
  auto j = parse_json_text(text.str(), path);
  if (!j) return j.problems();
  if (j->is_object() && j->contains("format")) {  // a plan file
    auto file = read_plan_file_full(path);
    if (!file) return file.problems();
    std::optional<Scenario> s = file->scenario;
    if (!s && scenario_path.empty())
      return Expected<RunInput>::fail(
          "--scenario", path + " is a \"" + file->format +
                            "\" file, which carries no model: name the scenario it was planned for with --scenario "
                            "SCENARIO.json (or emit the plan again: monarch-sim --emit-plan writes \"" +
                            PlanGraph::kFormat + "\" with its scenario)");
    if (!scenario_path.empty()) {
      auto given = read_scenario_file(scenario_path);
      if (!given) return given.problems();
      if (s) {
        if (auto d = scenario_difference(*s, *given))
          return Expected<RunInput>::fail("--scenario", scenario_path + " is not the scenario " + path +
                                                            " was planned for: " + *d);
      }
      s = std::move(given).value();
    }
    if (steps > 0) s->training.steps = steps;
    auto model = gpt_config_from(s->model);
    if (!model) return model.problems();
    auto g = std::optional<PlanGraph>(std::move(file->graph));
    const Plan& p = g->plan;
    if (s->training.global_batch_size % (p.micro_batch_size * p.dp) != 0 ||
        g->num_micro_batches != s->training.global_batch_size / (p.micro_batch_size * p.dp))
      return Expected<RunInput>::fail(path + ":/num_micro_batches",
                                      "found " + std::to_string(g->num_micro_batches) + ", but the scenario's global batch " +
                                          std::to_string(s->training.global_batch_size) + " makes " +
                                          std::to_string(s->training.global_batch_size / std::max<int64_t>(1, p.micro_batch_size * p.dp)) +
                                          " micro-batches per data-parallel rank");
    if (s->training.optimizer != Optimizer::kAdam)
      return Expected<RunInput>::fail((scenario_path.empty() ? path + ":/scenario" : scenario_path + ":") + "/training/optimizer",
                                      "the real runtime trains with adam");
    // The task graph must be one the plan can have: every rank's stage as placed by the plan,
    // and the whole-graph guarantees of the strategy engine (matching sends and receives,
    // complete collectives, balanced memory events, no deadlock).
    for (const RankProgram& rp : g->ranks) {
      const int64_t stage = rank_to_coords(rp.rank, p).pp;
      if (rp.stage != stage)
        return Expected<RunInput>::fail(path + ":/ranks/" + std::to_string(rp.rank) + "/stage",
                                        "found " + std::to_string(rp.stage) + ", but the plan places rank " +
                                            std::to_string(rp.rank) + " in pipeline stage " + std::to_string(stage));
    }
    if (Problems pr = check_graph(*g); !pr.empty()) {
      for (Problem& q : pr) q.where = path + ":" + q.where;
      pr.front().message = "the task graph does not hold together: " + pr.front().message;
      return pr;
    }
    RunInput in;
    in.scenario = *s;
    in.model = *model;
    in.train.global_batch_size = s->training.global_batch_size;
    in.train.micro_batch_size = p.micro_batch_size;
    in.train.seed = static_cast<uint64_t>(s->training.seed);
    in.train.steps = s->training.steps;
    in.graph = std::move(*g);
    return in;
  }
  if (!scenario_path.empty())
    return Expected<RunInput>::fail("--scenario", "only with a plan file; " + path + " is a scenario");
  auto s = read_scenario_file(path);
  if (!s) return s.problems();
  if (steps > 0) s->training.steps = steps;
  auto plan = fixed_plan(*s);
  if (!plan) return plan.problems();
  return run_input_from(*s, *plan);
}

nlohmann::json run_output_json(const BackendResult& result, int64_t first_step, const std::vector<RankSummary>& ranks) {
  nlohmann::json j;
  j["format"] = kRunOutputFormat;
  j["first_step"] = first_step;
  j["result"] = result_to_json(result);
  nlohmann::json rs = nlohmann::json::array();
  for (const RankSummary& r : ranks) {
    nlohmann::json e;
    e["rank"] = r.rank;
    e["stage"] = r.stage;
    e["step_time_s"] = r.step_time_s;
    e["compute_time_s"] = r.compute_time_s;
    nlohmann::json comm = nlohmann::json::array();
    for (size_t i = 0; i < r.communication.size(); ++i) {
      const CommEntry& c = r.communication[i];
      nlohmann::json ce = comm_entry_to_json(c);
      ce["size_bytes"] = r.size_bytes[i];
      comm.push_back(std::move(ce));
    }
    e["communication"] = comm;
    nlohmann::json mem;
    for (size_t i = 0; i < r.peak_bytes.size(); ++i)
      mem[std::string(to_string(static_cast<MemCategory>(i))) + "_bytes"] = r.peak_bytes[i];
    mem["workspace_bytes"] = r.peak_workspace_bytes;
    mem["total_bytes"] = r.peak_total_bytes;
    e["peak_memory"] = mem;
    rs.push_back(e);
  }
  j["ranks"] = rs;
  return j;
}

bool write_output_file(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream f(tmp);
    f << j.dump(1) << "\n";
    if (!f) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(tmp, path, ec);
  if (!ec) return true;
  std::filesystem::remove(tmp);
  std::fprintf(stderr, "monarch-run: error: --output: cannot write %s: %s\n", path.c_str(), ec.message().c_str());
  return false;
}

}  // namespace monarch::realrt
