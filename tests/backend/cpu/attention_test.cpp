// Tests of the blockwise causal attention (forward, backward, grouped-query) against a naive
// double-precision reference and finite differences, plus accumulation, determinism and schedules.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention_reference.h"
#include "backend/cpu/kernel_table.h"
#include "backend/ops.h"

namespace tessera::test {
namespace {

using ops::attn::BackwardSchedule;

std::vector<float> randn(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ||a - b|| / ||b||
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

struct AttnRun {
  std::vector<float> out, lse, dqkv;
};

// Forward, then backward of L = sum(out * R) into a zeroed dqkv.
AttnRun run_attention(const AttnDims& d, const std::vector<float>& qkv, const std::vector<float>& R,
                  BackwardSchedule sched = BackwardSchedule::automatic) {
  AttnRun r;
  r.out.assign(d.out_size(), 0.0f);
  r.lse.assign(d.lse_size(), 0.0f);
  r.dqkv.assign(d.qkv_size(), 0.0f);
  ops::attention_forward(r.out.data(), r.lse.data(), qkv.data(), d.B, d.T, d.NH, d.NKV, d.HS);
  ops::CpuWorkspace ws;
  ops::active_cpu_kernels().attention_backward_scheduled(ws, r.dqkv.data(), R.data(), qkv.data(), r.out.data(), r.lse.data(), d.B,
                                          d.T, d.NH, d.NKV, d.HS, sched);
  return r;
}

// tol bounds the relative error of out (in norm and elementwise against the largest entry) and of lse.
void expect_forward_matches(const AttnDims& d, const AttnRun& r, const std::vector<float>& qkv, double tol = 1e-5) {
  std::vector<double> out, lse;
  ref_forward(out, lse, to_double(qkv), d);
  double out_max = 0, lse_max = 1;
  for (double x : out) out_max = std::max(out_max, std::abs(x));
  for (double x : lse) lse_max = std::max(lse_max, std::abs(x));
  EXPECT_LE(rel_err(r.out, out), tol);
  EXPECT_LE(max_abs_diff(r.out, out), tol * out_max);
  EXPECT_LE(max_abs_diff(r.lse, lse), tol * lse_max);
}

class SmallAttention : public ::testing::TestWithParam<int64_t> {};

TEST_P(SmallAttention, ForwardMatchesNaiveReference) {
  const AttnDims d{2, 37, 4, GetParam(), 8};
  const auto qkv = randn(d.qkv_size(), 1);
  const auto R = randn(d.out_size(), 2);
  expect_forward_matches(d, run_attention(d, qkv, R), qkv);
}

TEST_P(SmallAttention, BackwardMatchesFiniteDifferences) {
  const AttnDims d{2, 37, 4, GetParam(), 8};
  const auto qkv = randn(d.qkv_size(), 3);
  const auto R = randn(d.out_size(), 4);
  std::vector<double> analytic;
  ref_backward(analytic, to_double(R), to_double(qkv), d);
  // Central differences of the double reference on every 7th entry (all q, k, v columns are hit
  // because 7 is coprime to the row widths used here).
  std::vector<double> x = to_double(qkv), Rd = to_double(R);
  std::vector<int64_t> idx;
  std::vector<double> fd;
  const double eps = 1e-4;
  for (int64_t i = 0; i < d.qkv_size(); i += 7) {
    const int64_t b = i / (d.T * d.c3());
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double lp = ref_loss_batch(x, Rd, d, b);
    x[i] = x0 - eps;
    const double lm = ref_loss_batch(x, Rd, d, b);
    x[i] = x0;
    idx.push_back(i);
    fd.push_back((lp - lm) / (2 * eps));
  }
  double den = 0, num_ref = 0;
  for (size_t n = 0; n < idx.size(); ++n) {
    num_ref += (analytic[idx[n]] - fd[n]) * (analytic[idx[n]] - fd[n]);
    den += fd[n] * fd[n];
  }
  ASSERT_LE(std::sqrt(num_ref / den), 1e-6) << "the double reference's own backward disagrees";
  for (auto sched : {BackwardSchedule::fused, BackwardSchedule::two_pass}) {
    const AttnRun r = run_attention(d, qkv, R, sched);
    double num = 0;
    for (size_t n = 0; n < idx.size(); ++n) num += (r.dqkv[idx[n]] - fd[n]) * (r.dqkv[idx[n]] - fd[n]);
    EXPECT_LE(std::sqrt(num / den), 1e-3);
    EXPECT_LE(rel_err(r.dqkv, analytic), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(KvHeads, SmallAttention, ::testing::Values(4, 2, 1));

class LongAttention : public ::testing::TestWithParam<AttnDims> {};

// T spans three blocks (the last partial); HS = 24 exercises the masked column tail, HS = 64 full vectors.
TEST_P(LongAttention, ForwardAndBackwardMatchReference) {
  const AttnDims d = GetParam();
  const auto qkv = randn(d.qkv_size(), 5);
  const auto R = randn(d.out_size(), 6);
  std::vector<double> analytic;
  ref_backward(analytic, to_double(R), to_double(qkv), d);
  for (auto sched : {BackwardSchedule::fused, BackwardSchedule::two_pass}) {
    const AttnRun r = run_attention(d, qkv, R, sched);
    expect_forward_matches(d, r, qkv);
    EXPECT_LE(rel_err(r.dqkv, analytic), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LongAttention,
                         ::testing::Values(AttnDims{1, 150, 4, 2, 24}, AttnDims{2, 150, 2, 1, 64},
                                           AttnDims{1, 128, 3, 3, 16}, AttnDims{3, 1, 2, 1, 8},
                                           AttnDims{1, 65, 6, 2, 5}));

TEST(Attention, SchedulesAreBitwiseEqual) {
  const AttnDims d{2, 150, 4, 2, 24};
  const auto qkv = randn(d.qkv_size(), 7);
  const auto R = randn(d.out_size(), 8);
  const AttnRun fused = run_attention(d, qkv, R, BackwardSchedule::fused);
  const AttnRun two = run_attention(d, qkv, R, BackwardSchedule::two_pass);
  EXPECT_EQ(0, std::memcmp(fused.dqkv.data(), two.dqkv.data(), fused.dqkv.size() * sizeof(float)));
}

TEST(Attention, BackwardAccumulates) {
  const AttnDims d{2, 100, 4, 2, 16};
  const auto qkv = randn(d.qkv_size(), 9);
  const auto R = randn(d.out_size(), 10);
  const AttnRun r = run_attention(d, qkv, R);
  const auto prior = randn(d.qkv_size(), 11);
  std::vector<float> dqkv = prior;
  ops::attention_backward(dqkv.data(), R.data(), qkv.data(), r.out.data(), r.lse.data(), d.B, d.T, d.NH, d.NKV,
                          d.HS);
  double max_err = 0, max_grad = 0;
  for (size_t i = 0; i < dqkv.size(); ++i) {
    max_err = std::max(max_err, std::abs(static_cast<double>(dqkv[i]) - prior[i] - r.dqkv[i]));
    max_grad = std::max(max_grad, static_cast<double>(std::abs(r.dqkv[i])));
  }
  EXPECT_GT(max_grad, 0.1);
  EXPECT_LE(max_err, 1e-5);
}

TEST(Attention, RunsAreBitwiseDeterministic) {
  const AttnDims d{2, 150, 4, 1, 32};
  const auto qkv = randn(d.qkv_size(), 12);
  const auto R = randn(d.out_size(), 13);
  const AttnRun a = run_attention(d, qkv, R);
  const AttnRun b = run_attention(d, qkv, R);
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)));
}

// Both schedules do identical arithmetic per block and no task's result depends on which thread
// runs it, so even a different thread count gives the same bits.
TEST(Attention, ThreadCountDoesNotChangeResults) {
  const AttnDims d{2, 150, 4, 2, 24};
  const auto qkv = randn(d.qkv_size(), 16);
  const auto R = randn(d.out_size(), 17);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const AttnRun one = run_attention(d, qkv, R);
  omp_set_num_threads(3);
  const AttnRun three = run_attention(d, qkv, R);
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(one.out.data(), three.out.data(), one.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(one.dqkv.data(), three.dqkv.data(), one.dqkv.size() * sizeof(float)));
}

// Scores in the hundreds: the online softmax must rescale without overflow. Float rounding of such
// scores alone costs ~1e-5 relative, hence the looser tolerance.
TEST(Attention, LargeScoresStayFinite) {
  const AttnDims d{1, 130, 2, 2, 16};
  const auto qkv = randn(d.qkv_size(), 14, 8.0f);
  const auto R = randn(d.out_size(), 15);
  const AttnRun r = run_attention(d, qkv, R);
  for (float x : r.dqkv) ASSERT_TRUE(std::isfinite(x));
  expect_forward_matches(d, r, qkv, 1e-4);
  std::vector<double> analytic;
  ref_backward(analytic, to_double(R), to_double(qkv), d);
  EXPECT_LE(rel_err(r.dqkv, analytic), 1e-3);
}

}  // namespace
}  // namespace tessera::test
