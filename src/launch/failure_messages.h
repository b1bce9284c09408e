// Reads the job launcher's own failure reports from its output: Open MPI's "mpirun noticed that
// process rank N with PID P on node H exited on signal S (...)" and "Process name / Exit code"
// blocks, and srun's "srun: error: H: task N: Killed" lines. They name a dead rank's signal or exit
// code, which the heartbeat files cannot tell.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace tessera::launch {

struct RankExitNotice {
  int rank = -1;
  std::string host;           // empty when the message gives none
  std::optional<int> pid;     // Open MPI prints PID 0 when it does not know it: left empty then
  std::optional<int> signal;  // the rank was killed by this signal ...
  std::optional<int> exit_code;  // ... or exited with this code
  std::string line;           // the message line it came from
};

// Feeds the job's output one line at a time (without the newline); returns a notice when a line
// completes one. Keeps a little state for Open MPI's multi-line "Process name:/Exit code:" block.
class FailureMessageParser {
 public:
  std::optional<RankExitNotice> feed(std::string_view line);

 private:
  std::optional<int> pending_rank_;  // from "Process name: [[jobid,1],rank]", awaiting "Exit code:"
  std::string pending_line_;
};

// "signal 9, SIGKILL": the number and its abbreviation for messages.
std::string signal_description(int signal);

// The signal whose strsignal() text starts `text` ("Killed" -> 9, "Segmentation fault" -> 11), or 0.
int signal_from_text(std::string_view text);

}  // namespace tessera::launch
