// Parsing of Open MPI's and srun's messages about a rank that died or exited non-zero.
#include "launch/failure_messages.h"

#include <csignal>
#include <cstring>
#include <regex>

namespace tessera::launch {

std::string signal_description(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return "signal " + std::to_string(signal) + (abbrev ? std::string(", SIG") + abbrev : std::string());
}

int signal_from_text(std::string_view text) {
  for (int s = 1; s < 32; ++s) {  // the standard signals; real-time ones have no names to match
    const char* desc = strsignal(s);
    if (desc == nullptr) continue;
    const size_t n = std::strlen(desc);
    if (n > 0 && text.substr(0, n) == desc) return s;
  }
  return 0;
}

std::optional<RankExitNotice> FailureMessageParser::feed(std::string_view line) {
  // Open MPI (4.x, 5.x): one line per dead rank.
  if (line.find("noticed that process rank") != std::string_view::npos) {
    static const std::regex re(
        R"(noticed that process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+))");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, re)) {
      RankExitNotice n;
      n.rank = std::stoi(m[1].str());
      if (const int pid = std::stoi(m[2].str()); pid > 0) n.pid = pid;
      n.host = m[3].str();
      n.signal = std::stoi(m[4].str());
      n.line = std::string(line);
      return n;
    }
  }
  // Open MPI's block for a non-zero exit: "Process name: [[39466,1],2]" then "Exit code: 3".
  if (line.find("Process name:") != std::string_view::npos) {
    static const std::regex re(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, re)) {
      pending_rank_ = std::stoi(m[1].str());
      pending_line_ = std::string(line);
    }
    return std::nullopt;
  }
  if (pending_rank_ && line.find("Exit code:") != std::string_view::npos) {
    static const std::regex re(R"(Exit code:\s*(-?\d+))");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, re)) {
      RankExitNotice n;
      n.rank = *pending_rank_;
      n.exit_code = std::stoi(m[1].str());
      n.line = pending_line_ + " / " + std::string(line);
      pending_rank_.reset();
      return n;
    }
  }
  // srun: "srun: error: node3: task 2: Killed", "srun: error: node3: tasks 2-3: Exited with exit code 1".
  if (line.find("srun: error:") != std::string_view::npos) {
    static const std::regex re(R"(srun: error: (\S+): tasks? (\d+)[^:]*: (.*)$)");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, re)) {
      RankExitNotice n;
      n.host = m[1].str();
      n.rank = std::stoi(m[2].str());
      const std::string what = m[3].str();
      static const std::regex exit_re(R"(Exited with exit code (-?\d+))");
      std::smatch em;
      if (std::regex_search(what, em, exit_re)) {
        n.exit_code = std::stoi(em[1].str());
      } else if (const int s = signal_from_text(what); s > 0) {
        n.signal = s;
      } else {
        return std::nullopt;
      }
      n.line = std::string(line);
      return n;
    }
  }
  return std::nullopt;
}

}  // namespace tessera::launch
