// Rank-count rewriting and environment export for mpirun/mpiexec and srun command lines.
#include "launch/command_line.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace tessera::launch {
namespace {

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_one_of(std::string_view word, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), word) != names.end();
}

// Launcher options that take no value, so that the word after them is not mistaken for their value
// (which would hide where the program starts). Options written --name=value never take the next word.
bool is_flag(LauncherKind kind, std::string_view opt) {
  if (kind == LauncherKind::mpirun)
    return is_one_of(opt, {"--oversubscribe", "-oversubscribe", "--nooversubscribe", "--allow-run-as-root",
                           "-q", "--quiet", "-v", "--verbose", "-V", "--version", "-h", "--help", "-d", "--debug",
                           "--tag-output", "-tag-output", "--timestamp-output", "-timestamp-output",
                           "--report-bindings", "-report-bindings", "--display-map", "-display-map",
                           "--display-allocation", "--display-devel-map", "--nolocal", "-nolocal", "--noprefix",
                           "--use-hwthread-cpus", "--merge-stderr-to-stdout", "--continuous", "--enable-recovery",
                           "--disable-recovery", "--debug-daemons", "--leave-session-attached",
                           "--do-not-launch", "--show-progress", "--xml", "-xml"});
  return is_one_of(opt, {"-l", "--label", "-u", "--unbuffered", "-O", "--overcommit", "--exclusive", "-Q", "--quiet",
                         "-v", "--verbose", "-K", "--kill-on-bad-exit", "-X", "--disable-status", "--pty", "-Z",
                         "--no-allocate", "-E", "--preserve-env", "--multi-prog", "-s", "--oversubscribe",
                         "--exact", "--overlap", "--spread-job", "--test-only", "--contiguous", "-H", "--hold",
                         "-h", "--help", "-V", "--version"});
}

// Where a rank count sits in argv: the word holding it and the prefix before the digits ("" when
// the whole word is the count, "--ntasks=" or "-n" when it is attached to its option).
struct CountSlot {
  size_t index;
  std::string prefix;
};

// Scans the launcher's options (from the word after the launcher to the program) for rank counts.
std::vector<CountSlot> find_count_slots(const JobCommand& cmd) {
  std::vector<CountSlot> slots;
  const auto& a = cmd.argv;
  const bool mpi = cmd.kind == LauncherKind::mpirun;
  for (size_t i = cmd.launcher_index + 1; i < a.size(); ++i) {
    const std::string& w = a[i];
    if (w.size() < 2 || w[0] != '-' || w == "--") break;  // the program (or "--" before it)
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    const bool count_opt = mpi ? is_one_of(name, {"-n", "-np", "--np", "--n", "-c"})
                               : is_one_of(name, {"-n", "--ntasks"});
    if (count_opt) {
      if (eq != std::string::npos) {
        slots.push_back({i, w.substr(0, eq + 1)});
      } else if (i + 1 < a.size()) {
        slots.push_back({i + 1, ""});
        ++i;
      }
      continue;
    }
    if (!mpi && w.size() > 2 && w[1] == 'n' && w[2] >= '0' && w[2] <= '9') {  // srun -n4
      slots.push_back({i, "-n"});
      continue;
    }
    if (eq != std::string::npos || is_flag(cmd.kind, w)) continue;
    const int values = (mpi && is_one_of(w, {"--mca", "-mca", "--gmca", "-gmca"})) ? 2 : 1;
    for (int v = 0; v < values && i + 1 < a.size() && a[i + 1][0] != '-'; ++v) ++i;
  }
  return slots;
}

}  // namespace

const char* launcher_kind_name(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::mpirun: return "mpirun";
    case LauncherKind::srun: return "srun";
    case LauncherKind::other: return "plain command";
  }
  return "?";
}

JobCommand classify_command(std::vector<std::string> argv) {
  JobCommand cmd;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string base = basename_of(argv[i]);
    if (base == "mpirun" || base == "mpiexec" || base == "orterun" || base == "srun") {
      cmd.kind = base == "srun" ? LauncherKind::srun : LauncherKind::mpirun;
      cmd.launcher_index = i;
      break;
    }
  }
  cmd.argv = std::move(argv);
  return cmd;
}

Result<std::optional<int>> rank_count(const JobCommand& cmd) {
  if (cmd.kind == LauncherKind::other) return std::optional<int>();
  std::optional<int> count;
  for (const CountSlot& s : find_count_slots(cmd)) {
    const std::string& w = cmd.argv[s.index];
    const std::string_view digits = std::string_view(w).substr(s.prefix.size());
    int n = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || p != digits.data() + digits.size() || n <= 0)
      return invalid_argument("the job command's rank count '" + w + "' is not a positive integer: write e.g. '-n 4'");
    count = n;
  }
  return count;
}

Result<JobCommand> with_rank_count(const JobCommand& cmd, int ranks) {
  if (cmd.kind == LauncherKind::other)
    return invalid_argument("cannot set the rank count of '" + shell_join(cmd.argv) +
                            "': it runs no mpirun/mpiexec/srun (start the job through one of them)");
  JobCommand out = cmd;
  const std::vector<CountSlot> slots = find_count_slots(cmd);
  if (slots.empty()) {
    out.argv.insert(out.argv.begin() + static_cast<long>(cmd.launcher_index) + 1, {"-n", std::to_string(ranks)});
    return out;
  }
  for (const CountSlot& s : slots) out.argv[s.index] = s.prefix + std::to_string(ranks);
  return out;
}

JobCommand with_exported_env(const JobCommand& cmd, const std::vector<std::string>& names) {
  if (cmd.kind != LauncherKind::mpirun) return cmd;
  JobCommand out = cmd;
  std::vector<std::string> words;
  for (const std::string& n : names) {
    words.push_back("-x");
    words.push_back(n);
  }
  out.argv.insert(out.argv.begin() + static_cast<long>(cmd.launcher_index) + 1, words.begin(), words.end());
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789_./=:,+@%-") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace tessera::launch
