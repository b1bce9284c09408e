// The launcher's clocks and console.
#include "launch/console.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace tessera::launch {

double mono_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void say(const std::string& msg) {
  std::fprintf(stderr, "tessera launch: %s\n", msg.c_str());
  std::fflush(stderr);
}

void say_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fflush(stderr);
}

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string local_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace tessera::launch
