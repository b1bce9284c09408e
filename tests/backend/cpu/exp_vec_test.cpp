// The vectorisable exp used by the activation and softmax kernels, against double-precision exp.
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_util.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

TEST(ExpVec, RelativeErrorBelowTwoUlpOverTheNormalRange) {
  double worst = 0.0;
  const int n = 2000001;
  for (int i = 0; i < n; ++i) {
    const float x = -87.3f + 176.0f * static_cast<float>(i) / (n - 1);  // [-87.3, 88.7]
    const double e = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ops::baseline::detail::exp_vec(x) - e) / e);
  }
  EXPECT_LT(worst, 2.4e-7);  // two float ulps at the top of a binade
}

TEST(ExpVec, EdgeCases) {
  EXPECT_EQ(ops::baseline::detail::exp_vec(0.0f), 1.0f);
  EXPECT_EQ(ops::baseline::detail::exp_vec(-100.0f), 0.0f);
  EXPECT_EQ(ops::baseline::detail::exp_vec(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ops::baseline::detail::exp_vec(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ops::baseline::detail::exp_vec(std::nanf(""))));
}

}  // namespace
}  // namespace tessera::test
