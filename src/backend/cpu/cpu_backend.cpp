// CpuBackend's host/device copies: the same memory, so plain copies.
#include "backend/cpu/cpu_backend.h"

#include <cstring>

namespace tessera {

void CpuBackend::copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes) std::memcpy(device, host, bytes);
}

void CpuBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes) std::memcpy(host, device, bytes);
}

}  // namespace tessera
