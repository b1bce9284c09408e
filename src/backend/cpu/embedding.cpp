// Token (+ optional learned position) embedding. The backward scatter is deterministic without
// atomics: each thread owns a slice of channels and walks the tokens in order.
#include <limits>

#include "backend/ops.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

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
  // The whole vocabulary is one range: one loop serves the single-process and the vocabulary-parallel
  // lookup (each row still sums its tokens in order, so results do not depend on the thread count).
  embedding_backward_range(dwte, dwpe, dout, tokens, B, T, C, 0, std::numeric_limits<int64_t>::max());
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
