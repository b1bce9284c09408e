// prepare_dataset end to end: shards + manifest contents, exact reconstruction of the input,
// line-granular val tail, checksums, overwrite protection, tokenizer variants, and the default corpus.
#include "data/prepare.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/corpus.h"
#include "data/manifest.h"
#include "data/token_shard.h"
#include "data_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Decodes the concatenated tokens of a split with the dataset's own tokenizer.
std::string split_text(const DatasetManifest& m, const std::string& split) {
  auto tok = open_dataset_tokenizer(m);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  std::vector<uint32_t> ids;
  for (const auto& p : m.shard_paths(split)) {
    auto s = TokenShard::open(p);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    for (uint64_t i = 0; i < s->size(); ++i) ids.push_back(s->token(i));
  }
  return (*tok)->decode(ids);
}

struct Corpus {
  TempDir dir;
  std::string expected;  // concatenation in sorted path order, each file newline-terminated
  Corpus() {
    const std::string a = testing::generated_corpus(3000, 1);
    const std::string b = testing::generated_corpus(2000, 2);
    const std::string c = "last file without a final newline";
    testing::write_file(dir / "in/b/second.txt", b);
    testing::write_file(dir / "in/a.txt", a);
    testing::write_file(dir / "in/c.txt", c);
    expected = a + b + c + "\n";  // in/a.txt < in/b/second.txt < in/c.txt
  }
};

TEST(Prepare, ByteEndToEnd) {
  Corpus corpus;
  PrepareOptions o;
  o.inputs = {corpus.dir / "in"};
  o.output_dir = corpus.dir / "out";
  o.val_fraction = 0.2;
  o.shard_tokens = 1000;
  std::vector<PrepareProgress> seen;
  o.progress = [&](const PrepareProgress& p) { seen.push_back(p); };
  auto r = prepare_dataset(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();

  auto m = load_manifest(o.output_dir);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->tokenizer_kind, "byte");
  EXPECT_EQ(m->vocab_size, 256u);
  EXPECT_EQ(m->tokenizer_model_file, "");
  EXPECT_EQ(m->shard_version, 1);
  ASSERT_EQ(m->sources.size(), 3u);
  EXPECT_NE(m->sources[0].path.find("in/a.txt"), std::string::npos);
  EXPECT_NE(m->sources[1].path.find("in/b/second.txt"), std::string::npos);
  EXPECT_EQ(m->source_bytes, corpus.expected.size() - 1);

  // Byte tokens reproduce the input exactly; train is a prefix, val the rest.
  const std::string train = split_text(*m, "train"), val = split_text(*m, "val");
  EXPECT_EQ(train + val, corpus.expected);
  EXPECT_EQ(m->train_tokens, train.size());
  EXPECT_EQ(m->val_tokens, val.size());
  // The split falls on a line boundary, at the first line starting in the last 20 % of the bytes.
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(train.back(), '\n');
  const size_t val_start = static_cast<size_t>((corpus.expected.size() - 1) * 0.8);
  EXPECT_GE(train.size(), val_start);
  EXPECT_LT(train.rfind('\n', train.size() - 2) + 1, val_start);  // the last train line starts before it

  // Shards are full except the last of each split; names and splits line up; checksums hold.
  uint64_t n_train = 0;
  for (const auto& s : m->shards) {
    EXPECT_TRUE(s.file.rfind(s.split + "_", 0) == 0) << s.file;
    EXPECT_LE(s.tokens, 1000u);
    auto h = file_xxh64(o.output_dir + "/" + s.file);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, s.xxh64);
    if (s.split == "train") ++n_train;
  }
  EXPECT_EQ(n_train, (train.size() + 999) / 1000);
  EXPECT_TRUE(fs::exists(o.output_dir + "/train_000000.bin"));
  EXPECT_TRUE(fs::exists(o.output_dir + "/val_000000.bin"));
  EXPECT_TRUE(verify_dataset(*m).ok());

  // Progress: starts at 0, never goes back, ends at the total.
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
  EXPECT_EQ(seen.back().bytes_done, m->source_bytes);
  EXPECT_EQ(seen.back().bytes_total, m->source_bytes);
  EXPECT_EQ(seen.back().phase, "done");
}

// Larger than one read (1 MiB) and with lines longer than a chunk (64 KiB) and than a read.
TEST(Prepare, LargeFilesAndLongLines) {
  TempDir d;
  const std::string text = testing::generated_corpus(1'500'000, 4) + std::string(200'000, 'x') + "\n" +
                           testing::generated_corpus(100'000, 5) + std::string(1'200'000, 'y');
  testing::write_file(d / "big.txt", text);
  PrepareOptions o;
  o.inputs = {d / "big.txt"};
  o.output_dir = d / "out";
  o.val_fraction = 0.6;  // the split (at 40 % of 3 MB) lands inside the 1.5 MB of short lines
  o.shard_tokens = 1'000'000;
  auto r = prepare_dataset(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string train = split_text(*r, "train"), val = split_text(*r, "val");
  EXPECT_EQ(train + val, text + "\n");
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(train.back(), '\n');
  const size_t val_start = static_cast<size_t>(text.size() * (1.0 - 0.6));
  EXPECT_GE(train.size(), val_start);
  EXPECT_LT(train.rfind('\n', train.size() - 2) + 1, val_start);
}

TEST(Prepare, IsDeterministic) {
  Corpus corpus;
  PrepareOptions o;
  o.inputs = {corpus.dir / "in/c.txt", corpus.dir / "in"};  // overlapping inputs are deduplicated
  o.shard_tokens = 777;
  o.output_dir = corpus.dir / "o1";
  auto a = prepare_dataset(o);
  o.output_dir = corpus.dir / "o2";
  auto b = prepare_dataset(o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->shards.size(), b->shards.size());
  EXPECT_EQ(a->sources.size(), 3u);
  for (size_t i = 0; i < a->shards.size(); ++i) EXPECT_EQ(a->shards[i].xxh64, b->shards[i].xxh64);
}

TEST(Prepare, VerifyDetectsCorruptionAndChanges) {
  Corpus corpus;
  PrepareOptions o;
  o.inputs = {corpus.dir / "in"};
  o.output_dir = corpus.dir / "out";
  ASSERT_TRUE(prepare_dataset(o).ok());
  auto m = load_manifest(o.output_dir + "/manifest.json");
  ASSERT_TRUE(m.ok());
  const std::string shard = o.output_dir + "/train_000000.bin";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1024 + 10);
    f.put('#');
  }
  Status s = verify_dataset(*m);
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_NE(s.message().find("train_000000.bin"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
  EXPECT_TRUE(verify_dataset(*m, /*check_checksums=*/false).ok());
  fs::remove(o.output_dir + "/val_000000.bin");
  EXPECT_EQ(verify_dataset(*m, false).code(), StatusCode::not_found);
}

TEST(Prepare, RefusesToOverwriteUnlessAsked) {
  Corpus corpus;
  PrepareOptions o;
  o.inputs = {corpus.dir / "in"};
  o.output_dir = corpus.dir / "out";
  o.shard_tokens = 500;
  ASSERT_TRUE(prepare_dataset(o).ok());
  testing::write_file(o.output_dir + "/my_notes.txt", "keep me");
  const size_t shards_before = load_manifest(o.output_dir)->shards.size();

  o.shard_tokens = 5000;
  auto again = prepare_dataset(o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--overwrite"), std::string::npos) << again.status().message();
  EXPECT_EQ(load_manifest(o.output_dir)->shards.size(), shards_before);  // untouched

  o.overwrite = true;
  auto r = prepare_dataset(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_LT(r->shards.size(), shards_before);
  EXPECT_FALSE(fs::exists(o.output_dir + "/train_000003.bin"));  // stale shards of the old run are gone
  EXPECT_EQ(testing::read_file(o.output_dir + "/my_notes.txt"), "keep me");
  EXPECT_TRUE(verify_dataset(*load_manifest(o.output_dir)).ok());
}

TEST(Prepare, OutputInsideInputIsNotReadBack) {
  Corpus corpus;
  PrepareOptions o;
  o.inputs = {corpus.dir / "in"};
  o.output_dir = corpus.dir / "in/prepared";
  ASSERT_TRUE(prepare_dataset(o).ok());
  o.overwrite = true;
  auto r = prepare_dataset(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->sources.size(), 3u);
  EXPECT_EQ(r->train_tokens + r->val_tokens, corpus.expected.size());
}

TEST(Prepare, BadOptions) {
  Corpus corpus;
  PrepareOptions o;
  o.output_dir = corpus.dir / "out";
  o.inputs = {corpus.dir / "missing.txt"};
  EXPECT_EQ(prepare_dataset(o).status().code(), StatusCode::not_found);
  o.inputs = {corpus.dir / "in"};
  o.val_fraction = 1.0;
  EXPECT_EQ(prepare_dataset(o).status().code(), StatusCode::invalid_argument);
  o.val_fraction = 0.01;
  o.tokenizer = TokenizerKind::sentencepiece;
  EXPECT_EQ(prepare_dataset(o).status().code(), StatusCode::invalid_argument);
  o.tokenizer_model = corpus.dir / "none.model";
  EXPECT_EQ(prepare_dataset(o).status().code(), StatusCode::not_found);
  EXPECT_FALSE(fs::exists(o.output_dir + "/manifest.json"));
  EXPECT_FALSE(parse_tokenizer_kind("wordpiece").ok());
  EXPECT_EQ(*parse_tokenizer_kind("unigram"), TokenizerKind::unigram);
  EXPECT_EQ(load_manifest(corpus.dir / "nowhere").status().code(), StatusCode::not_found);
  testing::write_file(corpus.dir / "bad/manifest.json", "{\"format\": \"tessera-token-dataset\", \"shards\": 3}");
  auto bad = load_manifest(corpus.dir / "bad");
  EXPECT_EQ(bad.status().code(), StatusCode::corrupt_data);
  EXPECT_NE(bad.status().message().find("malformed"), std::string::npos);
}

TEST(Prepare, BpeThenReuseModel) {
  TempDir d;
  const std::string text = testing::generated_corpus(120 * 1024, 3);
  testing::write_file(d / "corpus.txt", text);
  PrepareOptions o;
  o.inputs = {d / "corpus.txt"};
  o.output_dir = d / "bpe";
  o.tokenizer = TokenizerKind::bpe;
  o.vocab_size = 300;
  o.val_fraction = 0.05;
  auto r = prepare_dataset(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tokenizer_kind, "bpe");
  EXPECT_EQ(r->vocab_size, 300u);
  EXPECT_EQ(r->tokenizer_model_file, "tokenizer.model");
  EXPECT_TRUE(fs::exists(d / "bpe/tokenizer.model"));
  auto m = load_manifest(o.output_dir);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(split_text(*m, "train") + split_text(*m, "val"), text);
  EXPECT_LT(m->train_tokens + m->val_tokens, text.size());

  // The same model given explicitly gives the same tokens.
  PrepareOptions o2 = o;
  o2.output_dir = d / "reuse";
  o2.tokenizer = TokenizerKind::sentencepiece;
  o2.tokenizer_model = d / "bpe/tokenizer.model";
  auto r2 = prepare_dataset(o2);
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(r2->tokenizer_kind, "sentencepiece");
  ASSERT_EQ(r2->shards.size(), r->shards.size());
  for (size_t i = 0; i < r->shards.size(); ++i) EXPECT_EQ(r2->shards[i].xxh64, r->shards[i].xxh64);
}

TEST(Corpus, DefaultCorpusIsTheBible) {
  auto t = default_corpus_text();
  if (!t.ok()) {
    EXPECT_NE(t.status().message().find("apt-get install bible-kjv"), std::string::npos);
    GTEST_SKIP() << "bible-kjv is not installed: " << t.status().message();
  }
  EXPECT_GT(t->size(), 4'000'000u);
  EXPECT_EQ(t->rfind("Ge1:1 In the beginning God created the heaven and the earth.", 0), 0u);
  EXPECT_NE(t->find("Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen."), std::string::npos);
}

}  // namespace
}  // namespace tessera
