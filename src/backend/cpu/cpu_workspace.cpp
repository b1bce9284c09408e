// CpuWorkspace's growth paths, compiled once (baseline), outside the kernel copies.
#include "backend/cpu/cpu_workspace.h"

#include <cstdint>

namespace tessera::ops {

void AlignedScratch::grow(size_t floats) {
  buf_.resize(floats);
  const auto addr = reinterpret_cast<uintptr_t>(buf_.data());
  aligned_ = buf_.data() + ((64 - addr % 64) % 64) / sizeof(float);
}

void CpuWorkspace::grow_threads(int n) { per_thread.resize(static_cast<size_t>(n)); }

float* grown(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace tessera::ops
