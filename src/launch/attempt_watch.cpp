// Watching one attempt of the job (see attempt_watch.h).
#include "launch/attempt_watch.h"

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

#include "launch/console.h"

namespace tessera::launch {
namespace {

// mpirun ends the job itself after a rank dies and reports the signal: how long to wait for that.
constexpr double kLauncherReportWait = 5.0;

// Watches one running attempt until it ends or fails.
class AttemptWatch {
 public:
  AttemptWatch(const LaunchOptions& o, const JobCommand& command, JobProcess& job, int attempt, int ranks,
               const std::string& hb_dir, RestartLog& log, const LauncherSignals& signals)
      : o_(o), command_(command), job_(job), ranks_(ranks), start_(mono_now()), watch_(hb_dir, attempt, start_),
        log_(log), host_(local_host()), signals_(signals) {}

  AttemptOutcome run() {
    AttemptOutcome out;
    std::optional<Failure> failure;
    const double startup = o_.startup_timeout > 0 ? o_.startup_timeout : o_.heartbeat_timeout;
    const int poll_ms = std::max(1, static_cast<int>(o_.poll_interval * 1000));
    std::optional<double> stop_deadline;  // set once a stop signal was passed on to the job
    while (job_.running()) {
      job_.pump(poll_ms, line_fn());
      refresh();
      if (signals_.end_now) {
        say("received " + signal_description(signals_.end_now.load()) + ": ending the job now, nothing is saved");
        out.interrupted = true;
        break;
      }
      if (signals_.first && !stop_deadline) {
        pass_on_stop(signals_.first.load());
        stop_deadline = mono_now() + o_.stop_timeout;
      }
      if (!job_.running()) break;
      if (stop_deadline) {
        // The ranks are finishing their step and saving (phase "preempted"): that is no stall, and a
        // rank that fails meanwhile shows in the job's exit status. Only the deadline counts now.
        if (mono_now() < *stop_deadline) continue;
        say("the job did not stop within --stop-timeout " + fmt_s(o_.stop_timeout) + " s of the stop request: ending it");
        out.interrupted = true;
        break;
      }
      failure = failure_while_running(startup);
      if (failure && failure->cause == "died") {
        // The rank may have written "done" (or "failed") and exited since the heartbeats were read.
        refresh();
        failure = failure_while_running(startup);
      }
      if (failure) break;
    }
    if (failure) {
      out.detected_wall = wall_now();
      if (failure->cause != "no_progress") {
        // mpirun ends the job itself soon after a rank dies and says which signal killed it; a SIGTERM
        // from us first would cut that report off. Wait a few seconds for it (longer on a loaded node).
        const double until = mono_now() + kLauncherReportWait;
        while (job_.running() && mono_now() < until) job_.pump(50, line_fn());
      }
    }
    if (failure || out.interrupted) job_.terminate(o_.grace, local_pids());
    job_.drain(1.0, line_fn());
    refresh();
    // mpirun's report or a rank's "failed" heartbeat (read just now, perhaps) names the rank that
    // failed first: either beats a guess from vanished processes.
    if (failure && failure->cause != "no_progress")
      if (std::optional<Failure> better = blame(false)) failure = better;
    out.wait_status = job_.wait_status();
    if (!failure && !out.interrupted) {
      if (WIFEXITED(*out.wait_status) && WEXITSTATUS(*out.wait_status) == kLaunchPreempted) {
        out.preempted = true;
        out.checkpoint = reported_checkpoint();
      } else {
        failure = failure_after_exit(*out.wait_status);
        if (failure) out.detected_wall = wall_now();
      }
      if (failure || out.preempted) job_.terminate(0, local_pids());  // ranks that outlived mpirun
      // Asked to stop, it failed instead: say why, but do not restart what the user stopped.
      if (failure && stop_deadline) out.interrupted = true;
    }
    out.success = !failure && !out.interrupted && !out.preempted;
    out.failure = failure;
    out.first_step_wall = first_step_wall_;
    out.last_step = last_step_;
    return out;
  }

 private:
  // mpirun and srun forward SIGUSR1 to every rank (Open MPI 4.1 answers SIGTERM and SIGINT by
  // killing the ranks a second later, too soon to save); a plain command gets the signal itself.
  void pass_on_stop(int sig) {
    const std::string wait = "; waiting up to " + fmt_s(o_.stop_timeout) +
                             " s for it to save a checkpoint and exit (SIGINT again ends it at once)";
    if (command_.kind == LauncherKind::other) {
      job_.signal_group(sig);
      say("received " + signal_description(sig) + ": passed it on to the job" + wait);
      return;
    }
    const std::string word = std::filesystem::path(command_.argv[command_.launcher_index]).filename().string();
    const int pid = find_process_named(job_.pid(), word).value_or(job_.pid());
    ::kill(pid, SIGUSR1);
    say("received " + signal_description(sig) + ": asking every rank to stop after its current step (SIGUSR1 to " +
        word + " " + std::to_string(pid) + ", which forwards it to the ranks)" + wait);
  }

  // Rank 0's last heartbeat of a preempted run names the checkpoint it wrote.
  std::string reported_checkpoint() const {
    const auto it = watch_.ranks().find(0);
    if (it == watch_.ranks().end() || it->second.beat.phase != "preempted") return {};
    return it->second.beat.message;
  }

  std::function<void(std::string_view)> line_fn() {
    return [this](std::string_view line) {
      if (auto n = parser_.feed(line)) notices_.push_back(*n);
    };
  }

  int expected_ranks() const {
    int n = ranks_;
    for (const auto& [r, p] : watch_.ranks()) n = std::max(n, ranks_ > 0 ? ranks_ : p.beat.world_size);
    return n;
  }

  bool is_local(const Heartbeat& b) const { return b.pid > 0 && (b.host.empty() || b.host == host_); }

  // Reads the heartbeats; tracks CPU use of local ranks, the first completed step and the run dir.
  void refresh() {
    const double now = mono_now();
    std::string warn;
    for (int r : watch_.poll(now, &warn)) {
      RankProgress& p = watch_.ranks()[r];
      if (is_local(p.beat)) cpu_at_change_[r] = process_cpu_seconds(p.beat.pid);
      last_step_ = std::max(last_step_, p.beat.step);
      // The trainer's first beat after set-up carries the step it resumed from; the first beat with
      // a higher step marks the attempt's first completed step (for recovery_s).
      if (p.beat.phase != "setup" && p.beat.phase != "failed") {
        if (!start_step_.count(r)) start_step_[r] = p.beat.step;
        else if (!first_step_wall_ && p.beat.step > start_step_[r]) first_step_wall_ = wall_now();
      }
      if (log_.run_dir().empty() && !p.beat.out_dir.empty() && (r == 0 || !watch_.ranks().count(0))) {
        say("run directory (from rank " + std::to_string(r) + "'s heartbeat): " + p.beat.out_dir);
        if (Status s = log_.set_run_dir(p.beat.out_dir); !s.ok()) say("warning: " + s.message());
      }
    }
    if (!warn.empty()) say("warning: " + warn);
    for (auto& [r, p] : watch_.ranks()) {
      p.busy_fraction = -1;
      const auto c = cpu_at_change_.find(r);
      if (c == cpu_at_change_.end() || c->second < 0 || !is_local(p.beat) || now - p.last_change < 1.0) continue;
      const double cpu = process_cpu_seconds(p.beat.pid);
      if (cpu >= 0) p.busy_fraction = (cpu - c->second) / (now - p.last_change);
    }
  }

  Failure from_rank(int rank, const std::string& cause) const {
    Failure f;
    f.cause = cause;
    f.rank = rank;
    const auto it = watch_.ranks().find(rank);
    if (it != watch_.ranks().end() && it->second.reported) {
      const Heartbeat& b = it->second.beat;
      f.host = b.host;
      f.step = b.step;
      f.phase = b.phase;
      f.pid = b.pid;
      f.message = b.message;
    }
    return f;
  }

  void add_notice_details(Failure& f) const {
    for (const RankExitNotice& n : notices_) {
      if (n.rank != f.rank) continue;
      if (f.host.empty()) f.host = n.host;
      if (n.signal) {
        f.cause = f.cause == "failed" ? f.cause : "died";
        f.signal = n.signal;
      }
      if (n.exit_code && f.cause != "failed") {
        f.cause = "exited";
        f.exit_code = n.exit_code;
      }
      return;
    }
  }

  // Whom to blame, most reliable first: mpirun's/srun's first report of a dead rank, then the rank
  // that reported "failed" first, then (with include_vanished) a local rank whose process is gone;
  // several can vanish at once when mpirun ends the others, so that is the weakest evidence.
  std::optional<Failure> blame(bool include_vanished) const {
    for (const RankExitNotice& n : notices_) {
      // 0: finished; preempted: stopped with a checkpoint (mpirun reports it like a failure).
      if (n.exit_code && (*n.exit_code == 0 || *n.exit_code == kLaunchPreempted)) continue;
      Failure f = from_rank(n.rank, n.signal ? "died" : "exited");
      if (f.phase == "failed") f.cause = "failed";
      add_notice_details(f);
      return f;
    }
    const RankProgress* failed = nullptr;
    for (const auto& [r, p] : watch_.ranks())
      if (p.beat.phase == "failed" && (!failed || p.beat.time < failed->beat.time)) failed = &p;
    if (failed) return from_rank(failed->rank, "failed");
    if (include_vanished)
      for (const auto& [r, p] : watch_.ranks())
        if (p.beat.phase != "done" && p.beat.phase != "preempted" && is_local(p.beat) && !process_alive(p.beat.pid))
          return from_rank(r, "died");
    return std::nullopt;
  }

  std::optional<Failure> failure_while_running(double startup_timeout) const {
    if (std::optional<Failure> f = blame(true)) return f;
    const std::optional<Stall> stall = find_stall(watch_.progress(), expected_ranks(), start_, mono_now(),
                                                  o_.heartbeat_timeout, startup_timeout);
    if (!stall) return std::nullopt;
    Failure f = from_rank(stall->ranks.front(), "no_progress");
    f.idle_s = stall->seconds;
    f.stalled_ranks = stall->ranks;
    return f;
  }

  // The job exited by itself: success, or whom to blame.
  std::optional<Failure> failure_after_exit(int status) const {
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
      for (int r = 0; r < expected_ranks(); ++r) {
        const auto it = watch_.ranks().find(r);
        const bool done = it != watch_.ranks().end() && it->second.beat.phase == "done";
        if (!done && !watch_.ranks().empty()) return from_rank(r, "not_done");
      }
      if (watch_.ranks().empty()) say("warning: the job exited 0 without writing any heartbeat");
      return std::nullopt;
    }
    if (std::optional<Failure> f = blame(true)) return f;
    Failure j;
    j.cause = "job_exit";
    j.message = wait_status_text(status);
    return j;
  }

  std::vector<int> local_pids() const {
    std::vector<int> pids;
    for (const auto& [r, p] : watch_.ranks())
      if (is_local(p.beat)) pids.push_back(p.beat.pid);
    return pids;
  }

  const LaunchOptions& o_;
  const JobCommand& command_;
  JobProcess& job_;
  int ranks_;
  double start_;
  HeartbeatWatch watch_;
  RestartLog& log_;
  std::string host_;
  FailureMessageParser parser_;
  std::vector<RankExitNotice> notices_;
  std::map<int, double> cpu_at_change_;
  std::map<int, int64_t> start_step_;  // per rank: the step of its first beat after set-up
  std::optional<double> first_step_wall_;
  int64_t last_step_ = -1;
  const LauncherSignals& signals_;
};

}  // namespace

AttemptOutcome watch_attempt(const LaunchOptions& o, const JobCommand& command, JobProcess& job, int attempt,
                             int ranks, const std::string& heartbeat_dir, RestartLog& log,
                             const LauncherSignals& signals) {
  return AttemptWatch(o, command, job, attempt, ranks, heartbeat_dir, log, signals).run();
}

}  // namespace tessera::launch
