// Fused AdamW step (torch.optim.AdamW semantics: decoupled weight decay, bias-corrected moments).
#include <cmath>

#include "backend/ops.h"
#include "core/log.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own

namespace tessera::ops::TESSERA_KERNEL_NS {

void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
  TS_CHECK(step >= 1) << "adamw_update step counts from 1, got " << step;
  // Bias corrections in double: beta^t underflows gracefully and 1 - beta2^t for small t keeps its digits.
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step)));
  const float decay = lr * weight_decay;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    float p = params[i];
    p -= decay * p;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    p -= lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    params[i] = p;
  }
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
