// The small matmul of the attention kernels (see attention_kernels.h), register-tiled for this level:
// AVX-512 tiles of up to 4 rows x 64 columns, AVX2 tiles of up to 6 rows x 16 columns (the shape of
// the classic Haswell sgemm micro-kernel: 12 accumulators + 2 B vectors + 1 broadcast = 15 of the 16
// ymm registers), masked loads and stores for a column tail. Both form every sum the same way (one
// fused multiply-add per k, in increasing k, then one add to C), so both levels give the same bits.
#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/attention_kernels.h"

namespace tessera::ops::TESSERA_KERNEL_NS::attn {
namespace {

#if TESSERA_KERNEL_LEVEL == TESSERA_KERNEL_LEVEL_AVX512

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

void gemm_tiled(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak, const float* B,
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

#else  // AVX2 + FMA

constexpr int kRows = 6;  // rows per full tile

// Loads 8 floats, or only the lanes set in `mask` (the others read as 0) when Masked.
template <bool Masked>
inline __m256 load8(const float* p, __m256i mask) {
  if constexpr (Masked) return _mm256_maskload_ps(p, mask);
  return _mm256_loadu_ps(p);
}

// One tile: R rows x NV vectors of 8 columns; when Masked, the last vector only has the lanes of `tail`.
template <int R, int NV, bool Masked>
void tile(int64_t K, const float* A, int64_t sam, int64_t sak, const float* B, int64_t ldb, float* C,
          int64_t ldc, bool accumulate, __m256i tail) {
  __m256 acc[R][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = B + k * ldb;
    const float* ak = A + k * sak;
    __m256 b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV - 1; ++v) b[v] = _mm256_loadu_ps(bk + 8 * v);
    b[NV - 1] = load8<Masked>(bk + 8 * (NV - 1), tail);
    // Keep b in registers: folded into each FMA as a memory operand it would be loaded R times.
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) asm("" : "+x"(b[v]));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(ak + r * sam);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 x = acc[r][v];
      if (Masked && v == NV - 1) {
        if (accumulate) x = _mm256_add_ps(_mm256_maskload_ps(c + 8 * v, tail), x);
        _mm256_maskstore_ps(c + 8 * v, tail, x);
      } else {
        if (accumulate) x = _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), x);
        _mm256_storeu_ps(c + 8 * v, x);
      }
    }
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, bool,
                        __m256i);

// The tile for `rows` (1..6) rows and `nv` (1..2) vectors, masked or not.
template <bool Masked>
TileFn tile_for(int64_t rows, int nv) {
  static constexpr TileFn kTable[kRows][2] = {
      {&tile<1, 1, Masked>, &tile<1, 2, Masked>}, {&tile<2, 1, Masked>, &tile<2, 2, Masked>},
      {&tile<3, 1, Masked>, &tile<3, 2, Masked>}, {&tile<4, 1, Masked>, &tile<4, 2, Masked>},
      {&tile<5, 1, Masked>, &tile<5, 2, Masked>}, {&tile<6, 1, Masked>, &tile<6, 2, Masked>}};
  return kTable[rows - 1][nv - 1];
}

void gemm_tiled(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t n0 = 0; n0 < N; n0 += 16) {
    const int64_t width = std::min<int64_t>(16, N - n0);
    const int nv = static_cast<int>((width + 7) / 8);
    const int rem = static_cast<int>(width - 8 * (nv - 1));  // 1..8 columns in the last vector
    const bool masked = rem != 8;
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane);
    for (int64_t m0 = 0; m0 < M; m0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, M - m0);
      const TileFn fn = masked ? tile_for<true>(rows, nv) : tile_for<false>(rows, nv);
      fn(K, A + m0 * sam, sam, sak, B + n0, ldb, C + m0 * ldc + n0, ldc, accumulate, tail);
    }
  }
}

#endif

}  // namespace

void gemm_bcast(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  gemm_tiled(M, N, K, A, sam, sak, B, ldb, C, ldc, accumulate);
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS::attn

#include "backend/cpu/kernel_isa_end.h"
