// RoPE ("rotate_half" convention) against a double reference, a hand-written case, finite
// differences for the backward, and a forward/backward round trip.
#include <cmath>

#include "backend/cpu/kernel_table.h"
#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

std::vector<double> rope_ref(const std::vector<double>& qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV,
                             int64_t HS, double theta) {
  std::vector<double> out = qkv;
  const int64_t row = (NH + 2 * NKV) * HS, half = HS / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < NH + NKV; ++h) {
        const int64_t base = (b * T + t) * row + h * HS;
        for (int64_t i = 0; i < half; ++i) {
          const double angle = t * std::pow(theta, -2.0 * i / HS);
          const double x1 = qkv[base + i], x2 = qkv[base + i + half];
          out[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          out[base + i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
  return out;
}

TEST(Rope, HandWrittenCase) {
  // One q head and one k/v head of size 4 at position t = 1: pairs (0,2) rotate by 1 rad,
  // pairs (1,3) by 10000^(-1/2) = 0.01 rad; v stays.
  std::vector<float> qkv(2 * 12);
  for (int i = 0; i < 24; ++i) qkv[i] = static_cast<float>(i % 12 + 1);
  ops::rope_forward(qkv.data(), 1, 2, 1, 1, 4, 10000.0f);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(qkv[i], static_cast<float>(i + 1)) << "t = 0 must be the identity";
  const float* r = qkv.data() + 12;
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  const double expect[12] = {1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2,
                             5 * c1 - 7 * s1, 6 * c2 - 8 * s2, 7 * c1 + 5 * s1, 8 * c2 + 6 * s2,
                             9, 10, 11, 12};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(r[i], expect[i], 1e-5) << "element " << i;
}

TEST(Rope, ForwardMatchesReferenceAcrossTableSizes) {
  // Changing T and HS between calls must rebuild the cached cos/sin table.
  struct Case { int64_t B, T, NH, NKV, HS; float theta; };
  for (const Case& k : {Case{2, 5, 4, 2, 6, 10000.0f}, Case{1, 64, 2, 1, 16, 500000.0f}, Case{2, 5, 4, 2, 6, 10000.0f},
                        Case{2, 5, 4, 2, 8, 10000.0f}}) {
    const int64_t n = k.B * k.T * (k.NH + 2 * k.NKV) * k.HS;
    auto qkv = random_floats(n, 1);
    auto ref = rope_ref(to_double(qkv), k.B, k.T, k.NH, k.NKV, k.HS, k.theta);
    ops::rope_forward(qkv.data(), k.B, k.T, k.NH, k.NKV, k.HS, k.theta);
    EXPECT_LT(rel_err(qkv, ref), kForwardTol) << "T=" << k.T << " HS=" << k.HS;
  }
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, T = 3, NH = 2, NKV = 1, HS = 6;
  const float theta = 10000.0f;
  const int64_t n = B * T * (NH + 2 * NKV) * HS;
  auto qkv = random_floats(n, 2);
  auto R = random_floats(n, 3);
  auto qkv_d = to_double(qkv);
  std::vector<float> dqkv = R;
  ops::rope_backward(dqkv.data(), B, T, NH, NKV, HS, theta);
  auto loss = [&] { return weighted_sum(rope_ref(qkv_d, B, T, NH, NKV, HS, theta), R); };
  EXPECT_LT(rel_err(dqkv, numeric_grad(qkv_d, loss)), kGradTol);
}

TEST(Rope, BackwardInvertsForward) {
  const int64_t B = 2, T = 7, NH = 4, NKV = 2, HS = 8;
  auto x = random_floats(B * T * (NH + 2 * NKV) * HS, 4);
  auto y = x;
  ops::rope_forward(y.data(), B, T, NH, NKV, HS, 10000.0f);
  ops::rope_backward(y.data(), B, T, NH, NKV, HS, 10000.0f);
  EXPECT_LT(rel_err(y, x), 1e-6);
}

// A chunk of rows at positions [pos0, pos0 + c) (a context-parallel rank's) rotates exactly as those
// rows of the whole sequence, whichever chunk came first on a workspace whose table is reused.
TEST(Rope, AtOffsetEqualsTheWholeSequencesRows) {
  const int64_t B = 2, T = 12, c = 3, NH = 4, NKV = 2, HS = 8, row = (NH + 2 * NKV) * HS;
  auto whole = random_floats(B * T * row, 5);
  const auto input = whole;
  ops::rope_forward(whole.data(), B, T, NH, NKV, HS, 10000.0f);
  ops::CpuWorkspace ws;  // one table for every call, grown by the first and reused by the later, smaller ones
  for (int64_t pos0 : {9, 0, 3, 6}) {
    std::vector<float> chunk(B * c * row), expect(B * c * row);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < c; ++t)
        for (int64_t i = 0; i < row; ++i) {
          chunk[(b * c + t) * row + i] = input[(b * T + pos0 + t) * row + i];
          expect[(b * c + t) * row + i] = whole[(b * T + pos0 + t) * row + i];
        }
    const auto before = chunk;
    ops::active_cpu_kernels().rope_forward_at(ws, chunk.data(), B, c, pos0, NH, NKV, HS, 10000.0f);
    EXPECT_EQ(chunk, expect) << "pos0 = " << pos0;
    ops::rope_backward_at(chunk.data(), B, c, pos0, NH, NKV, HS, 10000.0f);
    EXPECT_LT(rel_err(chunk, to_double(before)), 1e-6) << "pos0 = " << pos0;
  }
}

}  // namespace
}  // namespace tessera::test
