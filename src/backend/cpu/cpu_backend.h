// CpuBackend: the ops of backend/ops.h on host memory (the CPU kernels at the level select_cpu_isa
// chose, oneDNN's matmuls); its memory is host memory, counted per backend. The oracle for other backends.
#pragma once
#include <utility>

#include "backend/backend.h"

namespace tessera {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu; }

#define TESSERA_CPU_BACKEND_OP(name, ret, params, args) \
  ret name params override { return ops::name args; }
  TESSERA_BACKEND_OPS(TESSERA_CPU_BACKEND_OP)
#undef TESSERA_CPU_BACKEND_OP

  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void synchronize() override {}

  Buffer allocate(size_t bytes, MemCategory category, Residency residency = Residency::resident) override {
    return Buffer(bytes, category, residency, &counters_);
  }
  MemoryStats memory_counters() const override { return counters_.stats(); }

  // Every op has completed when it returns: an event is reached when recorded.
  Stream set_stream(Stream s) override { return std::exchange(stream_, s); }
  Event record_event(Stream) override { return {++events_}; }
  void wait_event(Stream, Event) override {}
  void synchronize_event(Event) override {}

 private:
  MemoryCounters counters_;
  Stream stream_ = Stream::compute;
  uint64_t events_ = 0;
};

}  // namespace tessera
