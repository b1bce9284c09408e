// Status formatting.
#include "core/status.h"

namespace tessera {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::not_found: return "not_found";
    case StatusCode::io_error: return "io_error";
    case StatusCode::corrupt_data: return "corrupt_data";
    case StatusCode::comm_error: return "comm_error";
    case StatusCode::timeout: return "timeout";
    case StatusCode::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace tessera
