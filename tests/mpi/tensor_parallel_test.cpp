// Tensor parallelism across real ranks: every rank builds the whole model and its tp shard from the
// same seed and checks that the shard's loss, gradients (via shard_pieces), tp-aware clipped norm
// and three AdamW steps equal the whole model's. Run at 2 ranks (tp 2) and 4 (tp 2 x dp 2, tp 4).
// The same with sequence parallelism (after summing the replicated gradients over tp), also as two
// pipeline stages, and its error for token rows that do not split over tp. Activation recomputation
// (selective, full) under tp and sequence parallelism gives bitwise the gradients of none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../token_util.h"
#include "comm/grid.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/recompute.h"
#include "model/transformer.h"
#include "mpi_test_world.h"
#include "tp_test_util.h"
#include "optim/adamw.h"
#include "parallel/tensor_parallel.h"
#include "../backend_util.h"

using namespace tessera;
using tessera::testing::random_tokens;
using tessera::testing::world;
using namespace tessera::testing;

namespace {

void run_case(const Case& c, int tp_size, bool sp = false) {
  Communicator& w = world();
  Result<Grid> grid = Grid::create(w, GridShape{w.size() / tp_size, 1, tp_size});
  ASSERT_TRUE(grid.ok()) << grid.status().to_string();
  Communicator& tpc = grid->tp();
  const ModelConfig& cfg = c.cfg;
  const int64_t B = 2, T = 16, N = B * T;
  const uint64_t seed = 1234;
  const std::string where =
      c.name + " tp=" + std::to_string(tp_size) + (sp ? " sp" : "") + " rank " + std::to_string(tpc.rank());

  ParamStore whole{ParamLayout(cfg)};
  ParamStore shard{ParamLayout(cfg, TensorParallelShard{tpc.rank(), tpc.size()})};
  init_parameters(whole, cfg, seed);
  init_parameters(shard, cfg, seed);
  Transformer full(tessera::testing::cpu_backend(), cfg, whole, B, T), part(tessera::testing::cpu_backend(), cfg, shard, B, T);
  TensorParallel hooks(tessera::testing::cpu_backend(), tpc, sp);
  part.set_tensor_parallel_hooks(&hooks);
  EXPECT_EQ(part.sequence_parallel(), sp);
  AdamWConfig opt_cfg;
  AdamW opt_full(whole.layout(), opt_cfg), opt_part(shard.layout(), opt_cfg);

  for (int step = 0; step < 3; ++step) {
    // The same batch on every rank; a few ignored targets, and tokens in every vocabulary shard.
    auto tokens = random_tokens(N, cfg.vocab_size, 10 + step);
    auto targets = random_tokens(N, cfg.vocab_size, 20 + step);
    targets[3] = -1;
    targets[7] = static_cast<int32_t>(cfg.vocab_size - 1);
    tokens[5] = static_cast<int32_t>(cfg.vocab_size - 1);
    whole.zero_grads();
    shard.zero_grads();
    const float loss_full = full.forward(tokens.data(), targets.data());
    full.backward(0.5f);
    const float loss_part = part.forward(tokens.data(), targets.data());
    part.backward(0.5f);
    ASSERT_TRUE(hooks.status().ok()) << hooks.status().to_string();
    if (sp) {
      const Status s = sequence_parallel_reduce_replicated_grads(tessera::testing::cpu_backend(), shard, tpc);
      ASSERT_TRUE(s.ok()) << s.to_string();
      expect_replicated_identical(shard, /*grads=*/true, tpc, where);
    }
    EXPECT_NEAR(loss_part, loss_full, 1e-5 * std::abs(loss_full)) << where << " step " << step;
    // No ASSERT between collectives: a rank that left early would leave its peers waiting.
    for (int64_t i = 0; i < N; ++i)
      EXPECT_NEAR(part.losses()[i], full.losses()[i], 1e-5 * std::abs(full.losses()[i]) + 1e-6) << where << " row " << i;
    expect_shard_equals_whole(whole, shard, /*grads=*/true, 1e-5, where + " step " + std::to_string(step));

    // A small max norm so that clipping scales every gradient.
    const float norm_full = clip_grad_norm(whole.grads(), whole.numel(), 0.05f);
    Result<float> norm_part = tp_clip_grad_norm(tessera::testing::cpu_backend(), shard, tpc, 0.05f);
    ASSERT_TRUE(norm_part.ok()) << norm_part.status().to_string();
    EXPECT_GT(norm_full, 0.05f) << "the test means to exercise clipping";
    EXPECT_NEAR(*norm_part, norm_full, 1e-5 * norm_full) << where << " step " << step;
    opt_full.step(whole.params(), whole.grads(), kLr);
    opt_part.step(shard.params(), shard.grads(), kLr);
    expect_shard_equals_whole(whole, shard, /*grads=*/false, 1e-5, where + " after step " + std::to_string(step));
    if (sp) expect_replicated_identical(shard, /*grads=*/false, tpc, where);
  }
}

class TensorParallelEqualsWholeModel : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallelEqualsWholeModel, LossGradientsClippedNormAndAdamWSteps) {
  const int tp = GetParam();
  if (world().size() % tp != 0) GTEST_SKIP() << "tp " << tp << " needs a multiple of " << tp << " ranks";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    run_case(c, tp);
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, TensorParallelEqualsWholeModel, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(TensorParallelGradNorm, ReplicatedTensorsCountOnceAndShardsAddUp) {
  Communicator& w = world();
  const ModelConfig cfg = model_preset("tiny").value();
  ParamStore shard{ParamLayout(cfg, TensorParallelShard{w.rank(), w.size()})};
  // Gradient 1 everywhere: the whole model's squared norm is its parameter count (+ no padding: V 256).
  float* g = shard.grads();
  std::memset(g, 0, static_cast<size_t>(shard.numel()) * sizeof(float));
  for (const ParamInfo& p : shard.layout().params()) std::fill(g + p.offset, g + p.offset + p.numel, 1.f);
  Result<double> ss = tp_grad_sum_of_squares(shard, w);
  ASSERT_TRUE(ss.ok()) << ss.status().to_string();
  EXPECT_EQ(*ss, static_cast<double>(cfg.num_parameters()));
}

// ---- sequence parallelism ----

// The tensor-parallel cases plus a tied-embedding LLaMA.
std::vector<Case> sequence_parallel_cases() {
  std::vector<Case> out = cases();
  ModelConfig tied_llama = model_preset("tiny-llama").value();
  tied_llama.n_head = 8;
  tied_llama.n_kv_head = 4;
  tied_llama.tied_embeddings = true;
  out.push_back({"llama_gqa_tied", tied_llama});
  return out;
}

class SequenceParallelEqualsWholeModel : public ::testing::TestWithParam<int> {};

TEST_P(SequenceParallelEqualsWholeModel, LossGradientsClippedNormAndAdamWSteps) {
  const int tp = GetParam();
  if (world().size() % tp != 0) GTEST_SKIP() << "tp " << tp << " needs a multiple of " << tp << " ranks";
  for (const Case& c : sequence_parallel_cases()) {
    SCOPED_TRACE(c.name);
    run_case(c, tp, /*sp=*/true);
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, SequenceParallelEqualsWholeModel, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

// Two pipeline stages in one process, layers [0, 1) and [1, L), each sequence-parallel over the tp
// group: the whole (B,T,C) stage output of the first is the second's stage input, and the second's
// whole input gradient the first's output gradient, on every tp rank. Loss and every gradient equal
// the whole model's.
TEST(SequenceParallelStages, WholeStageSeamsGiveTheWholeModelsLossAndGradients) {
  Communicator& w = world();
  for (int tp_size : {2, 4}) {
    if (w.size() % tp_size != 0) continue;
    Result<Grid> grid = Grid::create(w, GridShape{w.size() / tp_size, 1, tp_size});
    ASSERT_TRUE(grid.ok()) << grid.status().to_string();
    Communicator& tpc = grid->tp();
    for (const Case& c : sequence_parallel_cases()) {
      const ModelConfig& cfg = c.cfg;
      if (cfg.tied_embeddings) continue;  // a tied head's gradient is split between the stages' copies
      const std::string where =
          c.name + " tp=" + std::to_string(tp_size) + " sp stages rank " + std::to_string(tpc.rank());
      const int64_t B = 2, T = 16, N = B * T, C = cfg.d_model;
      const int L = static_cast<int>(cfg.n_layer);
      const TensorParallelShard shard{tpc.rank(), tpc.size()};
      ParamStore whole{ParamLayout(cfg)}, s0{ParamLayout(cfg, 0, 1, shard)}, s1{ParamLayout(cfg, 1, L, shard)};
      for (ParamStore* st : {&whole, &s0, &s1}) init_parameters(*st, cfg, 99);
      Transformer full(tessera::testing::cpu_backend(), cfg, whole, B, T), first(tessera::testing::cpu_backend(), cfg, s0, B, T), last(tessera::testing::cpu_backend(), cfg, s1, B, T);
      TensorParallel hooks(tessera::testing::cpu_backend(), tpc, /*sequence_parallel=*/true);
      first.set_tensor_parallel_hooks(&hooks);
      last.set_tensor_parallel_hooks(&hooks);
      auto tokens = random_tokens(N, cfg.vocab_size, 71), targets = random_tokens(N, cfg.vocab_size, 72);
      for (ParamStore* st : {&whole, &s0, &s1}) st->zero_grads();
      const float loss_full = full.forward(tokens.data(), targets.data());
      full.backward();
      first.forward(tokens.data(), nullptr);
      std::memcpy(last.stage_input(), first.stage_output(), N * C * sizeof(float));
      const float loss = last.forward(nullptr, targets.data());
      last.backward();
      std::memcpy(first.stage_output_grad(), last.stage_input_grad(), N * C * sizeof(float));
      first.backward();
      ASSERT_TRUE(hooks.status().ok()) << hooks.status().to_string();
      EXPECT_NEAR(loss, loss_full, 1e-5 * std::abs(loss_full)) << where;
      for (ParamStore* st : {&s0, &s1}) {
        const Status s = sequence_parallel_reduce_replicated_grads(tessera::testing::cpu_backend(), *st, tpc);
        ASSERT_TRUE(s.ok()) << s.to_string();
        expect_shard_equals_whole(whole, *st, /*grads=*/true, 1e-5, where);
      }
    }
  }
}

// ---- activation recomputation ----

const Recompute kRecomputeModes[] = {Recompute::none, Recompute::selective, Recompute::full};

// The first element whose bits differ between two stores of the same layout ("" when none).
std::string first_bit_difference(const ParamStore& a, const ParamStore& b, bool grads) {
  for (const ParamInfo& p : a.layout().params()) {
    const float* x = (grads ? a.grads() : a.params()) + p.offset;
    const float* y = (grads ? b.grads() : b.params()) + p.offset;
    for (int64_t i = 0; i < p.numel; ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0)
        return p.name + "[" + std::to_string(i) + "]: " + std::to_string(x[i]) + " vs " + std::to_string(y[i]);
  }
  return "";
}

// One tp shard per recomputation mode, from the same seed: two micro-batches per step, clipping over
// tp and three AdamW steps. Each micro-batch's loss and per-row losses, the gradients (after the
// sequence-parallel sum of replicated ones), the clipped norm and the parameters after each step of
// selective and full are those of none, bit for bit.
void run_recompute_case(const Case& c, int tp_size, bool sp) {
  Communicator& w = world();
  Result<Grid> grid = Grid::create(w, GridShape{w.size() / tp_size, 1, tp_size});
  ASSERT_TRUE(grid.ok()) << grid.status().to_string();
  Communicator& tpc = grid->tp();
  const ModelConfig& cfg = c.cfg;
  const int64_t B = 2, T = 16, N = B * T;
  const std::string where =
      c.name + " tp=" + std::to_string(tp_size) + (sp ? " sp" : "") + " rank " + std::to_string(tpc.rank());
  const TensorParallelShard shard{tpc.rank(), tpc.size()};
  std::vector<std::unique_ptr<ParamStore>> stores;
  std::vector<std::unique_ptr<TensorParallel>> hooks;
  std::vector<std::unique_ptr<Transformer>> nets;
  std::vector<std::unique_ptr<AdamW>> opts;
  for (Recompute mode : kRecomputeModes) {
    stores.push_back(std::make_unique<ParamStore>(ParamLayout(cfg, shard)));
    init_parameters(*stores.back(), cfg, 4321);
    hooks.push_back(std::make_unique<TensorParallel>(tessera::testing::cpu_backend(), tpc, sp));
    nets.push_back(std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, *stores.back(), B, T, mode));
    nets.back()->set_tensor_parallel_hooks(hooks.back().get());
    opts.push_back(std::make_unique<AdamW>(stores.back()->layout(), AdamWConfig{}));
  }
  // No ASSERT between collectives: a rank that left early would leave its peers waiting.
  for (int step = 0; step < 3; ++step) {
    for (auto& st : stores) st->zero_grads();
    for (int mb = 0; mb < 2; ++mb) {
      auto tokens = random_tokens(N, cfg.vocab_size, 300 + 10 * step + mb);
      auto targets = random_tokens(N, cfg.vocab_size, 400 + 10 * step + mb);
      targets[3] = -1;
      float loss[3];
      for (int i = 0; i < 3; ++i) {
        loss[i] = nets[i]->forward(tokens.data(), targets.data());
        nets[i]->backward(0.5f);
      }
      for (int i = 1; i < 3; ++i) {
        const char* mode = recompute_name(kRecomputeModes[i]).data();
        EXPECT_EQ(std::memcmp(&loss[i], &loss[0], sizeof(float)), 0)
            << where << " " << mode << " step " << step << " micro-batch " << mb << ": " << loss[i] << " vs " << loss[0];
        EXPECT_EQ(std::memcmp(nets[i]->losses(), nets[0]->losses(), N * sizeof(float)), 0) << where << " " << mode;
      }
    }
    if (sp)
      for (auto& st : stores) {
        const Status s = sequence_parallel_reduce_replicated_grads(tessera::testing::cpu_backend(), *st, tpc);
        EXPECT_TRUE(s.ok()) << s.to_string();
      }
    float norm[3];
    for (int i = 0; i < 3; ++i) {
      Result<float> n = tp_clip_grad_norm(tessera::testing::cpu_backend(), *stores[i], tpc, 0.05f);
      EXPECT_TRUE(n.ok()) << n.status().to_string();
      norm[i] = n.ok() ? *n : -1.f;
    }
    for (int i = 1; i < 3; ++i) {
      const char* mode = recompute_name(kRecomputeModes[i]).data();
      EXPECT_EQ(first_bit_difference(*stores[i], *stores[0], /*grads=*/true), "")
          << where << " " << mode << " step " << step << ": the first gradient that differs from none";
      EXPECT_EQ(std::memcmp(&norm[i], &norm[0], sizeof(float)), 0) << where << " " << mode << ": clipped norm";
    }
    for (int i = 0; i < 3; ++i) opts[i]->step(stores[i]->params(), stores[i]->grads(), kLr);
    for (int i = 1; i < 3; ++i)
      EXPECT_EQ(first_bit_difference(*stores[i], *stores[0], /*grads=*/false), "")
          << where << " " << recompute_name(kRecomputeModes[i]) << " after step " << step;
  }
  for (auto& h : hooks) EXPECT_TRUE(h->status().ok()) << where << ": " << h->status().to_string();
}

class RecomputeUnderTensorParallelism : public ::testing::TestWithParam<int> {};

TEST_P(RecomputeUnderTensorParallelism, SelectiveAndFullGiveBitwiseTheGradientsOfNone) {
  const int tp = GetParam();
  if (world().size() % tp != 0) GTEST_SKIP() << "tp " << tp << " needs a multiple of " << tp << " ranks";
  for (bool sp : {false, true})
    for (const Case& c : sequence_parallel_cases()) {
      SCOPED_TRACE(c.name + (sp ? " sequence parallel" : ""));
      run_recompute_case(c, tp, sp);
    }
}

INSTANTIATE_TEST_SUITE_P(Tp, RecomputeUnderTensorParallelism, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

// Sequence-parallel pipeline stages of two layers each with full recomputation: the whole stage
// output, the whole input gradient at the seam and every gradient are those of the same stages
// without recomputation, bitwise.
TEST(RecomputeUnderSequenceParallelStages, FullRecomputationKeepsTheWholeSeamsAndGradients) {
  Communicator& w = world();
  for (int tp_size : {2, 4}) {
    if (w.size() % tp_size != 0) continue;
    Result<Grid> grid = Grid::create(w, GridShape{w.size() / tp_size, 1, tp_size});
    ASSERT_TRUE(grid.ok()) << grid.status().to_string();
    Communicator& tpc = grid->tp();
    for (const Case& c : sequence_parallel_cases()) {
      ModelConfig cfg = c.cfg;
      cfg.n_layer = 4;
      const std::string where = c.name + " tp=" + std::to_string(tp_size) + " rank " + std::to_string(tpc.rank());
      const int64_t B = 2, T = 16, N = B * T, C = cfg.d_model;
      const TensorParallelShard shard{tpc.rank(), tpc.size()};
      struct Pipeline {
        ParamStore s0, s1;
        TensorParallel hooks;
        Transformer first, last;
        Pipeline(const ModelConfig& cfg, TensorParallelShard shard, Communicator& tpc, int64_t B, int64_t T, Recompute r)
            : s0(ParamLayout(cfg, 0, 2, shard)), s1(ParamLayout(cfg, 2, 4, shard)), hooks(tessera::testing::cpu_backend(), tpc, true),
              first(tessera::testing::cpu_backend(), cfg, s0, B, T, r), last(tessera::testing::cpu_backend(), cfg, s1, B, T, r) {
          init_parameters(s0, cfg, 55);
          init_parameters(s1, cfg, 55);
          first.set_tensor_parallel_hooks(&hooks);
          last.set_tensor_parallel_hooks(&hooks);
          s0.zero_grads();
          s1.zero_grads();
        }
      };
      Pipeline none(cfg, shard, tpc, B, T, Recompute::none), full(cfg, shard, tpc, B, T, Recompute::full);
      auto tokens = random_tokens(N, cfg.vocab_size, 81), targets = random_tokens(N, cfg.vocab_size, 82);
      float loss[2];
      int i = 0;
      for (Pipeline* p : {&none, &full}) {
        p->first.forward(tokens.data(), nullptr);
        std::memcpy(p->last.stage_input(), p->first.stage_output(), N * C * sizeof(float));
        loss[i++] = p->last.forward(nullptr, targets.data());
        p->last.backward();
        std::memcpy(p->first.stage_output_grad(), p->last.stage_input_grad(), N * C * sizeof(float));
        p->first.backward();
      }
      EXPECT_EQ(std::memcmp(&loss[0], &loss[1], sizeof(float)), 0) << where;
      EXPECT_EQ(std::memcmp(none.first.stage_output(), full.first.stage_output(), N * C * sizeof(float)), 0) << where;
      EXPECT_EQ(std::memcmp(none.last.stage_input_grad(), full.last.stage_input_grad(), N * C * sizeof(float)), 0)
          << where;
      EXPECT_EQ(first_bit_difference(full.s0, none.s0, true), "") << where << " stage 0";
      EXPECT_EQ(first_bit_difference(full.s1, none.s1, true), "") << where << " stage 1";
      EXPECT_TRUE(none.hooks.status().ok() && full.hooks.status().ok()) << where;
    }
  }
}

TEST(SequenceParallelRows, TokenRowsMustSplitOverTpNamingBoth) {
  const Status bad = validate_sequence_parallel(30, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  for (const char* part : {"micro_batch*seq_len = 30", "tp = 4", "not divisible"})
    EXPECT_NE(bad.message().find(part), std::string::npos) << bad.message();
  EXPECT_TRUE(validate_sequence_parallel(32, 4).ok());
  EXPECT_TRUE(validate_sequence_parallel(7, 1).ok());
  EXPECT_FALSE(validate_sequence_parallel(8, 0).ok());
  // The hooks refuse such a region too (every rank alike, before any collective) and keep the error.
  Communicator& w = world();
  TensorParallel hooks(tessera::testing::cpu_backend(), w, /*sequence_parallel=*/true);
  std::vector<float> x(static_cast<size_t>(w.size() + 1) * 2, 1.f);
  hooks.copy_to_region_forward({TpPoint::attn_qkv, 0, x.data(), w.size() + 1, 2});
  ASSERT_FALSE(hooks.status().ok());
  EXPECT_NE(hooks.status().message().find("not divisible"), std::string::npos) << hooks.status().to_string();
  EXPECT_NE(hooks.status().message().find("attn_qkv"), std::string::npos) << hooks.status().to_string();
}

// An in-place reduce-scatter and all-gather along rows: rank r's rows hold the sums / every row.
TEST(SequenceParallelHooks, RowCollectivesRunInPlace) {
  Communicator& w = world();
  const int p = w.size(), r = w.rank();
  const int64_t rows = 2 * p, cols = 3, n = rows / p;
  TensorParallel hooks(tessera::testing::cpu_backend(), w, /*sequence_parallel=*/true);
  std::vector<float> y(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) y[i] = static_cast<float>(i * 10 + r);
  hooks.reduce_from_region_forward({TpPoint::attn_proj, 0, y.data(), rows, cols});
  ASSERT_TRUE(hooks.status().ok()) << hooks.status().to_string();
  for (int64_t i = r * n * cols; i < (r + 1) * n * cols; ++i)
    EXPECT_EQ(y[i], static_cast<float>(p * i * 10 + p * (p - 1) / 2)) << "element " << i;
  std::vector<float> x(static_cast<size_t>(rows * cols), -1.f);
  for (int64_t i = r * n * cols; i < (r + 1) * n * cols; ++i) x[i] = static_cast<float>(i);
  hooks.reduce_from_region_backward({TpPoint::attn_proj, 0, x.data(), rows, cols});
  ASSERT_TRUE(hooks.status().ok()) << hooks.status().to_string();
  for (int64_t i = 0; i < rows * cols; ++i) EXPECT_EQ(x[i], static_cast<float>(i)) << "element " << i;
}

}  // namespace
