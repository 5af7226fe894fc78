// monarch-calibrate --out profile.json [--device cpu|gpu] [--quick] [--threads N]
//
// Measures this machine and writes a calibration profile (docs/calibration_profile.md):
// --device cpu (default) calibrates the CPU runtime (OpenBLAS sgemm, STREAM triad, MPI
// collectives between the ranks of mpirun); --device gpu calibrates the GPUs of this node
// (cuBLAS, a copy kernel, NCCL). Tables go to stdout, progress to stderr when it is a terminal.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/profile.h"
#include "core/profile_io.h"
#include "realrt/calibrate/calibrate_common.h"

#if MONARCH_CALIBRATE_CPU
#include <cblas.h>
#include <mpi.h>

#include "realrt/calibrate/cpu_calibrate.h"
#endif
#if MONARCH_CALIBRATE_GPU
#include "realrt/gpu/gpu_calibrate.h"
#endif

namespace monarch::calibrate {
namespace {

struct Options {
  std::string out;
  std::string show;
  std::string device = "cpu";
  Settings settings;
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Rank and size as announced by the launcher (OpenMPI, MPICH/PMI, Slurm), before MPI_Init.
int launcher_value(const char* const* names, int fallback) {
  for (const char* const* n = names; *n; ++n) {
    if (const char* v = env(*n)) return std::atoi(v);
  }
  return fallback;
}
int launcher_rank() {
  static const char* const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", nullptr};
  return launcher_value(names, 0);
}
int launcher_size() {
  static const char* const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", nullptr};
  return launcher_value(names, 1);
}

void print_problems(const Problems& problems) {
  for (const Problem& p : problems) std::fprintf(stderr, "monarch-calibrate: %s\n", p.to_string().c_str());
}

// Fails early, before minutes of measuring, when the profile could not be written.
Problems check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.filename().empty()) return {Problem{"--out", "\"" + path + "\" has no file name"}};
  if (fs::is_directory(target, ec)) return {Problem{"--out", path + " is a directory, expected a file name"}};
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return {Problem{"--out", "folder " + dir.string() + " does not exist"}};
  if (::access(dir.c_str(), W_OK) != 0) return {Problem{"--out", "folder " + dir.string() + " is not writable"}};
  return {};
}

void fill_provenance(CalibrationProfile& p, const Settings& s) {
  p.host = host_name();
  p.created_utc = utc_now_iso8601();
  p.tool = std::string("monarch-calibrate ") + MONARCH_VERSION;
  p.quick = s.quick;
}

int write_and_report(const std::string& out, const CalibrationProfile& p) {
  if (interrupt_requested()) {
    std::fprintf(stderr, "monarch-calibrate: interrupted; no profile written\n");
    return kExitInterrupted;
  }
  const Problems problems = write_profile(out, p);
  if (!problems.empty()) {
    print_problems(problems);
    return kExitBadInput;
  }
  std::fprintf(stdout, "#\n# wrote %s: %s %s x %d, %zu matmul samples, memory %.1f GB/s, %zu collective samples\n",
               out.c_str(), to_string(p.device_kind), p.device_name.c_str(), p.device_count, p.matmul.size(),
               p.memory_bandwidth_GBps, p.collectives.size());
  return kExitOk;
}

#if MONARCH_CALIBRATE_CPU
std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, size_t(len));
  const size_t cut = v.find_first_of(",\n");
  return cut == std::string::npos ? v : v.substr(0, cut);
}

int run_cpu(const Options& opt) {
  MPI_Init(nullptr, nullptr);
  install_interrupt_handler();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = kExitOk;
  if (rank == 0) {
    const Problems problems = check_output_path(opt.out);
    if (!problems.empty()) {
      print_problems(problems);
      status = kExitBadInput;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (status != kExitOk) {
    MPI_Finalize();
    return status;
  }

  CalibrationProfile profile;
  profile.device_kind = DeviceKind::kCpu;
  profile.device_name = cpu_model_name();
  profile.device_count = size;
  fill_provenance(profile, opt.settings);
  profile.notes = std::string("OpenBLAS (") + openblas_get_config() + "), " + std::to_string(opt.settings.threads) +
                  " thread(s) per rank; " + mpi_library_version() + ", " + std::to_string(size) + " rank(s)";
  if (rank == 0) std::fprintf(stdout, "# %s, %s\n", profile.device_name.c_str(), profile.notes.c_str());

  Progress progress(rank == 0);
  bool complete = false;
  if (auto matmul = measure_cpu_matmul(opt.settings, MPI_COMM_WORLD, progress)) {
    profile.matmul = std::move(*matmul);
    if (auto triad = measure_cpu_triad_GBps(opt.settings, MPI_COMM_WORLD, &profile.memory_bytes)) {
      profile.memory_bandwidth_GBps = *triad;
      profile.memory_method = "stream-triad";
      if (auto coll = measure_mpi_collectives(opt.settings, MPI_COMM_WORLD, progress)) {
        profile.collectives = std::move(*coll);
        complete = true;
      }
    }
  }
  progress.clear();
  if (!complete) {
    status = kExitInterrupted;
    if (rank == 0) std::fprintf(stderr, "monarch-calibrate: interrupted; no profile written\n");
  } else if (rank == 0) {
    status = write_and_report(opt.out, profile);
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
#endif

int run_gpu(const Options& opt) {
  if (launcher_size() > 1) {
    if (launcher_rank() == 0) {
      std::fprintf(stderr,
                   "monarch-calibrate: --device gpu: measures every GPU of the node from one process "
                   "(ncclCommInitAll); run it without mpirun/srun\n");
    }
    return kExitBadInput;
  }
#if MONARCH_CALIBRATE_GPU
  if (const Problems problems = check_output_path(opt.out); !problems.empty()) {
    print_problems(problems);
    return kExitBadInput;
  }
  install_interrupt_handler();
  CalibrationProfile profile;
  fill_provenance(profile, opt.settings);
  Progress progress(true);
  std::string why;
  const int status = calibrate_gpu(opt.settings, progress, &profile, &why);
  progress.clear();
  switch (status) {
    case kExitOk: return write_and_report(opt.out, profile);
    case kExitNoDevice:
      std::fprintf(stderr, "monarch-calibrate: --device gpu: %s\n", why.c_str());
      return kExitNoDevice;
    case kExitInterrupted:
      std::fprintf(stderr, "monarch-calibrate: interrupted; no profile written\n");
      return kExitInterrupted;
    default:
      std::fprintf(stderr, "monarch-calibrate: --device gpu: %s; no profile written\n", why.c_str());
      return status;
  }
#else
  (void)opt;
  std::fprintf(stderr,
               "monarch-calibrate: --device gpu: this build has no GPU support (configure where nvcc, cuBLAS "
               "and NCCL are installed; see MONARCH_WITH_GPU)\n");
  return kExitNoDevice;
#endif
}

int show(const std::string& path) {
  auto profile = read_profile(path);
  if (!profile) {
    print_problems(profile.problems());
    return kExitBadInput;
  }
  print_profile(stdout, *profile);
  return kExitOk;
}

int run(int argc, char** argv) {
  Options opt;
  CLI::App app{"monarch-calibrate: measure this machine for the simulator (docs/calibration_profile.md)"};
  CLI::Option* out = app.add_option("--out", opt.out, "profile file to write (monarch-profile/1 JSON)");
  app.add_option("--show", opt.show, "print a profile file as tables (and check it), measure nothing")->excludes(out);
  app.add_option("--device", opt.device, "cpu: the CPU runtime (OpenBLAS, MPI); gpu: this node's GPUs")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  app.add_flag("--quick", opt.settings.quick, "fewer shapes and sizes, shorter timing");
  app.add_option("--threads", opt.settings.threads, "CPU: OpenBLAS threads per process")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (launcher_rank() == 0) {
      std::fprintf(stderr, "monarch-calibrate: %s\nRun with --help for the options.\n", e.what());
    }
    return kExitBadInput;
  }
  if (!opt.show.empty()) return show(opt.show);
  if (opt.out.empty()) {
    if (launcher_rank() == 0) {
      std::fprintf(stderr, "monarch-calibrate: --out is required (or --show FILE)\nRun with --help for the options.\n");
    }
    return kExitBadInput;
  }
  if (opt.device == "gpu") return run_gpu(opt);
#if MONARCH_CALIBRATE_CPU
  return run_cpu(opt);
#else
  std::fprintf(stderr, "monarch-calibrate: --device cpu: this build has no CPU runtime (MPI + OpenBLAS; see "
                       "MONARCH_WITH_MPI)\n");
  return kExitNoDevice;
#endif
}

}  // namespace
}  // namespace monarch::calibrate

int main(int argc, char** argv) { return monarch::calibrate::run(argc, argv); }
