// Preemption: SIGTERM, SIGINT and SIGUSR1 ask the run to stop after the current step with a
// checkpoint of it (exit code ExitCode::preempted, 75); a second SIGINT ends the process at once.
// The handler only records the signal; the trainer asks every rank at the step boundary
// (agree_on_stop_signal), so all ranks stop after the same step even when only one was signalled.
#pragma once
#include <csignal>
#include <atomic>
#include <string>
#include <thread>

#include "comm/communicator.h"
#include "core/status.h"

namespace tessera {

// Installs the handlers for the lifetime of the object (one per process) and restores the previous
// ones afterwards. Construct it on the main thread before any compute thread starts: it blocks the
// signals there (threads started later inherit that) and takes them on a watcher thread of its own,
// so no handler ever interrupts a kernel. A second SIGINT while a stop is pending writes a message and _exit(130)s: the
// user asked twice, nothing is saved.
class PreemptionSignals {
 public:
  PreemptionSignals();
  ~PreemptionSignals();
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The signal number received first, 0 while none; written only by the handler.
  const volatile std::sig_atomic_t& received() const;

 private:
  struct sigaction previous_[3];
  sigset_t previous_mask_;
  std::atomic<bool> closing_{false};
  std::thread watcher_;  // sigtimedwait()s the signals, which every later thread blocks
};

// The stop signal the ranks agree on: the largest signal number any rank of `world` received (0:
// none), so every rank stops after the same step. One all-reduce of one int; none in a world of one.
// `received`: this rank's PreemptionSignals::received(), or null when signals are not handled (then
// every rank must pass null, and nothing is exchanged).
Result<int> agree_on_stop_signal(Communicator& world, const volatile std::sig_atomic_t* received);

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string stop_signal_name(int signal);

}  // namespace tessera
