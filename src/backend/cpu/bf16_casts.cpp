// bf16 storage ops: the casts ZeRO and the bf16 compressor used to write as loops. The casts run
// serially because they may work in place (2-byte and 4-byte elements over the same memory).
#include "backend/ops.h"
#include "core/dtype.h"

namespace tessera::ops {

void cast_f32_to_bf16(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);  // element i lands where <= i were read
}

void cast_bf16_to_f32(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = n - 1; i >= 0; --i) out[i] = bf16_to_f32(in[i]);  // back to front: in place safe
}

void sub_bf16(float* out, const float* x, const uint16_t* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] - bf16_to_f32(y[i]);
}

void accumulate_bf16(float* out, float scale, const uint16_t* in, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] += scale * bf16_to_f32(in[i]);
}

}  // namespace tessera::ops
