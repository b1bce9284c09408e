// The CPU backend the single-process tests run their models on (one per test program; its kernels'
// scratch grows to the largest test's sizes).
#pragma once
#include "backend/cpu/cpu_backend.h"

namespace tessera::testing {

inline Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace tessera::testing
