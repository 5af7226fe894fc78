#include "realrt/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace monarch::realrt {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int g_crash_rank = -1;

void crash_handler(int sig) {
  char msg[128];
  const int n = std::snprintf(msg, sizeof msg, "monarch-run: rank %d: crashed with signal %d (%s)\n", g_crash_rank, sig,
                              sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : sig == SIGBUS ? "SIGBUS"
                                                           : sig == SIGFPE ? "SIGFPE" : "SIGILL");
  if (n > 0) (void)!write(2, msg, static_cast<size_t>(n));
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

// One rank's entry on the board (steady clock of the node, nanoseconds).
struct Watchdog::Slot {
  std::atomic<int64_t> world_rank;
  std::atomic<int64_t> progress_ns;  // last activity change
  std::atomic<int64_t> alive_ns;     // last sign of life
  std::atomic<int64_t> waiting;      // 1 while waiting on communication
  char label[96];
};
static_assert(std::atomic<int64_t>::is_always_lock_free);

Watchdog::Watchdog(MPI_Comm world, double timeout_s) : timeout_s_(timeout_s) {
  MPI_Comm_rank(world, &world_rank_);
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node_);
  MPI_Comm_rank(node_, &node_rank_);
  MPI_Comm_size(node_, &node_size_);
  char* mine = nullptr;
  MPI_Win_allocate_shared(static_cast<MPI_Aint>(sizeof(Slot)), 1, MPI_INFO_NULL, node_, &mine, &win_);
  MPI_Aint size = 0;
  int disp = 1;
  MPI_Win_shared_query(win_, 0, &size, &disp, &base_);
  Slot* s = slot(node_rank_);
  s->world_rank = world_rank_;
  s->progress_ns = s->alive_ns = now_ns();
  s->waiting = 0;
  std::snprintf(s->label, sizeof s->label, "start-up");
  MPI_Barrier(node_);
  if (timeout_s_ > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

Watchdog::Slot* Watchdog::slot(int i) const {
  // Slots are contiguous: MPI_Win_allocate_shared places the ranks' segments one after another
  // unless alloc_shared_noncontig is set, which we do not.
  return reinterpret_cast<Slot*>(base_ + static_cast<size_t>(i) * sizeof(Slot));
}

void Watchdog::enter(const char* label, bool waiting) {
  Slot* s = slot(node_rank_);
  if (!waiting && label != compute_label_) {
    std::strncpy(compute_label_, label, sizeof compute_label_ - 1);
    compute_label_[sizeof compute_label_ - 1] = '\0';
  }
  std::strncpy(s->label, label, sizeof s->label - 1);
  s->label[sizeof s->label - 1] = '\0';
  s->waiting = waiting ? 1 : 0;
  const int64_t t = now_ns();
  s->progress_ns = t;
  s->alive_ns = t;
}

void Watchdog::leave_wait() { enter(compute_label_, false); }

void Watchdog::alive() { slot(node_rank_)->alive_ns = now_ns(); }

void Watchdog::run() {
  const int64_t timeout_ns = static_cast<int64_t>(timeout_s_ * 1e9);
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kWatchdogPollS));
    const int64_t t = now_ns();
    Slot* me = slot(node_rank_);
    if (t - me->progress_ns < timeout_ns) continue;
    // No progress here for the timeout: find who is to blame.
    std::string culprits;
    for (int i = 0; i < node_size_; ++i) {
      Slot* s = slot(i);
      const bool stuck_computing = !s->waiting && t - s->progress_ns >= timeout_ns;
      const bool silent = t - s->alive_ns >= timeout_ns / 2 && s->waiting;
      if (stuck_computing || silent) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%srank %lld (%s in \"%s\" for %.1f s)", culprits.empty() ? "" : ", ",
                      static_cast<long long>(s->world_rank.load()), stuck_computing ? "no progress" : "no heartbeat",
                      s->label, static_cast<double>(t - s->progress_ns) * 1e-9);
        culprits += buf;
      }
    }
    if (culprits.empty()) culprits = "none found on this node (a rank on another node, or a deadlock)";
    std::fprintf(stderr, "monarch-run: rank %d: watchdog: no progress for %.1f s (timeout %.1f s) while in \"%s\"; hung: %s\n",
                 world_rank_, static_cast<double>(t - me->progress_ns) * 1e-9, timeout_s_, me->label, culprits.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

void Watchdog::install_crash_handlers(int world_rank) {
  g_crash_rank = world_rank;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_handler);
}

void wait_request(MPI_Request* request, Watchdog* wd) {
  int done = 0;
  for (int spins = 0;; ++spins) {
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (wd && (spins & 63) == 0) wd->alive();
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 200 : 20));
  }
}

}  // namespace monarch::realrt
