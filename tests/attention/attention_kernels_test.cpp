// Tests of the attention building blocks: the strided-broadcast matmul and the vectorisable exp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/attention_kernels.h"

namespace tessera::test {
namespace {

using namespace ops::attn;

TEST(AttentionKernels, GemmMatchesPlainLoops) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Odd sizes cover the row remainder (1..3) and the column tail (masks of 1..16 lanes, >64 columns).
  for (int64_t M : {1, 2, 3, 4, 7, 64}) {
    for (int64_t N : {1, 5, 16, 24, 64, 70, 129}) {
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
              ASSERT_NEAR(C[i], C2[i], 1e-5f * (1 + std::abs(C2[i])))
                  << "M=" << M << " N=" << N << " K=" << K << " i=" << i;
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
