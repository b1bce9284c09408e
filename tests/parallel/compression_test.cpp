// Gradient compressors: each round-trips within its documented error, error feedback carries exactly
// what was dropped, top-k keeps the k largest magnitudes, PowerSGD reconstructs a rank-r matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "parallel/compression.h"
#include "parallel/compression_powersgd.h"
#include "../backend_util.h"

namespace tessera {
namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * rng.normal();
  return v;
}

CompressionConfig config(CompressionKind kind, double ratio = 0.01, int rank = 4) { return {kind, ratio, rank}; }

std::vector<float> decompress(const Compressor& c, const std::vector<uint8_t>& payload, int64_t n) {
  std::vector<float> d(static_cast<size_t>(n), 0.0f);
  c.accumulate(payload.data(), n, 1.0f, d.data());
  return d;
}

double sq_norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return s;
}

TEST(Compression, ParseNamesEveryKindAndRejectsOthers) {
  for (auto k : {CompressionKind::none, CompressionKind::bf16, CompressionKind::topk, CompressionKind::powersgd,
                 CompressionKind::onebit})
    EXPECT_EQ(parse_compression(compression_name(k)).value(), k);
  const auto bad = parse_compression("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"powersgd\""), std::string::npos);
}

TEST(Compression, Bf16WithinHalfAnUlp) {
  const int64_t n = 5000;
  const auto g = random_vector(n, 1, 3.0f);
  auto c = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::bf16));
  std::vector<uint8_t> payload(static_cast<size_t>(c->payload_bytes(n)));
  EXPECT_EQ(c->payload_bytes(n), 2 * n);
  c->compress(g.data(), n, nullptr, payload.data());
  const auto d = decompress(*c, payload, n);
  for (int64_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(d[i] - g[i]), std::ldexp(std::fabs(g[i]), -8)) << i;
}

TEST(Compression, TopKKeepsExactlyTheKLargestMagnitudes) {
  const int64_t n = 10007;
  const double ratio = 0.013;
  const auto g = random_vector(n, 2);
  auto c = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::topk, ratio));
  const int64_t k = topk_count(n, ratio);
  EXPECT_EQ(k, 131);
  EXPECT_EQ(c->payload_bytes(n), 8 * k);
  std::vector<uint8_t> payload(static_cast<size_t>(c->payload_bytes(n)));
  c->compress(g.data(), n, nullptr, payload.data());
  const auto d = decompress(*c, payload, n);
  std::vector<float> mags(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mags[i] = std::fabs(g[i]);
  std::sort(mags.rbegin(), mags.rend());
  const float threshold = mags[static_cast<size_t>(k - 1)];  // the k-th largest (values are distinct)
  int64_t kept = 0;
  double dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] != 0.0f) {
      ++kept;
      EXPECT_EQ(d[i], g[i]);  // kept values are exact
      EXPECT_GE(std::fabs(g[i]), threshold);
    } else {
      EXPECT_LT(std::fabs(g[i]), threshold);
      dropped += static_cast<double>(g[i]) * g[i];
    }
  }
  EXPECT_EQ(kept, k);
  EXPECT_LE(dropped, (1.0 - static_cast<double>(k) / n) * sq_norm(g));
}

TEST(Compression, TopKBreaksTiesByIndex) {
  const std::vector<float> g = {1, -2, 2, 0, 2, 1};
  auto c = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::topk, 0.5));  // k = 3
  std::vector<uint8_t> payload(static_cast<size_t>(c->payload_bytes(6)));
  c->compress(g.data(), 6, nullptr, payload.data());
  EXPECT_EQ(decompress(*c, payload, 6), (std::vector<float>{0, -2, 2, 0, 2, 0}));
  const std::vector<float> flat(6, 1.0f);
  c->compress(flat.data(), 6, nullptr, payload.data());
  EXPECT_EQ(decompress(*c, payload, 6), (std::vector<float>{1, 1, 1, 0, 0, 0}));
}

TEST(Compression, OneBitErrorIsTheDocumentedEnergy) {
  const int64_t n = 3 * kOneBitChunk + 77;  // a partial last chunk
  auto g = random_vector(n, 3);
  g[5] = 0.0f;  // sign(0) = +
  auto c = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::onebit));
  std::vector<uint8_t> payload(static_cast<size_t>(c->payload_bytes(n)));
  EXPECT_EQ(c->payload_bytes(n), 4 * 4 + 4 * ((n + 31) / 32));
  c->compress(g.data(), n, nullptr, payload.data());
  const auto d = decompress(*c, payload, n);
  EXPECT_GT(d[5], 0.0f);
  for (int64_t b = 0; b < n; b += kOneBitChunk) {
    const int64_t e = std::min(n, b + kOneBitChunk);
    double abs_sum = 0, energy = 0, err = 0;
    for (int64_t i = b; i < e; ++i) {
      abs_sum += std::fabs(g[i]);
      energy += static_cast<double>(g[i]) * g[i];
      err += (static_cast<double>(g[i]) - d[i]) * (g[i] - d[i]);
    }
    const double s = abs_sum / static_cast<double>(e - b);
    for (int64_t i = b; i < e; ++i) EXPECT_FLOAT_EQ(std::fabs(d[i]), static_cast<float>(s));
    EXPECT_NEAR(err, energy - (e - b) * s * s, 1e-4 * energy);
    EXPECT_LE(err, energy);
  }
}

// decompress(payload) + new residual == grad + old residual, over several steps.
void expect_error_feedback_exact(Compressor& c, int64_t n, bool bitwise) {
  std::vector<float> residual(static_cast<size_t>(n), 0.0f);
  for (uint64_t step = 0; step < 4; ++step) {
    const auto g = random_vector(n, 10 + step);
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[i] = g[i] + residual[i];
    std::vector<uint8_t> payload(static_cast<size_t>(c.payload_bytes(n)));
    c.compress(g.data(), n, residual.data(), payload.data());
    const auto d = decompress(c, payload, n);
    for (int64_t i = 0; i < n; ++i) {
      if (bitwise) ASSERT_EQ(d[i] + residual[i], want[i]) << "step " << step << " element " << i;
      // One rounding of the subtraction m - d, then of the sum: within 2 ulps of the larger operand.
      else ASSERT_NEAR(d[i] + residual[i], want[i], 2.4e-7f * (std::fabs(want[i]) + std::fabs(d[i])));
    }
  }
}

TEST(Compression, ErrorFeedbackCarriesExactlyWhatWasDropped) {
  const int64_t n = 4096 + 13;
  auto topk = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::topk, 0.02));
  expect_error_feedback_exact(*topk, n, /*bitwise=*/true);
  auto bf16 = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::bf16));
  expect_error_feedback_exact(*bf16, n, /*bitwise=*/true);  // m - bf16(m) is exact in f32
  auto onebit = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::onebit));
  expect_error_feedback_exact(*onebit, n, /*bitwise=*/false);
  PowerSgd psgd(tessera::testing::cpu_backend(), 97, 43, 3, 7);
  expect_error_feedback_exact(psgd, 97 * 43, /*bitwise=*/false);
}

TEST(Compression, ErrorFeedbackSendsTheDroppedMassLater) {
  // A constant gradient under top-k: far more than k distinct elements get sent over the steps, and
  // what was sent plus what the residual holds is the true total.
  const int64_t n = 1000;
  auto c = make_compressor(tessera::testing::cpu_backend(), config(CompressionKind::topk, 0.01));
  const auto g = random_vector(n, 5);
  std::vector<float> residual(static_cast<size_t>(n), 0.0f), sent(static_cast<size_t>(n), 0.0f);
  std::vector<uint8_t> payload(static_cast<size_t>(c->payload_bytes(n)));
  const int steps = 300;
  for (int s = 0; s < steps; ++s) {
    c->compress(g.data(), n, residual.data(), payload.data());
    c->accumulate(payload.data(), n, 1.0f, sent.data());
  }
  int64_t reached = 0;
  for (int64_t i = 0; i < n; ++i) {
    reached += sent[i] != 0.0f;
    EXPECT_NEAR(sent[i] + residual[i], steps * g[i], 1e-3 * steps * std::fabs(g[i]) + 1e-3);
  }
  EXPECT_GT(reached, 50 * topk_count(n, 0.01));  // without error feedback: always the same 10
}

TEST(Compression, PowerSgdReconstructsARankRMatrix) {
  const int64_t rows = 64, cols = 48;
  const int r = 3;
  const auto a = random_vector(rows * r, 20), b = random_vector(cols * r, 21);
  std::vector<float> m(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int k = 0; k < r; ++k) m[i * cols + j] += a[i * r + k] * b[j * r + k];
  for (int rank : {3, 4}) {
    PowerSgd c(tessera::testing::cpu_backend(), rows, cols, rank, 99);
    ASSERT_TRUE(PowerSgd::worthwhile(rows, cols, rank));
    std::vector<uint8_t> payload(static_cast<size_t>(c.payload_bytes(rows * cols)));
    EXPECT_EQ(c.payload_bytes(rows * cols), 4 * rank * (rows + cols));
    std::vector<float> residual(m.size(), 0.0f);
    c.compress(m.data(), rows * cols, residual.data(), payload.data());
    const auto d = decompress(c, payload, rows * cols);
    double err = 0;
    for (size_t i = 0; i < m.size(); ++i) err += (static_cast<double>(d[i]) - m[i]) * (d[i] - m[i]);
    EXPECT_LT(std::sqrt(err), 1e-5 * std::sqrt(sq_norm(m))) << "rank " << rank;
    EXPECT_LT(std::sqrt(sq_norm(residual)), 1e-5 * std::sqrt(sq_norm(m)));
  }
}

TEST(Compression, PowerSgdErrorIsAProjection) {
  const int64_t rows = 50, cols = 70;
  const auto g = random_vector(rows * cols, 30);
  PowerSgd c(tessera::testing::cpu_backend(), rows, cols, 4, 1);
  std::vector<uint8_t> payload(static_cast<size_t>(c.payload_bytes(rows * cols)));
  c.compress(g.data(), rows * cols, nullptr, payload.data());
  const auto d = decompress(c, payload, rows * cols);
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) err += (static_cast<double>(g[i]) - d[i]) * (g[i] - d[i]);
  EXPECT_LE(err, sq_norm(g));
  EXPECT_GT(err, 0.0);  // a random 50 x 70 matrix has rank 50 > 4
  // P has orthonormal columns.
  const auto* p = reinterpret_cast<const float*>(payload.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < rows; ++k) dot += static_cast<double>(p[k * 4 + i]) * p[k * 4 + j];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5);
    }
}

TEST(Compression, PowerSgdTwoRoundsMatchTheLocalMessageOnOneReplica) {
  // The data-parallel rounds with a single replica (averaging = identity) give the same gradient
  // and residual as the one-message form, and warm-start Q identically.
  const int64_t rows = 40, cols = 30;
  const int r = 2;
  const auto g = random_vector(rows * cols, 40);
  PowerSgd a(tessera::testing::cpu_backend(), rows, cols, r, 5), b(tessera::testing::cpu_backend(), rows, cols, r, 5);
  std::vector<float> ra(g.size(), 0.0f), rb(g.size(), 0.0f), p(rows * r), q(cols * r), out(g.size());
  a.project(g.data(), ra.data(), p.data());
  a.factor(p.data(), ra.data(), q.data());
  a.reconstruct(p.data(), q.data(), out.data());
  std::vector<uint8_t> payload(static_cast<size_t>(b.payload_bytes(rows * cols)));
  b.compress(g.data(), rows * cols, rb.data(), payload.data());
  const auto d = decompress(b, payload, rows * cols);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_FLOAT_EQ(out[i], d[i]);
    EXPECT_FLOAT_EQ(ra[i], rb[i]);
  }
  EXPECT_EQ(a.q(), b.q());
}

TEST(Compression, OrthonormaliseZeroesADependentColumn) {
  std::vector<float> a = {1, 2, 2, 4, 3, 6};  // (3 x 2), column 1 = 2 x column 0
  ops::orthonormalise_columns(a.data(), 3, 2);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(a[i * 2 + 1], 0.0f, 1e-6f);
  EXPECT_NEAR(a[0] * a[0] + a[2] * a[2] + a[4] * a[4], 1.0f, 1e-6f);
}

}  // namespace
}  // namespace tessera
