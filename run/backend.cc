// The one place that knows which optional backends this build has (MONARCH_HAVE_SIMGRID,
// MONARCH_HAVE_REAL_CPU, MONARCH_HAVE_REAL_GPU, set by run/CMakeLists.txt).
#include "run/backend.h"

#include <optional>
#include <string_view>

#include "sim/analytical_backend.h"
#include "strategies/dlrm_lowering.h"
#include "core/graph_check.h"
#include "strategies/plan_check.h"
#include "strategies/plan_costs.h"
#ifdef MONARCH_HAVE_SIMGRID
#include "sim/simgrid_backend.h"
#include "sim/simgrid_symmetry.h"
#endif
#ifdef MONARCH_HAVE_REAL_CPU
#include "realrt/launch.h"
#endif

namespace monarch::run {

BuildFeatures build_features() {
  BuildFeatures f;
#ifdef MONARCH_HAVE_SIMGRID
  f.simgrid = true;
#endif
#ifdef MONARCH_HAVE_REAL_CPU
  f.real_cpu = true;
#endif
#ifdef MONARCH_HAVE_REAL_GPU
  f.real_gpu = true;
#endif
  return f;
}

Expected<PlanGraph> lower_candidate(const Scenario& scenario, const Candidate& candidate) {
  Expected<PlanGraph> g = candidate.sharding ? lower_dlrm(scenario, *candidate.sharding) : lower_plan(scenario, candidate.plan);
  if (!g) return g;
  const Problems pr = check_graph(*g);
  if (!pr.empty()) return pr;
  return g;
}

namespace {

class AnalyticalBackend final : public ExecutionBackend {
 public:
  Backend kind() const override { return Backend::kAnalytical; }
  Expected<BackendResult> run(const Scenario& s, const Candidate& c, const RunControl&) const override {
    if (c.sharding) return estimate_dlrm(s, *c.sharding);
    if (Problems bad = check_plan(s, c.plan); !bad.empty()) return bad;
    return run_analytical(s, c.plan);
  }
};

#ifdef MONARCH_HAVE_SIMGRID
class SimgridBackend final : public ExecutionBackend {
 public:
  explicit SimgridBackend(SimgridOptions options) : options_(std::move(options)) {}
  Backend kind() const override { return Backend::kSimgrid; }
  Expected<BackendResult> run(const Scenario& s, const Candidate& c, const RunControl& control) const override {
    std::optional<PlanGraph> lowered;
    if (!c.graph) {
      auto g = lower_for_simgrid(s, c);
      if (!g) return g.problems();
      lowered = std::move(g).value();
    }
    if (control.is_cancelled()) return Expected<BackendResult>::fail("", "simulation cancelled");
    SimgridOptions options = options_;
    options.cancelled = [&control] { return control.is_cancelled(); };  // kills the forked simulation
    if (const auto& rel = s.reliability; rel && rel->inject_failure)
      options.failure = SimgridFailure{*rel->inject_failure, rel->detection_s};
    auto r = run_simgrid(s, c.graph ? *c.graph : *lowered, options);
    if (!r) return r;
    // "Tokens" are samples for a recommendation model, as in the analytical result.
    if (c.sharding) r->tokens_per_s = r->iteration_time_s > 0 ? s.training.global_batch_size / r->iteration_time_s : 0;
    return r;
  }

 private:
  // Under data-parallel replica symmetry the simulation runs one replica's ranks only, so only
  // those are lowered (sim/simgrid_symmetry.h); every rank when the replica is not closed (MoE
  // expert groups across replicas) or the whole graph is small enough to simulate in full, and
  // with an injected failure, whose iteration simulates every rank.
  Expected<PlanGraph> lower_for_simgrid(const Scenario& s, const Candidate& c) const {
    const bool failure = s.reliability && s.reliability->inject_failure;
    const std::vector<char> only =
        c.sharding || failure ? std::vector<char>{} : simgrid_backend::replica_ranks_to_lower(s, c.plan, options_);
    if (!only.empty()) {
      auto g = lower_plan(s, c.plan, only);
      if (!g) return g;
      if (simgrid_backend::replica_graph_usable(*g, only, options_)) {
        const Problems pr = check_graph(*g);
        if (!pr.empty()) return pr;
        return g;
      }
    }
    return lower_candidate(s, c);
  }

  SimgridOptions options_;
};
#endif

#ifdef MONARCH_HAVE_REAL_CPU
// The CPU or GPU runtime: `mpirun -np N monarch-run ...` (realrt/launch.h).
class RealBackend final : public ExecutionBackend {
 public:
  explicit RealBackend(bool gpu) : gpu_(gpu) {}
  Backend kind() const override { return gpu_ ? Backend::kRealGpu : Backend::kRealCpu; }
  Expected<BackendResult> run(const Scenario& s, const Candidate& c, const RunControl&) const override {
    if (c.sharding) {
      if (gpu_) return Expected<BackendResult>::fail("", "the GPU runtime does not train recommendation models");
      return realrt::run_real_cpu_dlrm(s, *c.sharding, realrt::RealCpuOptions{});
    }
    std::optional<PlanGraph> lowered;
    if (!c.graph) {
      auto g = lower_candidate(s, c);
      if (!g) return g.problems();
      lowered = std::move(g).value();
    }
    const PlanGraph& graph = c.graph ? *c.graph : *lowered;
    return gpu_ ? realrt::run_real_gpu(s, graph, realrt::RealCpuOptions{}) : realrt::run_real_cpu(s, graph, realrt::RealCpuOptions{});
  }

 private:
  bool gpu_;
};
#endif

const char* missing_part(Backend b) {
  const BuildFeatures f = build_features();
  if (b == Backend::kSimgrid && !f.simgrid) return "SimGrid (configure with MONARCH_WITH_SIMGRID=ON; Debian package libsimgrid-dev)";
  if (b == Backend::kRealCpu && !f.real_cpu) return "the CPU runtime (MONARCH_WITH_MPI=ON; libopenmpi-dev openmpi-bin libopenblas-dev)";
  if (b == Backend::kRealGpu && !f.real_gpu) return "the GPU runtime (MONARCH_WITH_GPU=ON; CUDA toolkit with cuBLAS and NCCL)";
  return nullptr;
}

}  // namespace

void split_simgrid_overrides(const std::vector<std::string>& all, std::vector<std::string>& scenario,
                             std::vector<std::pair<std::string, std::string>>& simgrid) {
  constexpr std::string_view kPrefix = "simgrid.";
  for (const auto& o : all) {
    if (o.rfind(kPrefix, 0) == 0) {
      const auto eq = o.find('=');
      const std::string key = o.substr(kPrefix.size(), eq == std::string::npos ? std::string::npos : eq - kPrefix.size());
      simgrid.emplace_back(key, eq == std::string::npos ? std::string() : o.substr(eq + 1));
    } else {
      scenario.push_back(o);
    }
  }
}

Problems check_settings(const BackendSettings& settings) {
  Problems problems;
#ifdef MONARCH_HAVE_SIMGRID
  SimgridOptions options;
  for (const auto& [key, value] : settings.simgrid) {
    const Problems pr = apply_simgrid_option(options, key, value);
    problems.insert(problems.end(), pr.begin(), pr.end());
    if (!pr.empty()) break;
  }
#else
  if (!settings.simgrid.empty())
    problems.push_back({"--set simgrid." + settings.simgrid.front().first, "this build has no SimGrid backend"});
#endif
  return problems;
}

Expected<std::unique_ptr<ExecutionBackend>> make_backend(Backend kind, const BackendSettings& settings,
                                                         const std::string& where) {
  using Result = Expected<std::unique_ptr<ExecutionBackend>>;
  if (const char* missing = missing_part(kind))
    return Result::fail(where, std::string("backend \"") + to_string(kind) + "\" needs " + missing + ", which this build lacks");
  const Problems bad = check_settings(settings);
  if (!bad.empty()) return bad;
  switch (kind) {
    case Backend::kAnalytical:
      return std::unique_ptr<ExecutionBackend>(new AnalyticalBackend());
#ifdef MONARCH_HAVE_SIMGRID
    case Backend::kSimgrid: {
      SimgridOptions options;
      options.record_timeline = settings.record_timeline;
      for (const auto& [key, value] : settings.simgrid) apply_simgrid_option(options, key, value);
      return std::unique_ptr<ExecutionBackend>(new SimgridBackend(std::move(options)));
    }
#endif
#ifdef MONARCH_HAVE_REAL_CPU
    case Backend::kRealCpu:
      return std::unique_ptr<ExecutionBackend>(new RealBackend(/*gpu=*/false));
    case Backend::kRealGpu:
      return std::unique_ptr<ExecutionBackend>(new RealBackend(/*gpu=*/true));
#endif
    default:
      break;
  }
  return Result::fail(where, std::string("backend \"") + to_string(kind) + "\" is not available in this build");
}

}  // namespace monarch::run
