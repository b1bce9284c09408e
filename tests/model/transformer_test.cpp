// Model-level properties: determinism, gradient accumulation, pipeline-stage seams, presets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../token_util.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "../backend_util.h"

using namespace tessera;

using tessera::testing::random_tokens;

namespace {

std::vector<float> train_losses(const ModelConfig& cfg, int steps) {
  const int64_t B = 2, T = 16;
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 42);
  Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
  AdamW opt(store.layout(), AdamWConfig{});
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    auto tok = random_tokens(B * T, cfg.vocab_size, 100 + s % 2);
    auto tgt = random_tokens(B * T, cfg.vocab_size, 200 + s % 2);
    store.zero_grads();
    losses.push_back(net.forward(tok.data(), tgt.data()));
    net.backward();
    clip_grad_norm(store.grads(), store.numel(), 1.0f);
    opt.step(store.params(), store.grads(), 1e-3f);
  }
  return losses;
}
}  // namespace

class BothArchs : public ::testing::TestWithParam<const char*> {};

TEST_P(BothArchs, SameSeedGivesBitwiseIdenticalLossesOver20Steps) {
  ModelConfig cfg = model_preset(GetParam()).value();
  auto a = train_losses(cfg, 20), b = train_losses(cfg, 20);
  ASSERT_EQ(a.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "step " << i;
  EXPECT_LT(a.back(), a.front()) << "two alternating batches are memorised, so the loss must fall";
}

TEST_P(BothArchs, GradientAccumulationEqualsLargeBatch) {
  ModelConfig cfg = model_preset(GetParam()).value();
  // The load-balancing loss is a product of per-micro-batch means, not a sum over tokens: without it
  // (and dropless) a MoE model's gradient is additive over tokens like a dense one.
  cfg.moe_aux_loss = 0;
  const int64_t T = 16;
  auto tok = random_tokens(4 * T, cfg.vocab_size, 5), tgt = random_tokens(4 * T, cfg.vocab_size, 6);
  ParamStore big{ParamLayout(cfg)}, small{ParamLayout(cfg)};
  init_parameters(big, cfg, 1);
  init_parameters(small, cfg, 1);
  Transformer net4(tessera::testing::cpu_backend(), cfg, big, 4, T), net2(tessera::testing::cpu_backend(), cfg, small, 2, T);
  big.zero_grads();
  const float loss4 = net4.forward(tok.data(), tgt.data());
  net4.backward();
  small.zero_grads();
  float loss2 = 0;
  for (int m = 0; m < 2; ++m) {
    loss2 += 0.5f * net2.forward(tok.data() + m * 2 * T, tgt.data() + m * 2 * T);
    net2.backward(0.5f);
  }
  EXPECT_NEAR(loss4, loss2, 1e-5f * std::abs(loss4));
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < big.numel(); ++i) {
    diff += std::pow(double(big.grads()[i]) - small.grads()[i], 2);
    ref += std::pow(double(big.grads()[i]), 2);
  }
  EXPECT_LT(std::sqrt(diff / ref), 1e-5);
}

TEST_P(BothArchs, TwoPipelineStagesEqualTheWholeModel) {
  ModelConfig cfg = model_preset(GetParam()).value();
  const int64_t B = 2, T = 16, N = B * T, C = cfg.d_model;
  const int L = static_cast<int>(cfg.n_layer);
  auto tok = random_tokens(N, cfg.vocab_size, 8), tgt = random_tokens(N, cfg.vocab_size, 9);
  ParamStore whole{ParamLayout(cfg)}, s0{ParamLayout(cfg, 0, 1)}, s1{ParamLayout(cfg, 1, L)};
  init_parameters(whole, cfg, 3);
  init_parameters(s0, cfg, 3);
  init_parameters(s1, cfg, 3);
  Transformer full(tessera::testing::cpu_backend(), cfg, whole, B, T), first(tessera::testing::cpu_backend(), cfg, s0, B, T), last(tessera::testing::cpu_backend(), cfg, s1, B, T);
  whole.zero_grads(); s0.zero_grads(); s1.zero_grads();
  const float loss = full.forward(tok.data(), tgt.data());
  full.backward();
  first.forward(tok.data(), nullptr);
  std::memcpy(last.stage_input(), first.stage_output(), N * C * sizeof(float));
  const float loss_pp = last.forward(nullptr, tgt.data());
  last.backward();
  std::memcpy(first.stage_output_grad(), last.stage_input_grad(), N * C * sizeof(float));
  first.backward();
  EXPECT_EQ(loss, loss_pp);
  for (const ParamStore* st : {&s0, &s1})
    for (const auto& p : st->layout().params()) {
      if (p.name == "wte" && cfg.tied_embeddings) continue;  // split over both stages: below
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(st->grads()[p.offset + i], whole.grad(p.name)[i]) << p.name << "[" << i << "]";
    }
  if (cfg.tied_embeddings) {
    // The tied head's copy of wte on the last stage starts equal; the two stages' gradients add up to
    // the whole model's (the embedding group's all-reduce; another summation order, so not bitwise).
    const int64_t n = whole.layout().get("wte").numel;
    ASSERT_EQ(s1.layout().get("wte").layer, L);
    ASSERT_EQ(0, std::memcmp(s1.param("wte"), whole.param("wte"), n * sizeof(float)));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(s0.grad("wte")[i] + s1.grad("wte")[i], whole.grad("wte")[i], 1e-6f + 1e-5f * std::fabs(whole.grad("wte")[i]))
          << "wte[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Model, BothArchs, ::testing::Values("tiny", "tiny-llama", "tiny-moe"));

TEST(ModelConfig, PresetsValidateAndCountParameters) {
  for (const auto& name : preset_names()) {
    auto cfg = model_preset(name);
    ASSERT_TRUE(cfg.ok()) << name;
    EXPECT_TRUE(cfg->validate().ok()) << name << ": " << cfg->validate().message();
  }
  // GPT-2 small has 124,439,808 parameters with the tied head.
  EXPECT_EQ(model_preset("gpt2")->num_parameters(), 124439808);
}

TEST(ModelConfig, RejectsHeadsNotDividingWidthNamingTheFields) {
  ModelConfig cfg = model_preset("tiny").value();
  cfg.n_head = 5;
  Status s = cfg.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("n_head"), std::string::npos);
  EXPECT_NE(s.message().find("d_model"), std::string::npos);
  EXPECT_FALSE(model_preset("nope").ok());
}

TEST(ParamLayout, GradReadyOrderAndInitialisation) {
  ModelConfig cfg = model_preset("tiny").value();
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 1);
  EXPECT_EQ(store.param("h.0.ln1.w")[0], 1.f);
  EXPECT_EQ(store.param("h.0.ln1.b")[0], 0.f);
  // Residual projections are scaled down by 1/sqrt(2L).
  auto stddev = [&](const std::string& n) {
    const auto& p = store.layout().get(n);
    double s = 0;
    for (int64_t i = 0; i < p.numel; ++i) s += double(store.params()[p.offset + i]) * store.params()[p.offset + i];
    return std::sqrt(s / p.numel);
  };
  EXPECT_NEAR(stddev("h.0.mlp.fc.w"), 0.02, 0.002);
  EXPECT_NEAR(stddev("h.0.mlp.proj.w"), 0.02 / 2.0, 0.002);
  Transformer net(tessera::testing::cpu_backend(), cfg, store, 1, 8);
  std::vector<int> order;
  net.set_grad_ready_callback([&](int l) { order.push_back(l); });
  auto tok = random_tokens(8, cfg.vocab_size, 1);
  net.forward(tok.data(), tok.data());
  net.backward();
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0, -1}));
}
