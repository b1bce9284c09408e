// Importing shards tokenized elsewhere (llm.c style) as a dataset.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "data/import_shards.h"
#include "data/loader.h"
#include "data/token_shard.h"
#include "data_test_util.h"

using namespace tessera;
using tessera::testing::TempDir;

TEST(ImportShards, WrapsShardsIntoATrainableDataset) {
  TempDir d;
  std::vector<uint32_t> train(5000), val(700);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint32_t>(i * 7 % 50000);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint32_t>(i % 50257);
  ASSERT_TRUE(write_token_shard(d / "gpt2_train.bin", train, kShardVersionU16).ok());
  ASSERT_TRUE(write_token_shard(d / "gpt2_val.bin", val, kShardVersionU16).ok());
  ImportShardsOptions o;
  o.train_shards = {d / "gpt2_train.bin"};
  o.val_shards = {d / "gpt2_val.bin"};
  o.output_dir = d / "ds";
  o.vocab_size = 50257;
  auto m = import_shards(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->train_tokens, 5000u);
  EXPECT_EQ(m->val_tokens, 700u);
  auto loaded = load_manifest(d / "ds");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_TRUE(verify_dataset(loaded.value()).ok());
  EXPECT_EQ(loaded->bytes_per_token(), 0.0);  // unknown: no source text
  LoaderConfig lc;
  lc.B = 2; lc.T = 16;
  auto loader = DataLoader::open(loaded.value(), "train", lc);
  ASSERT_TRUE(loader.ok()) << loader.status().to_string();
  std::vector<int32_t> in(32), tgt(32);
  (*loader)->next_batch(in.data(), tgt.data());
  EXPECT_FALSE(open_dataset_tokenizer(loaded.value()).ok());  // no tokenizer, with a message
  // A second import into the same directory is refused without overwrite.
  auto again = import_shards(o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--overwrite"), std::string::npos);
}

TEST(ImportShards, RejectsTokensOutsideTheVocabulary) {
  TempDir d;
  std::vector<uint32_t> toks = {1, 2, 300, 4};
  ASSERT_TRUE(write_token_shard(d / "t.bin", toks, kShardVersionU16).ok());
  ImportShardsOptions o;
  o.train_shards = {d / "t.bin"};
  o.output_dir = d / "ds";
  o.vocab_size = 256;
  auto m = import_shards(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("300"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(d / "ds/manifest.json"));
}
