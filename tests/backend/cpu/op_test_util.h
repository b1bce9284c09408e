// Helpers for the op tests: seeded random data, norm-wise relative error, central differences in
// double precision, and the "backward accumulates" check.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace tessera::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Row-major naive C = alpha * op(A) op(B) + beta * C in double.
inline std::vector<double> naive_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                               const std::vector<float>& A, int64_t lda, const std::vector<float>& B, int64_t ldb,
                               double beta, const std::vector<float>& C, int64_t ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[k * lda + i] : A[i * lda + k];
        const double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      out[i * ldc + j] = alpha * acc + beta * C[i * ldc + j];
    }
  return out;
}

// ||a - b|| / ||b|| (absolute when b is zero).
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// sum(out * R): the scalar loss whose gradient with respect to out is R.
inline double weighted_sum(const std::vector<double>& out, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * static_cast<double>(r[i]);
  return s;
}

// dloss/dx by central differences; loss reads x (which is perturbed in place and restored).
inline std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& loss,
                                        double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    g[i] = (lp - lm) / (2.0 * h);
  }
  return g;
}

// Tolerances stated in the op tests' brief: float forward vs double reference, float backward vs
// finite differences of the double reference.
constexpr double kForwardTol = 1e-5;
constexpr double kGradTol = 1e-3;

// Runs `backward` twice on gradient buffers that start non-zero and checks that each call added
// the same increment (the contract: every backward accumulates into its d* outputs).
inline void expect_accumulates(const std::vector<std::vector<float>*>& grads, const std::function<void()>& backward) {
  std::vector<std::vector<float>> g0, g1;
  for (size_t k = 0; k < grads.size(); ++k) {
    *grads[k] = random_floats(grads[k]->size(), 1000 + k);
    g0.push_back(*grads[k]);
  }
  backward();
  for (auto* g : grads) g1.push_back(*g);
  backward();
  for (size_t k = 0; k < grads.size(); ++k) {
    std::vector<double> inc1(g0[k].size()), inc2(g0[k].size());
    for (size_t i = 0; i < inc1.size(); ++i) {
      inc1[i] = static_cast<double>(g1[k][i]) - g0[k][i];
      inc2[i] = static_cast<double>((*grads[k])[i]) - g1[k][i];
    }
    double norm = 0.0;
    for (double d : inc1) norm += d * d;
    EXPECT_GT(norm, 0.0) << "gradient " << k << " did not change";
    EXPECT_LT(rel_err(inc2, inc1), 1e-5) << "gradient " << k << " is overwritten, not accumulated";
  }
}

}  // namespace tessera::test
