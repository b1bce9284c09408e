// GELU (tanh form) and SwiGLU forward/backward against double references and finite differences.
#include <cmath>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

std::vector<double> gelu_ref(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  const double k = std::sqrt(2.0 / M_PI);
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = 0.5 * x[i] * (1.0 + std::tanh(k * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  return out;
}

std::vector<double> swiglu_ref(const std::vector<double>& inp, int64_t N, int64_t H) {
  std::vector<double> out(N * H);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const double g = inp[n * 2 * H + h], u = inp[n * 2 * H + H + h];
      out[n * H + h] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}

TEST(Gelu, ForwardAndBackwardMatchFiniteDifferences) {
  const int64_t n = 60;
  auto x = random_floats(n, 1, -4.0f, 4.0f);
  auto R = random_floats(n, 2);
  auto x_d = to_double(x);
  std::vector<float> out(n);
  ops::gelu_forward(out.data(), x.data(), n);
  EXPECT_LT(rel_err(out, gelu_ref(x_d)), kForwardTol);
  std::vector<float> dx(n, 0.0f);
  ops::gelu_backward(dx.data(), x.data(), R.data(), n);
  auto loss = [&] { return weighted_sum(gelu_ref(x_d), R); };
  EXPECT_LT(rel_err(dx, numeric_grad(x_d, loss)), kGradTol);
}

TEST(Gelu, BackwardAccumulates) {
  const int64_t n = 1001;
  auto x = random_floats(n, 3, -4.0f, 4.0f), dout = random_floats(n, 4);
  std::vector<float> dx(n);
  expect_accumulates({&dx}, [&] { ops::gelu_backward(dx.data(), x.data(), dout.data(), n); });
}

TEST(SwiGlu, ForwardAndBackwardMatchFiniteDifferences) {
  const int64_t N = 6, H = 10;
  auto inp = random_floats(N * 2 * H, 5, -4.0f, 4.0f);
  auto R = random_floats(N * H, 6);
  auto inp_d = to_double(inp);
  std::vector<float> out(N * H);
  ops::swiglu_forward(out.data(), inp.data(), N, H);
  EXPECT_LT(rel_err(out, swiglu_ref(inp_d, N, H)), kForwardTol);
  std::vector<float> dinp(N * 2 * H, 0.0f);
  ops::swiglu_backward(dinp.data(), R.data(), inp.data(), N, H);
  auto loss = [&] { return weighted_sum(swiglu_ref(inp_d, N, H), R); };
  EXPECT_LT(rel_err(dinp, numeric_grad(inp_d, loss)), kGradTol);
}

TEST(SwiGlu, BackwardAccumulates) {
  const int64_t N = 7, H = 45;
  auto inp = random_floats(N * 2 * H, 7, -4.0f, 4.0f), dout = random_floats(N * H, 8);
  std::vector<float> dinp(N * 2 * H);
  expect_accumulates({&dinp}, [&] { ops::swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H); });
}

}  // namespace
}  // namespace tessera::test
