// sgemm and the linear layer on a workspace (cpu_workspace.h): the same products as ops::sgemm /
// matmul_forward / matmul_backward, with the same bits, but a transposed operand whose rows alias in
// the first-level cache is first copied into padded workspace scratch where oneDNN's sgemm reads
// such an operand slowly (sgemm_padded.cpp has the measurements). CpuBackend's sgemm, matmul_forward
// and matmul_backward; the ops:: functions without a workspace run these on one of their own.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_workspace.h"

namespace tessera::ops {

void sgemm(CpuWorkspace& ws, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void matmul_forward(CpuWorkspace& ws, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC);
void matmul_backward(CpuWorkspace& ws, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC);

namespace detail {
// Whether oneDNN's sgemm runs its AVX2 kernels here: the CPU lacks AVX-512, or oneDNN is capped
// below it (train.cpu_isa / TESSERA_MAX_CPU_ISA).
bool onednn_runs_avx2();
// The two copies sgemm(ws, ...) makes, each of an operand whose rows are a multiple of 4 KiB apart:
// A of A^T B where oneDNN runs its AVX2 kernels and N < 384 (onednn_avx2: onednn_runs_avx2()), and
// B of A B^T (a linear layer's weight in its forward) of at most 16 MiB once padded.
bool pads_transposed_a(bool onednn_avx2, bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t lda);
bool pads_transposed_b(bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t ldb);
// Whether rows `ld` floats apart are a multiple of 4 KiB apart (every row of a column walk in one L1 set).
bool rows_alias(int64_t ld);
// A leading dimension >= cols whose rows are an odd number of 64-byte lines apart (every row of a
// column walk lands in a different L1 set).
int64_t unaliased_ld(int64_t cols);
// cols itself, or unaliased_ld(cols) where rows cols apart would alias (at most cols + 16): the row
// stride for a buffer of our own that a transposed product reads (ring attention's probabilities).
int64_t unaliased_stride(int64_t cols);
}  // namespace detail

}  // namespace tessera::ops
