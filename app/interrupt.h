// Ctrl-C (SIGINT) and, where asked, SIGTERM as a flag that long work polls: the handler only
// sets the flag, so the work stops at its next check and leaves nothing half-written.
#pragma once

#include <atomic>
#include <csignal>
#include <initializer_list>
#include <utility>
#include <vector>

namespace monarch::app {

inline std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
extern "C" inline void monarch_on_interrupt(int) { interrupt_flag().store(true); }

inline bool interrupted() { return interrupt_flag().load(); }

// Installs the handler for `signals` for the life of the object; the previous ones are
// restored after.
class InterruptGuard {
 public:
  explicit InterruptGuard(std::initializer_list<int> signals = {SIGINT}) {
    interrupt_flag().store(false);
    for (int s : signals) previous_.emplace_back(s, std::signal(s, monarch_on_interrupt));
  }
  ~InterruptGuard() {
    for (const auto& [s, handler] : previous_) std::signal(s, handler);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  std::vector<std::pair<int, void (*)(int)>> previous_;
};

}  // namespace monarch::app
