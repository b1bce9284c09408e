// Hugging Face tokenizer files: the byte tokenizer's tokenizer.json (GPT-2's byte-to-character
// table, id = byte), a SentencePiece model shipped as itself with LlamaTokenizer settings that add
// nothing, and no tokenizer for imported (external) token ids.
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/file_util.h"
#include "data_test_util.h"
#include "data/sentencepiece_tokenizer.h"

namespace tessera {
namespace {

using nlohmann::json;

TEST(HfTokenizer, ByteTokenizerIsByteLevelBpeWithoutMerges) {
  DatasetManifest m;
  m.tokenizer_kind = "byte";
  m.vocab_size = 256;
  auto r = hf_tokenizer_files(m, 64);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->files.count("tokenizer.json"));
  EXPECT_FALSE(r->bos.has_value());
  const json t = json::parse(r->files.at("tokenizer.json"));
  const json& vocab = t["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 256u);
  std::set<int> ids;
  for (const auto& [piece, id] : vocab.items()) ids.insert(id.get<int>());
  EXPECT_EQ(ids.size(), 256u);
  // GPT-2's table: printable bytes are themselves, the others U+0100 + their rank.
  EXPECT_EQ(vocab["a"], 97);
  EXPECT_EQ(vocab["\xC4\xA0"], 32);  // U+0120 'Ġ' = space
  EXPECT_EQ(vocab["\xC4\x8A"], 10);  // U+010A 'Ċ' = newline
  EXPECT_EQ(vocab["\xC4\x80"], 0);   // U+0100 = NUL
  EXPECT_EQ(vocab["\xC3\xBF"], 255);  // U+00FF stands for itself
  EXPECT_TRUE(t["model"]["merges"].empty());
  EXPECT_EQ(t["pre_tokenizer"]["use_regex"], false);
  EXPECT_EQ(t["pre_tokenizer"]["add_prefix_space"], false);
  EXPECT_EQ(json::parse(r->files.at("tokenizer_config.json"))["tokenizer_class"], "PreTrainedTokenizerFast");
}

TEST(HfTokenizer, SentencePieceModelShipsAsItselfWithLlamaTokenizer) {
  testing::TempDir d;
  testing::write_file(d / "corpus.txt", testing::generated_corpus(100 * 1024));
  SentencePieceTrainOptions o;
  o.input_files = {d / "corpus.txt"};
  o.vocab_size = 300;
  o.model_path = d / "tokenizer.model";
  ASSERT_TRUE(SentencePieceTokenizer::train(o).ok());
  DatasetManifest m;
  m.dir = d.str();
  m.tokenizer_kind = "bpe";
  m.vocab_size = 300;
  m.tokenizer_model_file = "tokenizer.model";
  auto r = hf_tokenizer_files(m, 128);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->files.at("tokenizer.model"), *read_file(d / "tokenizer.model"));
  const json c = json::parse(r->files.at("tokenizer_config.json"));
  EXPECT_EQ(c["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(c["legacy"], true);  // plain sp.encode, no added prefix space
  EXPECT_EQ(c["add_bos_token"], false);
  EXPECT_EQ(c["add_eos_token"], false);
  EXPECT_EQ(c["unk_token"], "<unk>");
  EXPECT_EQ(r->bos, 1);
  EXPECT_EQ(r->eos, 2);
}

TEST(HfTokenizer, ExternalTokensGetNoTokenizerAndANote) {
  DatasetManifest m;
  m.tokenizer_kind = "external";
  auto r = hf_tokenizer_files(m, 64);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->files.empty());
  EXPECT_NE(r->note.find("none written"), std::string::npos) << r->note;
}

}  // namespace
}  // namespace tessera
