// The padded transposed-A sgemm (sgemm_padded.h). oneDNN's AVX2 sgemm (jit, oneDNN 2.6) computing
// A^T B with N < 384 reads A down its columns; when A's rows are a multiple of 4 KiB apart every read
// of such a walk maps to the same L1 set, and the product runs at 0.4-0.45 of its speed. Measured on a
// Zen 4 capped at AVX2, 2 threads (GFLOP/s, direct -> A copied with 16 floats of padding per row, copy
// included): 1024 x 256 x 2048 89 -> 181, 4096 x 256 x 4096 81 -> 185 (the weight gradients of a
// 4 x width linear layer and of a 4096-token head at width 256); N >= 384 and the AVX-512 kernels read
// the same A at full speed, and padding B gained too little to pay for its copy. The copy is by column
// slabs of A of at most kSlabFloats, so the scratch stays bounded, and gives the same bits: each
// output's sum over K is formed as before (checked bitwise in tests/backend/cpu/matmul_test.cpp).
#include "backend/cpu/sgemm_padded.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "backend/ops.h"
#include "backend/cpu/matmul_bias.h"

namespace tessera::ops {
namespace detail {

bool pads_transposed_a(bool onednn_avx2, bool trans_a, bool trans_b, int64_t N, int64_t K, int64_t lda) {
  constexpr int64_t kAliasFloats = 4096 / sizeof(float);  // 4 KiB: one L1 way on Zen 3/4 and Intel cores
  return onednn_avx2 && trans_a && !trans_b && N < 384 && K >= 16 && lda % kAliasFloats == 0;
}

bool onednn_runs_avx2() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
  return (isa & avx512) != avx512;
}

int64_t unaliased_ld(int64_t cols) {
  constexpr int64_t kLine = 64 / sizeof(float);
  const int64_t lines = (cols + kLine - 1) / kLine;
  return (lines % 2 == 1 ? lines : lines + 1) * kLine;
}

}  // namespace detail

namespace {

// The scratch a slab of A may take (16 MiB): a slab is K rows x its width.
constexpr int64_t kSlabFloats = int64_t{4} << 20;

}  // namespace

void sgemm(CpuWorkspace& ws, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || !detail::pads_transposed_a(detail::onednn_runs_avx2(), trans_a, trans_b, N, K, lda)) {
    sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // A is stored (K, M): slab [m0, m0 + width) of its columns feeds C's rows [m0, m0 + width).
  const int64_t fit = std::max<int64_t>(16, kSlabFloats / K / 16 * 16);
  const int64_t slab = std::min(M, fit);
  const int64_t ld = detail::unaliased_ld(slab);
  float* padded = grown(ws.padded_operand, static_cast<size_t>(K * ld));
  for (int64_t m0 = 0; m0 < M; m0 += slab) {
    const int64_t width = std::min(slab, M - m0);
#pragma omp parallel for schedule(static) if (K * width > 32768)
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(padded + k * ld, A + k * lda + m0, static_cast<size_t>(width) * sizeof(float));
    sgemm(true, false, width, N, K, alpha, padded, ld, B, ldb, beta, C + m0 * ldc, ldc);
  }
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
