// The padded transposed operands of sgemm_padded.h. When a transposed operand's rows are a multiple
// of 4 KiB apart, every read of a walk down its columns maps to the same L1 set (64 sets of 64 bytes
// on Zen 3/4 and Intel cores), and oneDNN's sgemm (2.6, jit) slows down in two cases. Measured on a
// Zen 4, 2 threads, GFLOP/s direct -> with the operand copied into rows padded by 16 floats, the copy
// included, the bits identical:
//  * A of A^T B (a weight gradient dout^T inp) under the AVX2 kernels with N < 384: 0.4-0.45x speed.
//    1024 x 256 x 2048 89 -> 181, 4096 x 256 x 4096 81 -> 185 (a 4 x 256 layer's and a 4096-word head's
//    weight gradient); with N >= 384, or the AVX-512 kernels, A is read at full speed.
//  * B of A B^T (a linear layer's forward, B its weight): under the AVX-512 kernels 2048 x 256 x 1024
//    132 -> 151, 4096 x 256 x 1024 151 -> 185, GPT-2's MLP projection 1024 x 768 x 3072 172 -> 199;
//    under AVX2 between 2 % slower (GPT-2's) and 9 % faster.
// Copying the other operand, or either one of A B, gained nothing that paid for the copy.
// A is copied by slabs of its columns (C's rows), so the scratch stays bounded; B whole, when small.
#include "backend/cpu/sgemm_padded.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_bias.h"
#include "backend/ops.h"

namespace tessera::ops {
namespace {

constexpr int64_t kScratchFloats = int64_t{4} << 20;     // 16 MiB: a slab of A (plus its padding), or B

// dst (rows, cols; leading dimension ld) = src (rows, cols; leading dimension lds).
void copy_rows(float* dst, int64_t ld, const float* src, int64_t lds, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > 32768)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ld, src + r * lds, static_cast<size_t>(cols) * sizeof(float));
}

}  // namespace

namespace detail {

bool onednn_runs_avx2() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
  return (isa & avx512) != avx512;
}

bool rows_alias(int64_t ld) { return ld % static_cast<int64_t>(4096 / sizeof(float)) == 0; }

bool pads_transposed_a(bool onednn_avx2, bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t lda) {
  return onednn_avx2 && trans_a && !trans_b && N < 384 && K >= 16 && rows_alias(lda);
}

bool pads_transposed_b(bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t ldb) {
  return !trans_a && trans_b && K >= 16 && rows_alias(ldb) && N * unaliased_ld(K) <= kScratchFloats;
}

int64_t unaliased_ld(int64_t cols) {
  constexpr int64_t kLine = 64 / sizeof(float);
  const int64_t lines = (cols + kLine - 1) / kLine;
  return (lines % 2 == 1 ? lines : lines + 1) * kLine;
}

int64_t unaliased_stride(int64_t cols) { return rows_alias(cols) ? unaliased_ld(cols) : cols; }

}  // namespace detail

void sgemm(CpuWorkspace& ws, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M > 0 && N > 0 && detail::pads_transposed_b(trans_a, trans_b, N, K, ldb)) {
    const int64_t ld = detail::unaliased_ld(K);
    float* padded = grown(ws.padded_operand, static_cast<size_t>(N * ld));
    copy_rows(padded, ld, B, ldb, N, K);
    sgemm(false, true, M, N, K, alpha, A, lda, padded, ld, beta, C, ldc);
    return;
  }
  if (M == 0 || N == 0 || !detail::pads_transposed_a(detail::onednn_runs_avx2(), trans_a, trans_b, N, K, lda)) {
    sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // A is stored (K, M): the slab of its columns [m0, m0 + width) gives C's rows [m0, m0 + width).
  const int64_t slab = std::min(M, std::max<int64_t>(16, kScratchFloats / K / 16 * 16));
  const int64_t ld = detail::unaliased_ld(slab);
  float* padded = grown(ws.padded_operand, static_cast<size_t>(K * ld));
  for (int64_t m0 = 0; m0 < M; m0 += slab) {
    const int64_t width = std::min(slab, M - m0);
    copy_rows(padded, ld, A + m0, lda, K, width);
    sgemm(true, false, width, N, K, alpha, padded, ld, B, ldb, beta, C + m0 * ldc, ldc);
  }
}

void matmul_forward(CpuWorkspace& ws, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC) {
  // out(N,OC) = inp(N,C) @ weight(OC,C)^T (+ bias): seed out with the bias and let sgemm add with beta=1.
  const float beta = detail::seed_with_bias(out, bias, N, OC);
  sgemm(ws, false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward(CpuWorkspace& ws, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  // dinp(N,C) += dout(N,OC) @ weight(OC,C)
  if (dinp != nullptr) sgemm(ws, false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
  // dweight(OC,C) += dout(N,OC)^T @ inp(N,C)
  if (dweight != nullptr) sgemm(ws, true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr) detail::accumulate_bias_grad(dbias, dout, N, OC);
}

}  // namespace tessera::ops
