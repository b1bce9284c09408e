// Stop signals (see preemption.h): the handler and the per-step agreement between ranks.
#include "train/preemption.h"

#include <unistd.h>

#include <pthread.h>

#include <cstring>


namespace tessera {
namespace {

// The one piece of global state: a signal handler can reach nothing else (the watcher thread
// writes it through the same function).
volatile std::sig_atomic_t g_stop_signal = 0;

constexpr int kStopSignals[3] = {SIGTERM, SIGINT, SIGUSR1};

// Records a stop signal; called by the handler and by the watcher thread, so only
// async-signal-safe calls here: write(2) and _exit.
void record_stop_signal(int sig) {
  if (sig == SIGINT && g_stop_signal != 0) {
    static const char msg[] = "\nerror: second SIGINT: exiting now without saving a checkpoint (exit code 130)\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(130);
  }
  if (g_stop_signal == 0) g_stop_signal = sig;
}

extern "C" void on_stop_signal(int sig) { record_stop_signal(sig); }

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  return set;
}

}  // namespace

PreemptionSignals::PreemptionSignals() {
  g_stop_signal = 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes and MPI's polls go on as if nothing happened
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &sa, &previous_[i]);
  // A handler must never run on a compute thread: with it free to, 6 of 32 four-rank runs given a
  // SIGUSR1 mid-run aborted on a corrupted heap, always inside dnnl_sgemm's free (0 of 32 blocked).
  // So this thread, and every thread it starts from now on (OpenMP's, oneDNN's, the loader's, the
  // checkpoint writer's), blocks them; they reach the handler on a thread that does not block them
  // (MPI's own), or else the watcher takes them.
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  watcher_ = std::thread([this, set] {
    const timespec poll = {0, 50'000'000};
    while (!closing_.load(std::memory_order_relaxed)) {
      const int sig = ::sigtimedwait(&set, nullptr, &poll);
      if (sig > 0) record_stop_signal(sig);
    }
  });
}

PreemptionSignals::~PreemptionSignals() {
  closing_ = true;
  watcher_.join();
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
}

const volatile std::sig_atomic_t& PreemptionSignals::received() const { return g_stop_signal; }

Result<int> agree_on_stop_signal(Communicator& world, const volatile std::sig_atomic_t* received) {
  if (!received) return 0;
  int32_t sig = static_cast<int32_t>(*received);
  if (world.size() == 1) return static_cast<int>(sig);
  TS_RETURN_IF_ERROR(world.all_reduce(&sig, &sig, 1, DType::i32, ReduceOp::max));
  return static_cast<int>(sig);
}

std::string stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace tessera
