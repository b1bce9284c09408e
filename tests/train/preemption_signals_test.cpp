// PreemptionSignals: the stop signals never interrupt the thread that made it nor any thread it
// starts afterwards (a handler landing inside oneDNN's JIT sgemm corrupted its heap), yet a signal
// sent to the process is still recorded.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "train/preemption.h"

namespace tessera {
namespace {

bool blocked_here(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

// Waits (bounded) until `received` is set: the watcher polls every 50 ms.
int wait_for_signal(const volatile std::sig_atomic_t& received) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (received == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return static_cast<int>(received);
}

TEST(PreemptionSignals, ComputeThreadsBlockTheStopSignalsAndTheProcessStillGetsThem) {
  ASSERT_FALSE(blocked_here(SIGUSR1));
  {
    PreemptionSignals signals;
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) EXPECT_TRUE(blocked_here(sig)) << stop_signal_name(sig);
    bool worker_blocks = false;  // a thread started afterwards (an OpenMP or oneDNN worker) inherits it
    std::thread([&] { worker_blocks = blocked_here(SIGUSR1) && blocked_here(SIGTERM); }).join();
    EXPECT_TRUE(worker_blocks);
    EXPECT_EQ(signals.received(), 0);
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);  // to the process, as mpirun and schedulers send it
    EXPECT_EQ(wait_for_signal(signals.received()), SIGUSR1);
    ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);  // a later one does not replace the first
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(signals.received(), SIGUSR1);
  }
  EXPECT_FALSE(blocked_here(SIGUSR1)) << "the destructor restores the thread's mask";
  EXPECT_FALSE(blocked_here(SIGTERM));
}

}  // namespace
}  // namespace tessera
