// The outer optimizer of local SGD (outer_sgd_step) against torch.optim.SGD's rule worked by hand.
#include <gtest/gtest.h>

#include <vector>

#include "../backend_util.h"
#include "parallel/local_sgd.h"

namespace tessera {
namespace {

TEST(OuterSgd, LrOneNoMomentumIsPlainAveraging) {
  std::vector<float> anchor{1.f, -2.f, 0.5f}, v(3, 0.f), delta{0.25f, -0.5f, 1.f};
  outer_sgd_step(tessera::testing::cpu_backend(), anchor.data(), v.data(), delta.data(), 3, {1, 1.f, 0.f, false});
  // anchor - mean(anchor - params) = mean(params)
  EXPECT_EQ(anchor, (std::vector<float>{0.75f, -1.5f, -0.5f}));
}

TEST(OuterSgd, MomentumAndNesterovOverTwoSteps) {
  const float lr = 0.7f, mu = 0.9f;
  for (bool nesterov : {false, true}) {
    float anchor = 1.f, v = 0.f;
    const float d1 = 0.1f, d2 = -0.3f;
    outer_sgd_step(tessera::testing::cpu_backend(), &anchor, &v, &d1, 1, {3, lr, mu, nesterov});
    outer_sgd_step(tessera::testing::cpu_backend(), &anchor, &v, &d2, 1, {3, lr, mu, nesterov});
    const float v1 = d1, v2 = mu * v1 + d2;
    const float want = nesterov ? 1.f - lr * (d1 + mu * v1) - lr * (d2 + mu * v2) : 1.f - lr * v1 - lr * v2;
    EXPECT_FLOAT_EQ(v, v2) << "nesterov " << nesterov;
    EXPECT_FLOAT_EQ(anchor, want) << "nesterov " << nesterov;
  }
}

}  // namespace
}  // namespace tessera
