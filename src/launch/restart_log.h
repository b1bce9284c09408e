// The launcher's record of every attempt (failure, restart, final outcome) as JSON lines in
// <run-dir>/launch/restarts.jsonl, and the one-line descriptions of failures it prints.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::launch {

// Why an attempt failed, and where.
struct Failure {
  // died: the rank's process vanished or was killed; exited: it exited non-zero; failed: it wrote
  // phase "failed"; no_progress: heartbeat timeout; not_done: the job exited 0 without every rank
  // reporting "done"; job_exit: the job exited non-zero with no rank to blame; start: could not start.
  std::string cause;
  int rank = -1;
  std::string host;
  int64_t step = -1;  // the rank's last completed step (-1: none known)
  std::string phase;  // the rank's phase at the time
  std::optional<int> signal;
  std::optional<int> exit_code;
  int pid = 0;
  double idle_s = 0;              // no_progress: seconds without progress
  std::vector<int> stalled_ranks;  // no_progress: every stalled rank, culprit first
  std::string message;             // failed: the rank's error text; job_exit: the job's exit status
};

// "rank 2 on host node1 died (signal 9, SIGKILL) at step 5 (last completed step 4)",
// "rank 1 on host node1 made no progress for 20 s (last step 5); ranks 0, 2 stalled too".
std::string describe_failure(const Failure& f);

struct AttemptRecord {
  int attempt = 0;
  int ranks = 0;  // 0: not known (a plain command)
  std::string command;
  double start_time = 0;  // unix seconds
  double end_time = 0;
  std::string outcome;  // done | failed | preempted | interrupted | not_started
  std::string checkpoint;  // preempted: the checkpoint the job saved (empty when unknown)
  std::string exit_status;  // "exit code 1", "signal 15, SIGTERM"
  std::optional<int> exit_code;
  std::optional<Failure> failure;
  std::optional<double> detected_time;   // unix seconds when the launcher saw the failure
  int64_t last_step = -1;                 // highest step any rank reported
  std::optional<double> first_step_time;  // unix seconds of this attempt's first completed step
  // For a restart: seconds from the previous attempt's failure detection to this attempt's first
  // completed step.
  std::optional<int> recovered_from_attempt;
  std::optional<double> recovery_s;
  bool will_restart = false;
};

std::string attempt_record_json(const AttemptRecord& r);

// Appends records to <run_dir>/launch/restarts.jsonl; records made before the run directory is known
// (it may come from rank 0's heartbeat) are kept and written once it is.
class RestartLog {
 public:
  // Sets the run directory (once); creates <run_dir>/launch and writes what was kept.
  Status set_run_dir(const std::string& run_dir);
  const std::string& run_dir() const { return run_dir_; }
  std::string path() const;
  Status append(const AttemptRecord& r);
  // Writes kept records to `fallback_dir`/restarts.jsonl when no run directory was ever learned.
  Status flush_to(const std::string& fallback_dir);

 private:
  Status write_lines(const std::string& path, const std::vector<std::string>& lines);
  std::string run_dir_;
  std::vector<std::string> pending_;
};

}  // namespace tessera::launch
