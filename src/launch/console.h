// The launcher's clocks and console: monotonic and wall time, and its one-line messages on stderr.
#pragma once
#include <string>

namespace tessera::launch {

double mono_now();  // seconds, steady clock
double wall_now();  // seconds since the epoch
// "tessera launch: <msg>" on stderr.
void say(const std::string& msg);
// "error: <msg>" on stderr, like every other command's errors.
void say_error(const std::string& msg);
std::string fmt_s(double s);  // "%.1f"
std::string local_host();     // gethostname

}  // namespace tessera::launch
