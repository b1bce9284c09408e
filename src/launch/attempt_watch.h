// Watching one attempt of the job: polls its output and the ranks' heartbeats until the job ends,
// a rank dies or stops making progress, or the launcher is asked to stop; then ends the job.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "launch/command_line.h"
#include "launch/failure_messages.h"
#include "launch/heartbeat_watch.h"
#include "launch/job_process.h"
#include "launch/launcher.h"
#include "launch/restart_log.h"

namespace tessera::launch {

// What the launcher's signal handler recorded (launcher.cpp): SIGTERM, SIGINT and SIGUSR1 ask the
// job to stop with a checkpoint; a second SIGINT, or SIGHUP, ends it at once.
struct LauncherSignals {
  std::atomic<int> first{0};     // the first signal received (0: none)
  std::atomic<int> end_now{0};   // a signal that ends the job at once
};

struct AttemptOutcome {
  bool success = false;
  bool interrupted = false;
  bool preempted = false;  // the job exited with ExitCode::preempted after saving a checkpoint
  std::string checkpoint;  // preempted: the checkpoint rank 0 reported (empty when unknown)
  std::optional<Failure> failure;
  std::optional<int> wait_status;
  std::optional<double> detected_wall;
  std::optional<double> first_step_wall;
  int64_t last_step = -1;
};

// signals: set by the launcher's handler. A stop signal is passed on to the job (SIGUSR1 to
// mpirun/srun, which forward it to every rank; the signal itself to a plain command's process group),
// which then gets o.stop_timeout seconds to exit.
AttemptOutcome watch_attempt(const LaunchOptions& o, const JobCommand& command, JobProcess& job, int attempt,
                             int ranks, const std::string& heartbeat_dir, RestartLog& log,
                             const LauncherSignals& signals);

}  // namespace tessera::launch
