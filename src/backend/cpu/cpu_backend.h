// CpuBackend: the ops of backend/ops.h on host memory (the CPU kernels at the level select_cpu_isa
// chose, oneDNN's matmuls); its memory is host memory, counted per backend. The oracle for other backends.
#pragma once
#include <utility>

#include "backend/backend.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu_isa.h"

namespace tessera {

class CpuBackend final : public Backend {
 public:
  // The kernels of the level this process runs (select_cpu_isa), looked up at every op.
  CpuBackend() = default;
  // The kernels of one compiled level, whatever the process runs (the CPU must have it:
  // cpu_isa_supported), so one process can hold the levels against each other. oneDNN's matmuls and
  // the ops outside the kernel table have one implementation per process.
  explicit CpuBackend(CpuIsa isa) : kernels_(&ops::cpu_kernels(isa)) {}

  Device device() const override { return Device::cpu; }

  // An op of the kernel table runs this backend's level; the others are the ops:: functions.
  // (The lambda's names must not collide with any op's parameter names.)
#define TESSERA_CPU_BACKEND_OP(name, ret, params, args)                                   \
  ret name params override {                                                              \
    return [&]<class KernelTable_>(const KernelTable_& kernel_table_) -> ret {            \
      if constexpr (requires { kernel_table_.name; }) return kernel_table_.name args;     \
      else return ops::name args;                                                         \
    }(kernels_ ? *kernels_ : ops::active_cpu_kernels());                                  \
  }
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
  const ops::CpuKernels* kernels_ = nullptr;  // nullptr: the process's level
  MemoryCounters counters_;
  Stream stream_ = Stream::compute;
  uint64_t events_ = 0;
};

}  // namespace tessera
