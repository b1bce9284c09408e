// Vocabulary-parallel embedding and the split softmax cross-entropy (one vocabulary shard per tp
// rank): the pieces the tp ranks combine with all-reduce instead of gathering the full (N, V) logits.
#include <cmath>
#include <limits>

#include "backend/ops.h"
#include "core/log.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

void embedding_forward_range(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                             int64_t T, int64_t C, int64_t lo, int64_t hi) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    float* o = out + bt * C;  // (C)
    const int64_t tok = tokens[bt];
    const bool mine = tok >= lo && tok < hi;
    const float* e = wte + (mine ? tok - lo : 0) * C;  // (C), read only when mine
    const float* p = wpe ? wpe + (bt % T) * C : nullptr;
    if (mine && p) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    } else if (mine) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c];
    } else if (p) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = p[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = 0.0f;
    }
  }
}

void embedding_backward_range(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                              int64_t T, int64_t C, int64_t lo, int64_t hi) {
  using detail::kColBlock;
  const int64_t nblocks = detail::col_blocks(C);
  // As embedding_backward: each thread owns a slice of channels and walks the tokens in order.
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t c0 = blk * kColBlock;
    const int64_t w = std::min(kColBlock, C - c0);
    for (int64_t bt = 0; bt < B * T; ++bt) {
      const int64_t tok = tokens[bt];
      if (tok < lo || tok >= hi) continue;
      float* g = dwte + (tok - lo) * C + c0;
      const float* d = dout + bt * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) g[c] += d[c];
    }
  }
  if (dwpe != nullptr) {
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

void crossentropy_rowmax(float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid) {
  TS_CHECK(valid >= 0 && valid <= Vl) << "valid columns " << valid << " outside [0, " << Vl << "]";
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * Vl;  // (Vl)
    row_max[n] = valid > 0 ? detail::lane_max(valid, [&](int64_t i) { return x[i]; })
                           : -std::numeric_limits<float>::infinity();
  }
}

void crossentropy_sumexp_target(float* stats, const float* logits, const float* row_max, const int32_t* targets,
                                int64_t N, int64_t Vl, int64_t valid, int64_t lo) {
  TS_CHECK(valid >= 0 && valid <= Vl) << "valid columns " << valid << " outside [0, " << Vl << "]";
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * Vl;  // (Vl)
    float* s = stats + 2 * n;          // [sum exp, target logit - max]
    const int64_t t = targets[n];
    if (t < 0) {
      s[0] = s[1] = 0.0f;
      continue;
    }
    const float mx = row_max[n];
    s[0] = static_cast<float>(detail::lane_sum<double, 8>(valid, [&](int64_t i) { return detail::exp_vec(x[i] - mx); }));
    s[1] = t >= lo && t < lo + valid ? x[t - lo] - mx : 0.0f;
  }
}

void crossentropy_finish(float* losses, float* logits, const float* stats, const float* row_max,
                         const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo,
                         float dlogits_scale) {
  const bool write_grad = dlogits_scale != 0.0f;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* x = logits + n * Vl;  // (Vl)
    const int64_t t = targets[n];
    if (t < 0) {
      losses[n] = 0.0f;
      if (write_grad) {
#pragma omp simd
        for (int64_t v = 0; v < Vl; ++v) x[v] = 0.0f;
      }
      continue;
    }
    const double sum = stats[2 * n];
    losses[n] = static_cast<float>(std::log(sum) - static_cast<double>(stats[2 * n + 1]));
    if (!write_grad) continue;
    const float mx = row_max[n];
    const float scale = static_cast<float>(static_cast<double>(dlogits_scale) / sum);
#pragma omp simd
    for (int64_t v = 0; v < valid; ++v) x[v] = detail::exp_vec(x[v] - mx) * scale;
    for (int64_t v = valid; v < Vl; ++v) x[v] = 0.0f;
    if (t >= lo && t < lo + valid) x[t - lo] -= dlogits_scale;
  }
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
