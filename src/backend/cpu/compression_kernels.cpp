// Gradient compression's arithmetic (parallel/compression*.h): top-k selection, 1-bit sign
// compression with per-chunk scales, PowerSGD's orthonormalisation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/ops.h"

namespace tessera::ops {

void topk_select(int32_t* idx, int32_t* scratch, const float* m, int64_t n, int64_t k) {
  std::iota(scratch, scratch + n, 0);
  // Larger magnitude first; equal magnitudes by index, so the choice is a function of m alone.
  auto before = [m](int32_t a, int32_t b) {
    const float x = std::fabs(m[a]), y = std::fabs(m[b]);
    return x > y || (x == y && a < b);
  };
  std::nth_element(scratch, scratch + k, scratch + n, before);
  std::sort(scratch, scratch + k);
  std::copy_n(scratch, k, idx);
}

void onebit_compress(float* scales, uint32_t* words, float* residual, const float* m, int64_t n, int64_t chunk) {
  std::memset(words, 0, static_cast<size_t>((n + 31) / 32) * 4);
  const int64_t chunks = (n + chunk - 1) / chunk;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * chunk, e = std::min(n, b + chunk);
    double sum = 0;
    for (int64_t i = b; i < e; ++i) sum += std::fabs(m[i]);
    const float s = static_cast<float>(sum / static_cast<double>(e - b));
    scales[c] = s;
    for (int64_t i = b; i < e; ++i) {
      const bool positive = !(m[i] < 0.0f);
      if (positive) words[i / 32] |= 1u << (i % 32);
      if (residual) residual[i] = m[i] - (positive ? s : -s);
    }
  }
}

void onebit_accumulate(float* out, float scale, const float* scales, const uint32_t* words, int64_t n, int64_t chunk) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * chunk, e = std::min(n, b + chunk);
    const float s = scale * scales[c];
    for (int64_t i = b; i < e; ++i) out[i] += (words[i / 32] >> (i % 32)) & 1u ? s : -s;
  }
}

void orthonormalise_columns(float* a, int64_t rows, int64_t r) {
  std::vector<double> col(static_cast<size_t>(rows));
  for (int64_t j = 0; j < r; ++j) {
    double before = 0;
    for (int64_t i = 0; i < rows; ++i) {
      col[i] = a[i * r + j];
      before += col[i] * col[i];
    }
    for (int64_t k = 0; k < j; ++k) {  // modified Gram-Schmidt: project out each finished column in turn
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += col[i] * a[i * r + k];
      for (int64_t i = 0; i < rows; ++i) col[i] -= dot * a[i * r + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += col[i] * col[i];
    // Little left after the projections: the column depends on the earlier ones (rank(M) < r) and
    // what remains is rounding noise, which normalised would add a spurious direction.
    const double inv = norm <= 1e-8 * before || norm == 0 ? 0.0 : 1.0 / std::sqrt(norm);
    for (int64_t i = 0; i < rows; ++i) a[i * r + j] = static_cast<float>(col[i] * inv);
  }
}

}  // namespace tessera::ops
