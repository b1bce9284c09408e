// Building blocks of the blockwise attention kernels: a small register-tiled matmul whose left
// operand is read with arbitrary strides (so blocks of qkv are used in place) and a vectorisable exp.
// (Their scratch is the backend's: CpuWorkspace's per-thread AlignedScratch, cpu_workspace.h.)
// Included inside a kernel level's region (kernel_isa_begin.h).
#pragma once
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/kernel_decls.h"

namespace tessera::ops::TESSERA_KERNEL_NS::attn {

// Queries and keys are processed in blocks of this many rows. 64 floats = four AVX-512 vectors, and
// a 64 x 64 score block (16 KiB) plus the Q/K/V blocks for HS = 64 stay within L1/L2.
constexpr int64_t kBlock = 64;

// gemm_bcast (declared in kernel_decls.h, tiled per level in attention_gemm.cpp): C(M,N) = A(M,K) *
// B(K,N), or C += A * B when accumulate. a(m,k) = A[m*sam + k*sak] (any strides, read one scalar at
// a time and broadcast), b(k,n) = B[k*ldb + n], c(m,n) = C[m*ldc + n] (rows
// contiguous, vectorised over n). The sum over k is formed in registers in increasing k (one fused
// multiply-add per term) and then added to C, so the result depends only on the values, never on
// strides, alignment or the level's vector width.

// exp(x) for softmax arguments (scores minus their running max or log-sum-exp, so x <= 0):
// detail::exp_vec's core with one exponent multiply and the +inf/NaN selects left out, which the
// attention inner loops notice. Within ~2 ulp of expf up to x = 88; returns exactly 0 below -87.3
// (no denormals), which also maps -inf (masked scores) to 0.
inline float fast_exp(float x) {
  float xc = x > -87.3f ? x : -87.3f;  // ternaries, not fmin/fmax: they map to vmaxps/vminps
  xc = xc < 88.0f ? xc : 88.0f;        // keeps n <= 127, so 2^n is one normal float
  const detail::ExpParts e = detail::exp_parts(xc);
  return x < -87.3f ? 0.0f : e.er * std::bit_cast<float>((e.n + 127) << 23);
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS::attn
