// Shared helpers of the commands.
#include <cstdio>

#include "cli/commands.h"

namespace tessera::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

}  // namespace tessera::cli
