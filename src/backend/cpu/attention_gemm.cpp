// The small matmul of the attention kernels (see attention_kernels.h): register tiles of up to
// 4 rows x 64 columns with AVX-512 (masked loads/stores for a column tail), plain loops otherwise.
#include <algorithm>

#include "backend/cpu/attention_kernels.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::ops::attn {

void gemm_bcast_reference(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak,
                          const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    for (int64_t n = 0; n < N; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += A[m * sam + k * sak] * B[k * ldb + n];
      c[n] = accumulate ? c[n] + s : s;
    }
  }
}

#if defined(__AVX512F__)
namespace {

// One tile: R rows x NV vectors of 16 columns; the last vector is masked by `tail`.
template <int R, int NV>
void tile(int64_t K, const float* A, int64_t sam, int64_t sak, const float* B, int64_t ldb, float* C,
          int64_t ldc, bool accumulate, __mmask16 tail) {
  // Every loop over r and v is fully unrolled: otherwise GCC keeps acc in memory as well as in
  // registers and stores all 16 accumulators on every k.
  __m512 acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = B + k * ldb;
    const float* ak = A + k * sak;
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) b[v] = _mm512_loadu_ps(bk + 16 * v);
    b[NV - 1] = _mm512_maskz_loadu_ps(tail, bk + 16 * (NV - 1));
    // Keep b in registers: folded into each FMA as a memory operand it would be loaded R times.
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) asm("" : "+v"(b[v]));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(ak[r * sam]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = v == NV - 1 ? tail : static_cast<__mmask16>(0xFFFF);
      __m512 x = acc[r][v];
      if (accumulate) x = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, c + 16 * v), x);
      _mm512_mask_storeu_ps(c + 16 * v, mask, x);
    }
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, bool,
                        __mmask16);

template <int R>
constexpr TileFn tile_for(int nv) {
  return nv == 1 ? &tile<R, 1> : nv == 2 ? &tile<R, 2> : nv == 3 ? &tile<R, 3> : &tile<R, 4>;
}

}  // namespace

void gemm_bcast(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  static constexpr TileFn kFull[4] = {tile_for<4>(1), tile_for<4>(2), tile_for<4>(3), tile_for<4>(4)};
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const int64_t width = std::min<int64_t>(64, N - n0);
    const int nv = static_cast<int>((width + 15) / 16);
    const int rem = static_cast<int>(width - 16 * (nv - 1));
    const auto tail = static_cast<__mmask16>(rem == 16 ? 0xFFFF : (1u << rem) - 1);
    int64_t m0 = 0;
    for (; m0 + 4 <= M; m0 += 4)
      kFull[nv - 1](K, A + m0 * sam, sam, sak, B + n0, ldb, C + m0 * ldc + n0, ldc, accumulate, tail);
    const int64_t left = M - m0;
    if (left > 0) {
      const TileFn fn = left == 1 ? tile_for<1>(nv) : left == 2 ? tile_for<2>(nv) : tile_for<3>(nv);
      fn(K, A + m0 * sam, sam, sak, B + n0, ldb, C + m0 * ldc + n0, ldc, accumulate, tail);
    }
  }
}

#else

void gemm_bcast(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  gemm_bcast_reference(M, N, K, A, sam, sak, B, ldb, C, ldc, accumulate);
}

#endif

}  // namespace tessera::ops::attn
