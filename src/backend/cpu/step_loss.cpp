// The step's loss on the device: a double accumulated per micro-batch, read once at the step's end.
// Serial on purpose: the row order of the sum is the loss curve's bits.
#include "backend/ops.h"

namespace tessera::ops {

void fill_f64(double* x, int64_t n, double value) {
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void accumulate_mean_loss(double* loss_sum, const float* losses, int64_t n, int64_t valid) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += losses[i];
  const float mean = valid > 0 ? static_cast<float>(sum / static_cast<double>(valid)) : 0.f;
  *loss_sum += mean;
}

}  // namespace tessera::ops
