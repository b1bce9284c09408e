// Determinism: every op gives bitwise-equal results on repeated runs; all ops except the oneDNN
// gemms give the same bits for 1 and 2 OpenMP threads (their reductions have a fixed order).
#include <omp.h>

#include <cstring>
#include <string>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

struct OpRun {
  std::string name;
  bool thread_independent;
  std::function<std::vector<float>()> run;  // fresh inputs in, all outputs concatenated out
};

void append(std::vector<float>& dst, const std::vector<float>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

std::vector<OpRun> op_runs() {
  std::vector<OpRun> runs;
  const int64_t B = 4, T = 32, C = 200, N = B * T, V = 300, OC = 96;
  runs.push_back({"matmul", false, [=] {
                    auto inp = random_floats(N * C, 1), w = random_floats(OC * C, 2), b = random_floats(OC, 3);
                    auto dout = random_floats(N * OC, 4);
                    std::vector<float> out(N * OC), dinp(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
                    ops::matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
                    ops::matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C,
                                         OC);
                    append(out, dinp);
                    append(out, dw);
                    append(out, db);
                    return out;
                  }});
  runs.push_back({"embedding", true, [=] {
                    std::vector<int32_t> tok(N);
                    for (int64_t i = 0; i < N; ++i) tok[i] = static_cast<int32_t>((i * 7919) % 13);  // many repeats
                    auto wte = random_floats(13 * C, 5), wpe = random_floats(T * C, 6), dout = random_floats(N * C, 7);
                    std::vector<float> out(N * C), dwte(13 * C, 0.0f), dwpe(T * C, 0.0f);
                    ops::embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
                    ops::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, T, C);
                    append(out, dwte);
                    append(out, dwpe);
                    return out;
                  }});
  runs.push_back({"layernorm", true, [=] {
                    auto x = random_floats(N * C, 8), w = random_floats(C, 9), b = random_floats(C, 10);
                    auto dout = random_floats(N * C, 11);
                    std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
                    ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C,
                                           1e-5f);
                    ops::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                                            mean.data(), rstd.data(), N, C);
                    for (auto* v : {&mean, &rstd, &dx, &dw, &db}) append(out, *v);
                    return out;
                  }});
  runs.push_back({"rmsnorm", true, [=] {
                    auto x = random_floats(N * C, 12), w = random_floats(C, 13), dout = random_floats(N * C, 14);
                    std::vector<float> out(N * C), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f);
                    ops::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
                    ops::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
                    for (auto* v : {&rstd, &dx, &dw}) append(out, *v);
                    return out;
                  }});
  runs.push_back({"gelu+swiglu", true, [=] {
                    auto x = random_floats(N * C, 15, -4.0f, 4.0f), dout = random_floats(N * C, 16);
                    std::vector<float> out(N * C), dx(N * C, 0.0f), sw(N * C / 2), dsw(N * C, 0.0f);
                    ops::gelu_forward(out.data(), x.data(), N * C);
                    ops::gelu_backward(dx.data(), x.data(), dout.data(), N * C);
                    ops::swiglu_forward(sw.data(), x.data(), N, C / 2);
                    ops::swiglu_backward(dsw.data(), dout.data(), x.data(), N, C / 2);
                    for (auto* v : {&dx, &sw, &dsw}) append(out, *v);
                    return out;
                  }});
  runs.push_back({"rope", true, [=] {
                    auto qkv = random_floats(N * 8 * 16, 17);
                    ops::rope_forward(qkv.data(), B, T, 4, 2, 16, 10000.0f);
                    auto d = qkv;
                    ops::rope_backward(d.data(), B, T, 4, 2, 16, 10000.0f);
                    append(qkv, d);
                    return qkv;
                  }});
  runs.push_back({"cross_entropy", true, [=] {
                    auto logits = random_floats(N * V, 18, -5.0f, 5.0f);
                    std::vector<int32_t> tgt(N);
                    for (int64_t i = 0; i < N; ++i) tgt[i] = i % 11 == 0 ? -1 : static_cast<int32_t>((i * 31) % V);
                    std::vector<float> losses(N);
                    ops::softmax_crossentropy(losses.data(), logits.data(), tgt.data(), N, V, 1.0f / N);
                    append(losses, logits);
                    return losses;
                  }});
  runs.push_back({"adamw+clip", true, [=] {
                    const int64_t n = 200003;
                    auto p = random_floats(n, 19), g = random_floats(n, 20);
                    std::vector<float> m(n, 0.0f), v(n, 0.0f);
                    const double ss = ops::sum_of_squares(g.data(), n);
                    ops::scale_inplace(g.data(), n, static_cast<float>(1.0 / std::sqrt(ss)));
                    for (int64_t step = 1; step <= 2; ++step)
                      ops::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                                        step, 1.f);
                    float ss_bits[2];
                    std::memcpy(ss_bits, &ss, sizeof(ss));
                    p.push_back(ss_bits[0]);
                    p.push_back(ss_bits[1]);
                    append(p, m);
                    append(p, v);
                    return p;
                  }});
  return runs;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Determinism, RepeatedRunsAreBitwiseEqual) {
  for (const auto& op : op_runs()) EXPECT_TRUE(bitwise_equal(op.run(), op.run())) << op.name;
}

TEST(Determinism, SameBitsForOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  for (const auto& op : op_runs()) {
    if (!op.thread_independent) continue;
    omp_set_num_threads(1);
    auto one = op.run();
    omp_set_num_threads(2);
    auto two = op.run();
    EXPECT_TRUE(bitwise_equal(one, two)) << op.name;
  }
  omp_set_num_threads(saved);
}

TEST(Determinism, SumOfSquaresIgnoresAlignment) {
  // The same values at a different address (shifted by one float) must give the same bits.
  const int64_t n = 70001;
  auto x = random_floats(n, 21);
  std::vector<float> shifted(n + 1);
  std::copy(x.begin(), x.end(), shifted.begin() + 1);
  EXPECT_EQ(ops::sum_of_squares(x.data(), n), ops::sum_of_squares(shifted.data() + 1, n));
}

}  // namespace
}  // namespace tessera::test
