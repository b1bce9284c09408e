// Hugging Face weight import/export: bitwise round trips for GPT-2 and LLaMA presets, the GPT-2
// transposes and LLaMA row splits element by element, tolerated extras and refused mismatches.
#include "model/hf_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "../test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class HfWeightsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_ / name; }

  static ModelConfig preset(const char* name) {
    auto c = model_preset(name);
    EXPECT_TRUE(c.ok());
    return *c;
  }
  static const NamedTensor& find(const std::vector<NamedTensor>& ts, const std::string& name) {
    for (const auto& t : ts)
      if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return ts.front();
  }

  testing::TempDir dir_{"hf"};
};

void expect_same_buffer(const ParamStore& a, const ParamStore& b) {
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.params(), b.params(), static_cast<size_t>(a.numel()) * sizeof(float)), 0);
}

TEST_F(HfWeightsTest, Gpt2ExportImportIsBitwise) {
  const ModelConfig cfg = preset("tiny");
  ParamStore src(ParamLayout{cfg});
  init_parameters(src, cfg, 1234);
  ASSERT_TRUE(export_hf_weights(path("g.safetensors"), cfg, src.layout(), src.params()).ok());
  ParamStore dst(ParamLayout{cfg});
  Status s = import_hf_weights(path("g.safetensors"), cfg, dst.layout(), dst.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  expect_same_buffer(src, dst);

  auto f = open_safetensors(path("g.safetensors"));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->has("h.1.attn.c_attn.weight"));
  EXPECT_FALSE(f->has("lm_head.weight"));  // tied
  EXPECT_EQ(f->info("h.0.mlp.c_fc.weight")->shape, (Shape{cfg.d_model, cfg.d_ff}));
}

TEST_F(HfWeightsTest, LlamaExportImportIsBitwise) {
  const ModelConfig cfg = preset("tiny-llama");
  ParamStore src(ParamLayout{cfg});
  init_parameters(src, cfg, 99);
  ASSERT_TRUE(export_hf_weights(path("l.safetensors"), cfg, src.layout(), src.params()).ok());
  ParamStore dst(ParamLayout{cfg});
  Status s = import_hf_weights(path("l.safetensors"), cfg, dst.layout(), dst.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  expect_same_buffer(src, dst);

  auto f = open_safetensors(path("l.safetensors"));
  ASSERT_TRUE(f.ok());
  const int64_t HS = cfg.head_size();
  EXPECT_EQ(f->info("model.layers.1.self_attn.k_proj.weight")->shape, (Shape{cfg.n_kv_head * HS, cfg.d_model}));
  EXPECT_EQ(f->info("model.layers.0.mlp.up_proj.weight")->shape, (Shape{cfg.d_ff, cfg.d_model}));
  EXPECT_EQ(f->info("lm_head.weight")->shape, (Shape{cfg.vocab_size, cfg.d_model}));
}

TEST_F(HfWeightsTest, Gpt2Conv1DWeightsAreTransposed) {
  const ModelConfig cfg = preset("tiny");
  ParamStore s(ParamLayout{cfg});
  init_parameters(s, cfg, 7);
  const auto hf = to_hf_tensors(cfg, s.layout(), s.params());
  const int64_t C = cfg.d_model, F = cfg.d_ff;
  const float* qkv = s.param("h.1.attn.qkv.w");  // (3C, C)
  const auto& c_attn = find(hf, "h.1.attn.c_attn.weight");  // (C, 3C)
  ASSERT_EQ(c_attn.shape, (Shape{C, 3 * C}));
  for (int64_t r : {int64_t{0}, int64_t{5}, 3 * C - 1})
    for (int64_t c : {int64_t{0}, int64_t{3}, C - 1}) EXPECT_EQ(c_attn.data[c * 3 * C + r], qkv[r * C + c]);
  const float* proj = s.param("h.0.mlp.proj.w");  // (C, F)
  const auto& c_proj = find(hf, "h.0.mlp.c_proj.weight");  // (F, C)
  ASSERT_EQ(c_proj.shape, (Shape{F, C}));
  EXPECT_EQ(c_proj.data[7 * C + 2], proj[2 * F + 7]);
  // Vectors and embeddings are not transposed.
  EXPECT_EQ(find(hf, "wte.weight").data[5 * C + 1], s.param("wte")[5 * C + 1]);
  EXPECT_EQ(find(hf, "h.0.attn.c_attn.bias").data[9], s.param("h.0.attn.qkv.b")[9]);
}

TEST_F(HfWeightsTest, LlamaQkvAndGateUpAreRowBlocks) {
  const ModelConfig cfg = preset("tiny-llama");
  ParamStore s(ParamLayout{cfg});
  init_parameters(s, cfg, 7);
  const auto hf = to_hf_tensors(cfg, s.layout(), s.params());
  const int64_t C = cfg.d_model, F = cfg.d_ff, HS = cfg.head_size();
  const float* qkv = s.param("h.0.attn.qkv.w");
  const int64_t q_rows = cfg.n_head * HS, kv_rows = cfg.n_kv_head * HS;
  EXPECT_EQ(find(hf, "model.layers.0.self_attn.q_proj.weight").data[3 * C + 4], qkv[3 * C + 4]);
  EXPECT_EQ(find(hf, "model.layers.0.self_attn.k_proj.weight").data[2 * C + 1], qkv[(q_rows + 2) * C + 1]);
  EXPECT_EQ(find(hf, "model.layers.0.self_attn.v_proj.weight").data[0], qkv[(q_rows + kv_rows) * C]);
  const float* fc = s.param("h.0.mlp.fc.w");
  EXPECT_EQ(find(hf, "model.layers.0.mlp.gate_proj.weight").data[C + 3], fc[C + 3]);
  EXPECT_EQ(find(hf, "model.layers.0.mlp.up_proj.weight").data[C + 3], fc[(F + 1) * C + 3]);
}

TEST_F(HfWeightsTest, AcceptsTransformerPrefixAndIgnoresBuffers) {
  const ModelConfig cfg = preset("tiny");
  ParamStore src(ParamLayout{cfg});
  init_parameters(src, cfg, 5);
  auto hf = to_hf_tensors(cfg, src.layout(), src.params());
  for (auto& t : hf) t.name = "transformer." + t.name;
  const int64_t T = cfg.max_seq_len, V = cfg.vocab_size, C = cfg.d_model;
  hf.push_back({"transformer.h.0.attn.bias", {1, 1, T, T}, std::vector<float>(T * T, 1.f)});
  hf.push_back({"h.1.attn.masked_bias", {}, {-1e4f}});
  hf.push_back({"lm_head.weight", {V, C}, std::vector<float>(V * C, 0.5f)});
  ASSERT_TRUE(write_safetensors(path("p.safetensors"), hf).ok());
  ParamStore dst(ParamLayout{cfg});
  Status s = import_hf_weights(path("p.safetensors"), cfg, dst.layout(), dst.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  expect_same_buffer(src, dst);
}

TEST_F(HfWeightsTest, RefusesMissingWrongShapeAndUnknownTensors) {
  const ModelConfig cfg = preset("tiny-llama");
  ParamStore src(ParamLayout{cfg});
  init_parameters(src, cfg, 5);
  const auto good = to_hf_tensors(cfg, src.layout(), src.params());
  ParamStore dst(ParamLayout{cfg});
  auto import_modified = [&](const char* file, auto&& edit) {
    auto hf = good;
    edit(hf);
    EXPECT_TRUE(write_safetensors(path(file), hf).ok());
    return import_hf_weights(path(file), cfg, dst.layout(), dst.params());
  };

  Status missing = import_modified("missing.safetensors", [](std::vector<NamedTensor>& hf) {
    std::erase_if(hf, [](const NamedTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_EQ(missing.code(), StatusCode::not_found);
  EXPECT_NE(missing.message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("h.1.mlp.fc.w"), std::string::npos) << missing.message();

  Status shape = import_modified("shape.safetensors", [](std::vector<NamedTensor>& hf) {
    for (auto& t : hf)
      if (t.name == "model.layers.0.self_attn.k_proj.weight") {
        t.shape = {t.shape[1], t.shape[0]};  // transposed by mistake
      }
  });
  EXPECT_EQ(shape.code(), StatusCode::invalid_argument);
  EXPECT_NE(shape.message().find("k_proj"), std::string::npos) << shape.message();
  const int64_t kv = cfg.n_kv_head * cfg.head_size(), C = cfg.d_model;
  EXPECT_NE(shape.message().find("expected " + shape_to_string({kv, C})), std::string::npos) << shape.message();
  EXPECT_NE(shape.message().find("has shape " + shape_to_string({C, kv})), std::string::npos) << shape.message();

  Status extra = import_modified("extra.safetensors", [](std::vector<NamedTensor>& hf) {
    hf.push_back({"model.layers.2.input_layernorm.weight", {1}, {1.f}});  // a third layer
  });
  EXPECT_FALSE(extra.ok());
  EXPECT_NE(extra.message().find("model.layers.2.input_layernorm.weight"), std::string::npos) << extra.message();

  // A GPT-2 checkpoint offered to a LLaMA config fails on its first unknown tensor.
  const ModelConfig g = preset("tiny");
  ParamStore gs(ParamLayout{g});
  ASSERT_TRUE(export_hf_weights(path("gpt2.safetensors"), g, gs.layout(), gs.params()).ok());
  Status arch = import_hf_weights(path("gpt2.safetensors"), cfg, dst.layout(), dst.params());
  EXPECT_FALSE(arch.ok());
  EXPECT_NE(arch.message().find("not part of a llama model"), std::string::npos) << arch.message();
}

TEST_F(HfWeightsTest, ConfigRoundTripsThroughMetadata) {
  for (const char* name : {"tiny", "tiny-llama"}) {
    const ModelConfig cfg = preset(name);
    ParamStore s(ParamLayout{cfg});
    ASSERT_TRUE(export_hf_weights(path("m.safetensors"), cfg, s.layout(), s.params()).ok());
    auto f = open_safetensors(path("m.safetensors"));
    ASSERT_TRUE(f.ok());
    auto c = config_from_metadata(*f);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->name, cfg.name);
    EXPECT_EQ(c->arch, cfg.arch);
    EXPECT_EQ(c->vocab_size, cfg.vocab_size);
    EXPECT_EQ(c->max_seq_len, cfg.max_seq_len);
    EXPECT_EQ(c->n_layer, cfg.n_layer);
    EXPECT_EQ(c->n_head, cfg.n_head);
    EXPECT_EQ(c->n_kv_head, cfg.n_kv_head);
    EXPECT_EQ(c->d_model, cfg.d_model);
    EXPECT_EQ(c->d_ff, cfg.d_ff);
    EXPECT_EQ(c->norm_eps, cfg.norm_eps);
    EXPECT_EQ(c->rope_theta, cfg.rope_theta);
    EXPECT_EQ(c->tied_embeddings, cfg.tied_embeddings);
  }
  std::vector<float> a = {1};
  ASSERT_TRUE(write_safetensors(path("plain.safetensors"), {TensorRef{"a", {1}, a.data()}}).ok());
  auto f = open_safetensors(path("plain.safetensors"));
  ASSERT_TRUE(f.ok());
  auto c = config_from_metadata(*f);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("tessera.arch"), std::string::npos);
}

TEST_F(HfWeightsTest, PipelineStageImportsItsLayersOnly) {
  const ModelConfig cfg = preset("tiny-llama");
  ParamStore full(ParamLayout{cfg});
  init_parameters(full, cfg, 11);
  ASSERT_TRUE(export_hf_weights(path("f.safetensors"), cfg, full.layout(), full.params()).ok());
  ParamStore stage(ParamLayout(cfg, 1, static_cast<int>(cfg.n_layer)));
  Status s = import_hf_weights(path("f.safetensors"), cfg, stage.layout(), stage.params());
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (const auto& p : stage.layout().params())
    EXPECT_EQ(std::memcmp(stage.param(p.name), full.param(p.name), static_cast<size_t>(p.numel) * 4), 0) << p.name;
  Status e = export_hf_weights(path("stage.safetensors"), cfg, stage.layout(), stage.params());
  EXPECT_EQ(e.code(), StatusCode::invalid_argument);
  EXPECT_NE(e.message().find("whole model"), std::string::npos);
}

TEST_F(HfWeightsTest, RefusesLayoutOfAnotherConfig) {
  const ModelConfig cfg = preset("tiny");
  ModelConfig wider = cfg;
  wider.d_model = 2 * cfg.d_model;
  ParamStore s(ParamLayout{wider});
  ASSERT_TRUE(export_hf_weights(path("w.safetensors"), wider, s.layout(), s.params()).ok());
  Status st = import_hf_weights(path("w.safetensors"), cfg, s.layout(), s.params());
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("layout does not match"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessera
