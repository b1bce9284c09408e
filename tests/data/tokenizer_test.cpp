// Tokenizers: byte-level identity, SentencePiece training on a small corpus and exact round trips,
// and the errors for bad model files and vocab sizes.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/byte_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace tessera {
namespace {

using testing::TempDir;

const std::string kTricky = "In the beginning  God\tcreated\n\n  the heaven. Ünïcødé ✓ 日本語 \x01\xff end\n";

TEST(ByteTokenizer, RoundTripAndIds) {
  ByteTokenizer t;
  EXPECT_EQ(t.vocab_size(), 256u);
  EXPECT_EQ(t.kind(), "byte");
  auto ids = t.encode(kTricky);
  ASSERT_EQ(ids.size(), kTricky.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<unsigned char>(kTricky[i]));
  EXPECT_EQ(t.decode(ids), kTricky);
  EXPECT_TRUE(t.encode("").empty());
  std::vector<uint32_t> bad = {'a', 300, 'b'};
  EXPECT_EQ(t.decode(bad), "a\xEF\xBF\xBD" "b");
}

TEST(Tokenizer, FactoryErrors) {
  auto r = open_tokenizer("wordpiece", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte, bpe"), std::string::npos);
  EXPECT_FALSE(open_tokenizer("bpe", "").ok());
  auto b = open_tokenizer("byte", "");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->vocab_size(), 256u);
}

TEST(SentencePieceTokenizer, MissingAndCorruptModel) {
  TempDir d;
  auto r = SentencePieceTokenizer::load(d / "none.model");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_found);
  EXPECT_NE(r.status().message().find("does not exist"), std::string::npos);
  testing::write_file(d / "junk.model", "this is not a protobuf");
  auto j = SentencePieceTokenizer::load(d / "junk.model");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::corrupt_data);
}

TEST(SentencePieceTokenizer, BadTrainingOptions) {
  TempDir d;
  testing::write_file(d / "c.txt", testing::generated_corpus(20000));
  SentencePieceTrainOptions o;
  o.input_files = {d / "c.txt"};
  o.model_path = d / "m.model";
  o.vocab_size = 100;
  auto r = SentencePieceTokenizer::train(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("too small"), std::string::npos) << r.status().message();
  o.vocab_size = 300;
  o.input_files = {d / "missing.txt"};
  EXPECT_EQ(SentencePieceTokenizer::train(o).status().code(), StatusCode::not_found);
  // Far more pieces than a tiny corpus can make: SentencePiece's own error comes back as a Status.
  testing::write_file(d / "tiny.txt", "abc abd\n");
  o.input_files = {d / "tiny.txt"};
  o.vocab_size = 5000;
  auto big = SentencePieceTokenizer::train(o);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("Vocabulary size too high"), std::string::npos) << big.status().message();
  EXPECT_FALSE(std::filesystem::exists(d / "m.model"));
}

void train_and_round_trip(SentencePieceModelType type, const std::string& kind) {
  TempDir d;
  const std::string corpus = testing::generated_corpus(300 * 1024);
  testing::write_file(d / "corpus.txt", corpus);
  SentencePieceTrainOptions o;
  o.input_files = {d / "corpus.txt"};
  o.model_type = type;
  o.vocab_size = 300;
  o.model_path = d / "sp.model";
  auto r = SentencePieceTokenizer::train(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto& t = **r;
  EXPECT_EQ(t.vocab_size(), 300u);
  EXPECT_EQ(t.kind(), kind);
  ASSERT_TRUE(std::filesystem::exists(d / "sp.model"));

  // In-domain text compresses (merges were learned), and everything decodes back exactly.
  const std::string sample = corpus.substr(0, 5000);
  auto ids = t.encode(sample);
  // (Vocab 300 leaves ~40 merges beyond the 256 byte pieces, special pieces and characters.)
  EXPECT_LT(ids.size(), sample.size() * 8 / 10);
  for (uint32_t id : ids) ASSERT_LT(id, 300u);
  EXPECT_EQ(t.decode(ids), sample);
  // Unseen characters, runs of spaces, tabs and newlines survive via byte fallback.
  // (Exact for valid UTF-8: SentencePiece turns invalid UTF-8 into U+FFFD.)
  const std::string utf8 = "In the beginning  God\tcreated\n\n  the heaven. Ünïcødé ✓ 日本語 \x01 end\n";
  EXPECT_EQ(t.decode(t.encode(utf8)), utf8);
  EXPECT_EQ(t.decode(t.encode("a\xff" "b")), "a\xEF\xBF\xBD" "b");

  // The saved model loads and encodes identically.
  auto again = open_tokenizer(kind, d / "sp.model");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ((*again)->encode(sample), ids);
  EXPECT_EQ((*again)->kind(), kind);
}

TEST(SentencePieceTokenizer, TrainBpeRoundTrip) { train_and_round_trip(SentencePieceModelType::bpe, "bpe"); }
TEST(SentencePieceTokenizer, TrainUnigramRoundTrip) {
  train_and_round_trip(SentencePieceModelType::unigram, "unigram");
}

}  // namespace
}  // namespace tessera
