// Token (+ optional learned position) embedding. The backward scatter is deterministic without
// atomics: each thread owns a slice of channels and walks the tokens in order.
#include "backend/cpu/cpu_util.h"
#include "backend/ops.h"

namespace tessera::ops {

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    float* o = out + bt * C;                   // (C)
    const float* e = wte + tokens[bt] * C;     // (C)
    if (wpe != nullptr) {
      const float* p = wpe + (bt % T) * C;     // (C)
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) {
  using detail::kColBlock;
  const int64_t nblocks = detail::col_blocks(C);
  // dwte(V,C): a token repeated in the batch adds into the same row; owning columns (not tokens)
  // keeps every row's sum in token order whatever the thread count.
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t c0 = blk * kColBlock;
    const int64_t w = std::min(kColBlock, C - c0);
    for (int64_t bt = 0; bt < B * T; ++bt) {
      float* g = dwte + static_cast<int64_t>(tokens[bt]) * C + c0;
      const float* d = dout + bt * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) g[c] += d[c];
    }
  }
  if (dwpe != nullptr) {
    // dwpe(T,C) += sum_b dout(b,t,:): each position row belongs to one thread, batches in order.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      float* g = dwpe + t * C;
      for (int64_t b = 0; b < B; ++b) {
        const float* d = dout + (b * T + t) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) g[c] += d[c];
      }
    }
  }
}

}  // namespace tessera::ops
