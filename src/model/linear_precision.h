// The linear layers at the model's precision, shared by the transformer's passes (internal to
// model/): fp32 calls the f32 ops themselves (bitwise the f32 model); bf16 / fp16 round the operands
// and accumulate in f32 (backend/ops.h, reduced-precision matmul). Null pointers skip as in ops.h.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/precision.h"

namespace tessera {

inline void linear_forward(Backend& be, Precision p, float* out, const float* inp, const float* weight,
                           const float* bias, int64_t N, int64_t C, int64_t OC) {
  if (p == Precision::fp32) be.matmul_forward(out, inp, weight, bias, N, C, OC);
  else be.matmul_forward_lowp(p, out, inp, weight, bias, N, C, OC);
}

inline void linear_backward(Backend& be, Precision p, float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  if (p == Precision::fp32) be.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  else be.matmul_backward_lowp(p, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

}  // namespace tessera
