// This level's kernel table (compiled once per level, like the kernels it points to).
#include "backend/cpu/kernel_decls.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

const CpuKernels& kernel_table() {
  static constexpr CpuKernels table{
#if TESSERA_KERNEL_LEVEL == TESSERA_KERNEL_LEVEL_AVX512
      CpuIsa::avx512,
#else
      CpuIsa::avx2,
#endif
#define TESSERA_KERNEL_ENTRY(name) &TESSERA_KERNEL_NS::name,
      TESSERA_CPU_KERNELS(TESSERA_KERNEL_ENTRY)
      TESSERA_CPU_WORKSPACE_KERNELS(TESSERA_KERNEL_ENTRY)
#undef TESSERA_KERNEL_ENTRY
      &TESSERA_KERNEL_NS::attn::attention_backward_scheduled,
      &TESSERA_KERNEL_NS::attn::gemm_bcast,
  };
  return table;
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS
