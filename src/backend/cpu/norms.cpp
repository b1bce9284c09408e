// LayerNorm and RMSNorm over the last dimension. Backward runs in two parallel sweeps: rows for
// dinp, then column blocks for dweight/dbias, so no per-thread partial buffers are needed and the
// parameter gradients are summed in row order whatever the thread count.
#include <cmath>

#include "backend/ops.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

using detail::kColBlock;
using detail::lane_sum;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;  // (C)
    float* o = out + n * C;        // (C)
    const float m = lane_sum<float>(C, [&](int64_t i) { return x[i]; }) / static_cast<float>(C);
    // Two passes (mean, then centred squares) avoid the cancellation of E[x^2] - E[x]^2.
    const float var = lane_sum<float>(C, [&](int64_t i) { return (x[i] - m) * (x[i] - m); }) / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t nblocks = detail::col_blocks(C);
#pragma omp parallel
  {
    // dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * weight.
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      float* di = dinp + n * C;
      const float m = mean[n], s = rstd[n];
      const float dnorm_mean = lane_sum<float>(C, [&](int64_t i) { return d[i] * weight[i]; }) / static_cast<float>(C);
      const float dnorm_norm_mean =
          lane_sum<float>(C, [&](int64_t i) { return d[i] * weight[i] * (x[i] - m) * s; }) / static_cast<float>(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        di[c] += s * (d[c] * weight[c] - dnorm_mean - norm * dnorm_norm_mean);
      }
    }
    // dweight += sum_n dout * norm; dbias += sum_n dout.
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t c0 = blk * kColBlock;
      const int64_t w = std::min(kColBlock, C - c0);
      float dw[kColBlock] = {}, db[kColBlock] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* x = inp + n * C + c0;
        const float* d = dout + n * C + c0;
        const float m = mean[n], s = rstd[n];
#pragma omp simd
        for (int64_t c = 0; c < w; ++c) {
          dw[c] += d[c] * (x[c] - m) * s;
          db[c] += d[c];
        }
      }
      for (int64_t c = 0; c < w; ++c) {
        dweight[c0 + c] += dw[c];
        dbias[c0 + c] += db[c];
      }
    }
  }
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                     float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;  // (C)
    float* o = out + n * C;        // (C)
    const float ms = lane_sum<float>(C, [&](int64_t i) { return x[i] * x[i]; }) / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(ms + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = x[c] * s * weight[c];
    rstd[n] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  const int64_t nblocks = detail::col_blocks(C);
#pragma omp parallel
  {
    // With xhat = x * rstd and dy = dout * weight: dinp = rstd * (dy - xhat * mean(dy * xhat)).
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      float* di = dinp + n * C;
      const float s = rstd[n];
      const float dy_xhat_mean =
          lane_sum<float>(C, [&](int64_t i) { return d[i] * weight[i] * x[i] * s; }) / static_cast<float>(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) di[c] += s * (d[c] * weight[c] - x[c] * s * dy_xhat_mean);
    }
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t c0 = blk * kColBlock;
      const int64_t w = std::min(kColBlock, C - c0);
      float dw[kColBlock] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* x = inp + n * C + c0;
        const float* d = dout + n * C + c0;
        const float s = rstd[n];
#pragma omp simd
        for (int64_t c = 0; c < w; ++c) dw[c] += d[c] * x[c] * s;
      }
      for (int64_t c = 0; c < w; ++c) dweight[c0 + c] += dw[c];
    }
  }
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
