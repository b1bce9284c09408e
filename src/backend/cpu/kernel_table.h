// The CPU kernels of one instruction-set level as a table of functions: one entry per op of ops.h that
// our own code computes (oneDNN's matmuls dispatch themselves), plus two internals the tests reach.
// TESSERA_CPU_KERNELS and TESSERA_CPU_WORKSPACE_KERNELS are the one list: the table's fields, each
// level's table and the ops:: entry points (ops_entry.cpp) all expand them, so a level that misses an
// op does not compile. The workspace kernels take the caller's CpuWorkspace (cpu_workspace.h) in front
// of the op's own parameters: their scratch is the backend's, never the kernel's.
#pragma once
#include <cstdint>

#include "backend/cpu/attention_schedule.h"
#include "backend/cpu/cpu_workspace.h"
#include "backend/cpu_isa.h"
#include "backend/ops.h"

namespace tessera::ops {

#define TESSERA_CPU_KERNELS(X) \
  X(embedding_forward)         \
  X(embedding_backward)        \
  X(embedding_forward_range)   \
  X(embedding_backward_range)  \
  X(layernorm_forward)         \
  X(layernorm_backward)        \
  X(rmsnorm_forward)           \
  X(rmsnorm_backward)          \
  X(gelu_forward)              \
  X(gelu_backward)             \
  X(swiglu_forward)            \
  X(swiglu_backward)           \
  X(softmax_crossentropy)      \
  X(crossentropy_rowmax)       \
  X(crossentropy_sumexp_target) \
  X(crossentropy_finish)       \
  X(adamw_update)              \
  X(sum_of_squares)            \
  X(scale_inplace)

// The kernels with working memory: entry type WithWorkspace<op> = the op's with CpuWorkspace& first.
#define TESSERA_CPU_WORKSPACE_KERNELS(X) \
  X(rope_forward)                        \
  X(rope_backward)                       \
  X(rope_forward_at)                     \
  X(rope_backward_at)                    \
  X(attention_forward)                   \
  X(attention_backward)

template <class Op>
struct WithWorkspaceT;
template <class R, class... Args>
struct WithWorkspaceT<R(Args...)> {
  using type = R(CpuWorkspace& ws, Args...);
};
template <class Op>
using WithWorkspace = typename WithWorkspaceT<Op>::type;

// The small strided matmul inside attention (attention_kernels.h).
using GemmBcastFn = void(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak,
                         const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
// attention_backward with a chosen parallel schedule (attention_schedule.h).
using AttentionBackwardScheduledFn = void(CpuWorkspace& ws, float* dqkv, const float* dout, const float* qkv,
                                          const float* out, const float* lse, int64_t B, int64_t T, int64_t NH,
                                          int64_t NKV, int64_t HS, attn::BackwardSchedule schedule);

struct CpuKernels {
  CpuIsa isa;
#define TESSERA_KERNEL_FIELD(name) decltype(&ops::name) name;
  TESSERA_CPU_KERNELS(TESSERA_KERNEL_FIELD)
#undef TESSERA_KERNEL_FIELD
#define TESSERA_WORKSPACE_KERNEL_FIELD(name) WithWorkspace<decltype(ops::name)>* name;
  TESSERA_CPU_WORKSPACE_KERNELS(TESSERA_WORKSPACE_KERNEL_FIELD)
#undef TESSERA_WORKSPACE_KERNEL_FIELD
  AttentionBackwardScheduledFn* attention_backward_scheduled;
  GemmBcastFn* gemm_bcast;
};

// The table of a level this build compiled. Calling its functions needs a CPU that has the level
// (cpu_isa_supported); the tables themselves are constants.
const CpuKernels& cpu_kernels(CpuIsa isa);

// The table every ops:: call of this process goes through (select_cpu_isa; the best level by default).
const CpuKernels& active_cpu_kernels();

namespace isa_avx2 {
const CpuKernels& kernel_table();
}
namespace isa_avx512 {
const CpuKernels& kernel_table();
}

}  // namespace tessera::ops
