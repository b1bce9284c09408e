// Tests of the ring-attention block-pair kernel (backend/ops.h: attention_block_*): chunked forward with
// the log-sum-exp merge and chunked backward against the whole-sequence ops::attention_forward /
// attention_backward, in several merge orders and with grouped-query heads, plus a Tq != Tk full-mask
// check against a naive double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace tessera::test {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// |a - b| <= tol * (1 + |b|) elementwise: relative for large entries, absolute near zero.
template <typename Ref>
void expect_close(const std::vector<float>& a, const std::vector<Ref>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])) /
                       (1.0 + std::abs(static_cast<double>(b[i])));
    worst = std::max(worst, err);
    if (!(err <= tol)) ++bad;  // NaN counts as bad
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << a.size() << " entries off, worst " << worst;
}

struct Dims {
  int64_t B, T, NH, NKV, HS;
  int64_t C3() const { return (NH + 2 * NKV) * HS; }
  int64_t CO() const { return NH * HS; }
};

// Rows [t0, t0+n) of each batch of a (B, T, width) buffer as its own (B, n, width) buffer: how a
// context-parallel rank holds its chunk.
std::vector<float> take_rows(const std::vector<float>& full, int64_t B, int64_t T, int64_t width, int64_t t0,
                             int64_t n) {
  std::vector<float> out(B * n * width);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < width; ++c) out[(b * n + t) * width + c] = full[(b * T + t0 + t) * width + c];
  return out;
}
void put_rows(std::vector<float>& full, const std::vector<float>& part, int64_t B, int64_t T, int64_t width,
              int64_t t0, int64_t n) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < width; ++c) full[(b * T + t0 + t) * width + c] = part[(b * n + t) * width + c];
}

// The order a query chunk c visits its kv chunks 0..c (c itself with the causal mask).
enum class Order { causal_first, causal_last, reversed, causal_middle };
const char* order_name(Order o) {
  switch (o) {
    case Order::causal_first: return "causal_first";
    case Order::causal_last: return "causal_last";
    case Order::reversed: return "reversed";
    case Order::causal_middle: return "causal_middle";
  }
  return "?";
}
std::vector<int64_t> visit_order(int64_t c, Order o) {
  std::vector<int64_t> before;
  for (int64_t j = 0; j < c; ++j) before.push_back(j);
  std::vector<int64_t> r;
  switch (o) {
    case Order::causal_first:
      r.push_back(c);
      r.insert(r.end(), before.begin(), before.end());
      break;
    case Order::causal_last:
      r = before;
      r.push_back(c);
      break;
    case Order::reversed:  // c, c-1, ..., 0: as a ring passes chunks backwards
      for (int64_t j = c; j >= 0; --j) r.push_back(j);
      break;
    case Order::causal_middle:
      r.insert(r.end(), before.begin(), before.begin() + c / 2);
      r.push_back(c);
      r.insert(r.end(), before.begin() + c / 2, before.end());
      break;
  }
  return r;
}

struct Case {
  const char* name;
  Dims d;
  int64_t chunks;
};

// The whole sequence, split into `chunks` chunks, run the ring way: forward merges, then backward of
// L = sum(out * R) with the final (out, lse). Results scattered back to whole-sequence buffers.
struct RingRun {
  std::vector<float> out, lse, dqkv;
};
RingRun run_ring(const Dims& d, int64_t chunks, Order order, const std::vector<float>& qkv,
                 const std::vector<float>& R) {
  const int64_t Tc = d.T / chunks, C3 = d.C3(), CO = d.CO();
  const int64_t k_off = d.NH * d.HS, v_off = (d.NH + d.NKV) * d.HS;
  std::vector<std::vector<float>> qkv_c, dqkv_c(chunks, std::vector<float>(d.B * Tc * C3, 0.0f));
  for (int64_t c = 0; c < chunks; ++c) qkv_c.push_back(take_rows(qkv, d.B, d.T, C3, c * Tc, Tc));

  RingRun r;
  r.out.assign(d.B * d.T * CO, 0.0f);
  r.lse.assign(d.B * d.NH * d.T, 0.0f);
  r.dqkv.assign(d.B * d.T * C3, 0.0f);
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<float> out(d.B * Tc * CO, 0.0f), lse(d.B * d.NH * Tc, -std::numeric_limits<float>::infinity());
    const float* q = qkv_c[c].data();
    for (int64_t j : visit_order(c, order)) {
      const float* kv = qkv_c[j].data();
      ops::attention_block_forward(out.data(), lse.data(), q, C3, kv + k_off, kv + v_off, C3, d.B, Tc, Tc, d.NH, d.NKV,
                              d.HS, j == c ? ops::BlockMask::causal : ops::BlockMask::full);
    }
    const std::vector<float> dout = take_rows(R, d.B, d.T, CO, c * Tc, Tc);
    std::vector<float> delta(d.B * d.NH * Tc);
    ops::attention_block_delta(delta.data(), dout.data(), out.data(), d.B, Tc, d.NH, d.HS);
    for (int64_t j : visit_order(c, order)) {
      const float* kv = qkv_c[j].data();
      float* dkv = dqkv_c[j].data();
      ops::attention_block_backward(dqkv_c[c].data(), C3, dkv + k_off, dkv + v_off, C3, dout.data(), q, C3, kv + k_off,
                               kv + v_off, C3, lse.data(), delta.data(), d.B, Tc, Tc, d.NH, d.NKV, d.HS,
                               j == c ? ops::BlockMask::causal : ops::BlockMask::full);
    }
    put_rows(r.out, out, d.B, d.T, CO, c * Tc, Tc);
    // lse(B, NH, Tc) rows are (b, h) pairs of Tc queries each: the same put, with B*NH "batches" of width 1.
    put_rows(r.lse, lse, d.B * d.NH, d.T, 1, c * Tc, Tc);
  }
  for (int64_t c = 0; c < chunks; ++c) put_rows(r.dqkv, dqkv_c[c], d.B, d.T, C3, c * Tc, Tc);
  return r;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // names, not bytes, in failure messages

class AttentionBlockRing : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionBlockRing, ChunkedForwardAndBackwardMatchWholeSequenceInEveryOrder) {
  const Case& cs = GetParam();
  const Dims& d = cs.d;
  const auto qkv = randn(d.B * d.T * d.C3(), 11);
  const auto R = randn(d.B * d.T * d.CO(), 12);

  std::vector<float> out(d.B * d.T * d.CO()), lse(d.B * d.NH * d.T), dqkv(d.B * d.T * d.C3(), 0.0f);
  ops::attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.NH, d.NKV, d.HS);
  ops::attention_backward(dqkv.data(), R.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.NH, d.NKV, d.HS);

  for (Order order : {Order::causal_first, Order::causal_last, Order::reversed, Order::causal_middle}) {
    SCOPED_TRACE(std::string(cs.name) + " order " + order_name(order));
    const RingRun r = run_ring(d, cs.chunks, order, qkv, R);
    expect_close(r.out, out, 1e-5, "out");
    expect_close(r.lse, lse, 1e-5, "lse");
    expect_close(r.dqkv, dqkv, 1e-4, "dqkv");
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionBlock, AttentionBlockRing,
                         ::testing::Values(Case{"mha_T32_C2", {2, 32, 4, 4, 16}, 2},
                                           Case{"mha_T32_C4", {2, 32, 4, 4, 16}, 4},
                                           Case{"gqa_T16_C2", {2, 16, 4, 2, 8}, 2},
                                           Case{"gqa_T32_C4", {2, 32, 4, 2, 8}, 4}),
                         [](const auto& info) { return std::string(info.param.name); });

// Naive double-precision attention of Tq queries over all Tk keys (the full mask): out, lse, and the
// gradients of L = sum(out * dout). Layouts as ops.h attention_block_*, with explicit strides.
struct NaiveFull {
  std::vector<double> out, lse, dq, dk, dv;
};
NaiveFull naive_full(const std::vector<float>& q, int64_t qs, const std::vector<float>& kv, int64_t kvs,
                     int64_t k_off, int64_t v_off, const std::vector<float>& dout, int64_t B, int64_t Tq, int64_t Tk,
                     int64_t NH, int64_t NKV, int64_t HS) {
  NaiveFull r;
  const int64_t CO = NH * HS, group = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  r.out.assign(B * Tq * CO, 0.0);
  r.lse.assign(B * NH * Tq, 0.0);
  r.dq.assign(B * Tq * qs, 0.0);
  r.dk.assign(B * Tk * kvs, 0.0);
  r.dv.assign(B * Tk * kvs, 0.0);
  auto Q = [&](int64_t b, int64_t i, int64_t h, int64_t d) -> double { return q[(b * Tq + i) * qs + h * HS + d]; };
  auto K = [&](int64_t b, int64_t j, int64_t g, int64_t d) -> double {
    return kv[(b * Tk + j) * kvs + k_off + g * HS + d];
  };
  auto V = [&](int64_t b, int64_t j, int64_t g, int64_t d) -> double {
    return kv[(b * Tk + j) * kvs + v_off + g * HS + d];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t g = h / group;
        std::vector<double> s(Tk), p(Tk), dp(Tk);
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          s[j] = 0;
          for (int64_t d = 0; d < HS; ++d) s[j] += Q(b, i, h, d) * K(b, j, g, d);
          s[j] *= scale;
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j < Tk; ++j) sum += std::exp(s[j] - m);
        r.lse[(b * NH + h) * Tq + i] = m + std::log(sum);
        for (int64_t j = 0; j < Tk; ++j) p[j] = std::exp(s[j] - m) / sum;
        double D = 0;
        for (int64_t d = 0; d < HS; ++d) {
          double o = 0;
          for (int64_t j = 0; j < Tk; ++j) o += p[j] * V(b, j, g, d);
          r.out[(b * Tq + i) * CO + h * HS + d] = o;
          D += o * dout[(b * Tq + i) * CO + h * HS + d];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          dp[j] = 0;
          for (int64_t d = 0; d < HS; ++d) dp[j] += dout[(b * Tq + i) * CO + h * HS + d] * V(b, j, g, d);
          const double ds = p[j] * (dp[j] - D) * scale;
          for (int64_t d = 0; d < HS; ++d) {
            r.dv[(b * Tk + j) * kvs + v_off + g * HS + d] += p[j] * dout[(b * Tq + i) * CO + h * HS + d];
            r.dk[(b * Tk + j) * kvs + k_off + g * HS + d] += ds * Q(b, i, h, d);
            r.dq[(b * Tq + i) * qs + h * HS + d] += ds * K(b, j, g, d);
          }
        }
      }
  return r;
}

// One head layout of the full-mask tests: strides wider than the heads (padding columns must stay
// untouched), GQA, random q, k/v and dout, and the naive reference.
struct FullMaskCase {
  int64_t B, Tq, Tk, NH, NKV, HS;
  int64_t CO = NH * HS, qs = CO + 3, k_off = 1, v_off = k_off + NKV * HS + 2, kvs = v_off + NKV * HS + 1;
  std::vector<float> q = randn(B * Tq * qs, 21), kv = randn(B * Tk * kvs, 22), dout = randn(B * Tq * CO, 23);
  NaiveFull ref = naive_full(q, qs, kv, kvs, k_off, v_off, dout, B, Tq, Tk, NH, NKV, HS);

  // The backward from ones (it must add, and leave the padding columns alone) against the reference.
  void expect_backward_matches(const std::vector<float>& out, const std::vector<float>& lse) const {
    std::vector<float> delta(B * NH * Tq);
    ops::attention_block_delta(delta.data(), dout.data(), out.data(), B, Tq, NH, HS);
    std::vector<float> dq(B * Tq * qs, 1.0f), dkv(B * Tk * kvs, 1.0f);
    ops::attention_block_backward(dq.data(), qs, dkv.data() + k_off, dkv.data() + v_off, kvs, dout.data(), q.data(),
                                  qs, kv.data() + k_off, kv.data() + v_off, kvs, lse.data(), delta.data(), B, Tq, Tk,
                                  NH, NKV, HS, ops::BlockMask::full);
    std::vector<double> dq_ref(ref.dq), dkv_ref(ref.dk);
    for (auto& x : dq_ref) x += 1.0;
    for (size_t i = 0; i < dkv_ref.size(); ++i) dkv_ref[i] += ref.dv[i] + 1.0;  // dk and dv occupy disjoint columns
    expect_close(dq, dq_ref, 1e-4, "dq");
    expect_close(dkv, dkv_ref, 1e-4, "dk, dv");
  }
  void forward(std::vector<float>& out, std::vector<float>& lse) const {
    out.assign(B * Tq * CO, 0.0f);
    lse.assign(B * NH * Tq, -std::numeric_limits<float>::infinity());
    ops::attention_block_forward(out.data(), lse.data(), q.data(), qs, kv.data() + k_off, kv.data() + v_off, kvs, B,
                                 Tq, Tk, NH, NKV, HS, ops::BlockMask::full);
  }
};

// Tq != Tk, GQA; the keys also split 5 + 7 into two merged blocks, which must agree with the one-block call.
TEST(AttentionBlock, FullMaskWithTqNotTkMatchesNaiveReference) {
  const FullMaskCase c{2, 8, 12, 4, 2, 8};
  std::vector<float> out, lse;
  c.forward(out, lse);
  expect_close(out, c.ref.out, 1e-5, "out");
  expect_close(lse, c.ref.lse, 1e-5, "lse");

  // Two key blocks: keys [0,5) and [5,12) of each batch, each copied out as its own (B, n, kvs) buffer.
  std::vector<float> out2(c.B * c.Tq * c.CO, 0.0f), lse2(c.B * c.NH * c.Tq, -std::numeric_limits<float>::infinity());
  for (auto [t0, n] : {std::pair<int64_t, int64_t>{5, 7}, std::pair<int64_t, int64_t>{0, 5}}) {
    const auto part = take_rows(c.kv, c.B, c.Tk, c.kvs, t0, n);
    ops::attention_block_forward(out2.data(), lse2.data(), c.q.data(), c.qs, part.data() + c.k_off,
                                 part.data() + c.v_off, c.kvs, c.B, c.Tq, n, c.NH, c.NKV, c.HS, ops::BlockMask::full);
  }
  expect_close(out2, c.ref.out, 1e-5, "out of two merged key blocks");
  expect_close(lse2, c.ref.lse, 1e-5, "lse of two merged key blocks");
  c.expect_backward_matches(out, lse);
}

// 1024 keys: the backward's probability rows get a padded stride (never 4 KiB apart).
TEST(AttentionBlock, FullMaskOver1024KeysMatchesNaiveReference) {
  const FullMaskCase c{1, 3, 1024, 2, 1, 8};
  std::vector<float> out, lse;
  c.forward(out, lse);
  expect_close(out, c.ref.out, 1e-5, "out");
  c.expect_backward_matches(out, lse);
}

}  // namespace
}  // namespace tessera::test
