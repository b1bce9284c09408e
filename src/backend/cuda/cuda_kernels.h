// The CUDA kernels of the op contract (backend/ops.h), one launcher per op: the same parameters as the
// ops:: function, after a Launch that says where it runs. A launcher enqueues its kernels on the
// stream and returns without waiting; every pointer is memory the device can read (device memory of
// the CudaBackend, or pinned host memory in tests). Semantics, layouts and the accumulate (+=)
// convention are ops.h's; the CPU kernels are the oracle (tests/backend/cross_backend_ops_test.cpp).
//
// Determinism: every output element has one writer and a fixed summation order (no atomics in
// reductions), so two runs give the same bits.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/ops.h"

namespace tessera::cuda {

// Device scratch of one backend: a buffer that only grows. Stream-ordered: what a launcher takes is
// valid for the kernels it enqueues on its stream, until the next launcher takes scratch.
class DeviceScratch {
 public:
  virtual ~DeviceScratch() = default;
  virtual void* take(size_t bytes) = 0;
};

struct Launch {
  cudaStream_t stream = nullptr;
  DeviceScratch* scratch = nullptr;
  cublasHandle_t blas = nullptr;  // bound to `stream`
  // 8 bytes of device memory and of pinned host memory for a result the host reads back.
  void* reply_device = nullptr;
  void* reply_host = nullptr;
};

// Blocks of 256 threads covering n items.
inline unsigned blocks_for(int64_t n, int threads = 256) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// ---- element-wise, casts, the step's loss, local SGD (elementwise.cu) ----
void fill(Launch l, float* x, int64_t n, float value);
void copy(Launch l, float* dst, const float* src, int64_t n);
void add(Launch l, float* out, const float* y, const float* x, int64_t n);
void axpy(Launch l, float* y, float a, const float* x, int64_t n);
void sub(Launch l, float* out, const float* a, const float* b, int64_t n);
void scale_inplace(Launch l, float* x, int64_t n, float s);
void cast_f32_to_bf16(Launch l, uint16_t* out, const float* in, int64_t n);
void cast_bf16_to_f32(Launch l, float* out, const uint16_t* in, int64_t n);
void sub_bf16(Launch l, float* out, const float* x, const uint16_t* y, int64_t n);
void accumulate_bf16(Launch l, float* out, float scale, const uint16_t* in, int64_t n);
void round_to_precision(Launch l, float* out, const float* in, int64_t n, ops::MatmulPrecision p);
void fill_f64(Launch l, double* x, int64_t n, double value);
void accumulate_mean_loss(Launch l, double* loss_sum, const float* losses, int64_t n, int64_t valid);
void outer_sgd_update(Launch l, float* anchor, float* velocity, const float* delta, int64_t n, float lr,
                      float momentum, bool nesterov);
void adamw_update(Launch l, float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step, float grad_scale);

// ---- reductions whose result the host reads (reduce.cu) ----
// Into device memory (no wait):
void sum_of_squares(Launch l, double* result, const float* x, int64_t n);
void count_nonfinite(Launch l, int64_t* result, const float* x, int64_t n);
// The ops of the contract: through the reply buffers, waiting for the stream.
double sum_of_squares(Launch l, const float* x, int64_t n);
int64_t count_nonfinite(Launch l, const float* x, int64_t n);

// ---- matmuls on cuBLAS (matmul.cpp): f32 without TF32; bf16 / fp16 round their operands first ----
void sgemm(Launch l, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void matmul_forward(Launch l, float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC);
void matmul_backward(Launch l, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC);
void matmul_forward_lowp(Launch l, ops::MatmulPrecision p, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, int64_t OC);
void matmul_backward_lowp(Launch l, ops::MatmulPrecision p, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC);

// ---- model ops (model_ops.cu) ----
void embedding_forward_range(Launch l, float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                             int64_t T, int64_t C, int64_t lo, int64_t hi);
void embedding_backward_range(Launch l, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                              int64_t T, int64_t C, int64_t lo, int64_t hi);
void layernorm_forward(Launch l, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps);
void layernorm_backward(Launch l, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
void rmsnorm_forward(Launch l, float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                     float eps);
void rmsnorm_backward(Launch l, float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C);
void gelu_forward(Launch l, float* out, const float* inp, int64_t n);
void gelu_backward(Launch l, float* dinp, const float* inp, const float* dout, int64_t n);
void swiglu_forward(Launch l, float* out, const float* inp, int64_t N, int64_t H);
void swiglu_backward(Launch l, float* dinp, const float* dout, const float* inp, int64_t N, int64_t H);
void rope_forward_at(Launch l, float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                     float theta);
void rope_backward_at(Launch l, float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                      float theta);
void matmul_bias_backward(Launch l, float* dbias, const float* dout, int64_t N, int64_t OC);  // dbias += sum_rows
void bias_broadcast(Launch l, float* out, const float* bias, int64_t N, int64_t OC);  // out(N,OC) = bias per row
// The whole-vocabulary embedding and position-0 RoPE: the range / _at ops over everything.
void embedding_forward(Launch l, float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                       int64_t T, int64_t C);
void embedding_backward(Launch l, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                        int64_t T, int64_t C);
void rope_forward(Launch l, float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta);
void rope_backward(Launch l, float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta);

// ---- cross-entropy, whole and vocabulary-parallel (cross_entropy.cu) ----
void softmax_crossentropy(Launch l, float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V,
                          float dlogits_scale);
void crossentropy_rowmax(Launch l, float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid);
void crossentropy_sumexp_target(Launch l, float* stats, const float* logits, const float* row_max,
                                const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo);
void crossentropy_finish(Launch l, float* losses, float* logits, const float* stats, const float* row_max,
                         const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo,
                         float dlogits_scale);

// ---- attention (attention.cu) ----
void attention_forward(Launch l, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t NKV, int64_t HS);
void attention_backward(Launch l, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS);
void attention_block_forward(Launch l, float* out, float* lse, const float* q, int64_t q_stride, const float* k,
                             const float* v, int64_t kv_stride, int64_t B, int64_t Tq, int64_t Tk, int64_t NH,
                             int64_t NKV, int64_t HS, ops::BlockMask mask);
void attention_block_delta(Launch l, float* delta, const float* dout, const float* out, int64_t B, int64_t Tq,
                           int64_t NH, int64_t HS);
void attention_block_backward(Launch l, float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride,
                              const float* dout, const float* q, int64_t q_stride, const float* k, const float* v,
                              int64_t kv_stride, const float* lse, const float* delta, int64_t B, int64_t Tq,
                              int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, ops::BlockMask mask);

// ---- gather / scatter (gather_scatter.cu) ----
void gather(Launch l, float* out, const float* x, const int32_t* idx, int64_t k);
void scatter_add(Launch l, float* out, float scale, const int32_t* idx, const float* val, int64_t k);
void scatter_fill(Launch l, float* out, const int32_t* idx, int64_t k, float value);
void nonzero_rows(Launch l, int32_t* mask, const float* x, int64_t rows, int64_t cols);
void gather_rows(Launch l, float* out, const float* x, const int64_t* idx, int64_t k, int64_t cols);
void scatter_add_rows(Launch l, float* out, const int64_t* idx, const float* x, int64_t k, int64_t cols);

// ---- mixture-of-experts routing (moe_routing.cu) ----
void moe_router_forward(Launch l, float* probs, float* lse, int32_t* topk_idx, float* topk_w, const float* logits,
                        int64_t N, int64_t E, int64_t K);
void moe_dispatch_plan(Launch l, int64_t* slot_token, int32_t* slot_of, int32_t* counts, int32_t* routed,
                       const int32_t* topk_idx, int64_t N, int64_t E, int64_t K, int64_t capacity);
void moe_combine_forward(Launch l, float* out, const float* y, const int32_t* slot_of, const float* topk_w, int64_t N,
                         int64_t K, int64_t C);
void moe_combine_backward(Launch l, float* dy, float* dtopk_w, const float* dout, const float* y,
                          const int32_t* slot_of, const float* topk_w, int64_t N, int64_t K, int64_t C);
void moe_router_stats(Launch l, float* stats, const float* probs, const float* lse, const int32_t* routed, int64_t N,
                      int64_t E);
void moe_router_backward(Launch l, float* dlogits, const float* dtopk_w, const float* probs, const float* lse,
                         const int32_t* topk_idx, const float* topk_w, const int32_t* routed, int64_t N, int64_t E,
                         int64_t K, float aux_coef, float z_coef, float scale);

// ---- gradient compression (compression.cu) ----
void topk_select(Launch l, int32_t* idx, int32_t* scratch, const float* m, int64_t n, int64_t k);
void onebit_compress(Launch l, float* scales, uint32_t* words, float* residual, const float* m, int64_t n,
                     int64_t chunk);
void onebit_accumulate(Launch l, float* out, float scale, const float* scales, const uint32_t* words, int64_t n,
                       int64_t chunk);
void orthonormalise_columns(Launch l, float* a, int64_t rows, int64_t r);

}  // namespace tessera::cuda
