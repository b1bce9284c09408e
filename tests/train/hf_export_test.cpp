// `tessera export --hf` as a library call: the directory's files, HF's tensor names (the
// "transformer." prefix and an untied lm_head for GPT-2), the bitwise round trip through
// load_model_from_weights(DIR), the refusal to overwrite a non-empty directory, and init from DIR.
#include "train/hf_export.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "core/file_util.h"
#include "model/hf_config.h"
#include "model/hf_directory.h"
#include "model/hf_weights.h"
#include "model/safetensors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

LoadedModel make_model(const char* preset, bool tied, uint64_t seed) {
  LoadedModel lm;
  lm.config = *model_preset(preset);
  lm.config.tied_embeddings = tied;
  lm.store = std::make_unique<ParamStore>(ParamLayout(lm.config));
  init_parameters(*lm.store, lm.config, seed);
  return lm;
}

void expect_bitwise(const LoadedModel& a, const LoadedModel& b) {
  ASSERT_EQ(a.store->numel(), b.store->numel());
  EXPECT_EQ(std::memcmp(a.store->params(), b.store->params(), static_cast<size_t>(a.store->numel()) * sizeof(float)), 0);
}

// What is on disk under `dir`: names and contents, to prove a refused export changed nothing.
std::map<std::string, std::string> contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = *read_file(e.path().string());
  return out;
}

class HfExport : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (tmp_.path() / name).string(); }
  testing::TempDir tmp_{"hfexport"};
};

TEST_F(HfExport, RoundTripIsBitwiseForEachFamily) {
  for (const char* preset : {"tiny", "tiny-llama"}) {
    for (bool tied : {true, false}) {
      SCOPED_TRACE(std::string(preset) + (tied ? " tied" : " untied"));
      const LoadedModel lm = make_model(preset, tied, 7);
      const std::string dir = path(std::string(preset) + (tied ? "_tied" : "_untied"));
      auto r = export_hf_directory(dir, lm, {});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
        EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / f)) << f;
      auto back = load_model_from_weights(dir);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_EQ(first_model_difference(lm.config, back->config), "");
      expect_bitwise(lm, *back);
      // No staging directory is left beside it.
      for (const auto& e : fs::directory_iterator(tmp_.path()))
        EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    }
  }
}

TEST_F(HfExport, TensorNamesAreThoseOfTheLmHeadModels) {
  const LoadedModel g = make_model("tiny", false, 1);
  ASSERT_TRUE(export_hf_directory(path("g"), g, {}).ok());
  auto f = open_safetensors(path("g") + "/model.safetensors");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->has("transformer.wte.weight"));
  EXPECT_TRUE(f->has("transformer.h.1.attn.c_attn.weight"));
  EXPECT_TRUE(f->has("lm_head.weight"));  // untied: beside, not under, the prefix
  EXPECT_EQ(f->info("transformer.h.0.mlp.c_fc.weight")->shape, (Shape{64, 256}));  // Conv1D: (in, out)

  const LoadedModel l = make_model("tiny-llama", true, 1);
  ASSERT_TRUE(export_hf_directory(path("l"), l, {}).ok());
  auto fl = open_safetensors(path("l") + "/model.safetensors");
  ASSERT_TRUE(fl.ok());
  EXPECT_TRUE(fl->has("model.layers.0.self_attn.k_proj.weight"));
  EXPECT_FALSE(fl->has("lm_head.weight"));  // tied: HF ties it to embed_tokens
  EXPECT_EQ(fl->info("model.layers.0.self_attn.k_proj.weight")->shape, (Shape{32, 64}));  // 2 kv heads x 16
}

TEST_F(HfExport, RefusesANonEmptyDirectoryAndChangesNothing) {
  const LoadedModel a = make_model("tiny", true, 1), b = make_model("tiny", true, 2);
  ASSERT_TRUE(export_hf_directory(path("d"), a, {}).ok());
  const auto before = contents(path("d"));
  auto again = export_hf_directory(path("d"), b, {});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--force"), std::string::npos) << again.status().message();
  EXPECT_NE(again.status().message().find("not empty"), std::string::npos) << again.status().message();
  EXPECT_EQ(contents(path("d")), before);

  // --force replaces the export's files and keeps the user's.
  ASSERT_TRUE(write_file_atomic(path("d") + "/README.md", "mine").ok());
  ASSERT_TRUE(export_hf_directory(path("d"), b, {"", true}).ok());
  EXPECT_EQ(*read_file(path("d") + "/README.md"), "mine");
  auto back = load_model_from_weights(path("d"));
  ASSERT_TRUE(back.ok());
  expect_bitwise(b, *back);
}

TEST_F(HfExport, AnEmptyDirectoryIsUsedAndAFileIsRefused) {
  fs::create_directory(path("empty"));
  EXPECT_TRUE(export_hf_directory(path("empty"), make_model("tiny", true, 1), {}).ok());
  ASSERT_TRUE(write_file_atomic(path("file"), "x").ok());
  auto r = export_hf_directory(path("file"), make_model("tiny", true, 1), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a directory"), std::string::npos) << r.status().message();
}

TEST_F(HfExport, RefusedConfigWritesNothing) {
  LoadedModel lm = make_model("tiny-llama", false, 1);
  lm.config.rope_theta = -1;
  auto r = export_hf_directory(path("bad"), lm, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rope_theta"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::is_empty(tmp_.path()));
}

TEST_F(HfExport, InitFromADirectoryChecksTheConfig) {
  const LoadedModel lm = make_model("tiny-llama", false, 3);
  ASSERT_TRUE(export_hf_directory(path("d"), lm, {}).ok());
  ParamStore dst{ParamLayout(lm.config)};
  ASSERT_TRUE(import_hf_weights(path("d"), lm.config, dst.layout(), dst.params()).ok());
  EXPECT_EQ(std::memcmp(dst.params(), lm.store->params(), static_cast<size_t>(dst.numel()) * sizeof(float)), 0);
  ModelConfig other = lm.config;
  other.rope_theta = 500000.f;  // same shapes, another model
  Status s = import_hf_weights(path("d"), other, dst.layout(), dst.params());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rope_theta"), std::string::npos) << s.message();
}

TEST_F(HfExport, DirectoryErrorsSayWhatIsMissing) {
  fs::create_directory(path("nothing"));
  auto r = load_model_from_weights(path("nothing"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().message();
  ASSERT_TRUE(export_hf_directory(path("sharded"), make_model("tiny", true, 1), {}).ok());
  fs::rename(path("sharded") + "/model.safetensors", path("sharded") + "/model-00001-of-00002.safetensors");
  ASSERT_TRUE(write_file_atomic(path("sharded") + "/model.safetensors.index.json", "{}").ok());
  r = load_model_from_weights(path("sharded"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sharded"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tessera
