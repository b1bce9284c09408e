// Reduced-precision matmul: rounding (bf16 / fp16 round-to-nearest-even, NaN, overflow), sgemm_lowp
// and the linear layer against a double-precision product of the ROUNDED operands, on both bf16
// kernels (native oneDNN where available, emulated: CpuBackend's bf16 switch), and fp32 dispatching
// bitwise to the f32 ops.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

using ops::MatmulPrecision;

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

float round1(float x, MatmulPrecision p) {
  float y;
  ops::round_to_precision(&y, &x, 1, p);
  return y;
}

std::vector<float> rounded(const std::vector<float>& v, MatmulPrecision p) {
  std::vector<float> out(v.size());
  ops::round_to_precision(out.data(), v.data(), static_cast<int64_t>(v.size()), p);
  return out;
}

TEST(RoundToPrecision, Bf16RoundsToNearestEven) {
  const MatmulPrecision p = MatmulPrecision::bf16;
  EXPECT_EQ(round1(1.0f, p), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even mantissa (1).
  EXPECT_EQ(round1(1.0f + 0x1p-8f, p), 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(round1(1.0f + 3 * 0x1p-8f, p), 1.0f + 0x1p-6f);
  // Just above the halfway point rounds up.
  EXPECT_EQ(round1(from_bits(0x3f808001u), p), from_bits(0x3f810000u));
  EXPECT_EQ(round1(-1.0f - 3 * 0x1p-8f, p), -1.0f - 0x1p-6f);
  // Largest finite f32 overflows to inf; inf and NaN survive.
  EXPECT_TRUE(std::isinf(round1(std::numeric_limits<float>::max(), p)));
  EXPECT_TRUE(std::isinf(round1(std::numeric_limits<float>::infinity(), p)));
  EXPECT_TRUE(std::isnan(round1(std::nanf(""), p)));
  EXPECT_TRUE(std::isnan(round1(from_bits(0x7f800001u), p)));  // signalling NaN with low payload only
  // Every result has a zero low half.
  for (float x : random_floats(4096, 7, -1e3f, 1e3f)) EXPECT_EQ(bits(round1(x, p)) & 0xffffu, 0u);
}

TEST(RoundToPrecision, Fp16RoundsToNearestEvenAndOverflows) {
  const MatmulPrecision p = MatmulPrecision::fp16;
  EXPECT_EQ(round1(1.0f + 0x1p-11f, p), 1.0f);                  // tie to even
  EXPECT_EQ(round1(1.0f + 3 * 0x1p-11f, p), 1.0f + 0x1p-9f);    // tie to even (up)
  EXPECT_EQ(round1(65504.0f, p), 65504.0f);                     // largest half
  EXPECT_TRUE(std::isinf(round1(65520.0f, p)));                 // rounds past it
  EXPECT_EQ(round1(0x1p-24f, p), 0x1p-24f);                     // smallest subnormal half
  EXPECT_EQ(round1(0x1p-26f, p), 0.0f);
  // The vector body (16 at a time) and the scalar tail agree.
  auto v = random_floats(1000 + 7, 8, -100.f, 100.f);
  auto r = rounded(v, p);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(r[i], static_cast<float>(static_cast<_Float16>(v[i])));
}

TEST(RoundToPrecision, Fp32IsACopy) {
  auto v = random_floats(100, 9);
  EXPECT_EQ(rounded(v, MatmulPrecision::fp32), v);
}

// f32 accumulation of exact products: ~1e-7 relative; far from the bf16 (4e-3) or fp16 (5e-4)
// rounding of the operands themselves, so this tolerance tells "rounded then f32" from "unrounded".
constexpr double kLowpTol = 1e-5;

void check_gemm_against_rounded_reference(MatmulPrecision p, CpuBackend& be) {
  const int64_t M = 37, N = 53, K = 129;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f, -1.5f}) {
        const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
        auto A = random_floats((ta ? K : M) * lda, 1);
        auto B = random_floats((tb ? N : K) * ldb, 2);
        auto C = random_floats(M * ldc, 3);
        const float alpha = 0.75f;
        auto ref = naive_gemm(ta, tb, M, N, K, alpha, rounded(A, p), lda, rounded(B, p), ldb, beta, C, ldc);
        auto unrounded = naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        be.sgemm_lowp(p, ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
        EXPECT_LT(rel_err(C, ref), kLowpTol) << "ta=" << ta << " tb=" << tb << " beta=" << beta;
        // The rounding is really there: the unrounded product is much further away.
        EXPECT_GT(rel_err(C, unrounded), 10 * kLowpTol) << "ta=" << ta << " tb=" << tb;
      }
}

TEST(SgemmLowp, Bf16NativeOrDefaultMatchesRoundedReference) {
  CpuBackend be;
  check_gemm_against_rounded_reference(MatmulPrecision::bf16, be);
}

TEST(SgemmLowp, Bf16EmulatedMatchesRoundedReference) {
  CpuBackend be;
  be.set_bf16_gemm_native(false);
  EXPECT_EQ(be.bf16_gemm_kernel(), "emulated");
  check_gemm_against_rounded_reference(MatmulPrecision::bf16, be);
}

TEST(SgemmLowp, Fp16MatchesRoundedReference) {
  CpuBackend be;
  check_gemm_against_rounded_reference(MatmulPrecision::fp16, be);
}

// The switch is the backend's: forbidding the native kernel on one leaves another as it was.
TEST(SgemmLowp, TheBf16SwitchBelongsToOneBackend) {
  CpuBackend a, b;
  const std::string kernel = b.bf16_gemm_kernel();
  a.set_bf16_gemm_native(false);
  EXPECT_FALSE(a.bf16_gemm_native());
  EXPECT_TRUE(b.bf16_gemm_native());
  EXPECT_EQ(a.bf16_gemm_kernel(), "emulated");
  EXPECT_EQ(b.bf16_gemm_kernel(), kernel);
  a.set_bf16_gemm_native(true);
  EXPECT_EQ(a.bf16_gemm_kernel(), kernel);
}

TEST(SgemmLowp, NativeAndEmulatedBf16AgreeToF32Summation) {
  const int64_t M = 64, N = 96, K = 768;
  auto A = random_floats(M * K, 11), B = random_floats(N * K, 12);
  std::vector<float> c1(M * N), c2(M * N);
  CpuBackend native, emulated;
  emulated.set_bf16_gemm_native(false);
  native.sgemm_lowp(MatmulPrecision::bf16, false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, c1.data(), N);
  emulated.sgemm_lowp(MatmulPrecision::bf16, false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, c2.data(), N);
  EXPECT_LT(rel_err(c1, c2), kLowpTol) << "kernel " << native.bf16_gemm_kernel();
}

TEST(SgemmLowp, Fp32IsBitwiseSgemm) {
  const int64_t M = 33, N = 41, K = 57;
  auto A = random_floats(M * K, 1), B = random_floats(K * N, 2), C0 = random_floats(M * N, 3);
  auto c1 = C0, c2 = C0;
  ops::sgemm(false, false, M, N, K, 0.5f, A.data(), K, B.data(), N, 1.f, c1.data(), N);
  ops::sgemm_lowp(MatmulPrecision::fp32, false, false, M, N, K, 0.5f, A.data(), K, B.data(), N, 1.f, c2.data(), N);
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0);
}

TEST(SgemmLowp, Fp16OverflowGivesInf) {
  // 1e5 does not fit in half: the rounded operand is inf and so is the product.
  std::vector<float> A = {1e5f, 1.f}, B = {1.f, 1.f}, C(1);
  ops::sgemm_lowp(MatmulPrecision::fp16, false, false, 1, 1, 2, 1.f, A.data(), 2, B.data(), 1, 0.f, C.data(), 1);
  EXPECT_TRUE(std::isinf(C[0]));
}

void check_linear(MatmulPrecision p, bool native) {
  CpuBackend be;
  be.set_bf16_gemm_native(native);
  const int64_t N = 37, C = 29, OC = 53;
  auto inp = random_floats(N * C, 4), w = random_floats(OC * C, 5), b = random_floats(OC, 6);
  auto dout = random_floats(N * OC, 7);
  const auto ri = rounded(inp, p), rw = rounded(w, p), rd = rounded(dout, p);
  // Forward: rounded inp @ rounded w^T + bias (bias exact).
  std::vector<float> out(N * OC, std::nanf(""));
  be.matmul_forward_lowp(p, out.data(), inp.data(), w.data(), b.data(), N, C, OC);
  std::vector<double> ref(N * OC);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = b[o];
      for (int64_t c = 0; c < C; ++c) acc += double(ri[n * C + c]) * rw[o * C + c];
      ref[n * OC + o] = acc;
    }
  EXPECT_LT(rel_err(out, ref), kLowpTol);
  // Backward accumulates (+=) onto nonzero gradients.
  auto dinp = random_floats(N * C, 8), dw = random_floats(OC * C, 9), db = random_floats(OC, 10);
  std::vector<double> rdinp(dinp.begin(), dinp.end()), rdw(dw.begin(), dw.end()), rdb(db.begin(), db.end());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      rdb[o] += dout[n * OC + o];  // bias gradient from the f32 dout
      for (int64_t c = 0; c < C; ++c) {
        rdinp[n * C + c] += double(rd[n * OC + o]) * rw[o * C + c];
        rdw[o * C + c] += double(rd[n * OC + o]) * ri[n * C + c];
      }
    }
  be.matmul_backward_lowp(p, dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  EXPECT_LT(rel_err(dinp, rdinp), kLowpTol);
  EXPECT_LT(rel_err(dw, rdw), kLowpTol);
  EXPECT_LT(rel_err(db, rdb), 1e-6);
}

TEST(MatmulLowp, Bf16LinearMatchesRoundedReference) {
  check_linear(MatmulPrecision::bf16, true);
  check_linear(MatmulPrecision::bf16, false);
}
TEST(MatmulLowp, Fp16LinearMatchesRoundedReference) { check_linear(MatmulPrecision::fp16, false); }

TEST(MatmulLowp, Fp32IsBitwiseTheF32Linear) {
  const int64_t N = 17, C = 23, OC = 31;
  auto inp = random_floats(N * C, 4), w = random_floats(OC * C, 5), b = random_floats(OC, 6);
  auto dout = random_floats(N * OC, 7);
  std::vector<float> o1(N * OC), o2(N * OC);
  ops::matmul_forward(o1.data(), inp.data(), w.data(), b.data(), N, C, OC);
  ops::matmul_forward_lowp(MatmulPrecision::fp32, o2.data(), inp.data(), w.data(), b.data(), N, C, OC);
  EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.size() * 4), 0);
  std::vector<float> di1(N * C), dw1(OC * C), db1(OC), di2(N * C), dw2(OC * C), db2(OC);
  ops::matmul_backward(di1.data(), dw1.data(), db1.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  ops::matmul_backward_lowp(MatmulPrecision::fp32, di2.data(), dw2.data(), db2.data(), dout.data(), inp.data(),
                            w.data(), N, C, OC);
  EXPECT_EQ(di1, di2);
  EXPECT_EQ(dw1, dw2);
  EXPECT_EQ(db1, db2);
}

TEST(MatmulLowp, ReportsTheBf16Kernel) {
  CpuBackend be;
  const std::string k = be.bf16_gemm_kernel();
  EXPECT_TRUE(k == "emulated" || k.rfind("onednn:", 0) == 0) << k;
  std::printf("bf16 gemm kernel: %s\n", k.c_str());
}

// The backward rounds dout once for both products (and all operands in one parallel region): it must
// give bitwise what the two separate sgemm_lowp calls give, with and without dinp.
TEST(MatmulLowp, Bf16BackwardIsBitwiseTheTwoGemms) {
  const int64_t N = 96, C = 48, OC = 80;
  auto dout = random_floats(N * OC, 21), inp = random_floats(N * C, 22), w = random_floats(OC * C, 23);
  for (bool with_dinp : {true, false}) {
    auto dinp = random_floats(N * C, 24), dw = random_floats(OC * C, 25), db = random_floats(OC, 26);
    auto dinp_ref = dinp, dw_ref = dw;
    matmul_backward_lowp(MatmulPrecision::bf16, with_dinp ? dinp.data() : nullptr, dw.data(), db.data(), dout.data(),
                         inp.data(), w.data(), N, C, OC);
    if (with_dinp)
      sgemm_lowp(MatmulPrecision::bf16, false, false, N, C, OC, 1.0f, dout.data(), OC, w.data(), C, 1.0f,
                 dinp_ref.data(), C);
    sgemm_lowp(MatmulPrecision::bf16, true, false, OC, C, N, 1.0f, dout.data(), OC, inp.data(), C, 1.0f,
               dw_ref.data(), C);
    EXPECT_EQ(std::memcmp(dinp.data(), dinp_ref.data(), dinp.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(dw.data(), dw_ref.data(), dw.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace tessera::test
