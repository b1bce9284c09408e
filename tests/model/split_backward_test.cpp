// The split backward of zero-bubble pipelines (Transformer::set_split_backward): backward() gives
// bitwise the whole backward's input gradient at the pipeline seam and leaves the linear layers'
// weight gradients alone; backward_weights(), run later and after other micro-batches' backwards
// (as zb-h1 runs them, one model per micro-batch in flight), completes bitwise the whole backward's
// gradients, with the grad-ready callbacks in the same order, in fp32 and bf16.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../backend_util.h"
#include "../token_util.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"

using namespace tessera;
using tessera::testing::random_tokens;

namespace {

struct Variant {
  const char* preset;
  Precision precision;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.preset << " " << precision_name(v.precision); }

ModelConfig config_of(const Variant& v) {
  ModelConfig cfg = model_preset(v.preset).value();
  cfg.n_layer = 4;
  cfg.tied_embeddings = false;  // a tied head's gradient adds to the embedding's in another order when split
  if (cfg.is_moe()) {
    cfg.moe_every = 2;  // dense layers, and a MoE layer with a shared expert (whose MLP is deferred)
    cfg.moe_shared_expert = true;
  }
  return cfg;
}

// The first differing gradient, for the failure message.
std::string first_difference(const ParamStore& a, const ParamStore& b) {
  for (const ParamInfo& p : a.layout().params())
    if (std::memcmp(a.grads() + p.offset, b.grads() + p.offset, static_cast<size_t>(p.numel) * sizeof(float)) != 0)
      return p.name;
  return "none";
}
bool same_grads(const ParamStore& a, const ParamStore& b) {
  return std::memcmp(a.grads(), b.grads(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// Two pipeline stages, layers [0, S) and [S, L), each with two models (two micro-batches in flight).
struct Stages {
  ParamStore store0, store1;
  std::vector<std::unique_ptr<Transformer>> first, last;
  std::vector<int> ready0, ready1;
  Stages(const ModelConfig& cfg, int S, Precision precision, bool split, int64_t B, int64_t T)
      : store0(ParamLayout(cfg, 0, S)), store1(ParamLayout(cfg, S, static_cast<int>(cfg.n_layer))) {
    init_parameters(store0, cfg, 5);
    init_parameters(store1, cfg, 5);
    store0.zero_grads();
    store1.zero_grads();
    for (int i = 0; i < 2; ++i) {
      first.push_back(std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, store0, B, T));
      last.push_back(std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, store1, B, T));
      for (auto* m : {first.back().get(), last.back().get()}) {
        m->set_precision(precision);
        m->set_split_backward(split);
      }
      first.back()->set_grad_ready_callback([this](int l) { ready0.push_back(l); });
      last.back()->set_grad_ready_callback([this](int l) { ready1.push_back(l); });
    }
  }
};

class SplitBackward : public ::testing::TestWithParam<Variant> {};

TEST_P(SplitBackward, WeightPassesLaterGiveTheWholeBackwardsBits) {
  const ModelConfig cfg = config_of(GetParam());
  const int64_t B = 2, T = 16, N = B * T, C = cfg.d_model;
  const int S = 2;
  Stages whole(cfg, S, GetParam().precision, false, B, T), split(cfg, S, GetParam().precision, true, B, T);
  const float scale = 0.5f;  // two micro-batches
  for (int mb = 0; mb < 2; ++mb) {
    auto tok = random_tokens(N, cfg.vocab_size, 100 + mb), tgt = random_tokens(N, cfg.vocab_size, 200 + mb);
    for (Stages* s : {&whole, &split}) {
      Transformer &f = *s->first[mb], &l = *s->last[mb];
      f.forward(tok.data(), nullptr);
      std::memcpy(l.stage_input(), f.stage_output(), N * C * sizeof(float));
      l.forward(nullptr, tgt.data());
      l.backward(scale);
      std::memcpy(f.stage_output_grad(), l.stage_input_grad(), N * C * sizeof(float));
      f.backward(scale);
    }
    // The seam's input gradient does not wait for the weight pass.
    EXPECT_EQ(std::memcmp(split.last[mb]->stage_input_grad(), whole.last[mb]->stage_input_grad(), N * C * sizeof(float)), 0)
        << "micro-batch " << mb;
  }
  EXPECT_TRUE(split.ready0.empty() && split.ready1.empty()) << "grad-ready before the weight pass";
  EXPECT_FALSE(same_grads(split.store1, whole.store1)) << "the weight gradients came before the weight pass";
  // zb-h1's order on each stage: the weight passes in micro-batch order, after both backwards.
  for (int mb = 0; mb < 2; ++mb) {
    split.last[mb]->backward_weights();
    split.first[mb]->backward_weights();
  }
  EXPECT_TRUE(same_grads(split.store0, whole.store0)) << first_difference(split.store0, whole.store0);
  EXPECT_TRUE(same_grads(split.store1, whole.store1)) << first_difference(split.store1, whole.store1);
  EXPECT_EQ(split.ready0, whole.ready0);
  EXPECT_EQ(split.ready1, whole.ready1);
}

INSTANTIATE_TEST_SUITE_P(Models, SplitBackward,
                         ::testing::Values(Variant{"tiny", Precision::fp32}, Variant{"tiny-llama", Precision::fp32},
                                           Variant{"tiny-moe", Precision::fp32}, Variant{"tiny-llama", Precision::bf16}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.preset) + "_" +
                                           std::string(precision_name(info.param.precision));
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Recomputation or sequence parallelism would leave the weight pass without its inputs.
TEST(SplitBackwardDeath, RefusesRecomputation) {
  const ModelConfig cfg = model_preset("tiny").value();
  ParamStore store{ParamLayout(cfg)};
  Transformer net(tessera::testing::cpu_backend(), cfg, store, 2, 16, Recompute::selective);
  EXPECT_DEATH(net.set_split_backward(true), "train.recompute");
}

}  // namespace
