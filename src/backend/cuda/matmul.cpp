// sgemm and the linear layer on cuBLAS. Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T,
// so each call passes the operands swapped. The f32 path keeps cuBLAS's default math (no TF32: the
// exact path the CPU oracle is held to). bf16 / fp16 round both operands into scratch and multiply the
// rounded values in f32, the CPU's emulated path (autocast semantics); a tensor-core path is the next step.
#include <cublas_v2.h>

#include "backend/cuda/cuda_kernels.h"
#include "core/log.h"

namespace tessera::cuda {
namespace {

void check(cublasStatus_t st, const char* what) {
  TS_CHECK(st == CUBLAS_STATUS_SUCCESS) << "cuBLAS " << what << " failed with status " << static_cast<int>(st);
}

void gemm_f32(Launch l, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
              int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = beta * C, with beta == 0 clearing whatever C held (NaN included)
    for (int64_t i = 0; i < M; ++i) {
      if (beta == 0.0f) fill(l, C + i * ldc, N, 0.0f);
      else scale_inplace(l, C + i * ldc, N, beta);
    }
    return;
  }
  check(cublasSgemm_64(l.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                       &alpha, B, ldb, A, lda, &beta, C, ldc),
        "sgemm");
}

// rows x cols (leading dimension ld) rounded into a compact buffer.
void round_matrix(Launch l, float* out, const float* in, int64_t rows, int64_t cols, int64_t ld,
                  ops::MatmulPrecision p) {
  if (ld == cols) {
    round_to_precision(l, out, in, rows * cols, p);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) round_to_precision(l, out + r * cols, in + r * ld, cols, p);
}

void gemm_lowp(Launch l, ops::MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (p == ops::MatmulPrecision::fp32 || M == 0 || N == 0 || K == 0) {
    gemm_f32(l, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  float* a = static_cast<float*>(l.scratch->take(static_cast<size_t>(M * K + K * N) * sizeof(float)));
  float* b = a + M * K;
  const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  round_matrix(l, a, A, a_rows, a_cols, lda, p);
  round_matrix(l, b, B, b_rows, b_cols, ldb, p);
  gemm_f32(l, trans_a, trans_b, M, N, K, alpha, a, a_cols, b, b_cols, beta, C, ldc);
}

}  // namespace

void sgemm(Launch l, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_f32(l, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void matmul_forward_lowp(Launch l, ops::MatmulPrecision p, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, int64_t OC) {
  // out = inp @ weight^T (+ bias): seed out with the bias and add with beta = 1, as the CPU does.
  float beta = 0.0f;
  if (bias != nullptr) {
    bias_broadcast(l, out, bias, N, OC);
    beta = 1.0f;
  }
  gemm_lowp(l, p, false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward_lowp(Launch l, ops::MatmulPrecision p, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  if (dinp != nullptr) gemm_lowp(l, p, false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
  if (dweight != nullptr) gemm_lowp(l, p, true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr) matmul_bias_backward(l, dbias, dout, N, OC);  // the f32 column sum of dout
}

void matmul_forward(Launch l, float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC) {
  matmul_forward_lowp(l, ops::MatmulPrecision::fp32, out, inp, weight, bias, N, C, OC);
}

void matmul_backward(Launch l, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  matmul_backward_lowp(l, ops::MatmulPrecision::fp32, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

}  // namespace tessera::cuda
