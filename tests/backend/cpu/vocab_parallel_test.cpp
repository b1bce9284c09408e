// Vocabulary-parallel ops: the range embedding and the split cross-entropy, combined over shards by
// hand (max / sum, as the tp all-reduces do) and compared with the fused ops and finite differences.
#include <cmath>
#include <limits>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

struct Range {
  int64_t lo, hi;
};

TEST(VocabParallelEmbedding, ShardsSumToTheWholeLookupBitwise) {
  const int64_t B = 2, T = 5, C = 70, V = 7;  // C spans two column blocks
  const std::vector<int32_t> tokens = {1, 6, 1, 0, 3, 4, 6, 2, 5, 1};
  const std::vector<Range> shards = {{0, 3}, {3, 5}, {5, 8}};  // the last one padded past V
  auto wte = random_floats(V * C, 1);
  auto wpe = random_floats(T * C, 2);
  auto dout = random_floats(B * T * C, 3);
  std::vector<float> whole(B * T * C), dwte(V * C, 0.f), dwpe(T * C, 0.f);
  ops::embedding_forward(whole.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  ops::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);

  std::vector<float> sum(B * T * C, 0.f);
  for (size_t r = 0; r < shards.size(); ++r) {
    const auto [lo, hi] = shards[r];
    std::vector<float> shard((hi - lo) * C, 0.f), out(B * T * C);
    for (int64_t i = lo * C; i < std::min(hi, V) * C; ++i) shard[i - lo * C] = wte[i];
    ops::embedding_forward_range(out.data(), tokens.data(), shard.data(), r == 0 ? wpe.data() : nullptr, B, T, C, lo,
                                 hi);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];
    std::vector<float> dshard((hi - lo) * C, 0.f), dwpe_r(T * C, 0.f);
    ops::embedding_backward_range(dshard.data(), dwpe_r.data(), dout.data(), tokens.data(), B, T, C, lo, hi);
    for (int64_t i = lo * C; i < hi * C; ++i)
      ASSERT_EQ(dshard[i - lo * C], i < V * C ? dwte[i] : 0.f) << "shard " << r << " element " << i;
    EXPECT_EQ(dwpe_r, dwpe) << "every shard computes the whole position gradient";
  }
  EXPECT_EQ(sum, whole);
}

TEST(VocabParallelEmbedding, RangeBackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t B = 2, T = 3, C = 6, lo = 2, hi = 5;
  const std::vector<int32_t> tokens = {2, 0, 4, 4, 7, 2};
  auto wte = random_floats((hi - lo) * C, 4);
  auto wpe = random_floats(T * C, 5);
  auto R = random_floats(B * T * C, 6);
  auto wte_d = to_double(wte), wpe_d = to_double(wpe);
  auto ref = [&] {
    std::vector<double> out(B * T * C);
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t tok = tokens[bt];
        out[bt * C + c] = (tok >= lo && tok < hi ? wte_d[(tok - lo) * C + c] : 0.0) + wpe_d[(bt % T) * C + c];
      }
    return out;
  };
  std::vector<float> out(B * T * C);
  ops::embedding_forward_range(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, lo, hi);
  EXPECT_LT(rel_err(out, ref()), kForwardTol);
  std::vector<float> dwte(wte.size(), 0.f), dwpe(wpe.size(), 0.f);
  ops::embedding_backward_range(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C, lo, hi);
  auto loss = [&] { return weighted_sum(ref(), R); };
  EXPECT_LT(rel_err(dwte, numeric_grad(wte_d, loss)), kGradTol);
  EXPECT_LT(rel_err(dwpe, numeric_grad(wpe_d, loss)), kGradTol);
  expect_accumulates({&dwte, &dwpe}, [&] {
    ops::embedding_backward_range(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C, lo, hi);
  });
}

// Runs the split loss over `p` shards of width ceil(V/p) (padding filled with large junk that must
// be ignored), reducing max and sums by hand. Returns losses(N) and the concatenated dlogits(N, V).
void split_crossentropy(std::vector<float>& losses, std::vector<float>& dlogits, const std::vector<float>& logits,
                        const std::vector<int32_t>& targets, int64_t N, int64_t V, int p, float scale) {
  const int64_t Vl = (V + p - 1) / p;
  std::vector<std::vector<float>> z(p, std::vector<float>(N * Vl, 1e4f));
  std::vector<float> m(N, -std::numeric_limits<float>::infinity()), stats(2 * N, 0.f);
  for (int r = 0; r < p; ++r) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < Vl && r * Vl + j < V; ++j) z[r][n * Vl + j] = logits[n * V + r * Vl + j];
    std::vector<float> mr(N);
    ops::crossentropy_rowmax(mr.data(), z[r].data(), N, Vl, std::clamp<int64_t>(V - r * Vl, 0, Vl));
    for (int64_t n = 0; n < N; ++n) m[n] = std::max(m[n], mr[n]);  // all-reduce MAX
  }
  for (int r = 0; r < p; ++r) {
    std::vector<float> sr(2 * N);
    ops::crossentropy_sumexp_target(sr.data(), z[r].data(), m.data(), targets.data(), N, Vl,
                                    std::clamp<int64_t>(V - r * Vl, 0, Vl), r * Vl);
    for (int64_t i = 0; i < 2 * N; ++i) stats[i] += sr[i];  // all-reduce SUM
  }
  losses.assign(N, 0.f);
  dlogits.assign(N * V, 0.f);
  for (int r = 0; r < p; ++r) {
    std::vector<float> lr(N);
    ops::crossentropy_finish(lr.data(), z[r].data(), stats.data(), m.data(), targets.data(), N, Vl,
                             std::clamp<int64_t>(V - r * Vl, 0, Vl), r * Vl, scale);
    if (r == 0) losses = lr;
    EXPECT_EQ(lr, losses) << "every shard computes the same losses";
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < Vl; ++j) {
        if (r * Vl + j < V) {
          dlogits[n * V + r * Vl + j] = z[r][n * Vl + j];
        } else if (scale != 0.f) {
          EXPECT_EQ(z[r][n * Vl + j], 0.f) << "padding gets no gradient";
        }
      }
  }
}

TEST(VocabParallelCrossEntropy, SplitEqualsFusedForEveryShardCount) {
  const int64_t N = 6, V = 11;
  const std::vector<int32_t> targets = {3, 0, -1, 10, 5, 7};
  const float scale = 0.2f;
  auto logits = random_floats(N * V, 7, -3.f, 3.f);
  std::vector<float> losses(N), fused = logits;
  ops::softmax_crossentropy(losses.data(), fused.data(), targets.data(), N, V, scale);
  for (int p : {1, 2, 3, 4, 6}) {
    std::vector<float> l, d;
    split_crossentropy(l, d, logits, targets, N, V, p, scale);
    EXPECT_LT(rel_err(l, losses), 1e-6) << "p=" << p;
    EXPECT_LT(rel_err(d, fused), 1e-6) << "p=" << p;
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(d[2 * V + v], 0.f) << "ignored row";
    EXPECT_EQ(l[2], 0.f);
  }
}

TEST(VocabParallelCrossEntropy, GradientMatchesFiniteDifferences) {
  const int64_t N = 4, V = 9;
  const std::vector<int32_t> targets = {8, 0, 4, -1};
  const float scale = 1.f / 3.f;
  auto logits = random_floats(N * V, 8, -2.f, 2.f);
  std::vector<double> x = to_double(logits);
  auto loss = [&] {  // mean cross-entropy in double over the counted rows
    double total = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (targets[n] < 0) continue;
      double mx = x[n * V], s = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, x[n * V + v]);
      for (int64_t v = 0; v < V; ++v) s += std::exp(x[n * V + v] - mx);
      total += std::log(s) + mx - x[n * V + targets[n]];
    }
    return total * scale;
  };
  std::vector<float> l, d;
  split_crossentropy(l, d, logits, targets, N, V, 2, scale);
  double lsum = 0;
  for (float v : l) lsum += v;
  EXPECT_NEAR(lsum * scale, loss(), 1e-5);
  EXPECT_LT(rel_err(d, numeric_grad(x, loss)), kGradTol);
}

TEST(VocabParallelCrossEntropy, NoGradientModeKeepsLogitsAndShardsWithoutRealColumnsAreInert) {
  const int64_t N = 2, Vl = 4;
  auto z = random_floats(N * Vl, 9);
  const auto kept = z;
  const std::vector<int32_t> targets = {1, 2};
  std::vector<float> m(N), stats(2 * N), losses(N);
  ops::crossentropy_rowmax(m.data(), z.data(), N, Vl, 0);  // a shard made only of padding
  EXPECT_EQ(m[0], -std::numeric_limits<float>::infinity());
  const std::vector<float> global_max = {0.5f, 0.25f};
  ops::crossentropy_sumexp_target(stats.data(), z.data(), global_max.data(), targets.data(), N, Vl, 0, 8);
  EXPECT_EQ(stats, std::vector<float>(2 * N, 0.f));
  ops::crossentropy_sumexp_target(stats.data(), z.data(), global_max.data(), targets.data(), N, Vl, Vl, 0);
  ops::crossentropy_finish(losses.data(), z.data(), stats.data(), global_max.data(), targets.data(), N, Vl, Vl, 0, 0.f);
  EXPECT_EQ(z, kept) << "dlogits_scale = 0 must leave the logits alone";
  EXPECT_TRUE(std::isfinite(losses[0]) && std::isfinite(losses[1]));
}

TEST(VocabParallelCrossEntropy, StableForLargeLogits) {
  const int64_t N = 3, V = 40;
  auto logits = random_floats(N * V, 10);
  for (auto& x : logits) x += 1000.f;
  const std::vector<int32_t> targets = {0, 39, 17};
  std::vector<float> losses(N), fused = logits;
  ops::softmax_crossentropy(losses.data(), fused.data(), targets.data(), N, V, 1.f);
  std::vector<float> l, d;
  split_crossentropy(l, d, logits, targets, N, V, 4, 1.f);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isfinite(l[n]));
    EXPECT_NEAR(l[n], losses[n], 1e-5);
  }
  EXPECT_LT(rel_err(d, fused), 1e-5);
}

}  // namespace
}  // namespace tessera::test
