// sgemm peak measurement.
#include "backend/sgemm_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/ops.h"

namespace tessera::ops {

bool PeakSearch::add(double rate) {
  if (rate > best_ * 1.03) since_gain_ = 0;
  else ++since_gain_;
  best_ = std::max(best_, rate);
  return since_gain_ < settled_after_;
}

double measure_matmul_peak_gflops(int64_t n, int reps,
                                  const std::function<void(const float*, const float*, float*)>& multiply) {
  using clock = std::chrono::steady_clock;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  multiply(a.data(), b.data(), c.data());
  PeakSearch search(reps);
  const auto start = clock::now();
  for (bool more = true; more && std::chrono::duration<double>(clock::now() - start).count() < 0.5;) {
    const auto t0 = clock::now();
    multiply(a.data(), b.data(), c.data());
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    more = search.add(2.0 * n * n * n / dt / 1e9);
  }
  return search.best();
}

double measure_sgemm_peak_gflops(int64_t n, int reps) {
  return measure_matmul_peak_gflops(n, reps, [n](const float* a, const float* b, float* c) {
    sgemm(false, true, n, n, n, 1.f, a, n, b, n, 0.f, c, n);
  });
}

double measure_lowp_peak_gflops(Backend& backend, MatmulPrecision p, int64_t n, int reps) {
  return measure_matmul_peak_gflops(n, reps, [&backend, p, n](const float* a, const float* b, float* c) {
    backend.matmul_forward_lowp(p, c, a, b, nullptr, n, n, n);
  });
}

}  // namespace tessera::ops
