// Logging and invariant checks. Every line carries the process's rank label so that an error on
// one rank of a many-rank job says which rank it came from.
#pragma once
#include <sstream>
#include <string>

namespace tessera {

// The rank label is the one piece of process-wide state: it only decorates messages.
void set_log_rank(int rank);
int log_rank();

void log_info(const std::string& msg);
void log_warn(const std::string& msg);
void log_error(const std::string& msg);

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace tessera

// TS_CHECK(cond) << "context"; aborts with file:line and rank. For bugs only, never for bad input.
#define TS_CHECK(cond)                                                                       \
  if (cond) {                                                                                \
  } else                                                                                     \
    ::tessera::detail::CheckMessage(__FILE__, __LINE__, #cond).stream()

namespace tessera::detail {
class CheckMessage {
 public:
  CheckMessage(const char* file, int line, const char* cond) : file_(file), line_(line), cond_(cond) {}
  [[noreturn]] ~CheckMessage() { check_failed(file_, line_, cond_, ss_.str()); }
  std::ostringstream& stream() { return ss_; }

 private:
  const char* file_;
  int line_;
  const char* cond_;
  std::ostringstream ss_;
};
}  // namespace tessera::detail
