// The launcher's restart loop: options, rank count, heartbeat directory, one attempt after another
// (each watched by attempt_watch), the restart log and the exit code.
#include "launch/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include "launch/attempt_watch.h"
#include "launch/command_line.h"
#include "launch/console.h"
#include "launch/failure_messages.h"
#include "launch/heartbeat_watch.h"
#include "launch/job_process.h"
#include "launch/restart_log.h"
#include "launch/slots.h"

namespace tessera::launch {
namespace {

// What the signal handler records: it can reach only globals (lock-free atomics).
LauncherSignals g_signals;
extern "C" void on_signal(int sig) {
  if (sig == SIGHUP || (sig == SIGINT && g_signals.first != 0)) g_signals.end_now = sig;
  else if (g_signals.first == 0) g_signals.first = sig;
}

// SIGTERM/SIGINT/SIGUSR1 to the launcher ask the job to stop with a checkpoint; a second SIGINT or a
// SIGHUP ends it at once (it runs in its own process group, so a Ctrl-C in the terminal reaches
// only the launcher). The previous handlers come back afterwards.
class StopSignals {
 public:
  StopSignals() {
    g_signals.first = 0;
    g_signals.end_now = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr int kSignals[4] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
  struct sigaction old_[4];
};

// The rank count for the next start: the slots file (capped by max_ranks), else the command's own
// count (capped), else max_ranks; 0 leaves the command as it is. Waits up to wait_for_slots for
// min_ranks slots.
Result<int> choose_ranks(const LaunchOptions& o, std::optional<int> command_ranks) {
  if (o.slots_file.empty()) {
    int n = command_ranks.value_or(o.max_ranks);
    if (o.max_ranks > 0) n = std::min(n, o.max_ranks);
    if (n > 0 && n < o.min_ranks)
      return invalid_argument("the command runs " + std::to_string(n) + " ranks, fewer than --min-ranks " +
                              std::to_string(o.min_ranks));
    return n;
  }
  const double give_up = mono_now() + o.wait_for_slots;
  bool told = false;
  while (true) {
    Result<int> slots = read_slots_file(o.slots_file);
    if (slots.ok()) {
      const int n = o.max_ranks > 0 ? std::min(*slots, o.max_ranks) : *slots;
      if (n >= o.min_ranks) return n;
      if (mono_now() >= give_up)
        return invalid_argument("only " + std::to_string(*slots) + " slot(s) in " + o.slots_file +
                                ", fewer than --min-ranks " + std::to_string(o.min_ranks) +
                                ": add slots to the file, lower --min-ranks, or wait longer with --wait-for-slots");
      if (!told) say("waiting up to " + fmt_s(o.wait_for_slots) + " s for " + std::to_string(o.min_ranks) +
                     " slots (" + o.slots_file + " has " + std::to_string(*slots) + ")");
    } else if (mono_now() >= give_up) {
      return slots.status();
    }
    told = true;
    if (g_signals.first || g_signals.end_now) return invalid_argument("interrupted while waiting for slots");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Removes the heartbeat files (and their temporaries) of earlier attempts; nothing else.
Status clear_heartbeats(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create the heartbeat directory " + dir + ": " + ec.message());
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank_", 0) == 0 && name.find(".json") != std::string::npos)
      std::filesystem::remove(e.path(), ec);
  }
  return Status();
}

Status check_options(const LaunchOptions& o) {
  if (o.command.empty())
    return invalid_argument("no job command: write it after '--', e.g. tessera launch -- mpirun -n 4 tessera train "
                            "--config run.toml");
  if (o.min_ranks < 1) return invalid_argument("--min-ranks must be at least 1");
  if (o.max_ranks < 0 || (o.max_ranks > 0 && o.max_ranks < o.min_ranks))
    return invalid_argument("--max-ranks " + std::to_string(o.max_ranks) + " is below --min-ranks " +
                            std::to_string(o.min_ranks));
  if (o.max_restarts < 0) return invalid_argument("--max-restarts must be 0 or more");
  if (!(o.heartbeat_timeout > 0) || o.startup_timeout < 0 || o.grace < 0 || !(o.poll_interval > 0) ||
      o.wait_for_slots < 0)
    return invalid_argument("--heartbeat-timeout must be positive and the other durations non-negative");
  return Status();
}

std::string summary_of(const std::vector<AttemptRecord>& records) {
  std::string s;
  for (const AttemptRecord& r : records)
    s += "\n  attempt " + std::to_string(r.attempt) + " (" + std::to_string(r.ranks) + " ranks): " +
         (r.failure ? describe_failure(*r.failure) : r.outcome);
  return s;
}

}  // namespace

int run_launch(const LaunchOptions& o) {
  if (Status s = check_options(o); !s.ok()) {
    say_error(s.message());
    return kLaunchSetupError;
  }
  const JobCommand cmd = classify_command(o.command);
  Result<std::optional<int>> command_ranks = rank_count(cmd);
  if (!command_ranks.ok()) {
    say_error(command_ranks.status().message());
    return kLaunchSetupError;
  }
  if (cmd.kind == LauncherKind::other && (!o.slots_file.empty() || o.max_ranks > 0)) {
    say_error("--slots-file and --max-ranks need an mpirun/mpiexec/srun command whose rank count the launcher can "
        "set; '" + o.command[0] + "' is none of them");
    return kLaunchSetupError;
  }
  StopSignals stop_signals;
  RestartLog log;
  std::string hb_dir = o.heartbeat_dir;
  bool temp_hb_dir = false;
  if (hb_dir.empty() && !o.run_dir.empty()) hb_dir = o.run_dir + "/launch/heartbeats";
  if (hb_dir.empty()) {
    std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") + "/tessera-launch-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      say_error("cannot create a temporary heartbeat directory " + tmpl + " (set --heartbeat-dir or --run-dir)");
      return kLaunchSetupError;
    }
    hb_dir = tmpl;
    temp_hb_dir = true;
  }
  if (Status s = log.set_run_dir(o.run_dir); !s.ok()) {
    say_error(s.message());
    return kLaunchSetupError;
  }
  say("heartbeats in " + hb_dir + (o.run_dir.empty() ? " (run directory: from rank 0's heartbeat)" : ""));

  std::vector<AttemptRecord> records;
  std::optional<double> last_detected;
  int code = kLaunchFailed;
  for (int attempt = 0; attempt <= o.max_restarts; ++attempt) {
    AttemptRecord rec;
    rec.attempt = attempt;
    rec.start_time = wall_now();
    Result<int> ranks = choose_ranks(o, *command_ranks);
    JobCommand job_cmd = cmd;
    if (ranks.ok() && *ranks > 0) {
      Result<JobCommand> rewritten = with_rank_count(cmd, *ranks);
      if (rewritten.ok()) job_cmd = *rewritten;
      else ranks = rewritten.status();
    }
    std::vector<std::pair<std::string, std::string>> env = {
        {"TESSERA_HEARTBEAT_DIR", std::filesystem::absolute(hb_dir).string()},
        {"TESSERA_RESUME", "auto"},
        {"TESSERA_LAUNCH_ATTEMPT", std::to_string(attempt)},
        {"TESSERA_LAUNCH_RANKS", std::to_string(ranks.ok() ? *ranks : 0)}};
    std::vector<std::string> exported;
    for (const auto& [k, v] : env) exported.push_back(k);
    if (std::getenv("TESSERA_FAULT")) exported.push_back("TESSERA_FAULT");
    job_cmd = with_exported_env(job_cmd, exported);
    rec.ranks = ranks.ok() ? *ranks : 0;
    rec.command = shell_join(job_cmd.argv);
    Status started = ranks.ok() ? clear_heartbeats(hb_dir) : ranks.status();
    std::optional<JobProcess> job;
    if (started.ok()) {
      say("attempt " + std::to_string(attempt) + (attempt ? " (restart " + std::to_string(attempt) + " of " +
                                                                std::to_string(o.max_restarts) + ")" : "") +
          ": starting " + (rec.ranks ? std::to_string(rec.ranks) + " ranks: " : "") + rec.command);
      Result<JobProcess> j = JobProcess::start(job_cmd.argv, env);
      if (j.ok()) job.emplace(std::move(j).value());
      else started = j.status();
    }
    if (!started.ok()) {
      rec.end_time = wall_now();
      rec.outcome = "not_started";
      Failure f;
      f.cause = "start";
      f.message = started.message();
      rec.failure = f;
      (void)log.append(rec);
      records.push_back(rec);
      say_error(describe_failure(f));
      code = kLaunchSetupError;
      break;
    }
    const AttemptOutcome out = watch_attempt(o, job_cmd, *job, attempt, rec.ranks, hb_dir, log, g_signals);
    rec.end_time = wall_now();
    rec.exit_status = out.wait_status ? wait_status_text(*out.wait_status) : "";
    if (out.wait_status) rec.exit_code = wait_status_code(*out.wait_status);
    rec.failure = out.failure;
    rec.detected_time = out.detected_wall;
    rec.first_step_time = out.first_step_wall;
    rec.last_step = out.last_step;
    if (last_detected && out.first_step_wall) {
      rec.recovered_from_attempt = attempt - 1;
      rec.recovery_s = *out.first_step_wall - *last_detected;
      say("attempt " + std::to_string(attempt) + ": first step completed " + fmt_s(*rec.recovery_s) +
          " s after the failure of attempt " + std::to_string(attempt - 1) + " was detected");
    }
    rec.outcome = out.success ? "done" : out.preempted ? "preempted" : out.interrupted ? "interrupted" : "failed";
    rec.checkpoint = out.checkpoint;
    rec.will_restart = rec.outcome == "failed" && attempt < o.max_restarts;
    (void)log.append(rec);
    records.push_back(rec);
    const std::string took = fmt_s(rec.end_time - rec.start_time) + " s";
    if (out.success) {
      say("done: the job finished on attempt " + std::to_string(attempt) + " (" + std::to_string(attempt) +
          " restart(s)) after " + took + ", last step " + std::to_string(out.last_step));
      code = kLaunchDone;
      break;
    }
    if (out.preempted) {
      // Not a failure: the job did what it was asked. The same command resumes (TESSERA_RESUME=auto).
      say("preempted at step " + std::to_string(out.last_step) + "; checkpoint " +
          (out.checkpoint.empty() ? std::string("of that step") : out.checkpoint) +
          " saved; run the same command again to resume");
      code = kLaunchPreempted;
      break;
    }
    if (out.interrupted) {
      if (out.failure) say("attempt " + std::to_string(attempt) + " ended while stopping (" + rec.exit_status +
                           "): " + describe_failure(*out.failure));
      code = kLaunchInterrupted;
      break;
    }
    last_detected = out.detected_wall;
    say("attempt " + std::to_string(attempt) + " failed after " + took + " (" + rec.exit_status + "): " +
        describe_failure(*out.failure) + (rec.will_restart ? "; restarting from the latest checkpoint" : ""));
  }
  if (code == kLaunchFailed)
    say("giving up: the job failed " + std::to_string(records.size()) + " time(s) (--max-restarts " +
        std::to_string(o.max_restarts) + "):" + summary_of(records));
  const bool any_started = std::any_of(records.begin(), records.end(),
                                      [](const AttemptRecord& r) { return r.outcome != "not_started"; });
  if (log.run_dir().empty() && any_started) {
    (void)log.flush_to(hb_dir);
    say("restart log: " + hb_dir + "/restarts.jsonl (no run directory was given or reported)");
    temp_hb_dir = false;  // it holds the log now
  } else if (!log.run_dir().empty()) {
    say("restart log: " + log.path());
  }
  if (temp_hb_dir) std::filesystem::remove_all(hb_dir);
  return code;
}

}  // namespace tessera::launch
