// Reductions for gradient clipping: sum of squares (double, fixed blocks so the result does not
// depend on the thread count) and in-place scaling. No scratch: the partial sums live on the stack.
#include <algorithm>

#include "backend/ops.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

namespace {
// Each block's partial sum is computed by whichever thread, then the partials are added in block
// order: the same bits for any thread count. The blocks go in groups of kSumGroup whose partials sit
// in an array on the stack (8 KiB); `total` receives the same additions in the same order as over one
// array of all partials, and one parallel region per group (32 Mi floats) costs nothing.
constexpr int64_t kSumBlock = int64_t{1} << 15;
constexpr int64_t kSumGroup = 1024;
}  // namespace

double sum_of_squares(const float* x, int64_t n) {
  const int64_t nblocks = (n + kSumBlock - 1) / kSumBlock;
  double total = 0.0;
  for (int64_t g0 = 0; g0 < nblocks; g0 += kSumGroup) {
    const int64_t ng = std::min(kSumGroup, nblocks - g0);
    double part[kSumGroup];
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < ng; ++j) {
      const int64_t b = g0 + j;
      const float* xb = x + b * kSumBlock;
      const int64_t len = std::min(kSumBlock, n - b * kSumBlock);
      part[j] = detail::lane_sum<double, 8>(len, [&](int64_t i) {
        const double xi = xb[i];
        return xi * xi;
      });
    }
    for (int64_t j = 0; j < ng; ++j) total += part[j];
  }
  return total;
}

void scale_inplace(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
