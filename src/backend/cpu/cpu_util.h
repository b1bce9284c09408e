// Internal helpers for the CPU kernels: fixed-lane reductions and column chunking (so every reduction
// has one summation order, whatever the thread count and alignment), and a vectorisable expf.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace tessera::ops::detail {

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

// expf that vectorises: glibc's expf is a scalar call unless built with -ffast-math, which made
// GELU/SwiGLU/softmax 5-10x slower than the memory traffic allows. Cephes-style: x = n ln2 + r with
// a two-part ln2, a degree-6 polynomial for e^r on |r| <= ln2/2, and 2^n built in the exponent
// bits. Max relative error about 2e-7 (tested against double exp). Below -87.3 (where 2^n would be
// subnormal) it returns 0; above 88.7 +inf; NaN stays NaN.
inline float exp_vec(float x) {
  const float xc = std::min(std::max(x, -87.3f), 88.7f);
  // n = round(x / ln2) by adding 1.5 * 2^23 (floorf would not vectorise without -fno-trapping-math).
  const float shifted = xc * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^n as two normal halves: n reaches 128 near the top of the range, one past float's exponent.
  const int32_t ni = static_cast<int32_t>(n), h = ni >> 1;
  float y = er * std::bit_cast<float>((h + 127) << 23) * std::bit_cast<float>((ni - h + 127) << 23);
  y = x < -87.3f ? 0.0f : y;
  y = x > 88.7f ? __builtin_inff() : y;
  return x != x ? x : y;
}

// Column blocks for the "each thread owns a slice of columns and walks rows in order" reductions.
// 64 floats = four AVX-512 vectors: wide enough to vectorise, small enough to spread C over threads.
constexpr int64_t kColBlock = 64;
inline int64_t col_blocks(int64_t C) { return (C + kColBlock - 1) / kColBlock; }

}  // namespace tessera::ops::detail
