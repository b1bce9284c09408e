// LayerNorm and RMSNorm forward/backward against double references and finite differences.
#include <cmath>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

constexpr float kEps = 1e-5f;

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, int64_t N, int64_t C,
                                  std::vector<double>* mean = nullptr, std::vector<double>* rstd = nullptr) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + static_cast<double>(kEps));
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    if (mean) (*mean)[n] = m;
    if (rstd) (*rstd)[n] = s;
  }
  return out;
}

std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t N, int64_t C,
                                std::vector<double>* rstd = nullptr) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0.0;
    for (int64_t c = 0; c < C; ++c) ms += x[n * C + c] * x[n * C + c];
    const double s = 1.0 / std::sqrt(ms / C + static_cast<double>(kEps));
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * s * w[c];
    if (rstd) (*rstd)[n] = s;
  }
  return out;
}

TEST(LayerNorm, ForwardAndBackwardMatchFiniteDifferences) {
  const int64_t N = 6, C = 10;
  auto x = random_floats(N * C, 1, -2.0f, 2.0f);
  auto w = random_floats(C, 2, 0.5f, 1.5f);
  auto b = random_floats(C, 3);
  auto R = random_floats(N * C, 4);
  auto x_d = to_double(x), w_d = to_double(w), b_d = to_double(b);

  std::vector<float> out(N * C), mean(N), rstd(N);
  ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  std::vector<double> mean_ref(N), rstd_ref(N);
  EXPECT_LT(rel_err(out, layernorm_ref(x_d, w_d, b_d, N, C, &mean_ref, &rstd_ref)), kForwardTol);
  EXPECT_LT(rel_err(mean, mean_ref), kForwardTol);
  EXPECT_LT(rel_err(rstd, rstd_ref), kForwardTol);

  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  ops::layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);
  auto loss = [&] { return weighted_sum(layernorm_ref(x_d, w_d, b_d, N, C), R); };
  EXPECT_LT(rel_err(dx, numeric_grad(x_d, loss)), kGradTol);
  EXPECT_LT(rel_err(dw, numeric_grad(w_d, loss)), kGradTol);
  EXPECT_LT(rel_err(db, numeric_grad(b_d, loss)), kGradTol);
}

TEST(LayerNorm, BackwardAccumulates) {
  const int64_t N = 9, C = 133;  // several column blocks, ragged last block
  auto x = random_floats(N * C, 5), w = random_floats(C, 6), b = random_floats(C, 7);
  auto dout = random_floats(N * C, 8);
  std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
  ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  expect_accumulates({&dx, &dw, &db}, [&] {
    ops::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
  });
}

TEST(RmsNorm, ForwardAndBackwardMatchFiniteDifferences) {
  const int64_t N = 6, C = 10;
  auto x = random_floats(N * C, 11, -2.0f, 2.0f);
  auto w = random_floats(C, 12, 0.5f, 1.5f);
  auto R = random_floats(N * C, 13);
  auto x_d = to_double(x), w_d = to_double(w);

  std::vector<float> out(N * C), rstd(N);
  ops::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  std::vector<double> rstd_ref(N);
  EXPECT_LT(rel_err(out, rmsnorm_ref(x_d, w_d, N, C, &rstd_ref)), kForwardTol);
  EXPECT_LT(rel_err(rstd, rstd_ref), kForwardTol);

  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
  ops::rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  auto loss = [&] { return weighted_sum(rmsnorm_ref(x_d, w_d, N, C), R); };
  EXPECT_LT(rel_err(dx, numeric_grad(x_d, loss)), kGradTol);
  EXPECT_LT(rel_err(dw, numeric_grad(w_d, loss)), kGradTol);
}

TEST(RmsNorm, BackwardAccumulates) {
  const int64_t N = 9, C = 133;
  auto x = random_floats(N * C, 14), w = random_floats(C, 15);
  auto dout = random_floats(N * C, 16);
  std::vector<float> out(N * C), rstd(N), dx(N * C), dw(C);
  ops::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  expect_accumulates({&dx, &dw}, [&] {
    ops::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  });
}

}  // namespace
}  // namespace tessera::test
