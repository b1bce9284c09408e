// `tessera --version`: the version, the build (commit, baseline target, CUDA) and the CPU kernel level
// this machine runs.
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "backend/cpu_isa.h"
#include "build_info.h"
#include "cli/commands.h"

namespace tessera::cli {

std::string version_text() {
  return std::string("tessera ") + TESSERA_VERSION + "\nbuild: commit " + TESSERA_BUILD_COMMIT + ", " +
         TESSERA_BUILD_FLAGS + " with AVX2 and AVX-512 kernels, " + cuda_build_summary() + "\nCPU kernels: " + cpu_isa_summary();
}

}  // namespace tessera::cli
