// The bias parts of the f32 and reduced-precision matmuls (matmul.cpp, matmul_lowp.cpp): seeding the
// output with the bias before a gemm adds to it, and the bias gradient as column sums in one order.
#pragma once
#include <algorithm>
#include <cstdint>

namespace tessera::ops::detail {

// Column blocks: each thread owns a slice of columns and walks the rows in order.
constexpr int64_t kBiasColBlock = 64;

// out(N, OC) = bias broadcast over the rows, when there is a bias: returns the beta with which a
// gemm must then add to out (1), or 0 when there is none (out is left as it is).
inline float seed_with_bias(float* out, const float* bias, int64_t N, int64_t OC) {
  if (bias == nullptr) return 0.0f;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
#pragma omp simd
    for (int64_t j = 0; j < OC; ++j) o[j] = bias[j];
  }
  return 1.0f;
}

// dbias(OC) += column sums of dout(N, OC), in f32, column blocks in parallel (one summation order).
inline void accumulate_bias_grad(float* dbias, const float* dout, int64_t N, int64_t OC) {
  const int64_t nblocks = (OC + kBiasColBlock - 1) / kBiasColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t j0 = blk * kBiasColBlock;
    const int64_t w = std::min(kBiasColBlock, OC - j0);
    float acc[kBiasColBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const float* d = dout + n * OC + j0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += d[j];
    }
    for (int64_t j = 0; j < w; ++j) dbias[j0 + j] += acc[j];
  }
}

}  // namespace tessera::ops::detail
