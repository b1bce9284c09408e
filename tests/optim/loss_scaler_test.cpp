// Dynamic loss scaling (optim/loss_scaler.h): the inf/NaN check, unscaling, backoff and growth; an
// fp16 training loop with a planted overflow (one gradient set to inf) skips that step -- parameters
// and the optimizer's step count unchanged -- halves the scale, and then keeps training; scaled and
// unscaled fp16 gradients match the fp32 ones; the collective check on a world of one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../token_util.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "../backend_util.h"

namespace tessera {
using tessera::testing::random_tokens;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LossScaler, FindsInfAndNanAnywhere) {
  std::vector<float> g(200003, 0.5f);
  const LossScaler scaler(tessera::testing::cpu_backend());
  EXPECT_FALSE(scaler.has_non_finite(g.data(), int64_t(g.size())));
  for (size_t at : {size_t(0), size_t(17), size_t(65536), g.size() - 1}) {
    for (float bad : {kInf, -kInf, std::nanf("")}) {
      g[at] = bad;
      EXPECT_TRUE(scaler.has_non_finite(g.data(), int64_t(g.size()))) << at;
      g[at] = 0.5f;
    }
  }
  g[5] = std::numeric_limits<float>::max();  // large but finite
  EXPECT_FALSE(scaler.has_non_finite(g.data(), int64_t(g.size())));
}

TEST(LossScaler, BacksOffGrowsAndUnscales) {
  LossScaler s(tessera::testing::cpu_backend(), LossScalerConfig{.init_scale = 1024.f, .growth_interval = 3});
  std::vector<float> a = {1024.f, -2048.f}, b = {512.f};
  GradSpan spans[] = {{a.data(), 2}, {b.data(), 1}};
  EXPECT_TRUE(s.unscale_or_skip(spans, nullptr).value());
  EXPECT_EQ(a, (std::vector<float>{1.f, -2.f}));
  EXPECT_EQ(b, (std::vector<float>{0.5f}));
  EXPECT_EQ(s.scale(), 1024.f);
  b[0] = kInf;
  EXPECT_FALSE(s.unscale_or_skip(spans, nullptr).value());
  EXPECT_EQ(a, (std::vector<float>{1.f, -2.f}));  // not unscaled on overflow
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.good_steps_in_a_row(), 0);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_TRUE(s.update(false));  // third good step in a row
  EXPECT_EQ(s.scale(), 1024.f);
  EXPECT_EQ(s.good_steps_in_a_row(), 0);
  LossScaler tiny(tessera::testing::cpu_backend(), LossScalerConfig{.init_scale = 1.f});
  tiny.update(true);
  EXPECT_EQ(tiny.scale(), 1.f);  // min_scale
}


// The trainer's step with a loss scaler (the hook described in optim/loss_scaler.cpp), on one rank.
struct Fp16Trainer {
  ModelConfig cfg = model_preset("tiny").value();
  static constexpr int64_t B = 2, T = 32;
  ParamStore store{ParamLayout(cfg)};
  Transformer net{tessera::testing::cpu_backend(), cfg, store, B, T};
  AdamW opt{store.layout(), AdamWConfig{}};
  LossScaler scaler{tessera::testing::cpu_backend(), LossScalerConfig{.growth_interval = 2000}};
  Fp16Trainer() {
    init_parameters(store, cfg, 99);
    net.set_precision(Precision::fp16);
  }
  // Returns the loss; `plant` sets one gradient to inf after backward.
  float step(int64_t s, bool plant, bool* stepped) {
    auto tokens = random_tokens(B * T, 16, 500 + s % 4);
    std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
    targets.push_back(tokens[0]);
    store.zero_grads();
    const float loss = net.forward(tokens.data(), targets.data());
    net.backward(scaler.scale());
    if (plant) store.grads()[store.numel() / 2] = kInf;
    GradSpan g{store.grads(), store.numel()};
    *stepped = scaler.unscale_or_skip({&g, 1}, nullptr).value();
    if (*stepped) {
      clip_grad_norm(store.grads(), store.numel(), 1.0f);
      opt.step(store.params(), store.grads(), 3e-3f);
    }
    return loss;
  }
};

TEST(LossScaler, PlantedOverflowSkipsTheStepHalvesTheScaleAndTrainingRecovers) {
  Fp16Trainer t;
  std::vector<float> losses;
  bool stepped = false;
  for (int64_t s = 0; s < 5; ++s) {
    losses.push_back(t.step(s, false, &stepped));
    ASSERT_TRUE(stepped) << s;
  }
  EXPECT_EQ(t.opt.steps_taken(), 5);
  EXPECT_EQ(t.scaler.scale(), 65536.f);
  const std::vector<float> params(t.store.params(), t.store.params() + t.store.numel());
  const std::vector<float> m(t.opt.m(), t.opt.m() + t.opt.numel()), v(t.opt.v(), t.opt.v() + t.opt.numel());
  t.step(5, /*plant=*/true, &stepped);
  EXPECT_FALSE(stepped);
  EXPECT_EQ(t.opt.steps_taken(), 5);
  EXPECT_EQ(t.scaler.scale(), 32768.f);
  EXPECT_EQ(t.scaler.skipped_steps(), 1);
  EXPECT_EQ(std::memcmp(params.data(), t.store.params(), params.size() * 4), 0);
  EXPECT_EQ(std::memcmp(m.data(), t.opt.m(), m.size() * 4), 0);
  EXPECT_EQ(std::memcmp(v.data(), t.opt.v(), v.size() * 4), 0);
  for (int64_t s = 6; s < 30; ++s) {
    losses.push_back(t.step(s, false, &stepped));
    ASSERT_TRUE(stepped) << s;
    ASSERT_TRUE(std::isfinite(losses.back()));
  }
  EXPECT_EQ(t.opt.steps_taken(), 29);
  EXPECT_EQ(t.scaler.scale(), 32768.f);
  std::printf("fp16 + loss scaling: loss %.4f -> %.4f\n", losses.front(), losses.back());
  EXPECT_LT(losses.back(), losses.front() - 0.5f);
}

TEST(LossScaler, ScaledFp16GradientsMatchFp32AfterUnscaling) {
  const ModelConfig cfg = model_preset("tiny").value();
  const int64_t B = 2, T = 32;
  auto tokens = random_tokens(B * T, cfg.vocab_size, 3), targets = random_tokens(B * T, cfg.vocab_size, 4);
  std::vector<float> grads[2];
  for (int i = 0; i < 2; ++i) {
    ParamStore store{ParamLayout(cfg)};
    init_parameters(store, cfg, 5);
    Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
    net.set_precision(i == 0 ? Precision::fp32 : Precision::fp16);
    LossScaler scaler(tessera::testing::cpu_backend());
    store.zero_grads();
    net.forward(tokens.data(), targets.data());
    net.backward(i == 0 ? 1.f : scaler.scale());
    if (i == 1) {
      GradSpan g{store.grads(), store.numel()};
      ASSERT_TRUE(scaler.unscale_or_skip({&g, 1}, nullptr).value());
    }
    grads[i].assign(store.grads(), store.grads() + store.numel());
  }
  double num = 0, den = 0;
  for (size_t k = 0; k < grads[0].size(); ++k) {
    num += (double(grads[1][k]) - grads[0][k]) * (double(grads[1][k]) - grads[0][k]);
    den += double(grads[0][k]) * grads[0][k];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-2);
}

TEST(LossScaler, CollectiveCheckOnAWorldOfOne) {
  static MpiRuntime runtime;  // MPI singleton init, only when this test runs
  auto world = MpiCommunicator::create_world();
  ASSERT_TRUE(world.ok()) << world.status().to_string();
  std::vector<float> g = {1.f, 2.f};
  GradSpan s{g.data(), 2};
  LossScaler scaler(tessera::testing::cpu_backend());
  EXPECT_FALSE(scaler.found_overflow({&s, 1}, world.value().get()).value());
  g[1] = std::nanf("");
  EXPECT_TRUE(scaler.found_overflow({&s, 1}, world.value().get()).value());
  EXPECT_EQ(world.value()->collective_seq(), 2u);  // one max all-reduce per check
}

}  // namespace
}  // namespace tessera
