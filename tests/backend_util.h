// The CPU backend the single-process tests run their models on (stateless: one per test program).
#pragma once
#include "backend/cpu/cpu_backend.h"

namespace tessera::testing {

inline Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace tessera::testing
