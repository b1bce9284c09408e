// Reductions for gradient clipping: sum of squares (double, fixed blocks so the result does not
// depend on the thread count) and in-place scaling.
#include <vector>

#include "backend/ops.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

namespace {
// Each block's partial sum is computed by whichever thread, then the partials are added in block
// order: the same bits for any thread count.
constexpr int64_t kSumBlock = int64_t{1} << 15;
}  // namespace

double sum_of_squares(const float* x, int64_t n) {
  const int64_t nblocks = (n + kSumBlock - 1) / kSumBlock;
  thread_local std::vector<double> partials;  // per calling thread; grows only
  if (static_cast<int64_t>(partials.size()) < nblocks) partials.resize(nblocks);
  double* part = partials.data();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) {
    const float* xb = x + b * kSumBlock;
    const int64_t len = std::min(kSumBlock, n - b * kSumBlock);
    part[b] = detail::lane_sum<double, 8>(len, [&](int64_t i) {
      const double xi = xb[i];
      return xi * xi;
    });
  }
  double total = 0.0;
  for (int64_t b = 0; b < nblocks; ++b) total += part[b];
  return total;
}

void scale_inplace(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
