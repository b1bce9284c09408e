// Fused softmax cross-entropy: losses against a double reference, the in-place gradient against
// finite differences, ignored targets, and stability with large logits.
#include <cmath>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

std::vector<double> ce_ref(const std::vector<double>& logits, const std::vector<int32_t>& targets, int64_t N,
                           int64_t V) {
  std::vector<double> losses(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double mx = logits[n * V];
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[n * V + v]);
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(logits[n * V + v] - mx);
    losses[n] = std::log(s) + mx - logits[n * V + targets[n]];
  }
  return losses;
}

TEST(CrossEntropy, LossAndGradientMatchFiniteDifferences) {
  const int64_t N = 6, V = 10;
  const std::vector<int32_t> targets = {3, 0, -1, 9, 3, 7};
  const float scale = 1.0f / 5.0f;  // mean over the 5 counted rows
  auto logits = random_floats(N * V, 1, -3.0f, 3.0f);
  auto logits_d = to_double(logits);

  std::vector<float> losses(N), kept = logits;
  ops::softmax_crossentropy(losses.data(), kept.data(), targets.data(), N, V, 0.0f);
  EXPECT_EQ(kept, logits) << "dlogits_scale = 0 must leave the logits alone";
  EXPECT_LT(rel_err(losses, ce_ref(logits_d, targets, N, V)), kForwardTol);

  std::vector<float> losses2(N), dlogits = logits;
  ops::softmax_crossentropy(losses2.data(), dlogits.data(), targets.data(), N, V, scale);
  EXPECT_EQ(losses2, losses) << "the loss must not depend on whether the gradient is written";
  auto loss = [&] {
    double s = 0.0;
    for (double l : ce_ref(logits_d, targets, N, V)) s += l;
    return s * scale;
  };
  EXPECT_LT(rel_err(dlogits, numeric_grad(logits_d, loss)), kGradTol);
}

TEST(CrossEntropy, IgnoredTargetsGiveZeroLossAndGradient) {
  const int64_t N = 4, V = 37;
  auto logits = random_floats(N * V, 2, -5.0f, 5.0f);
  const std::vector<int32_t> targets = {-1, 5, -1, 36};
  std::vector<float> losses(N, 7.0f), grad = logits;
  ops::softmax_crossentropy(losses.data(), grad.data(), targets.data(), N, V, 0.5f);
  for (int64_t n : {0, 2}) {
    EXPECT_EQ(losses[n], 0.0f);
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(grad[n * V + v], 0.0f);
  }
  // The counted rows are unaffected by their ignored neighbours.
  for (int64_t n : {1, 3}) {
    float loss_alone;
    std::vector<float> row(logits.begin() + n * V, logits.begin() + (n + 1) * V);
    ops::softmax_crossentropy(&loss_alone, row.data(), &targets[n], 1, V, 0.5f);
    EXPECT_EQ(losses[n], loss_alone);
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(grad[n * V + v], row[v]);
  }
}

TEST(CrossEntropy, StableForLargeLogits) {
  const int64_t N = 2, V = 50;
  auto logits = random_floats(N * V, 3, -1.0f, 1.0f);
  for (auto& x : logits) x += 1000.0f;  // exp(1000) overflows float and double alike
  const std::vector<int32_t> targets = {4, 49};
  auto ref = ce_ref(to_double(logits), targets, N, V);
  std::vector<float> losses(N);
  ops::softmax_crossentropy(losses.data(), logits.data(), targets.data(), N, V, 1.0f);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isfinite(losses[n]));
    EXPECT_NEAR(losses[n], ref[n], 1e-3);  // logits near 1000 carry only ~1e-4 absolute precision
    double row_sum = 0.0;
    for (int64_t v = 0; v < V; ++v) row_sum += logits[n * V + v];
    EXPECT_NEAR(row_sum, 0.0, 1e-5) << "softmax - onehot sums to zero";
  }
}

}  // namespace
}  // namespace tessera::test
