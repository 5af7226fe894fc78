#include "realrt/launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/plan_io.h"
#include "core/result_io.h"
#include "core/scenario_io.h"

namespace monarch::realrt {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The lines of the log that monarch-run wrote itself (errors, the watchdog), at most a few.
std::string monarch_lines(const std::string& log_path) {
  std::ifstream f(log_path);
  std::string line, out;
  int n = 0;
  while (std::getline(f, line))
    if (line.rfind("monarch-run:", 0) == 0 && n++ < 6) out += (out.empty() ? "" : "; ") + line;
  return out;
}

// Runs `mpirun -np N monarch-run <args>` with scenario.json (and what `args` adds) in the work
// directory, then reads the result it wrote. `args` gets the work directory's path. `device` is
// "cpu" or "gpu" (monarch-run --device); the option named in problems is --backend real-<device>.
Expected<BackendResult> launch(const Scenario& scenario, int64_t world_size, const RealCpuOptions& opt,
                               const std::string& device,
                               const std::function<Expected<std::string>(const std::string& dir, const std::string& scen)>& args) {
  using E = Expected<BackendResult>;
  const std::string backend = "--backend real-" + device;
  if (world_size < 1) return E::fail(backend, "the plan graph has no ranks");
  if (world_size > opt.max_ranks)
    return E::fail(backend, "the plan needs " + std::to_string(world_size) + " processes; the " + device +
                                " runtime starts at most " + std::to_string(opt.max_ranks) + " on this machine");
  const std::string run = opt.monarch_run.empty() ? env_or("MONARCH_RUN", MONARCH_RUN_DEFAULT) : opt.monarch_run;
  const std::string mpirun = opt.mpirun.empty() ? env_or("MONARCH_MPIEXEC", MONARCH_MPIEXEC_DEFAULT) : opt.mpirun;
  if (!std::filesystem::exists(run)) return E::fail(backend, "monarch-run not found at " + run + " (set MONARCH_RUN)");
  std::error_code ec;
  std::string dir = opt.work_dir;
  if (dir.empty())
    dir = (std::filesystem::temp_directory_path(ec) / ("monarch-real-" + device + "-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir, ec);
  if (ec) return E::fail(backend, "cannot create " + dir + ": " + ec.message());
  const std::string scen = dir + "/scenario.json", out = dir + "/result.json", log = dir + "/monarch-run.log";
  {
    std::ofstream f(scen);
    f << scenario_to_json(scenario).dump(1) << "\n";
    if (!f) return E::fail(backend, "cannot write " + scen);
  }
  auto input_args = args(dir, scen);
  if (!input_args) return input_args.problems();
  std::filesystem::remove(out, ec);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::ostringstream cmd;
  cmd << "timeout " << static_cast<int64_t>(opt.timeout_s) << " " << shell_quote(mpirun);
  if (geteuid() == 0) cmd << " --allow-run-as-root";
  if (device == "cpu" && static_cast<unsigned>(world_size) > cores) cmd << " --oversubscribe";
  cmd << " -np " << world_size << " " << shell_quote(run) << " " << *input_args << " --output " << shell_quote(out);
  if (opt.steps > 0) cmd << " --steps " << opt.steps;
  if (device != "cpu") cmd << " --device " << device;
  cmd << " > " << shell_quote(log) << " 2>&1 < /dev/null";
  const int raw = std::system(cmd.str().c_str());
  const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (status != 0) {
    std::string why = monarch_lines(log);
    if (why.empty()) why = "see " + log;
    if (status == 124) return E::fail(backend, "timed out after " + std::to_string(opt.timeout_s) + " s; " + why);
    return E::fail(backend, "monarch-run failed (exit status " + std::to_string(status) + "): " + why);
  }
  std::ifstream f(out);
  if (!f) return E::fail(backend, "monarch-run wrote no result at " + out);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("result")) return E::fail(out, "not a monarch-run result");
  return result_from_json(j["result"], "/result");
}

// The GPT plan file and the flags that go with it.
// A self-contained plan file (monarch-plan/2): the graph and the scenario it was planned for.
std::function<Expected<std::string>(const std::string&, const std::string&)> plan_args(const Scenario& scenario,
                                                                                        const PlanGraph& graph,
                                                                                        const RealCpuOptions& opt) {
  return [&scenario, &graph, &opt](const std::string& dir, const std::string&) -> Expected<std::string> {
    const std::string plan = dir + "/plan.json";
    if (Problems pr = write_plan_file(plan, graph, &scenario); !pr.empty()) return pr;
    std::ostringstream a;
    a << shell_quote(plan) << " --watchdog-timeout " << opt.watchdog_timeout_s;
    return a.str();
  };
}

}  // namespace

Expected<BackendResult> run_real_cpu(const Scenario& scenario, const PlanGraph& graph, const RealCpuOptions& opt) {
  return launch(scenario, graph.world_size, opt, "cpu", plan_args(scenario, graph, opt));
}

Expected<BackendResult> run_real_gpu(const Scenario& scenario, const PlanGraph& graph, const RealCpuOptions& opt) {
  return launch(scenario, graph.world_size, opt, "gpu", plan_args(scenario, graph, opt));
}

Expected<BackendResult> run_real_cpu_dlrm(const Scenario& scenario, const DlrmShardingPlan& plan, const RealCpuOptions& opt) {
  return launch(scenario, scenario.cluster.num_gpus, opt, "cpu", [&](const std::string&, const std::string& scen) -> Expected<std::string> {
    return shell_quote(scen) + " --sharding " + shell_quote(describe(plan));
  });
}

}  // namespace monarch::realrt
