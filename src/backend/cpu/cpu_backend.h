// CpuBackend: the ops of backend/ops.h on host memory (the CPU kernels at the level select_cpu_isa
// chose, oneDNN's matmuls). Stateless apart from what the kernels keep; the oracle for other backends.
#pragma once
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
};

}  // namespace tessera
