// sum_of_squares against a naive double sum, and scale_inplace.
#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

TEST(SumOfSquares, MatchesNaiveDouble) {
  for (int64_t n : {0, 1, 15, 17, 100003}) {  // empty, below/above one lane group, several ragged blocks
    auto x = random_floats(n, n + 1, -3.0f, 3.0f);
    double ref = 0.0;
    for (float xi : x) ref += static_cast<double>(xi) * xi;
    const double got = ops::sum_of_squares(x.data(), n);
    if (n == 0) {
      EXPECT_EQ(got, 0.0);
    } else {
      EXPECT_NEAR(got, ref, 1e-12 * ref) << "n=" << n;
    }
  }
}

TEST(ScaleInplace, ScalesEveryElement) {
  auto x = random_floats(1003, 5);
  auto y = x;
  ops::scale_inplace(y.data(), static_cast<int64_t>(y.size()), 0.25f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] * 0.25f);
}

}  // namespace
}  // namespace tessera::test
