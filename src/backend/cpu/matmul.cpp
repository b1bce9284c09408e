// sgemm on oneDNN's row-major dnnl_sgemm, and the linear layer (matmul_forward/backward) through the
// workspace versions of sgemm_padded.h.
#include <oneapi/dnnl/dnnl.h>

#include "backend/cpu/sgemm_padded.h"
#include "backend/ops.h"
#include "core/log.h"

namespace tessera::ops {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // oneDNN leaves C untouched here; the definition says C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C,
                                ldc);
  TS_CHECK(st == dnnl_success) << "dnnl_sgemm failed with status " << static_cast<int>(st) << " for trans_a="
                               << trans_a << " trans_b=" << trans_b << " M=" << M << " N=" << N << " K=" << K
                               << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc;
}

// The linear layer on a workspace of the call's own (sgemm_padded.cpp: the same bits as on a backend's).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                    int64_t OC) {
  CpuWorkspace ws;
  matmul_forward(ws, out, inp, weight, bias, N, C, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  CpuWorkspace ws;
  matmul_backward(ws, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

}  // namespace tessera::ops
