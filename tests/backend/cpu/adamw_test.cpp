// AdamW: three steps against a naive double-precision torch.optim.AdamW.
#include <cmath>
#include <cstring>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

TEST(AdamW, ThreeStepsMatchNaiveDouble) {
  const int64_t n = 257;
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  auto p = random_floats(n, 1);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  auto p_d = to_double(p);
  std::vector<double> m_d(n, 0.0), v_d(n, 0.0);
  const auto p0 = p_d;

  for (int64_t step = 1; step <= 3; ++step) {
    auto g = random_floats(n, 100 + step);
    ops::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, step, 1.f);
    const double bc1 = 1.0 - std::pow(double{b1}, step), bc2 = 1.0 - std::pow(double{b2}, step);
    for (int64_t i = 0; i < n; ++i) {
      p_d[i] -= double{lr} * wd * p_d[i];
      m_d[i] = b1 * m_d[i] + (1.0 - b1) * g[i];
      v_d[i] = b2 * v_d[i] + (1.0 - b2) * double{g[i]} * g[i];
      p_d[i] -= lr * (m_d[i] / bc1) / (std::sqrt(v_d[i] / bc2) + eps);
    }
  }
  EXPECT_LT(rel_err(p, p_d), kForwardTol);
  EXPECT_LT(rel_err(m, m_d), kForwardTol);
  EXPECT_LT(rel_err(v, v_d), kForwardTol);
  // The parameters moved by ~3 * lr; compare the movement itself, not just the sum.
  std::vector<double> moved(n), moved_d(n);
  for (int64_t i = 0; i < n; ++i) {
    moved[i] = static_cast<double>(p[i]) - p0[i];
    moved_d[i] = p_d[i] - p0[i];
  }
  EXPECT_LT(rel_err(moved, moved_d), 1e-4);
}

// The scale the update applies as it reads the gradient (a data-parallel sum's 1/dp times the
// clipping factor) gives the same bits as scaling the gradient in memory first.
TEST(AdamW, GradScaleIsTheSameAsScalingTheGradientFirst) {
  const int64_t n = 1031;  // not a multiple of any vector width
  const float scale = 0.5f * 0.37f;
  auto p_fused = random_floats(n, 3), p_scaled = p_fused;
  std::vector<float> m_fused(n, 0.0f), v_fused(n, 0.0f), m_scaled(n, 0.0f), v_scaled(n, 0.0f);
  for (int64_t step = 1; step <= 3; ++step) {
    const auto g = random_floats(n, 200 + step);
    auto g_scaled = g;
    ops::scale_inplace(g_scaled.data(), n, scale);
    ops::adamw_update(p_fused.data(), g.data(), m_fused.data(), v_fused.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f,
                      step, scale);
    ops::adamw_update(p_scaled.data(), g_scaled.data(), m_scaled.data(), v_scaled.data(), n, 1e-2f, 0.9f, 0.95f,
                      1e-8f, 0.1f, step, 1.f);
  }
  EXPECT_EQ(0, std::memcmp(p_fused.data(), p_scaled.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(m_fused.data(), m_scaled.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(v_fused.data(), v_scaled.data(), n * sizeof(float)));
}

}  // namespace
}  // namespace tessera::test
