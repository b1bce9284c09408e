// Tests of the attention building blocks: the strided-broadcast matmul and the vectorisable exp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/kernel_table.h"

namespace tessera::test {
namespace {

using ops::baseline::attn::fast_exp;

// The plain loops gemm_bcast must match: the same sum in the same order (one fused multiply-add per
// k, in increasing k, then one add to C), so every level gives exactly these bits.
void gemm_bcast_reference(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam, int64_t sak,
                          const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    for (int64_t n = 0; n < N; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s = std::fma(A[m * sam + k * sak], B[k * ldb + n], s);
      c[n] = accumulate ? c[n] + s : s;
    }
  }
}

TEST(AttentionKernels, GemmMatchesPlainLoops) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Odd sizes cover the row remainders (AVX2 tiles of 6 rows, AVX-512 of 4) and the column tails
  // (masks of 1..8 and 1..16 lanes, more than one panel), at every level this CPU can run.
  for (CpuIsa isa : kCpuIsaLevels) {
    if (!cpu_isa_supported(isa, detect_cpu_features())) continue;
    const ops::GemmBcastFn* gemm_bcast = ops::cpu_kernels(isa).gemm_bcast;
    for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 13, 64}) {
      for (int64_t N : {1, 5, 8, 9, 16, 17, 24, 64, 70, 129}) {
        for (int64_t K : {1, 8, 37}) {
          for (bool transposed_a : {false, true}) {
            for (bool acc : {false, true}) {
              const int64_t sam = transposed_a ? 1 : K + 3, sak = transposed_a ? M + 2 : 1;
              std::vector<float> A((M + 2) * (K + 3) + 8), B(K * (N + 5)), C((M) * (N + 7)), C2;
              for (auto& x : A) x = dist(gen);
              for (auto& x : B) x = dist(gen);
              for (auto& x : C) x = dist(gen);
              C2 = C;
              gemm_bcast(M, N, K, A.data(), sam, sak, B.data(), N + 5, C.data(), N + 7, acc);
              gemm_bcast_reference(M, N, K, A.data(), sam, sak, B.data(), N + 5, C2.data(), N + 7, acc);
              for (size_t i = 0; i < C.size(); ++i)
                ASSERT_EQ(C[i], C2[i])
                    << cpu_isa_name(isa) << " M=" << M << " N=" << N << " K=" << K << " i=" << i;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, FastExpIsAccurate) {
  for (float x = -87.0f; x <= 10.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    ASSERT_NEAR(fast_exp(x), want, 3e-7 * want) << x;
  }
  EXPECT_EQ(fast_exp(-INFINITY), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

}  // namespace
}  // namespace tessera::test
