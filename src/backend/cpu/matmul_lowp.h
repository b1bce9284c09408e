// The reduced-precision matmuls of ops.h on a workspace (cpu_workspace.h): its bf16 setting decides
// whether bf16 may run oneDNN's native kernel, and its LowpMatmulState holds the oneDNN objects and the
// operand copies. CpuBackend calls these; the ops:: functions without a workspace run these on a
// workspace of their own call.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cpu/cpu_workspace.h"
#include "backend/ops.h"

namespace tessera::ops {

void sgemm_lowp(CpuWorkspace& ws, MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);
void matmul_forward_lowp(CpuWorkspace& ws, MatmulPrecision p, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, int64_t OC);
void matmul_backward_lowp(CpuWorkspace& ws, MatmulPrecision p, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC);
// The bf16 kernel sgemm_lowp uses on this workspace: "onednn:<implementation>" (native AVX512-BF16/AMX)
// or "emulated" (rounded f32 through sgemm).
std::string bf16_gemm_kernel(CpuWorkspace& ws);

}  // namespace tessera::ops
