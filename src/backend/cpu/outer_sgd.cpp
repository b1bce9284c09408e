// Local SGD's outer optimizer step (momentum SGD on the averaged delta).
#include "backend/ops.h"

namespace tessera::ops {

void outer_sgd_update(float* anchor, float* velocity, const float* delta, int64_t n, float lr, float momentum,
                      bool nesterov) {
  const float mu = momentum;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = mu * velocity[i] + delta[i];
    velocity[i] = v;
    anchor[i] -= lr * (nesterov ? delta[i] + mu * v : v);
  }
}

}  // namespace tessera::ops
