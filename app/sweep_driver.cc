// The coordinator and workers of `monarch-sim sweep` (app/sweep_driver.h).
#include "app/sweep_driver.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/interrupt.h"
#include "results/store.h"

extern char** environ;

namespace monarch::app {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitInterrupted = 130;
// How long the coordinator sleeps between looks at its children and ranks.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
// How often the progress line on a terminal is redrawn.
constexpr auto kProgressInterval = std::chrono::milliseconds(500);

// A point that ended: its outcome's text, or why its process ended without one.
struct Finished {
  int64_t index = 0;
  bool lost = false;
  std::string text;  // lost: the reason; else the outcome (run/sweep.h wire format)
};

std::string last_line(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

std::string wait_status_text(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

// Points in child processes of this process, up to `slots` at a time.
class LocalChildren {
 public:
  LocalChildren(std::string monarch_sim, std::string sweep_path, size_t slots)
      : monarch_sim_(std::move(monarch_sim)), sweep_path_(std::move(sweep_path)), slots_(slots) {
    std::string templ = (std::filesystem::temp_directory_path() / "monarch-sweep-XXXXXX").string();
    if (::mkdtemp(templ.data())) dir_ = templ;
  }
  ~LocalChildren() {
    stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  LocalChildren(const LocalChildren&) = delete;
  LocalChildren& operator=(const LocalChildren&) = delete;

  bool usable() const { return !dir_.empty(); }
  size_t running() const { return children_.size(); }
  bool has_free_slot() const { return children_.size() < slots_; }

  // Starts the child of point `index`; false (and `why`) when it cannot be spawned.
  bool start(int64_t index, std::string* why) {
    const std::string stem = dir_ + "/point-" + std::to_string(index) + "-" + std::to_string(++serial_);
    Child c{index, stem + ".json", stem + ".err"};
    const std::string& exe = monarch_sim_;
    std::vector<std::string> args = {exe, "sweep", sweep_path_, "--point", std::to_string(index), "--point-output", c.output};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, c.error.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      *why = "cannot start a worker process (" + exe + "): " + std::strerror(rc);
      return false;
    }
    children_.emplace(pid, std::move(c));
    return true;
  }

  // A child that ended, if any (without waiting).
  std::optional<Finished> reap() {
    for (auto it = children_.begin(); it != children_.end(); ++it) {
      int status = 0;
      const pid_t r = ::waitpid(it->first, &status, WNOHANG);
      if (r == 0) continue;
      Finished f{it->second.index, true, ""};
      if (r < 0) {
        f.text = "the worker process vanished";
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        std::FILE* in = std::fopen(it->second.output.c_str(), "rb");
        if (in) {
          char buf[65536];
          size_t n;
          while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) f.text.append(buf, n);
          std::fclose(in);
          f.lost = false;
        } else {
          f.text = "the worker process wrote no outcome";
        }
      } else {
        const std::string err = last_line(it->second.error);
        f.text = "the worker process " + wait_status_text(status) + (err.empty() ? "" : " (" + err + ")");
      }
      std::error_code ec;
      std::filesystem::remove(it->second.output, ec);
      std::filesystem::remove(it->second.error, ec);
      children_.erase(it);
      return f;
    }
    return std::nullopt;
  }

  // Ends every running child (SIGTERM: it cancels its run) and waits for them.
  void stop() {
    for (const auto& [pid, c] : children_) ::kill(pid, SIGTERM);
    for (const auto& [pid, c] : children_) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      std::error_code ec;
      std::filesystem::remove(c.output, ec);
      std::filesystem::remove(c.error, ec);
    }
    children_.clear();
  }

 private:
  struct Child {
    int64_t index;
    std::string output, error;
  };
  std::string monarch_sim_;
  std::string sweep_path_;
  size_t slots_;
  std::string dir_;
  int64_t serial_ = 0;
  std::map<pid_t, Child> children_;
};

// Where the coordinator's points run: its own children, or MPI ranks.
class PointExecutor {
 public:
  virtual ~PointExecutor() = default;
  virtual bool has_free_slot() const = 0;
  virtual size_t running() const = 0;
  virtual Problems start(int64_t index) = 0;
  virtual Expected<std::optional<Finished>> next_finished() = 0;
  virtual void stop() = 0;  // interrupted: end the running points without recording them
  virtual void finish() {}  // the sweep is done: release the workers
};

class LocalExecutor : public PointExecutor {
 public:
  LocalExecutor(const std::string& monarch_sim, const std::string& sweep_path, size_t jobs)
      : children_(monarch_sim, sweep_path, jobs) {}
  bool usable() const { return children_.usable(); }
  bool has_free_slot() const override { return children_.has_free_slot(); }
  size_t running() const override { return children_.running(); }
  Problems start(int64_t index) override {
    std::string why;
    if (!children_.start(index, &why)) return {{"--jobs", why}};
    return {};
  }
  Expected<std::optional<Finished>> next_finished() override { return children_.reap(); }
  void stop() override { children_.stop(); }

 private:
  LocalChildren children_;
};

// A finished point as one message (MPI worker -> rank 0).
std::string finished_message(const Finished& f) {
  return json({{"index", f.index}, {"lost", f.lost}, {"text", f.text}}).dump(-1, ' ', false, json::error_handler_t::replace);
}
std::optional<Finished> finished_from_message(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.value("index", json()).is_number_integer() || !j.value("lost", json()).is_boolean() ||
      !j.value("text", json()).is_string())
    return std::nullopt;
  return Finished{j["index"].get<int64_t>(), j["lost"].get<bool>(), j["text"].get<std::string>()};
}

// Rank 0's side: each worker rank computes one point at a time.
class MpiExecutor : public PointExecutor {
 public:
  explicit MpiExecutor(realrt::SweepTransport& t) : t_(t) {
    for (int r = 1; r < t.size(); ++r) idle_.insert(r);
  }
  bool has_free_slot() const override { return !idle_.empty(); }
  size_t running() const override { return busy_.size(); }
  Problems start(int64_t index) override {
    const int worker = *idle_.begin();
    if (Problems p = t_.send_point(worker, index); !p.empty()) return p;
    idle_.erase(worker);
    busy_[worker] = index;
    return {};
  }
  Expected<std::optional<Finished>> next_finished() override {
    auto m = t_.poll_message();
    if (!m) return m.problems();
    if (!*m) return std::optional<Finished>();
    const auto& [worker, text] = **m;
    auto f = finished_from_message(text);
    const auto it = busy_.find(worker);
    if (it == busy_.end()) return std::optional<Finished>();  // not a point of ours: ignore
    const int64_t index = it->second;
    busy_.erase(it);
    idle_.insert(worker);
    if (!f || f->index != index)
      return std::optional<Finished>(Finished{index, true, "rank " + std::to_string(worker) + " sent an unreadable message"});
    if (f->lost) f->text = "on rank " + std::to_string(worker) + ": " + f->text;
    return f;
  }
  void stop() override {
    // The ranks' children get the same signal from the launcher; wait for their messages so
    // that every rank is idle, then release them.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!busy_.empty() && Clock::now() < deadline) {
      auto f = next_finished();
      if (!f) break;
      if (!*f) std::this_thread::sleep_for(kPollInterval);
    }
    finish();
  }
  void finish() override {
    for (int r = 1; r < t_.size(); ++r)
      if (!busy_.count(r)) (void)t_.send_point(r, -1);
  }

 private:
  realrt::SweepTransport& t_;
  std::set<int> idle_;
  std::map<int, int64_t> busy_;  // worker rank -> point
};

// A worker rank: computes the points rank 0 sends, each in a child process, until told to stop.
int run_mpi_worker(realrt::SweepTransport& t, const std::string& monarch_sim, const std::string& sweep_path) {
  LocalChildren children(monarch_sim, sweep_path, 1);
  while (true) {
    auto index = t.receive_point();
    if (!index) {
      for (const auto& p : index.problems()) print_error(p.where, p.message);
      return 1;
    }
    if (*index < 0) return kExitOk;
    Finished f{*index, true, "cannot create a temporary directory on " + host_name()};
    std::string why;
    if (children.usable() && !children.start(*index, &why)) f.text = why;
    else if (children.usable()) {
      std::optional<Finished> done;
      while (!(done = children.reap())) std::this_thread::sleep_for(kPollInterval);
      f = *done;
    }
    if (Problems p = t.send_message(finished_message(f)); !p.empty()) {
      for (const auto& pr : p) print_error(pr.where, pr.message);
      return 1;
    }
  }
}

std::string duration_text(double s) {
  char buf[32];
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

// What the coordinator counts while the sweep runs.
struct Tally {
  size_t total = 0, skipped = 0, computed = 0, not_ok = 0, retried = 0;
  std::map<PointStatus, size_t> by_status;
};

void print_progress(const run::SweepSpec& spec, const Tally& t, size_t running, Clock::time_point started) {
  const size_t done = t.skipped + t.computed;
  std::string eta = "ETA --:--";
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (t.computed > 0) eta = "ETA " + duration_text(elapsed_s / static_cast<double>(t.computed) * static_cast<double>(t.total - done));
  std::fprintf(stderr, "\rsweep %s: %zu / %zu points, %zu not ok, %zu running, %s   ", spec.name.c_str(), done, t.total,
               t.not_ok, running, eta.c_str());
  std::fflush(stderr);
}

// Records one finished point; false when the store refused it (the message says why).
bool record_point(Store& store, const run::SweepSpec& spec, size_t index, const run::PointOutcome& outcome, Tally& tally) {
  auto id = store.record_sweep_point(run::sweep_point(spec, index, outcome), outcome.runs);
  if (!id) {
    for (const auto& p : id.problems()) print_error("--db " + store.path(), p.to_string());
    return false;
  }
  ++tally.computed;
  ++tally.by_status[outcome.status];
  if (outcome.status != PointStatus::kOk) ++tally.not_ok;
  return true;
}

// The outcome a finished point records: its own, or failed when its text is unreadable or was
// computed from different inputs than the coordinator's.
run::PointOutcome outcome_of(const run::SweepSpec& spec, const Finished& f) {
  auto o = run::point_outcome_from_json(f.text, "point " + std::to_string(f.index));
  run::PointOutcome failed;
  failed.status = PointStatus::kFailed;
  if (!o) {
    failed.error = o.problems().front().to_string();
    return failed;
  }
  if (o->key != spec.points[static_cast<size_t>(f.index)].key) {
    failed.error = "the sweep file or its base scenario changed while the sweep ran; the point was computed from other inputs";
    return failed;
  }
  return std::move(o).value();
}

// Hands out the points and records what comes back until all are done or the sweep is stopped.
int coordinate(const run::SweepSpec& spec, Store& store, PointExecutor& exec, std::deque<int64_t> todo, Tally& tally) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto started = Clock::now();
  std::map<int64_t, int> attempts;
  bool store_failed = false;
  auto last_progress = Clock::time_point{};
  while (!todo.empty() || exec.running() > 0) {
    if (interrupted()) break;
    while (!todo.empty() && exec.has_free_slot()) {
      if (Problems p = exec.start(todo.front()); !p.empty()) {
        for (const auto& pr : p) print_error(pr.where, pr.message);
        exec.stop();
        return 1;
      }
      ++attempts[todo.front()];
      todo.pop_front();
    }
    auto f = exec.next_finished();
    if (!f) {
      for (const auto& p : f.problems()) print_error(p.where, p.message);
      exec.stop();
      return 1;
    }
    if (!*f) {
      if (tty && Clock::now() - last_progress >= kProgressInterval) {
        print_progress(spec, tally, exec.running(), started);
        last_progress = Clock::now();
      }
      std::this_thread::sleep_for(kPollInterval);
      continue;
    }
    const Finished& done = **f;
    if (done.lost && interrupted()) break;
    if (done.lost && attempts[done.index] < kMaxPointAttempts) {
      if (tty) std::fprintf(stderr, "\r%100s\r", "");
      std::cerr << "monarch-sim: sweep " << spec.name << ": point " << done.index << " lost (" << done.text
                << "); handed out again\n";
      ++tally.retried;
      todo.push_front(done.index);
      continue;
    }
    run::PointOutcome outcome;
    if (done.lost) {
      outcome.status = PointStatus::kFailed;
      outcome.error = "lost " + std::to_string(kMaxPointAttempts) + " times, last: " + done.text;
    } else {
      outcome = outcome_of(spec, done);
    }
    if (!record_point(store, spec, static_cast<size_t>(done.index), outcome, tally)) {
      store_failed = true;
      break;
    }
  }
  if (tty) std::fprintf(stderr, "\r%100s\r", "");
  if (interrupted() || store_failed) {
    exec.stop();
    if (interrupted()) {
      std::cerr << "monarch-sim: sweep " << spec.name << " interrupted: " << tally.skipped + tally.computed << " of "
                << tally.total << " points are in " << store.path() << "; --resume computes the rest\n";
      return kExitInterrupted;
    }
    return 1;
  }
  exec.finish();
  return kExitOk;
}

void print_summary(const run::SweepSpec& spec, const Tally& t, const Store& store) {
  std::cerr << "monarch-sim: sweep " << spec.name << ": " << t.total << " points, " << t.computed << " computed, "
            << t.skipped << " already in the store";
  for (const auto& [status, n] : t.by_status) std::cerr << ", " << n << " " << to_string(status);
  if (t.retried > 0) std::cerr << ", " << t.retried << " handed out again";
  std::cerr << "\nmonarch-sim: recorded in " << store.path() << " (monarch-sim --db " << store.path()
            << " runs export --sweep " << spec.name << ")\n";
}

// The coordinator: checks, opens the store, decides which points to compute, runs them.
int run_coordinator(const SweepDriverOptions& opts, const run::SweepSpec& spec, PointExecutor& exec) {
  auto st = opts.db_path.empty() ? Store::open_default() : Store::open(opts.db_path);
  if (!st) {
    for (const auto& p : st.problems()) print_error("--db", p.to_string());
    return kExitInvalid;
  }
  Store store = std::move(st).value();
  auto recorded = store.list_sweep_points(spec.name);
  if (!recorded) {
    for (const auto& p : recorded.problems()) print_error("--db", p.to_string());
    return kExitInvalid;
  }
  std::set<std::string> have;
  for (const auto& p : *recorded) have.insert(p.point.point_key);
  if (!have.empty() && !opts.resume) {
    print_error(spec.path, "sweep \"" + spec.name + "\" already has " + std::to_string(have.size()) +
                                     " points in " + store.path() +
                                     "; --resume computes only the missing ones, or give the sweep another \"name\"");
    return kExitInvalid;
  }
  Tally tally;
  tally.total = spec.points.size();
  std::deque<int64_t> todo;
  for (size_t i = 0; i < spec.points.size(); ++i) {
    if (have.count(spec.points[i].key)) ++tally.skipped;
    else todo.push_back(static_cast<int64_t>(i));
  }
  InterruptGuard guard({SIGINT, SIGTERM});
  const int rc = coordinate(spec, store, exec, std::move(todo), tally);
  if (rc == kExitOk) print_summary(spec, tally, store);
  return rc;
}

}  // namespace

bool launched_by_mpi() {
  // OpenMPI's mpirun, MPICH / Intel MPI (PMI), Slurm's srun with PMIx.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

int run_sweep_locally(const SweepDriverOptions& options, const run::SweepSpec& spec) {
  LocalExecutor exec(options.monarch_sim, spec.path, options.jobs);
  if (!exec.usable()) {
    print_error("--jobs", "cannot create a temporary directory for the worker processes (check TMPDIR)");
    return kExitInvalid;
  }
  return run_coordinator(options, spec, exec);
}

int run_sweep_over_mpi(const SweepDriverOptions& options, realrt::SweepTransport& transport,
                       const Expected<run::SweepSpec>& spec, const std::string& sweep_path) {
  if (transport.rank() != 0) return run_mpi_worker(transport, options.monarch_sim, sweep_path);
  MpiExecutor exec(transport);
  if (!spec) {
    for (const auto& p : spec.problems()) print_error(p.where, p.message);
    exec.finish();
    return kExitInvalid;
  }
  const int rc = run_coordinator(options, *spec, exec);
  if (rc == kExitInvalid) exec.finish();
  return rc;
}

}  // namespace monarch::app
