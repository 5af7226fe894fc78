#include "app/real_cpu.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/model_math.h"
#include "core/result_io.h"
#include "core/scenario_io.h"

extern char** environ;

namespace monarch::app {
namespace {

namespace fs = std::filesystem;

// monarch-run next to monarch-sim (installed layouts), else the one this build made.
std::string find_monarch_run() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {self.parent_path() / "monarch-run", self.parent_path().parent_path() / "realrt" / "monarch-run"})
      if (fs::exists(p)) return p.string();
  }
#ifdef MONARCH_RUN_BUILD_PATH
  if (fs::exists(MONARCH_RUN_BUILD_PATH)) return MONARCH_RUN_BUILD_PATH;
#endif
  return {};
}

// The scenario with its parallelism fixed to `plan`, as monarch-run reads it.
nlohmann::json pinned_scenario(const Scenario& s, const Plan& p) {
  nlohmann::json j = scenario_to_json(s);
  nlohmann::json par = nlohmann::json::object();
  par["tensor_parallel_degree"] = p.tp;
  par["pipeline_parallel_degree"] = p.pp;
  par["data_parallel_degree"] = p.dp;
  par["context_parallel_degree"] = p.cp;
  par["expert_parallel_degree"] = p.ep;
  par["virtual_pipeline_degree"] = p.vpp;
  par["pipeline_schedule"] = to_string(p.schedule);
  par["sequence_parallel"] = p.sequence_parallel;
  par["activation_recompute"] = to_string(p.recompute);
  par["zero_stage"] = p.zero_stage;
  j["parallelism"] = par;
  j["training"]["micro_batch_size"] = p.micro_batch_size;
  j.erase("backends");
  return j;
}

}  // namespace

Expected<BackendResult> run_real_cpu_backend(const Scenario& s, const Plan& plan, bool show_progress) {
  const std::string where = "--backend real-cpu";
  if (plan.world_size() > kMaxLocalRealCpuRanks)
    return Expected<BackendResult>::fail(where, "the chosen plan has " + std::to_string(plan.world_size()) +
                                                    " ranks; monarch-sim starts at most " +
                                                    std::to_string(kMaxLocalRealCpuRanks) +
                                                    " here (run `mpirun -np N monarch-run` on a cluster)");
  const int64_t params = parameter_counts(model_shape(s.model)).total;
  if (params > kMaxLocalRealCpuParameters)
    return Expected<BackendResult>::fail(where, "the model has " + std::to_string(params) + " parameters; at most " +
                                                    std::to_string(kMaxLocalRealCpuParameters) +
                                                    " are trained on this machine's CPUs");
  const std::string run_bin = find_monarch_run();
  if (run_bin.empty()) return Expected<BackendResult>::fail(where, "monarch-run was not found beside monarch-sim");

  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / ("monarch-real-cpu-" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  if (ec) return Expected<BackendResult>::fail(where, "cannot create a temporary directory: " + ec.message());
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(d, e);
    }
  } cleanup{dir};
  const std::string input = (dir / "input.json").string();
  const std::string output = (dir / "result.json").string();
  std::ofstream(input) << pinned_scenario(s, plan).dump(2);

  std::vector<std::string> args = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                                   std::to_string(plan.world_size()), run_bin, input, "--output", output};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (show_progress) std::fprintf(stderr, "training the chosen plan on %lld CPU processes...\n", static_cast<long long>(plan.world_size()));
  pid_t pid = 0;
  if (posix_spawnp(&pid, "mpirun", nullptr, nullptr, argv.data(), environ) != 0)
    return Expected<BackendResult>::fail(where, "cannot start mpirun (Debian package openmpi-bin)");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Expected<BackendResult>::fail(where, "monarch-run failed (exit status " +
                                                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                                                    "); its messages are above");
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("result"))
    return Expected<BackendResult>::fail(where, "monarch-run wrote no readable result");
  return result_from_json(j["result"], "/result");
}

}  // namespace monarch::app
