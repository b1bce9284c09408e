// The elastic launcher (`tessera launch`): starts an mpirun/srun job, watches the ranks' heartbeat
// files and the job's exit, ends the whole job when a rank dies or stops making progress, and
// restarts it (TESSERA_RESUME=auto: from the latest complete checkpoint) up to max_restarts times,
// with as many ranks as the slots file allows. It never touches checkpoints.
#pragma once
#include <string>
#include <vector>

#include "core/exit_codes.h"

namespace tessera::launch {

struct LaunchOptions {
  std::vector<std::string> command;  // the mpirun/srun line (or a plain command: one process)
  int min_ranks = 1;
  int max_ranks = 0;  // 0: no cap
  int max_restarts = 3;
  double heartbeat_timeout = 120;  // seconds without progress of a training rank
  double startup_timeout = 0;      // seconds for a rank's set-up (and first heartbeat); 0: heartbeat_timeout
  double grace = 10;               // seconds between SIGTERM and SIGKILL when ending the job
  // Seconds the job gets to finish its step, save a checkpoint and exit after the launcher passed
  // on a stop signal (SIGTERM/SIGINT/SIGUSR1); then it is ended as above.
  double stop_timeout = 300;
  double poll_interval = 0.2;
  double wait_for_slots = 0;  // seconds to wait for min_ranks slots before giving up
  std::string slots_file;     // re-read before every start; empty: the command's own rank count
  std::string run_dir;        // train.out_dir; empty: learned from the heartbeats' "out_dir"
  std::string heartbeat_dir;  // empty: <run_dir>/launch/heartbeats, or a new temporary directory
};

// Exit codes of run_launch (and `tessera launch`).
inline constexpr int kLaunchDone = 0;
inline constexpr int kLaunchFailed = 1;       // the job failed and the restarts are used up
inline constexpr int kLaunchSetupError = 2;   // bad options, too few slots, command cannot start
inline constexpr int kLaunchInterrupted = 130;  // ended at once (a second SIGINT, SIGHUP) or did not stop in time
inline constexpr int kLaunchPreempted = exit_code(ExitCode::preempted);  // stopped with a checkpoint; run it again

// Runs the job to completion, until restarts are exhausted, or until a stop signal (SIGTERM, SIGINT,
// SIGUSR1) has made it save a checkpoint and exit with code 75 (preempted: the same command resumes).
// Prints one line per event and attempt to stderr ("tessera launch: ..."), and appends every attempt
// to <run_dir>/launch/restarts.jsonl.
int run_launch(const LaunchOptions& options);

}  // namespace tessera::launch
