// AdamW: three steps against a naive double-precision torch.optim.AdamW.
#include <cmath>

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
    ops::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, step);
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

}  // namespace
}  // namespace tessera::test
