// restarts.jsonl records and failure descriptions.
#include "launch/restart_log.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launch/failure_messages.h"

namespace tessera::launch {
namespace {

std::string where(const Failure& f) {
  if (f.phase.empty() && f.step < 0) return "before its first heartbeat";
  if (f.phase == "setup" || f.step < 0) return "during set-up";
  if (f.phase == "checkpoint") return "while saving a checkpoint after step " + std::to_string(f.step);
  if (f.phase == "done") return "after finishing (step " + std::to_string(f.step) + ")";
  return "at step " + std::to_string(f.step + 1) + " (last completed step " + std::to_string(f.step) + ")";
}

std::string rank_on_host(const Failure& f) {
  return "rank " + std::to_string(f.rank) + (f.host.empty() ? std::string() : " on host " + f.host);
}

std::string join_ranks(const std::vector<int>& ranks, size_t from) {
  std::string s;
  for (size_t i = from; i < ranks.size(); ++i) s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

std::string describe_failure(const Failure& f) {
  if (f.cause == "died") {
    const std::string how = f.signal ? signal_description(*f.signal)
                                     : "process " + std::to_string(f.pid) + " vanished";
    return rank_on_host(f) + " died (" + how + ") " + where(f);
  }
  if (f.cause == "exited")
    return rank_on_host(f) + " exited with code " + std::to_string(f.exit_code.value_or(-1)) + " " + where(f);
  if (f.cause == "failed")
    return rank_on_host(f) + " failed " + where(f) + (f.message.empty() ? "" : ": " + f.message);
  if (f.cause == "no_progress") {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.0f", f.idle_s);
    std::string s = f.phase.empty() ? rank_on_host(f) + " never wrote a heartbeat in " + secs + " s"
                                    : rank_on_host(f) + " made no progress for " + secs + " s (" +
                                          (f.phase == "setup" ? std::string("in set-up")
                                                              : "last step " + std::to_string(f.step)) +
                                          ")";
    if (f.stalled_ranks.size() > 1)
      s += "; rank" + std::string(f.stalled_ranks.size() > 2 ? "s " : " ") + join_ranks(f.stalled_ranks, 1) +
           " stalled too (likely waiting on it)";
    return s;
  }
  if (f.cause == "not_done") return "the job exited 0 but " + rank_on_host(f) + " never reported \"done\"";
  if (f.cause == "start") return "the job could not be started: " + f.message;
  return "the job ended with " + f.message + " and no rank reported a failure";
}

namespace {
template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json failure_json(const Failure& f) {
  return {{"cause", f.cause},         {"rank", f.rank},
          {"host", f.host},           {"step", f.step},
          {"phase", f.phase},         {"signal", or_null(f.signal)},
          {"exit_code", or_null(f.exit_code)}, {"stalled_ranks", f.stalled_ranks},
          {"message", f.message},     {"description", describe_failure(f)}};
}
}  // namespace

std::string attempt_record_json(const AttemptRecord& r) {
  const nlohmann::json j = {{"attempt", r.attempt},
                            {"ranks", r.ranks},
                            {"command", r.command},
                            {"start_time", r.start_time},
                            {"end_time", r.end_time},
                            {"outcome", r.outcome},
                            {"checkpoint", r.checkpoint.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.checkpoint)},
                            {"exit_status", r.exit_status},
                            {"exit_code", or_null(r.exit_code)},
                            {"last_step", r.last_step},
                            {"first_step_time", or_null(r.first_step_time)},
                            {"detected_time", or_null(r.detected_time)},
                            {"failure", r.failure ? failure_json(*r.failure) : nlohmann::json(nullptr)},
                            {"recovered_from_attempt", or_null(r.recovered_from_attempt)},
                            {"recovery_s", or_null(r.recovery_s)},
                            {"will_restart", r.will_restart}};
  return j.dump();
}

std::string RestartLog::path() const {
  return run_dir_.empty() ? std::string() : run_dir_ + "/launch/restarts.jsonl";
}

Status RestartLog::set_run_dir(const std::string& run_dir) {
  if (!run_dir_.empty() || run_dir.empty()) return Status();
  run_dir_ = run_dir;
  std::error_code ec;
  std::filesystem::create_directories(run_dir_ + "/launch", ec);
  if (ec)
    return io_error("cannot create " + run_dir_ + "/launch for the restart log: " + ec.message() +
                    " (check --run-dir)");
  std::vector<std::string> lines;
  lines.swap(pending_);
  return write_lines(path(), lines);
}

Status RestartLog::append(const AttemptRecord& r) {
  if (run_dir_.empty()) {
    pending_.push_back(attempt_record_json(r));
    return Status();
  }
  return write_lines(path(), {attempt_record_json(r)});
}

Status RestartLog::flush_to(const std::string& fallback_dir) {
  if (pending_.empty()) return Status();
  std::vector<std::string> lines;
  lines.swap(pending_);
  return write_lines(fallback_dir + "/restarts.jsonl", lines);
}

Status RestartLog::write_lines(const std::string& path, const std::vector<std::string>& lines) {
  if (lines.empty()) return Status();
  std::ofstream out(path, std::ios::app);
  for (const std::string& l : lines) out << l << '\n';
  out.flush();
  if (!out) return io_error("cannot append to the restart log " + path);
  return Status();
}

}  // namespace tessera::launch
