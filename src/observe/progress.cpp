// Progress line formatting.
#include "observe/progress.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <string>

namespace tessera {

std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

std::string format_progress(const ProgressFields& f) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | MFU %.1f%% | mem %.0f MiB | ETA %s",
                static_cast<long long>(f.step), static_cast<long long>(f.total_steps), f.loss, f.lr, f.grad_norm,
                f.tokens_per_s, 100 * f.mfu, f.mem_mb, format_duration(f.eta_s).c_str());
  return buf;
}

bool is_live_terminal(int fd) {
  if (!isatty(fd)) return false;
  const std::string parent = "/proc/" + std::to_string(getppid());
  std::string launcher;
  std::getline(std::ifstream(parent + "/comm"), launcher);
  for (const char* mpi : {"mpirun", "mpiexec", "orterun", "prterun", "orted", "prted"}) {
    if (launcher != mpi) continue;
    char target[PATH_MAX] = {};
    const ssize_t n = readlink((parent + "/fd/" + std::to_string(fd)).c_str(), target, sizeof target - 1);
    const std::string where(target, n > 0 ? static_cast<size_t>(n) : 0);
    return where.rfind("/dev/pts/", 0) == 0 || where.rfind("/dev/tty", 0) == 0;
  }
  return true;
}

const char* clear_progress_line() {
  static const bool live = is_live_terminal(STDOUT_FILENO);  // a property of the process
  return live ? "\r\033[K" : "";
}

void print_progress(const ProgressFields& f, bool final_line) {
  const bool tty = *clear_progress_line() != '\0';
  if (tty && !final_line) std::printf("\r\033[K%s", format_progress(f).c_str());
  else std::printf("%s%s\n", tty ? "\r\033[K" : "", format_progress(f).c_str());
  std::fflush(stdout);
}

}  // namespace tessera
