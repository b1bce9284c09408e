// Element-wise ops of the contract (fill, copy, add, sub, axpy, non-finite count): the loops the model
// and the strategies used to write themselves, so another backend can run them on its memory.
#include <cmath>
#include <cstring>

#include "backend/ops.h"

namespace tessera::ops {

void fill(float* x, int64_t n, float value) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void copy(float* dst, const float* src, int64_t n) {
  if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void add(float* out, const float* y, const float* x, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = y[i] + x[i];
}

void axpy(float* y, float a, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void sub(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

int64_t count_nonfinite(const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for simd reduction(+ : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(x[i]);
  return bad;
}

}  // namespace tessera::ops
