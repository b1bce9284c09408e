// Mixture-of-experts layers: the Transformer's gradients (router, experts, shared expert, with the
// load-balancing and z losses) against central differences of the objective, the routing ops'
// tie-breaking and capacity order, the configuration errors and the Hugging Face Mixtral names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../backend_util.h"
#include "../token_util.h"
#include "backend/ops.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/hf_weights.h"
#include "model/param_layout.h"
#include "model/transformer.h"

using namespace tessera;
using tessera::testing::random_tokens;

namespace {

ModelConfig tiny_moe_for_fd() {
  ModelConfig c = model_preset("tiny-moe").value();
  c.vocab_size = 16; c.max_seq_len = 8; c.n_layer = 1; c.n_head = 2; c.n_kv_head = 1; c.d_model = 8; c.d_ff = 6;
  c.moe_experts = 4; c.moe_top_k = 2;
  c.moe_aux_loss = 0.3f;  // large, so the auxiliary losses' gradients are a visible part of the router's
  c.moe_z_loss = 0.05f;
  return c;
}

struct FdCase {
  const char* name;
  float capacity_factor;
  bool shared_expert;
  int64_t n_layer, moe_every, top_k;
};

class MoeFiniteDifferences : public ::testing::TestWithParam<FdCase> {};

// The objective the trainer descends: cross-entropy + sum over MoE layers of the weighted aux losses.
double objective(Transformer& net, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt) {
  const double ce = net.forward(tok.data(), tgt.data());
  return ce + net.moe_objective();
}

TEST_P(MoeFiniteDifferences, GradientsMatchCentralDifferences) {
  const FdCase fc = GetParam();
  ModelConfig cfg = tiny_moe_for_fd();
  cfg.moe_capacity_factor = fc.capacity_factor;
  cfg.moe_shared_expert = fc.shared_expert;
  cfg.n_layer = fc.n_layer;
  cfg.moe_every = fc.moe_every;
  cfg.moe_top_k = fc.top_k;
  ASSERT_TRUE(cfg.validate().ok()) << cfg.validate().message();
  const int64_t B = 2, T = 4;
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 7);
  // Larger weights than the GPT-2 init, so gradients stand well above float32 rounding.
  Rng rng(99);
  for (int64_t i = 0; i < store.numel(); ++i)
    if (store.params()[i] != 0.f && store.params()[i] != 1.f) store.params()[i] = rng.normal(0.f, 0.4f);
  Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
  auto tok = random_tokens(B * T, cfg.vocab_size, 3), tgt = random_tokens(B * T, cfg.vocab_size, 4);
  store.zero_grads();
  objective(net, tok, tgt);
  net.backward();
  if (fc.capacity_factor > 0) {  // the case must really drop something
    int64_t dropped = 0;
    for (const auto& st : net.moe_layer_stats()) dropped += st.dropped;
    EXPECT_GT(dropped, 0);
  }
  const std::vector<float> analytic(store.grads(), store.grads() + store.numel());
  int checked_tensors = 0;
  for (const ParamInfo& p : store.layout().params()) {
    const bool moe_tensor = p.name.find("moe.") != std::string::npos || p.name.find("mlp.") != std::string::npos ||
                            p.name.find("ln2") != std::string::npos;
    if (!moe_tensor) continue;
    ++checked_tensors;
    // Every element of small tensors (the router), a spread of elements of the larger ones.
    const int64_t stride = p.numel <= 64 ? 1 : p.numel / 29 + 1;
    double num = 0, den = 0;
    for (int64_t i = 0; i < p.numel; i += stride) {
      float& w = store.params()[p.offset + i];
      const float w0 = w;
      const float h = 1e-2f;
      w = w0 + h;
      const double lp = objective(net, tok, tgt);
      w = w0 - h;
      const double lm = objective(net, tok, tgt);
      w = w0;
      const double fd = (lp - lm) / (2.0 * static_cast<double>(h));
      const double an = analytic[static_cast<size_t>(p.offset + i)];
      num += (fd - an) * (fd - an);
      den += fd * fd;
    }
    ASSERT_GT(den, 0) << p.name << ": no gradient at all";
    EXPECT_LT(std::sqrt(num / den), 2e-2) << p.name << " (" << fc.name << ")";
  }
  EXPECT_GE(checked_tensors, 4);
}

INSTANTIATE_TEST_SUITE_P(
    Moe, MoeFiniteDifferences,
    ::testing::Values(FdCase{"dropless_top2", 0.f, false, 1, 1, 2}, FdCase{"top1", 0.f, false, 1, 1, 1},
                      FdCase{"capacity_shared_every2", 0.75f, true, 2, 2, 2}),
    [](const auto& info) { return std::string(info.param.name); });

// The auxiliary losses alone: with the cross-entropy's path cut off (no targets are valid), the
// router's gradient is exactly theirs, checked against central differences of moe_objective().
TEST(Moe, AuxiliaryLossGradientsAloneMatchCentralDifferences) {
  ModelConfig cfg = tiny_moe_for_fd();
  const int64_t B = 2, T = 4;
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 11);
  Rng rng(5);
  float* gate = store.param("h.0.moe.gate.w");
  const int64_t n = store.layout().get("h.0.moe.gate.w").numel;
  for (int64_t i = 0; i < n; ++i) gate[i] = rng.normal(0.f, 0.5f);
  Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
  auto tok = random_tokens(B * T, cfg.vocab_size, 3);
  std::vector<int32_t> none(static_cast<size_t>(B * T), -1);
  store.zero_grads();
  net.forward(tok.data(), none.data());
  net.backward();
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g0 = gate[i], h = 1e-2f;
    gate[i] = g0 + h;
    net.forward(tok.data(), none.data());
    const double lp = net.moe_objective();
    gate[i] = g0 - h;
    net.forward(tok.data(), none.data());
    const double lm = net.moe_objective();
    gate[i] = g0;
    const double fd = (lp - lm) / (2.0 * h), an = store.grad("h.0.moe.gate.w")[i];
    num += (fd - an) * (fd - an);
    den += fd * fd;
  }
  ASSERT_GT(den, 0);
  EXPECT_LT(std::sqrt(num / den), 1e-2);
}

TEST(MoeRouting, TopKBreaksTiesTowardsTheLowerExpertAndRenormalises) {
  const int64_t N = 2, E = 4, K = 2;
  // Row 0: experts 1, 2, 3 tie; row 1: all four tie.
  std::vector<float> logits = {0.f, 1.f, 1.f, 1.f, 0.5f, 0.5f, 0.5f, 0.5f}, probs(N * E), lse(N), w(N * K);
  std::vector<int32_t> idx(N * K);
  ops::moe_router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), N, E, K);
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 2, 0, 1}));
  for (float x : w) EXPECT_FLOAT_EQ(x, 0.5f);
  EXPECT_NEAR(lse[1], 0.5 + std::log(4.0), 1e-6);
}

TEST(MoeRouting, CapacityKeepsFirstChoicesFirstThenTokenOrderAndCountsDrops) {
  // 4 tokens, 3 experts, top-2, capacity 2.
  const int64_t N = 4, E = 3, K = 2;
  const std::vector<int32_t> idx = {0, 1,   // token 0
                                    0, 2,   // token 1
                                    1, 0,   // token 2: its second choice (0) comes after every first choice
                                    0, 1};  // token 3: first choice 0 is the third first choice of 0: dropped
  std::vector<int64_t> slot_token(N * K, -1);
  std::vector<int32_t> slot_of(N * K), counts(E), routed(E);
  ops::moe_dispatch_plan(slot_token.data(), slot_of.data(), counts.data(), routed.data(), idx.data(), N, E, K, 2);
  EXPECT_EQ(routed, (std::vector<int32_t>{4, 3, 1}));
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 1}));
  // Expert 0 keeps tokens 0 and 1 (first choices); token 3's first choice and token 2's second are dropped.
  EXPECT_EQ(slot_of[3 * K + 0], -1);
  EXPECT_EQ(slot_of[2 * K + 1], -1);
  // Expert 1: token 2 (a first choice) before token 0 (a second choice); token 3's second choice dropped.
  EXPECT_EQ(slot_token[2], 2);
  EXPECT_EQ(slot_token[3], 0);
  EXPECT_EQ(slot_of[3 * K + 1], -1);
  EXPECT_EQ(slot_token[4], 1);  // expert 2
  const int64_t kept = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  EXPECT_EQ(N * K - kept, 3);
  // Dropless keeps all eight.
  ops::moe_dispatch_plan(slot_token.data(), slot_of.data(), counts.data(), routed.data(), idx.data(), N, E, K, 0);
  EXPECT_EQ(counts, routed);
}

TEST(MoeConfig, CapacityAndBadValuesNameTheFix) {
  ModelConfig c = model_preset("tiny-moe").value();
  ASSERT_TRUE(c.validate().ok());
  EXPECT_EQ(c.moe_capacity(128), 0);  // dropless
  c.moe_capacity_factor = 1.25f;
  EXPECT_EQ(c.moe_capacity(128), 80);  // ceil(1.25 * 128 * 2 / 4)
  auto message = [](ModelConfig m) { return m.validate().message(); };
  ModelConfig bad = model_preset("tiny-moe").value();
  bad.moe_top_k = 5;
  EXPECT_NE(message(bad).find("moe_top_k (5) must be in [1, moe_experts = 4]"), std::string::npos) << message(bad);
  bad = model_preset("tiny").value();
  bad.moe_experts = 4;
  EXPECT_NE(message(bad).find("needs arch = \"llama\""), std::string::npos) << message(bad);
  bad = model_preset("tiny-moe").value();
  bad.moe_every = 0;
  EXPECT_NE(message(bad).find("moe_every"), std::string::npos);
  bad = model_preset("tiny-moe").value();
  bad.moe_capacity_factor = -1;
  EXPECT_NE(message(bad).find("moe_capacity_factor"), std::string::npos);
  // tp splits attention (and a shared expert's MLP); the experts themselves run whole on every tp
  // rank, so their width need not divide.
  ModelConfig odd = model_preset("tiny-moe").value();
  odd.d_ff = 97;
  EXPECT_TRUE(validate_tensor_parallel(odd, {0, 2}).ok());
  odd.moe_shared_expert = true;
  EXPECT_NE(validate_tensor_parallel(odd, {0, 2}).message().find("must divide d_ff (97)"), std::string::npos);
}

TEST(MoeConfig, ParametersAndLayout) {
  ModelConfig c = model_preset("tiny-moe").value();
  ParamLayout layout(c);
  EXPECT_EQ(layout.find("h.0.mlp.fc.w"), nullptr);  // no shared expert: no dense MLP
  EXPECT_EQ(layout.get("h.1.moe.fc.w").shape, (Shape{4 * 2 * 96, 64}));
  EXPECT_EQ(layout.get("h.1.moe.proj.w").shape, (Shape{4 * 64, 96}));
  int64_t sum = 0;
  for (const auto& p : layout.params()) sum += p.numel;
  EXPECT_EQ(sum, c.num_parameters());
  c.moe_shared_expert = true;
  c.moe_every = 2;  // layer 0 MoE with a shared expert, layer 1 dense
  ParamLayout mixed(c);
  EXPECT_NE(mixed.find("h.0.mlp.fc.w"), nullptr);
  EXPECT_NE(mixed.find("h.0.moe.gate.w"), nullptr);
  EXPECT_EQ(mixed.find("h.1.moe.gate.w"), nullptr);
  sum = 0;
  for (const auto& p : mixed.params()) sum += p.numel;
  EXPECT_EQ(sum, c.num_parameters());
}

// Owner-only expert storage: ep rank r stores experts [r*E/ep, (r+1)*E/ep) of every MoE layer at
// their global rows, the dense tensors whole, and initialises its rows exactly as one process does.
TEST(MoeConfig, ExpertShardStoresOnlyItsExpertsAtTheirGlobalRows) {
  ModelConfig c = model_preset("tiny-moe").value();
  c.moe_shared_expert = true;  // a dense MLP beside the experts stays whole
  const int64_t E = c.moe_experts;
  ParamStore whole{ParamLayout(c)};
  init_parameters(whole, c, 7);
  for (int ep : {2, 4}) {
    int64_t expert_elements = 0;
    for (int r = 0; r < ep; ++r) {
      SCOPED_TRACE("ep " + std::to_string(ep) + " rank " + std::to_string(r));
      ParamStore shard{ParamLayout(c, 0, static_cast<int>(c.n_layer), {}, 16, ExpertShard{r, ep})};
      init_parameters(shard, c, 7);
      const ParamLayout& layout = shard.layout();
      EXPECT_TRUE(layout.experts_sharded());
      EXPECT_FALSE(layout.whole_tensors());
      EXPECT_EQ(layout.first_stored_expert(), r * E / ep);
      int64_t in_ranges = 0;
      for (const auto& [b, e] : expert_ranges(layout)) in_ranges += e - b;
      int64_t experts_here = 0;
      for (const ParamInfo& p : layout.params()) {
        const ParamInfo& w = whole.layout().get(p.name);
        EXPECT_EQ(p.global_shape, w.global_shape) << p.name;
        const auto pieces = layout.shard_pieces(p);
        ASSERT_EQ(pieces.size(), 1u) << p.name;
        EXPECT_EQ(pieces[0].numel, p.numel) << p.name;
        if (p.expert) {
          EXPECT_EQ(p.shape[0] * ep, w.shape[0]) << p.name;
          EXPECT_EQ(pieces[0].global_offset, r * p.numel) << p.name;
          experts_here += p.numel;
        } else {
          EXPECT_EQ(p.numel, w.numel) << p.name;
          EXPECT_EQ(pieces[0].global_offset, 0) << p.name;
        }
        // The same values as the whole model's rows (bitwise: the same stream).
        const float* got = shard.params() + p.offset;
        const float* want = whole.params() + w.offset + pieces[0].global_offset;
        int64_t differ = 0;
        for (int64_t i = 0; i < p.numel; ++i) differ += got[i] != want[i];
        EXPECT_EQ(differ, 0) << p.name;
      }
      EXPECT_GE(in_ranges, experts_here);  // the ranges run to the next tensor (alignment padding)
      EXPECT_LT(in_ranges, experts_here + 16 * static_cast<int64_t>(layout.params().size()));
      expert_elements += experts_here;
    }
    int64_t whole_experts = 0;
    for (const ParamInfo& p : whole.layout().params())
      if (p.expert) whole_experts += p.numel;
    EXPECT_EQ(expert_elements, whole_experts);
  }
  EXPECT_TRUE(expert_ranges(whole.layout()).empty());
}

TEST(MoeHf, MixtralNamesRoundTrip) {
  ModelConfig c = model_preset("tiny-moe").value();
  c.moe_shared_expert = true;
  ParamStore store{ParamLayout(c)};
  init_parameters(store, c, 1);
  const auto tensors = to_hf_tensors(c, store.layout(), store.params());
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  for (const char* want : {"model.layers.1.block_sparse_moe.gate.weight",
                           "model.layers.1.block_sparse_moe.experts.3.w1.weight",
                           "model.layers.1.block_sparse_moe.experts.3.w2.weight",
                           "model.layers.0.block_sparse_moe.experts.0.w3.weight",
                           "model.layers.0.mlp.shared_expert.down_proj.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  // Expert 2's w2 is rows [2C, 3C) of moe.proj.w.
  const auto& w2 = *std::find_if(tensors.begin(), tensors.end(), [](const auto& t) {
    return t.name == "model.layers.1.block_sparse_moe.experts.2.w2.weight";
  });
  const float* proj = store.param("h.1.moe.proj.w");
  EXPECT_EQ(w2.shape, (Shape{64, 96}));
  EXPECT_EQ(std::memcmp(w2.data.data(), proj + 2 * 64 * 96, 64 * 96 * sizeof(float)), 0);
}

}  // namespace
