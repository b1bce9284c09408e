// Error feedback through the real data-parallel exchange (CompressedExchange over MPI): after one
// exchange, the averaged result plus the ranks' mean residual is the ranks' mean gradient -- what
// was dropped is carried, not lost -- and a second exchange of zero gradients sends part of it. The
// compressors' own identities are in tests/parallel/compression_test.cpp; this catches an exchange that compresses
// without the residual (it still trains, so the loss curves cannot tell).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"
#include "mpi_test_world.h"
#include "parallel/compression_sync.h"
#include "../backend_util.h"

namespace tessera {
namespace {

using testing::world;

std::vector<float> rank_gradient(int64_t n, int rank) {
  std::vector<float> g(static_cast<size_t>(n));
  uint32_t s = 12345u + 7919u * static_cast<uint32_t>(rank);
  for (float& x : g) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  }
  return g;
}

// Runs one exchange of `grads` (in place) over the whole buffer.
void exchange(CompressedExchange& ex, std::vector<float>& grads) {
  if (!ex.per_bucket()) {
    ASSERT_TRUE(ex.exchange_all(grads.data()).ok());
    return;
  }
  const int64_t n = static_cast<int64_t>(grads.size());
  ASSERT_TRUE(ex.launch(0, grads.data(), 0, n).wait().ok());
  ex.complete(0, grads.data(), 0, n);
}

std::vector<float> mean_over_ranks(std::vector<float> v) {
  EXPECT_TRUE(world().all_reduce_async(v.data(), v.data(), static_cast<int64_t>(v.size()), DType::f32,
                                       ReduceOp::avg).wait().ok());
  return v;
}

void expect_error_feedback(const CompressionConfig& cfg) {
  const ParamLayout layout(model_preset("tiny").value());
  const int64_t n = layout.total_numel();
  CompressedExchange ex(tessera::testing::cpu_backend(), world(), layout, cfg);
  std::vector<float> g = rank_gradient(n, world().rank());
  const std::vector<float> mean_g = mean_over_ranks(g);
  exchange(ex, g);
  const std::vector<float> mean_residual = mean_over_ranks(ex.residual());
  double dropped = 0, worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    dropped += std::abs(mean_residual[k]);
    worst = std::max(worst, static_cast<double>(std::abs(g[k] + mean_residual[k] - mean_g[k])));
    scale = std::max(scale, static_cast<double>(std::abs(mean_g[k])));
  }
  EXPECT_GT(dropped, 1e-3 * static_cast<double>(n)) << "a lossy method left no residual";
  EXPECT_LE(worst, 1e-5 * scale) << "result + mean residual != mean gradient";
  // Zero gradients next step: only the carried residual is sent, so the result is not zero.
  std::vector<float> zero(static_cast<size_t>(n), 0.0f);
  exchange(ex, zero);
  EXPECT_TRUE(std::any_of(zero.begin(), zero.end(), [](float x) { return x != 0.0f; }))
      << "the residual was not sent on the next exchange";
}

TEST(CompressedExchange, TopKCarriesWhatItDrops) {
  expect_error_feedback({CompressionKind::topk, 0.1, 4});
}

TEST(CompressedExchange, OneBitCarriesWhatItDrops) {
  expect_error_feedback({CompressionKind::onebit, 0.01, 4});
}

TEST(CompressedExchange, PowerSgdCarriesWhatItDrops) {
  expect_error_feedback({CompressionKind::powersgd, 0.01, 2});
}

}  // namespace
}  // namespace tessera
