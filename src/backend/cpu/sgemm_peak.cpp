// sgemm peak measurement.
#include "backend/sgemm_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/ops.h"

namespace tessera::ops {

double measure_sgemm_peak_gflops(int64_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / dt / 1e9);
  }
  return best;
}

}  // namespace tessera::ops
