// Progress line formatting.
#include "train/progress.h"

#include <unistd.h>

#include <cstdio>

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

void print_progress(const ProgressFields& f, bool final_line) {
  static const bool tty = isatty(STDOUT_FILENO);
  if (tty && !final_line) std::printf("\r\033[K%s", format_progress(f).c_str());
  else std::printf("%s%s\n", tty ? "\r\033[K" : "", format_progress(f).c_str());
  std::fflush(stdout);
}

}  // namespace tessera
