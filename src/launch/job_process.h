// The job as a child process: started in its own process group with extra environment variables,
// its stdout/stderr passed through (and split into lines for the failure-message parser), and
// ended as a whole: SIGTERM to the group and every descendant, SIGKILL after a grace period.
// Open MPI puts each local rank in a process group of its own, so the group alone is not enough.
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessera::launch {

class JobProcess {
 public:
  // Forks and execs argv[0] (searched in PATH) with the launcher's environment plus `env`
  // (overriding variables of the same name). Fails when the program cannot be started.
  static Result<JobProcess> start(const std::vector<std::string>& argv,
                                  const std::vector<std::pair<std::string, std::string>>& env);
  JobProcess(JobProcess&& other) noexcept;
  JobProcess& operator=(JobProcess&&) = delete;
  JobProcess(const JobProcess&) = delete;
  ~JobProcess();  // kills and reaps a job still running

  pid_t pid() const { return pid_; }
  bool running() const { return !status_.has_value(); }
  // The raw wait status once the job has exited.
  std::optional<int> wait_status() const { return status_; }

  // Waits up to timeout_ms for output, forwards what arrives to the launcher's stdout/stderr, and
  // calls on_line for every complete line; then reaps the job if it has exited.
  void pump(int timeout_ms, const std::function<void(std::string_view)>& on_line);
  // Pumps until both output pipes are closed or `max_s` seconds passed (a surviving grandchild can
  // hold them open).
  void drain(double max_s, const std::function<void(std::string_view)>& on_line);

  // Ends the job: SIGTERM to its process group, its descendants and `extra_pids` (ranks known from
  // heartbeats), waits up to grace_s for the job to exit, then SIGKILL to all of them and reaps.
  void terminate(double grace_s, const std::vector<int>& extra_pids);
  // Sends `sig` to the job's process group only (the job's own processes, not Open MPI's ranks,
  // which each get a group of their own).
  void signal_group(int sig) const;

 private:
  JobProcess(pid_t pid, int out_fd, int err_fd) : pid_(pid), fds_{out_fd, err_fd} {}
  void reap(bool block);
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string partial_[2];
  std::optional<int> status_;
};

// "exit code 3" / "signal 9, SIGKILL" for a wait status.
std::string wait_status_text(int status);
// The exit code a shell would report for a wait status (128 + signal for a signal).
int wait_status_code(int status);

// Whether a process with this id exists and is not a zombie (kill(pid, 0), /proc/<pid>/stat).
bool process_alive(int pid);
// All descendants of `pid` (children, their children...), from /proc.
std::vector<int> process_descendants(int pid);
// `pid` itself or the first of its descendants whose program (argv[0] in /proc/<p>/cmdline) has
// this basename, e.g. the mpirun under a `timeout 600 mpirun ...` wrapper; nullopt when none.
std::optional<int> find_process_named(int pid, const std::string& basename);
// User+system CPU seconds a process has used (from /proc/<pid>/stat), or a negative number.
double process_cpu_seconds(int pid);

}  // namespace tessera::launch
