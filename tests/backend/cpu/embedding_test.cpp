// Embedding forward/backward against a double reference and finite differences, with repeated
// tokens so the backward scatter has collisions.
#include <limits>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tessera::test {
namespace {

std::vector<double> embedding_ref(const std::vector<int32_t>& tokens, const std::vector<double>& wte,
                                  const std::vector<double>* wpe, int64_t B, int64_t T, int64_t C) {
  std::vector<double> out(B * T * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        out[(b * T + t) * C + c] = wte[tokens[b * T + t] * C + c] + (wpe ? (*wpe)[t * C + c] : 0.0);
  return out;
}

TEST(Embedding, ForwardAndBackwardMatchFiniteDifferences) {
  const int64_t B = 2, T = 3, C = 10, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 1, 4};  // token 1 three times, 4 twice
  auto wte = random_floats(V * C, 1);
  auto wpe = random_floats(T * C, 2);
  auto R = random_floats(B * T * C, 3);
  auto wte_d = to_double(wte), wpe_d = to_double(wpe);

  for (bool with_pos : {false, true}) {
    std::vector<float> out(B * T * C);
    ops::embedding_forward(out.data(), tokens.data(), wte.data(), with_pos ? wpe.data() : nullptr, B, T, C);
    EXPECT_LT(rel_err(out, embedding_ref(tokens, wte_d, with_pos ? &wpe_d : nullptr, B, T, C)), kForwardTol);

    std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
    ops::embedding_backward(dwte.data(), with_pos ? dwpe.data() : nullptr, R.data(), tokens.data(), B, T, C);
    auto loss = [&] { return weighted_sum(embedding_ref(tokens, wte_d, with_pos ? &wpe_d : nullptr, B, T, C), R); };
    EXPECT_LT(rel_err(dwte, numeric_grad(wte_d, loss)), kGradTol);
    if (with_pos) {
      EXPECT_LT(rel_err(dwpe, numeric_grad(wpe_d, loss)), kGradTol);
    }
  }
}

TEST(Embedding, BackwardAccumulates) {
  const int64_t B = 3, T = 8, C = 150, V = 7;  // C spans several column blocks
  std::vector<int32_t> tokens(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 5) % V);
  auto dout = random_floats(B * T * C, 4);
  std::vector<float> dwte(V * C), dwpe(T * C);
  expect_accumulates({&dwte, &dwpe}, [&] {
    ops::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
  });
}

// The tied-embedding tail exchanges only the rows some replica touched: a row counts when any
// element is other than +-0 (a NaN or a denormal counts; -0 alone does not), wherever it sits.
TEST(Embedding, NonzeroRowsFindsEveryTouchedRow) {
  const int64_t rows = 7, cols = 37;
  std::vector<float> x(rows * cols, 0.f);
  std::fill_n(x.begin() + 1 * cols, cols, -0.f);       // row 1: only negative zeros
  x[2 * cols + cols - 1] = 1e-40f;                      // row 2: a denormal in its last column
  x[3 * cols] = std::numeric_limits<float>::quiet_NaN();  // row 3: NaN first
  x[4 * cols + 5] = -0.f;                               // row 4: -0 then a value
  x[4 * cols + 20] = -3.f;
  x[6 * cols + 17] = 2.f;                               // row 6: one value mid-row
  std::vector<int32_t> mask(rows, 7);
  ops::nonzero_rows(mask.data(), x.data(), rows, cols);
  EXPECT_EQ(mask, (std::vector<int32_t>{0, 0, 1, 1, 1, 0, 1}));
}

}  // namespace
}  // namespace tessera::test
