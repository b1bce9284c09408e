// Elementwise activations: GELU (tanh approximation, as GPT-2) and SwiGLU (LLaMA's gated MLP).
// Both go through sigmoids built on detail::exp_vec so that the loops vectorise.
#include "backend/ops.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/cpu_util.h"

namespace tessera::ops::TESSERA_KERNEL_NS {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCoeff = 0.044715f;

// 1 / (1 + e^-z): saturates cleanly to 0 and 1 (exp_vec gives inf / 0 at the ends).
inline float sigmoid(float z) { return 1.0f / (1.0f + detail::exp_vec(-z)); }
}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
    // 0.5 * (1 + tanh(u)) = sigmoid(2u): no cancellation near u = 0 and no tanhf call.
    out[i] = x * sigmoid(2.0f * u);
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
    const float s = sigmoid(2.0f * u);  // = 0.5 * (1 + tanh(u)); 1 - tanh(u)^2 = 4 s (1 - s)
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
    const float grad = s + 2.0f * x * s * (1.0f - s) * du_dx;
    dinp[i] += grad * dout[i];
  }
}

void swiglu_forward(float* out, const float* inp, int64_t N, int64_t H) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * H;  // (H)
    const float* up = gate + H;           // (H)
    float* o = out + n * H;               // (H)
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      const float g = gate[h];
      o[h] = g * sigmoid(g) * up[h];
    }
  }
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t N, int64_t H) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * H;
    const float* up = gate + H;
    float* dgate = dinp + n * 2 * H;
    float* dup = dgate + H;
    const float* d = dout + n * H;
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      const float g = gate[h];
      const float sig = sigmoid(g);
      // d silu(g)/dg = sig * (1 + g * (1 - sig))
      dgate[h] += d[h] * up[h] * sig * (1.0f + g * (1.0f - sig));
      dup[h] += d[h] * g * sig;
    }
  }
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
