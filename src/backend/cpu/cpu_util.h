// Internal helpers for the CPU kernels: fixed-lane reductions and column chunking (so every reduction
// has one summation order, whatever the thread count and alignment), and the vectorisable expf core.
// Kernel sources include it inside their level's region (kernel_isa_begin.h), so each level has its
// own copy of these inline functions under its own name.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

#include "backend/cpu/kernel_isa.h"

namespace tessera::ops::TESSERA_KERNEL_NS::detail {

// Sum of f(i) for i in [0, n) over a fixed number of lanes combined in a fixed tree. The lane loop
// vectorises without -ffast-math, and unlike a compiler-reordered reduction its order does not
// depend on pointer alignment (no peeling), so equal inputs give equal bits wherever they live.
template <typename Acc, int Lanes = 16, typename F>
inline Acc lane_sum(int64_t n, F&& f) {
  Acc acc[Lanes] = {};
  int64_t i = 0;
  for (; i + Lanes <= n; i += Lanes) {
#pragma omp simd
    for (int j = 0; j < Lanes; ++j) acc[j] += static_cast<Acc>(f(i + j));
  }
  for (int j = 0; i + j < n; ++j) acc[j] += static_cast<Acc>(f(i + j));
  for (int width = Lanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

// Maximum of f(i) over [0, n) (n >= 1); max is order-independent, lanes only help vectorise.
template <int Lanes = 16, typename F>
inline float lane_max(int64_t n, F&& f) {
  float acc[Lanes];
  for (int j = 0; j < Lanes; ++j) acc[j] = f(0);
  int64_t i = 0;
  for (; i + Lanes <= n; i += Lanes) {
#pragma omp simd
    for (int j = 0; j < Lanes; ++j) {
      float x = f(i + j);
      acc[j] = x > acc[j] ? x : acc[j];
    }
  }
  for (int j = 0; i + j < n; ++j) acc[j] = std::max(acc[j], static_cast<float>(f(i + j)));
  float m = acc[0];
  for (int j = 1; j < Lanes; ++j) m = std::max(m, acc[j]);
  return m;
}

// The exp kernels' shared core (Cephes expf): for xc already clamped to [-87.3, 88.7], splits
// xc = n ln2 + r with a two-part ln2 (|r| <= ln2/2) and returns e^r from a degree-6 polynomial
// together with n, so that e^xc = er * 2^n. n = round(xc / ln2) comes from adding 1.5 * 2^23 and
// reading the integer back from the low mantissa bits: floorf and a float->int conversion would
// not vectorise under the default -ftrapping-math.
struct ExpParts {
  float er;
  int32_t n;
};
inline ExpParts exp_parts(float xc) {
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = xc * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * r * r + r + 1.0f, std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShifter)};
}

// expf that vectorises: glibc's expf is a scalar call unless built with -ffast-math, which made
// GELU/SwiGLU/softmax 5-10x slower than the memory traffic allows. Max relative error about 2e-7
// (tested against double exp). Below -87.3 (where 2^n would be subnormal) it returns 0, so -inf
// gives 0; above 88.7 +inf; NaN stays NaN. (attn::fast_exp is the cheaper variant for arguments
// that are at most 0.)
inline float exp_vec(float x) {
  const float xc = std::min(std::max(x, -87.3f), 88.7f);
  const ExpParts e = exp_parts(xc);
  // 2^n as two normal halves: n reaches 128 near the top of the range, one past float's exponent.
  const int32_t h = e.n >> 1;
  float y = e.er * std::bit_cast<float>((h + 127) << 23) * std::bit_cast<float>((e.n - h + 127) << 23);
  y = x < -87.3f ? 0.0f : y;
  y = x > 88.7f ? __builtin_inff() : y;
  return x != x ? x : y;
}

// Column blocks for the "each thread owns a slice of columns and walks rows in order" reductions.
// 64 floats = four AVX-512 (eight AVX2) vectors: wide enough to vectorise, small enough to spread C
// over threads.
constexpr int64_t kColBlock = 64;
inline int64_t col_blocks(int64_t C) { return (C + kColBlock - 1) / kColBlock; }

}  // namespace tessera::ops::TESSERA_KERNEL_NS::detail
