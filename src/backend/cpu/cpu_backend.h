// CpuBackend: the ops of backend/ops.h on host memory (the CPU kernels at the level select_cpu_isa
// chose, oneDNN's matmuls); its memory is host memory, counted per backend. The oracle for other backends.
// Its state: the kernels' workspace (cpu_workspace.h: scratch, oneDNN's objects for the bf16 matmuls)
// and the bf16 switch, per backend object; nothing of it is shared with another CpuBackend.
#pragma once
#include <string>
#include <utility>

#include "backend/backend.h"
#include "backend/cpu/cpu_workspace.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/matmul_lowp.h"
#include "backend/cpu/sgemm_padded.h"
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

  // An op of the kernel table runs this backend's level, with this backend's workspace when its entry
  // takes one; the others are the ops:: functions, on this workspace where one takes it (matmul_lowp.h).
  // (The lambda's names must not collide with any op's parameter names; a template parameter's type
  // keeps the requires-expressions dependent.)
#define TESSERA_CPU_WITH_WORKSPACE(...) (workspace_ __VA_OPT__(, ) __VA_ARGS__)
#define TESSERA_CPU_BACKEND_OP(name, ret, params, args)                                                       \
  ret name params override {                                                                                  \
    return [&]<class KernelTable_, class Workspace_>(const KernelTable_& kernel_table_,                       \
                                                     Workspace_& workspace_) -> ret {                         \
      if constexpr (requires { kernel_table_.name TESSERA_CPU_WITH_WORKSPACE args; })                         \
        return kernel_table_.name TESSERA_CPU_WITH_WORKSPACE args;                                            \
      else if constexpr (requires { kernel_table_.name; }) return kernel_table_.name args;                    \
      else if constexpr (requires { ops::name TESSERA_CPU_WITH_WORKSPACE args; })                             \
        return ops::name TESSERA_CPU_WITH_WORKSPACE args;                                                     \
      else return ops::name args;                                                                             \
    }(kernels_ ? *kernels_ : ops::active_cpu_kernels(), workspace_);                                          \
  }
  TESSERA_BACKEND_OPS(TESSERA_CPU_BACKEND_OP)
#undef TESSERA_CPU_BACKEND_OP
#undef TESSERA_CPU_WITH_WORKSPACE

  // ---- the bf16 switch (this backend's matmul_forward_lowp / matmul_backward_lowp / sgemm_lowp) ----
  // Allows (default) or forbids oneDNN's native bf16 kernel where this CPU has one (AVX512-BF16 / AMX);
  // forbidden, bf16 rounds into f32 and runs sgemm (tests and benchmarks compare both).
  void set_bf16_gemm_native(bool allow) { workspace_.bf16_gemm_native = allow; }
  bool bf16_gemm_native() const { return workspace_.bf16_gemm_native; }
  // The bf16 kernel this backend's matmuls use now: "onednn:<implementation>" or "emulated".
  std::string bf16_gemm_kernel() { return ops::bf16_gemm_kernel(workspace_); }
  // ops::sgemm_lowp on this backend's workspace and bf16 setting (not an op of the contract).
  void sgemm_lowp(ops::MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    ops::sgemm_lowp(workspace_, p, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }

  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  bool is_device_memory(const void*) const override { return false; }
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
  ops::CpuWorkspace workspace_;               // the kernels' scratch and the bf16 switch
  MemoryCounters counters_;
  Stream stream_ = Stream::compute;
  uint64_t events_ = 0;
};

}  // namespace tessera
