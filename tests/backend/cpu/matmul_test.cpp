// sgemm against a naive double product (odd shapes, transposes, alpha/beta), and the linear
// layer's forward/backward against a double reference and finite differences.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/sgemm_padded.h"
#include "backend/cpu_isa.h"
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

// ---- the padded transposed A (sgemm_padded.h) ----

TEST(SgemmPadded, PadsOnlyATransposedOperandWhoseRowsAlias) {
  using ops::detail::pads_transposed_a;
  EXPECT_TRUE(pads_transposed_a(true, true, false, 256, 2048, 1024));   // a 4 x 256 layer's weight gradient
  EXPECT_TRUE(pads_transposed_a(true, true, false, 256, 4096, 3072));   // any multiple of 4 KiB
  EXPECT_FALSE(pads_transposed_a(false, true, false, 256, 2048, 1024)); // oneDNN's AVX-512 kernels
  EXPECT_FALSE(pads_transposed_a(true, true, false, 384, 2048, 1024));  // wide enough B: full speed
  EXPECT_FALSE(pads_transposed_a(true, true, false, 256, 2048, 1040));  // rows already apart
  EXPECT_FALSE(pads_transposed_a(true, false, false, 256, 2048, 1024)); // A read along its rows
  EXPECT_FALSE(pads_transposed_a(true, true, true, 256, 2048, 1024));
  using ops::detail::pads_transposed_b;
  EXPECT_TRUE(pads_transposed_b(false, true, 256, 1024, 1024));   // a 1024 -> 256 layer's forward
  EXPECT_TRUE(pads_transposed_b(false, true, 768, 3072, 3072));   // GPT-2's MLP projection
  EXPECT_FALSE(pads_transposed_b(false, true, 4096, 1024, 1024)); // over 16 MiB padded
  EXPECT_FALSE(pads_transposed_b(false, true, 256, 768, 768));
  EXPECT_FALSE(pads_transposed_b(false, false, 256, 1024, 1024));
  EXPECT_FALSE(pads_transposed_b(true, true, 256, 1024, 1024));
  // An odd number of 64-byte lines per row.
  EXPECT_EQ(ops::detail::unaliased_ld(1024), 1040);
  EXPECT_EQ(ops::detail::unaliased_ld(1040), 1040);
  EXPECT_EQ(ops::detail::unaliased_ld(1000), 1008);
  EXPECT_EQ(ops::detail::unaliased_ld(16), 16);
  // A buffer's own row stride: changed only where its rows would alias.
  EXPECT_EQ(ops::detail::unaliased_stride(1024), 1040);
  EXPECT_EQ(ops::detail::unaliased_stride(3072), 3088);
  EXPECT_EQ(ops::detail::unaliased_stride(1000), 1000);
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

// Through a CpuBackend, where the copies happen (A's at the avx2 level: Name@avx2 caps oneDNN too), the
// product has the bits of the plain sgemm: A^T B in several slabs and a last narrower one, A B^T, a
// linear layer's forward and backward; alpha and beta.
TEST(SgemmPadded, TheCopyGivesThePlainSgemmsBits) {
  if (active_cpu_isa() == CpuIsa::avx2) {
    EXPECT_TRUE(ops::detail::onednn_runs_avx2()) << "oneDNN not capped with the kernels";
  }
  CpuBackend be;
  struct Case {
    bool ta, tb;
    int64_t M, N, K, lda, ldb;
  };
  // K = 8192: slabs of 512 columns, so M = 1200 takes 512 + 512 + 176.
  for (const Case c : {Case{true, false, 1024, 256, 512, 1024, 256}, Case{true, false, 1200, 256, 8192, 2048, 256},
                       Case{false, true, 300, 256, 1024, 1024, 1024}, Case{false, true, 64, 768, 3000, 3000, 3072}}) {
    const auto A = random_floats(static_cast<size_t>((c.ta ? c.K : c.M) * c.lda), 11);
    const auto B = random_floats(static_cast<size_t>((c.tb ? c.N : c.K) * c.ldb), 12);
    auto plain = random_floats(static_cast<size_t>(c.M * c.N), 13), padded = plain;
    ops::sgemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), c.lda, B.data(), c.ldb, 1.25f, plain.data(), c.N);
    be.sgemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), c.lda, B.data(), c.ldb, 1.25f, padded.data(), c.N);
    EXPECT_EQ(differing(plain, padded), 0u) << "ta=" << c.ta << " M=" << c.M << " N=" << c.N << " K=" << c.K;
  }
  // A 1024 -> 256 linear layer over 2048 rows (both copies' shapes): forward and backward against sgemm.
  const int64_t N = 2048, C = 1024, OC = 256;
  const auto inp = random_floats(static_cast<size_t>(N * C), 14), w = random_floats(static_cast<size_t>(OC * C), 15);
  const auto dout = random_floats(static_cast<size_t>(N * OC), 16);
  std::vector<float> out(static_cast<size_t>(N * OC)), out_ref(out.size(), 0.0f);
  be.matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, C, OC);
  ops::sgemm(false, true, N, OC, C, 1.0f, inp.data(), C, w.data(), C, 0.0f, out_ref.data(), OC);
  EXPECT_EQ(differing(out, out_ref), 0u) << "forward";
  std::vector<float> dw(static_cast<size_t>(OC * C), 0.0f), dw_ref = dw;
  be.matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  ops::sgemm(true, false, OC, C, N, 1.0f, dout.data(), OC, inp.data(), C, 1.0f, dw_ref.data(), C);
  EXPECT_EQ(differing(dw, dw_ref), 0u) << "weight gradient";
}

// The emulated bf16 matmul rounds A straight into the padded layout: the bits of rounding both
// operands and multiplying them with the plain sgemm.
TEST(SgemmPadded, TheEmulatedBf16MatmulGivesTheBitsOfRoundedOperands) {
  CpuBackend be;
  be.set_bf16_gemm_native(false);
  auto rounded = [](const std::vector<float>& v) {
    std::vector<float> r(v.size());
    ops::round_to_precision(r.data(), v.data(), static_cast<int64_t>(v.size()), ops::MatmulPrecision::bf16);
    return r;
  };
  const int64_t M = 1024, N = 256, K = 512;
  // A^T B with A (K, M), and A B^T with B (N, M): each with the rows of A or B 4 KiB apart.
  const auto A = random_floats(static_cast<size_t>(K * M), 21), B = random_floats(static_cast<size_t>(K * N), 22);
  const auto Bt = random_floats(static_cast<size_t>(N * M), 23);
  for (const bool tb : {false, true}) {
    const int64_t rows = tb ? K : M, inner = tb ? M : K;
    const std::vector<float>& b = tb ? Bt : B;
    std::vector<float> plain(static_cast<size_t>(rows * N), 0.0f), emulated = plain;
    ops::sgemm(!tb, tb, rows, N, inner, 1.0f, rounded(A).data(), M, rounded(b).data(), tb ? M : N, 0.0f, plain.data(), N);
    be.sgemm_lowp(ops::MatmulPrecision::bf16, !tb, tb, rows, N, inner, 1.0f, A.data(), M, b.data(), tb ? M : N, 0.0f,
                  emulated.data(), N);
    EXPECT_EQ(differing(plain, emulated), 0u) << (tb ? "A B^T" : "A^T B");
  }
}

}  // namespace
}  // namespace tessera::test
