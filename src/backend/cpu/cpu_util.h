// Internal helpers for the CPU kernels: fixed-lane reductions and column chunking.
// Both exist so that every reduction has one summation order, independent of thread count and alignment.
#pragma once
#include <algorithm>
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

// Column blocks for the "each thread owns a slice of columns and walks rows in order" reductions.
// 64 floats = four AVX-512 vectors: wide enough to vectorise, small enough to spread C over threads.
constexpr int64_t kColBlock = 64;
inline int64_t col_blocks(int64_t C) { return (C + kColBlock - 1) / kColBlock; }

}  // namespace tessera::ops::detail
