// Declares this level's copy of every kernel (tessera::ops::TESSERA_KERNEL_NS::gelu_forward, ...) with
// exactly the type of its ops.h op, so a kernel source whose definition drifts from the contract fails
// to build instead of quietly becoming an overload (the workspace kernels: with CpuWorkspace& in front).
#pragma once
#include "backend/cpu/kernel_isa.h"
#include "backend/cpu/kernel_table.h"

namespace tessera::ops::TESSERA_KERNEL_NS {
#define TESSERA_KERNEL_DECLARE(name) decltype(ops::name) name;
TESSERA_CPU_KERNELS(TESSERA_KERNEL_DECLARE)
#undef TESSERA_KERNEL_DECLARE
#define TESSERA_WORKSPACE_KERNEL_DECLARE(name) WithWorkspace<decltype(ops::name)> name;
TESSERA_CPU_WORKSPACE_KERNELS(TESSERA_WORKSPACE_KERNEL_DECLARE)
#undef TESSERA_WORKSPACE_KERNEL_DECLARE
const CpuKernels& kernel_table();
namespace attn {
using ops::attn::BackwardSchedule;
GemmBcastFn gemm_bcast;
AttentionBackwardScheduledFn attention_backward_scheduled;
}  // namespace attn
}  // namespace tessera::ops::TESSERA_KERNEL_NS
