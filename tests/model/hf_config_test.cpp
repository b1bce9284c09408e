// Hugging Face config.json: the fields transformers reads for each family, round trips of every
// Tessera config, HF's defaults for absent keys, and refusals of what Tessera does not compute.
#include "model/hf_config.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using nlohmann::json;

ModelConfig preset(const char* name) {
  auto c = model_preset(name);
  EXPECT_TRUE(c.ok());
  return *c;
}

TEST(HfConfig, Gpt2FieldsAreGpt2Config) {
  ModelConfig c = preset("tiny");
  c.d_ff = 200;  // not 4C: n_inner must say so
  auto j = hf_config_json(c, {});
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)["model_type"], "gpt2");
  EXPECT_EQ((*j)["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ((*j)["vocab_size"], 256);
  EXPECT_EQ((*j)["n_positions"], 64);
  EXPECT_EQ((*j)["n_embd"], 64);
  EXPECT_EQ((*j)["n_layer"], 2);
  EXPECT_EQ((*j)["n_head"], 4);
  EXPECT_EQ((*j)["n_inner"], 200);
  EXPECT_EQ((*j)["activation_function"], "gelu_new");
  EXPECT_EQ((*j)["layer_norm_epsilon"].get<double>(), 1e-5);  // the shortest text, not 9.99999974e-06
  EXPECT_EQ((*j)["tie_word_embeddings"], true);
  EXPECT_EQ((*j)["torch_dtype"], "float32");
  EXPECT_TRUE((*j)["bos_token_id"].is_null());  // the byte tokenizer has none; GPT2Config's 50256 would be out of range
}

TEST(HfConfig, LlamaFieldsAreLlamaConfig) {
  ModelConfig c = preset("tiny-llama");
  c.norm_eps = 1e-6f;
  c.rope_theta = 500000.f;
  auto j = hf_config_json(c, {1, 2, std::nullopt});
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)["model_type"], "llama");
  EXPECT_EQ((*j)["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ((*j)["hidden_size"], 64);
  EXPECT_EQ((*j)["intermediate_size"], 160);
  EXPECT_EQ((*j)["num_hidden_layers"], 2);
  EXPECT_EQ((*j)["num_attention_heads"], 4);
  EXPECT_EQ((*j)["num_key_value_heads"], 2);
  EXPECT_EQ((*j)["max_position_embeddings"], 64);
  EXPECT_EQ((*j)["rms_norm_eps"].get<double>(), 1e-6);
  EXPECT_EQ((*j)["rope_theta"].get<double>(), 500000.0);
  EXPECT_TRUE((*j)["rope_scaling"].is_null());
  EXPECT_EQ((*j)["attention_bias"], false);
  EXPECT_EQ((*j)["mlp_bias"], false);
  EXPECT_EQ((*j)["hidden_act"], "silu");
  EXPECT_EQ((*j)["tie_word_embeddings"], false);
  EXPECT_EQ((*j)["bos_token_id"], 1);
  EXPECT_EQ((*j)["eos_token_id"], 2);
}

TEST(HfConfig, EveryPresetRoundTrips) {
  for (const auto& name : preset_names()) {
    for (bool tied : {true, false}) {
      ModelConfig c = preset(name.c_str());
      c.tied_embeddings = tied;
      c.norm_eps = 3.3e-6f;  // a float whose shortest text is not the double's
      auto j = hf_config_json(c, {});
      ASSERT_TRUE(j.ok()) << name;
      auto back = model_config_from_hf_json(json::parse(j->dump()), "config.json");
      ASSERT_TRUE(back.ok()) << name << ": " << back.status().to_string();
      EXPECT_EQ(first_model_difference(c, *back), "") << name;
    }
  }
}

TEST(HfConfig, AbsentKeysTakeTransformersDefaults) {
  auto g = model_config_from_hf_json(json{{"model_type", "gpt2"}}, "config.json");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(first_model_difference(*g, preset("gpt2")), "");
  auto l = model_config_from_hf_json(json{{"model_type", "llama"}, {"num_hidden_layers", 2}}, "config.json");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->d_model, 4096);
  EXPECT_EQ(l->n_kv_head, 32);  // num_key_value_heads defaults to the head count
  EXPECT_EQ(l->norm_eps, 1e-6f);
  EXPECT_FALSE(l->tied_embeddings);
}

TEST(HfConfig, RefusesWhatTesseraDoesNotCompute) {
  const json llama = *hf_config_json(preset("tiny-llama"), {});
  const json gpt2 = *hf_config_json(preset("tiny"), {});
  struct Case {
    json base;
    const char* key;
    json value;
  };
  const Case cases[] = {{llama, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}},
                        {llama, "attention_bias", true},
                        {llama, "mlp_bias", true},
                        {llama, "hidden_act", "gelu"},
                        {llama, "head_dim", 32},
                        {llama, "model_type", "mistral"},
                        {gpt2, "activation_function", "relu"},
                        {gpt2, "scale_attn_by_inverse_layer_idx", true},
                        {gpt2, "n_embd", "64"}};
  for (const auto& k : cases) {
    json j = k.base;
    j[k.key] = k.value;
    auto r = model_config_from_hf_json(j, "dir/config.json");
    ASSERT_FALSE(r.ok()) << k.key;
    EXPECT_NE(r.status().message().find(k.key == std::string("model_type") ? "mistral" : k.key), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("dir/config.json"), std::string::npos) << r.status().message();
  }
}

TEST(HfConfig, RefusesAConfigHfCannotRepresent) {
  ModelConfig c = preset("tiny-llama");
  c.rope_theta = 0;
  Status s = check_hf_representable(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rope_theta"), std::string::npos) << s.message();
  EXPECT_FALSE(hf_config_json(c, {}).ok());
}

TEST(HfConfig, FirstDifferenceNamesTheField) {
  ModelConfig a = preset("tiny-llama"), b = a;
  b.norm_eps = 1e-6f;
  EXPECT_EQ(first_model_difference(a, b), "norm_eps: 1e-05 vs 1e-06");
  b = a;
  b.name = "other";
  EXPECT_EQ(first_model_difference(a, b), "");
}

TEST(HfConfig, MoeModelsAreMixtralConfigs) {
  ModelConfig c = preset("tiny-moe");
  c.moe_shared_expert = true;
  c.moe_every = 2;
  c.moe_capacity_factor = 1.25f;
  auto j = hf_config_json(c, {});
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["model_type"], "mixtral");
  EXPECT_EQ((*j)["architectures"], json({"MixtralForCausalLM"}));
  EXPECT_EQ((*j)["num_local_experts"], 4);
  EXPECT_EQ((*j)["num_experts_per_tok"], 2);
  EXPECT_EQ((*j)["intermediate_size"], 96);  // each expert's width
  auto back = model_config_from_hf_json(json::parse(j->dump()), "config.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(first_model_difference(c, *back), "");
  EXPECT_EQ(back->moe_capacity_factor, 1.25f);
  ModelConfig dense = preset("tiny-llama");
  EXPECT_NE(first_model_difference(c, dense), "");
}

}  // namespace
}  // namespace tessera
