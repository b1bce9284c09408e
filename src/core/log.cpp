// Rank-labelled logging to stderr.
#include "core/log.h"

#include <cstdio>
#include <cstdlib>

namespace tessera {
namespace {
int g_rank = -1;
void emit(const char* level, const std::string& msg) {
  if (g_rank >= 0)
    std::fprintf(stderr, "[rank %d] %s: %s\n", g_rank, level, msg.c_str());
  else
    std::fprintf(stderr, "%s: %s\n", level, msg.c_str());
  std::fflush(stderr);
}
}  // namespace

void set_log_rank(int rank) { g_rank = rank; }
int log_rank() { return g_rank; }
void log_info(const std::string& msg) { emit("info", msg); }
void log_warn(const std::string& msg) { emit("warning", msg); }
void log_error(const std::string& msg) { emit("error", msg); }

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "[rank %d] internal error at %s:%d: check '%s' failed %s\n", g_rank < 0 ? 0 : g_rank,
               file, line, cond, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera
