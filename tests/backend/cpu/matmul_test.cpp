// sgemm against a naive double product (odd shapes, transposes, alpha/beta), and the linear
// layer's forward/backward against a double reference and finite differences.
#include <cmath>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

TEST(Sgemm, MatchesNaiveOnOddShapesAndTransposes) {
  const int64_t M = 37, N = 53, K = 29;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Leading dimensions wider than the matrices, to exercise strides.
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      auto A = random_floats((ta ? K : M) * lda, 1);
      auto B = random_floats((tb ? N : K) * ldb, 2);
      auto C = random_floats(M * ldc, 3);
      const float alpha = 0.75f, beta = -1.5f;
      auto ref = naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      ops::sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      EXPECT_LT(rel_err(C, ref), kForwardTol) << "ta=" << ta << " tb=" << tb;
    }
}

TEST(Sgemm, EmptyInnerDimensionScalesC) {
  std::vector<float> A(1), B(1), C = {1.0f, 2.0f, 3.0f, 4.0f};
  ops::sgemm(false, false, 2, 2, 0, 1.0f, A.data(), 1, B.data(), 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  C.assign(4, std::nanf(""));  // beta = 0 overwrites, even NaN
  ops::sgemm(false, false, 2, 2, 0, 1.0f, A.data(), 1, B.data(), 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>(4, 0.0f)));
}

TEST(Matmul, ForwardMatchesNaiveOnOddShapes) {
  const int64_t N = 37, C = 29, OC = 53;
  auto inp = random_floats(N * C, 4);
  auto w = random_floats(OC * C, 5);
  auto b = random_floats(OC, 6);
  for (bool with_bias : {false, true}) {
    std::vector<float> out(N * OC, std::nanf(""));  // garbage that must be overwritten, not read
    ops::matmul_forward(out.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
    std::vector<double> ref(N * OC);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o) {
        double acc = with_bias ? b[o] : 0.0;
        for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(inp[n * C + c]) * w[o * C + c];
        ref[n * OC + o] = acc;
      }
    EXPECT_LT(rel_err(out, ref), kForwardTol) << "bias=" << with_bias;
  }
}

// Double reference of matmul_forward.
std::vector<double> matmul_ref(const std::vector<double>& inp, const std::vector<double>& w,
                               const std::vector<double>& b, int64_t N, int64_t C, int64_t OC) {
  std::vector<double> out(N * OC);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = b[o];
      for (int64_t c = 0; c < C; ++c) acc += inp[n * C + c] * w[o * C + c];
      out[n * OC + o] = acc;
    }
  return out;
}

TEST(Matmul, BackwardMatchesFiniteDifferences) {
  const int64_t N = 6, C = 10, OC = 7;
  auto inp = random_floats(N * C, 7);
  auto w = random_floats(OC * C, 8);
  auto b = random_floats(OC, 9);
  auto R = random_floats(N * OC, 10);
  auto inp_d = to_double(inp), w_d = to_double(w), b_d = to_double(b);

  std::vector<float> out(N * OC);
  ops::matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
  EXPECT_LT(rel_err(out, matmul_ref(inp_d, w_d, b_d, N, C, OC)), kForwardTol);

  std::vector<float> dinp(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  ops::matmul_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), N, C, OC);

  auto loss = [&] { return weighted_sum(matmul_ref(inp_d, w_d, b_d, N, C, OC), R); };
  EXPECT_LT(rel_err(dinp, numeric_grad(inp_d, loss)), kGradTol);
  EXPECT_LT(rel_err(dw, numeric_grad(w_d, loss)), kGradTol);
  EXPECT_LT(rel_err(db, numeric_grad(b_d, loss)), kGradTol);
}

TEST(Matmul, BackwardAccumulatesAndSkipsNullOutputs) {
  const int64_t N = 37, C = 29, OC = 53;
  auto inp = random_floats(N * C, 11);
  auto w = random_floats(OC * C, 12);
  auto dout = random_floats(N * OC, 13);
  std::vector<float> dinp(N * C), dw(OC * C), db(OC);
  expect_accumulates({&dinp, &dw, &db}, [&] {
    ops::matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  });
  // Null dinp/dbias: dweight alone is still computed, and equals the one from the full call.
  std::vector<float> dw_full(OC * C, 0.0f), dw_only(OC * C, 0.0f), dinp0(N * C, 0.0f), db0(OC, 0.0f);
  ops::matmul_backward(dinp0.data(), dw_full.data(), db0.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  ops::matmul_backward(nullptr, dw_only.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  EXPECT_EQ(dw_full, dw_only);
}

}  // namespace
}  // namespace tessera::test
