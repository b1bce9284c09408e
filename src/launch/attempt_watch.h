// Watching one attempt of the job: polls its output and the ranks' heartbeats until the job ends,
// a rank dies or stops making progress, or the launcher is asked to stop; then ends the job.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "launch/failure_messages.h"
#include "launch/heartbeat_watch.h"
#include "launch/job_process.h"
#include "launch/launcher.h"
#include "launch/restart_log.h"

namespace tessera::launch {

struct AttemptOutcome {
  bool success = false;
  bool interrupted = false;
  std::optional<Failure> failure;
  std::optional<int> wait_status;
  std::optional<double> detected_wall;
  std::optional<double> first_step_wall;
  int64_t last_step = -1;
};

// stop_signal: set (to the signal number) by the launcher's SIGINT/SIGTERM/SIGHUP handler.
AttemptOutcome watch_attempt(const LaunchOptions& o, JobProcess& job, int attempt, int ranks,
                             const std::string& heartbeat_dir, RestartLog& log, const std::atomic<int>& stop_signal);

}  // namespace tessera::launch
