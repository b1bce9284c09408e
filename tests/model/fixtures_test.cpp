// The committed PyTorch parity fixtures (tools/make_parity_fixtures.py) read through Tessera's
// reader: the config recovers from metadata, the weights import, and the expected file holds a
// gradient and an AdamW result of the right shape for every parameter.
#include <gtest/gtest.h>

#include <cstring>

#include "model/hf_weights.h"

namespace tessera {
namespace {

void check_fixture(const std::string& arch) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/parity_" + arch + "/";
  auto weights = open_safetensors(dir + "weights.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  auto cfg = config_from_metadata(*weights);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(arch_name(cfg->arch), arch);
  EXPECT_EQ(cfg->n_layer, 2);
  EXPECT_EQ(cfg->norm_eps, 1e-5f);

  ParamStore store(ParamLayout{*cfg});
  Status s = import_hf_weights(*weights, *cfg, store.layout(), store.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  // Import then export reproduces the file's tensors exactly.
  for (const auto& t : to_hf_tensors(*cfg, store.layout(), store.params())) {
    auto w = weights->read_f32(t.name);
    ASSERT_TRUE(w.ok()) << t.name;
    EXPECT_EQ(std::memcmp(w->data(), t.data.data(), t.data.size() * 4), 0) << t.name;
  }

  auto expected = open_safetensors(dir + "expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto tokens = expected->read_i32("tokens");
  auto targets = expected->read_i32("targets");
  ASSERT_TRUE(tokens.ok() && targets.ok());
  const Shape bt = expected->info("tokens")->shape;
  ASSERT_EQ(bt.size(), 2u);
  EXPECT_EQ(expected->info("targets")->shape, bt);
  EXPECT_EQ(expected->info("logits")->shape, (Shape{bt[0], bt[1], cfg->vocab_size}));
  EXPECT_EQ(expected->info("loss")->shape, Shape{1});
  int ignored = 0;
  for (size_t i = 0; i < tokens->size(); ++i) {
    EXPECT_TRUE((*tokens)[i] >= 0 && (*tokens)[i] < cfg->vocab_size);
    EXPECT_TRUE((*targets)[i] >= -1 && (*targets)[i] < cfg->vocab_size);
    ignored += (*targets)[i] == -1;
  }
  EXPECT_EQ(ignored, 2);
  for (const auto& m : hf_tensor_map(*cfg, store.layout())) {
    for (const char* prefix : {"grad.", "after_adamw."}) {
      auto info = expected->info(prefix + m.hf_name);
      ASSERT_TRUE(info.ok()) << info.status().to_string();
      EXPECT_EQ(info->shape, m.hf_shape) << prefix << m.hf_name;
    }
  }
}

TEST(ParityFixtures, Gpt2FixtureIsComplete) { check_fixture("gpt2"); }
TEST(ParityFixtures, LlamaFixtureIsComplete) { check_fixture("llama"); }

}  // namespace
}  // namespace tessera
