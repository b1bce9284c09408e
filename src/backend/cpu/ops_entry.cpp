// The ops.h entry points of the kernels in TESSERA_CPU_KERNELS: each calls this process's level
// (dispatch.cpp). One indirect call per op; every op works on whole tensors, so it costs nothing.
// The workspace kernels (rope, attention) run on a workspace of the call's own, allocated each time:
// for tests and one-off calls; a CpuBackend passes its own, which only grows.
#include "backend/cpu/kernel_table.h"

namespace tessera::ops {
namespace {
const CpuKernels& k() { return active_cpu_kernels(); }
}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) {
  k().embedding_forward(out, tokens, wte, wpe, B, T, C);
}
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) {
  k().embedding_backward(dwte, dwpe, dout, tokens, B, T, C);
}
void embedding_forward_range(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                             int64_t T, int64_t C, int64_t lo, int64_t hi) {
  k().embedding_forward_range(out, tokens, wte, wpe, B, T, C, lo, hi);
}
void embedding_backward_range(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                              int64_t T, int64_t C, int64_t lo, int64_t hi) {
  k().embedding_backward_range(dwte, dwpe, dout, tokens, B, T, C, lo, hi);
}
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps) {
  k().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  k().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                     float eps) {
  k().rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  k().rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}
void gelu_forward(float* out, const float* inp, int64_t n) { k().gelu_forward(out, inp, n); }
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  k().gelu_backward(dinp, inp, dout, n);
}
void swiglu_forward(float* out, const float* inp, int64_t N, int64_t H) { k().swiglu_forward(out, inp, N, H); }
void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t N, int64_t H) {
  k().swiglu_backward(dinp, dout, inp, N, H);
}
void rope_forward(float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta) {
  CpuWorkspace ws;
  k().rope_forward(ws, qkv, B, T, NH, NKV, HS, theta);
}
void rope_backward(float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta) {
  CpuWorkspace ws;
  k().rope_backward(ws, dqkv, B, T, NH, NKV, HS, theta);
}
void rope_forward_at(float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS, float theta) {
  CpuWorkspace ws;
  k().rope_forward_at(ws, qkv, B, T, pos0, NH, NKV, HS, theta);
}
void rope_backward_at(float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                      float theta) {
  CpuWorkspace ws;
  k().rope_backward_at(ws, dqkv, B, T, pos0, NH, NKV, HS, theta);
}
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV,
                       int64_t HS) {
  CpuWorkspace ws;
  k().attention_forward(ws, out, lse, qkv, B, T, NH, NKV, HS);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
  CpuWorkspace ws;
  k().attention_backward(ws, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS);
}
void softmax_crossentropy(float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V,
                          float dlogits_scale) {
  k().softmax_crossentropy(losses, logits, targets, N, V, dlogits_scale);
}
void crossentropy_rowmax(float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid) {
  k().crossentropy_rowmax(row_max, logits, N, Vl, valid);
}
void crossentropy_sumexp_target(float* stats, const float* logits, const float* row_max, const int32_t* targets,
                                int64_t N, int64_t Vl, int64_t valid, int64_t lo) {
  k().crossentropy_sumexp_target(stats, logits, row_max, targets, N, Vl, valid, lo);
}
void crossentropy_finish(float* losses, float* logits, const float* stats, const float* row_max,
                         const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo,
                         float dlogits_scale) {
  k().crossentropy_finish(losses, logits, stats, row_max, targets, N, Vl, valid, lo, dlogits_scale);
}
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
  k().adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
}
double sum_of_squares(const float* x, int64_t n) { return k().sum_of_squares(x, n); }
void scale_inplace(float* x, int64_t n, float s) { k().scale_inplace(x, n, s); }

}  // namespace tessera::ops
