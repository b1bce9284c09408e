// Fused softmax + cross-entropy over rows of logits; optionally overwrites the logits with their
// gradient so the (N,V) probabilities never need a buffer of their own.
#include <cmath>

#include "backend/ops.h"
#include "core/log.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

void softmax_crossentropy(float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V,
                          float dlogits_scale) {
  const bool write_grad = dlogits_scale != 0.0f;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* x = logits + n * V;  // (V)
    const int32_t target = targets[n];
    if (target < 0) {  // ignored row (padding / masked position)
      losses[n] = 0.0f;
      if (write_grad) {
#pragma omp simd
        for (int64_t v = 0; v < V; ++v) x[v] = 0.0f;
      }
      continue;
    }
    TS_CHECK(target < V) << "target " << target << " out of range for vocabulary size " << V << " (row " << n << ")";
    // Subtracting the row max keeps exp() in range; the normaliser is summed in double.
    const float mx = detail::lane_max(V, [&](int64_t i) { return x[i]; });
    const float target_logit = x[target];
    double sum;
    if (write_grad) {
      sum = detail::lane_sum<double, 8>(V, [&](int64_t i) {
        const float e = detail::exp_vec(x[i] - mx);
        x[i] = e;
        return e;
      });
    } else {
      sum = detail::lane_sum<double, 8>(V, [&](int64_t i) { return detail::exp_vec(x[i] - mx); });
    }
    losses[n] = static_cast<float>(std::log(sum) - static_cast<double>(target_logit - mx));
    if (write_grad) {
      const float scale = static_cast<float>(static_cast<double>(dlogits_scale) / sum);
#pragma omp simd
      for (int64_t v = 0; v < V; ++v) x[v] *= scale;
      x[target] -= dlogits_scale;
    }
  }
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
