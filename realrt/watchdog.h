// Watchdog of the real runtime: a rank that crashes or hangs must not leave the others waiting
// for ever. Every rank publishes what it is doing on a board in node-shared memory (an MPI
// shared window over the ranks of the node): its current activity, whether it is waiting on
// communication, when it last made progress and when it was last alive. A thread per rank
// checks the board every kWatchdogPollS; when this rank has made no progress for the timeout it
// names the culprit — a rank that is not waiting on communication and has made no progress (hung
// in compute), or whose heartbeat stopped (stopped or dead) — prints one line on stderr and ends
// the process with exit status 3, upon which mpirun ends every other rank (non-zero too).
// A crash (fatal signal) prints "rank R: crashed with signal S" before dying.
// Bound: every rank ends within timeout + kWatchdogPollS + mpirun's teardown (about a second).
// The board covers the ranks of one node. On several nodes (see realrt/README.md, "Watchdog on
// several nodes"): a crash is named by the crashed rank itself and mpirun ends every node; a
// rank hung outside communication is named by its own watchdog thread (its progress stopped
// first, so it fires first); every rank still exits within the bound, because each thread
// watches its own rank's progress. Only a rank whose process stopped whole (no thread left to
// speak, e.g. SIGSTOP) is named by node-mates alone; ranks on other nodes then say "none found
// on this node" and what they were waiting on ("receive from rank 5", "all-reduce dp").
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace monarch::realrt {

inline constexpr double kWatchdogPollS = 0.2;  // how often the watchdog thread looks, seconds

class Watchdog {
 public:
  // Collective over world. timeout_s <= 0 disables the thread (the board still exists).
  Watchdog(MPI_Comm world, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // This rank starts an activity (label: "forward chunk 0 mb 3", "all-reduce tp"); waiting is
  // true for communication waits. Counts as progress.
  void enter(const char* label, bool waiting);
  // A wait ended: back to the last non-waiting activity. Counts as progress.
  void leave_wait();
  // Still alive inside a wait (called from polling loops); not progress.
  void alive();
  double timeout_s() const { return timeout_s_; }

  // Installs handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT that print the rank.
  static void install_crash_handlers(int world_rank);

 private:
  struct Slot;
  void run();
  Slot* slot(int i) const;

  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  char* base_ = nullptr;
  int node_rank_ = 0, node_size_ = 1, world_rank_ = 0;
  double timeout_s_ = 0;
  char compute_label_[96] = "compute";
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits for an MPI request, polling with short sleeps (so oversubscribed ranks leave the cores
// to the ranks that compute) and telling the watchdog this rank is alive. wd may be null.
void wait_request(MPI_Request* request, Watchdog* wd);

}  // namespace monarch::realrt
