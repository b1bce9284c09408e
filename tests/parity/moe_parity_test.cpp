// Parity of the mixture-of-experts layers with PyTorch: the Transformer on the fixtures of
// tools/make_moe_parity_fixtures.py (a float64 reference of Mixtral's sparse-MoE block with the
// load-balancing and z losses, Hugging Face Mixtral names) must reproduce the logits, the
// cross-entropy, the objective, every gradient, and each layer's tokens per expert and dropped count.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/hf_weights.h"
#include "model/transformer.h"
#include "../backend_util.h"

namespace tessera {
namespace {

// ||got - want|| / ||want||; a float32 torch run lands within 6e-7 of the reference (config.json).
constexpr double kTol = 1e-4;

double rel_err(const float* got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num) / (den > 0 ? std::sqrt(den) : 1.0);
}

class MoeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeParity, MatchesPyTorchMixtralReference) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/parity_" + GetParam() + "/";
  auto weights = open_safetensors(dir + "weights.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  auto cfg_r = config_from_metadata(*weights);
  ASSERT_TRUE(cfg_r.ok()) << cfg_r.status().to_string();
  const ModelConfig cfg = *cfg_r;
  ASSERT_TRUE(cfg.is_moe());
  auto expected = open_safetensors(dir + "expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();

  ParamStore store(ParamLayout{cfg});
  Status s = import_hf_weights(*weights, cfg, store.layout(), store.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  const std::vector<int32_t> tokens = *expected->read_i32("tokens");
  const std::vector<int32_t> targets = *expected->read_i32("targets");
  const Shape bt = expected->info("tokens")->shape;
  const int64_t B = bt[0], T = bt[1], V = cfg.vocab_size;
  Transformer model(tessera::testing::cpu_backend(), cfg, store, B, T);

  model.forward(tokens.data(), nullptr);
  const std::vector<float> want_logits = *expected->read_f32("logits");
  const double e_logits = rel_err(model.logits(), want_logits.data(), static_cast<size_t>(B * T * V));
  EXPECT_LE(e_logits, kTol) << "logits";

  store.zero_grads();
  const float ce = model.forward(tokens.data(), targets.data());
  const double objective = ce + model.moe_objective();
  model.backward(1.f);
  const float want_ce = expected->read_f32("ce")->at(0), want_loss = expected->read_f32("loss")->at(0);
  EXPECT_LE(std::abs(ce - want_ce) / want_ce, kTol) << "cross-entropy " << ce << " vs " << want_ce;
  EXPECT_LE(std::abs(objective - want_loss) / want_loss, kTol) << "objective " << objective << " vs " << want_loss;

  int64_t dropped = 0;
  for (const auto& st : model.moe_layer_stats()) {
    const std::string l = std::to_string(st.layer);
    auto want_tokens = expected->read_i32("tokens_per_expert." + l);
    ASSERT_TRUE(want_tokens.ok()) << want_tokens.status().to_string();
    EXPECT_EQ(st.tokens, *want_tokens) << "tokens per expert, layer " << l;
    EXPECT_EQ(st.dropped, expected->read_i32("dropped." + l)->at(0)) << "dropped, layer " << l;
    dropped += st.dropped;
  }
  if (cfg.moe_capacity_factor > 0) {
    EXPECT_GT(dropped, 0) << "the capacity fixture must drop assignments";
  }

  double worst_grad = 0;
  for (const auto& g : to_hf_tensors(cfg, store.layout(), store.grads())) {
    auto want = expected->read_f32("grad." + g.name);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const double e = rel_err(g.data.data(), want->data(), g.data.size());
    EXPECT_LE(e, kTol) << "grad." << g.name;
    worst_grad = std::max(worst_grad, e);
  }
  std::printf("[moe parity %s] rel err: logits %.2e, objective %.2e, worst grad %.2e, dropped %lld\n",
              GetParam().c_str(), e_logits, std::abs(objective - want_loss) / want_loss, worst_grad,
              static_cast<long long>(dropped));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeParity, ::testing::Values("moe", "moe_capacity"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
