// sgemm and the linear layer's backward on a workspace (cpu_workspace.h): the same products as
// ops::sgemm / ops::matmul_backward, with the same bits, but a transposed A whose rows alias in the
// first-level cache is first copied into padded workspace scratch where oneDNN's AVX2 sgemm reads such
// an operand at half speed (sgemm_padded.cpp says when). CpuBackend's sgemm and matmul_backward.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_workspace.h"

namespace tessera::ops {

void sgemm(CpuWorkspace& ws, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void matmul_backward(CpuWorkspace& ws, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC);

namespace detail {
// Whether sgemm(ws, ...) copies A into padded scratch for this call, when oneDNN runs its AVX2
// kernels (onednn_avx2): A transposed, B not, A's rows a multiple of 4 KiB apart and N < 384.
bool pads_transposed_a(bool onednn_avx2, bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t lda);
// Whether oneDNN's sgemm runs its AVX2 kernels here: the CPU lacks AVX-512, or oneDNN is capped
// below it (train.cpu_isa / TESSERA_MAX_CPU_ISA).
bool onednn_runs_avx2();
// A leading dimension >= cols whose rows are an odd number of 64-byte lines apart (every row of a
// column walk lands in a different L1 set).
int64_t unaliased_ld(int64_t cols);
}  // namespace detail

}  // namespace tessera::ops
