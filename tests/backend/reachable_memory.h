// Host memory a backend's ops can read and write directly (the cross-backend cases' buffers): plain
// host memory for the CPU, pinned (page-locked, device-mapped) host memory for a CUDA device.
#pragma once
#include <memory_resource>

#include "backend/backend.h"

namespace tessera {

std::pmr::memory_resource* reachable_memory(const Backend& be);

// Makes `r` the default memory resource (what the cases' Vec buffers use) while it lives.
class DefaultMemoryScope {
 public:
  explicit DefaultMemoryScope(std::pmr::memory_resource* r) : previous_(std::pmr::set_default_resource(r)) {}
  ~DefaultMemoryScope() { std::pmr::set_default_resource(previous_); }
  DefaultMemoryScope(const DefaultMemoryScope&) = delete;
  DefaultMemoryScope& operator=(const DefaultMemoryScope&) = delete;

 private:
  std::pmr::memory_resource* previous_;
};

}  // namespace tessera
