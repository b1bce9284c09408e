// Token shard format: round trips for both versions, llm.c byte layout, and every malformed input.
#include "data/token_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "data_test_util.h"

namespace tessera {
namespace {

using testing::TempDir;

std::vector<uint32_t> ramp(size_t n, uint32_t mul, uint32_t mod) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>((i * mul + 3) % mod);
  return v;
}

TEST(TokenShard, RoundTripU16) {
  TempDir d;
  auto toks = ramp(1000, 7919, 65536);
  toks[5] = 65535;
  auto info = write_token_shard(d / "a.bin", toks, kShardVersionU16);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->bytes, 1024u + 2000u);
  EXPECT_EQ(std::filesystem::file_size(d / "a.bin"), 3024u);
  auto s = TokenShard::open(d / "a.bin");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->size(), 1000u);
  EXPECT_EQ(s->version(), 1);
  EXPECT_EQ(s->bytes_per_token(), 2);
  for (size_t i = 0; i < toks.size(); ++i) ASSERT_EQ(s->token(i), toks[i]) << i;
  std::vector<int32_t> out(10);
  s->copy_tokens(3, 10, out.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], static_cast<int32_t>(toks[3 + i]));
  auto h = file_xxh64(d / "a.bin");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, info->xxh64);
}

TEST(TokenShard, RoundTripU32) {
  TempDir d;
  auto toks = ramp(777, 104729, 1u << 20);
  toks[0] = 70000;
  auto info = write_token_shard(d / "b.bin", toks, kShardVersionU32);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  auto s = TokenShard::open(d / "b.bin");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->version(), 2);
  EXPECT_EQ(s->bytes_per_token(), 4);
  ASSERT_EQ(s->size(), 777u);
  for (size_t i = 0; i < toks.size(); ++i) ASSERT_EQ(s->token(i), toks[i]) << i;
  std::vector<int32_t> out(5);
  s->copy_tokens(770, 5, out.data());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], static_cast<int32_t>(toks[770 + i]));
}

TEST(TokenShard, EmptyShardIsValid) {
  TempDir d;
  ASSERT_TRUE(write_token_shard(d / "e.bin", {}, kShardVersionU16).ok());
  auto s = TokenShard::open(d / "e.bin");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->size(), 0u);
}

TEST(TokenShard, WriterRejectsIdsTooWideForU16) {
  TempDir d;
  std::vector<uint32_t> toks = {1, 2, 65536};
  auto r = write_token_shard(d / "w.bin", toks, kShardVersionU16);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(d / "w.bin"));
  EXPECT_FALSE(write_token_shard(d / "w.bin", toks, 3).ok());
  EXPECT_EQ(shard_version_for_vocab(50257), 1);
  EXPECT_EQ(shard_version_for_vocab(65536), 1);
  EXPECT_EQ(shard_version_for_vocab(65537), 2);
}

TEST(TokenShard, WriteLeavesNoTempFiles) {
  TempDir d;
  ASSERT_TRUE(write_token_shard(d / "x.bin", ramp(100, 3, 256), 1).ok());
  ASSERT_TRUE(write_token_shard(d / "x.bin", ramp(50, 5, 256), 1).ok());  // replaces
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(d.path())) (void)e, ++n;
  EXPECT_EQ(n, 1);
  EXPECT_EQ(TokenShard::open(d / "x.bin")->size(), 50u);
}

// A shard built byte for byte the way llm.c's fineweb.py writes it (header[3] left 0) loads.
TEST(TokenShard, LoadsLlmcFileBuiltByHand) {
  TempDir d;
  const uint16_t toks[] = {50256, 15496, 11, 995, 0, 65535};
  // Explicit little-endian bytes, independent of the host: 20240520 = 0x0134D888.
  std::string bytes;
  auto put = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(20240520, 4);
  put(1, 4);
  put(6, 4);
  for (int i = 3; i < 256; ++i) put(0, 4);
  for (uint16_t t : toks) put(t, 2);
  ASSERT_EQ(bytes.size(), 1024u + 12u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x88);
  EXPECT_EQ(static_cast<unsigned char>(bytes[3]), 0x01);
  testing::write_file(d / "llmc.bin", bytes);
  auto s = TokenShard::open(d / "llmc.bin");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s->token(i), toks[i]);
  // And what we write for version 1 is llm.c's layout plus header[3] = 2.
  ASSERT_TRUE(write_token_shard(d / "ours.bin", std::vector<uint32_t>(toks, toks + 6), 1).ok());
  std::string ours = testing::read_file(d / "ours.bin");
  ASSERT_EQ(ours.size(), bytes.size());
  EXPECT_EQ(ours.substr(1024), bytes.substr(1024));
  EXPECT_EQ(ours.substr(0, 12), bytes.substr(0, 12));
  int32_t h3;
  std::memcpy(&h3, ours.data() + 12, 4);
  EXPECT_EQ(h3, 2);
}

std::string header_bytes(int32_t magic, int32_t version, int32_t count, int32_t width) {
  int32_t h[256] = {};
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  h[3] = width;
  return std::string(reinterpret_cast<const char*>(h), 1024);
}

Status open_status(const std::string& path) {
  auto r = TokenShard::open(path);
  return r.ok() ? Status() : r.status();
}

bool contains(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

TEST(TokenShard, MissingFile) {
  TempDir d;
  Status s = open_status(d / "nope.bin");
  EXPECT_EQ(s.code(), StatusCode::not_found);
  EXPECT_TRUE(contains(s, "does not exist")) << s.message();
  EXPECT_TRUE(contains(s, "tessera prepare")) << s.message();
}

TEST(TokenShard, ShorterThanHeader) {
  TempDir d;
  testing::write_file(d / "short.bin", header_bytes(kShardMagic, 1, 0, 2).substr(0, 100));
  Status s = open_status(d / "short.bin");
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_TRUE(contains(s, "shorter than")) << s.message();
  testing::write_file(d / "zero.bin", "");
  EXPECT_EQ(open_status(d / "zero.bin").code(), StatusCode::corrupt_data);
}

TEST(TokenShard, WrongMagic) {
  TempDir d;
  testing::write_file(d / "text.bin", std::string(2000, 'a'));
  Status s = open_status(d / "text.bin");
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_TRUE(contains(s, "not a token shard")) << s.message();
  EXPECT_TRUE(contains(s, "tessera prepare")) << s.message();
  // llm.c's tokenizer file magic is a different file kind.
  testing::write_file(d / "tok.bin", header_bytes(20240328, 1, 0, 0));
  EXPECT_TRUE(contains(open_status(d / "tok.bin"), "not a token shard"));
}

TEST(TokenShard, UnknownVersion) {
  TempDir d;
  testing::write_file(d / "v7.bin", header_bytes(kShardMagic, 7, 0, 0));
  Status s = open_status(d / "v7.bin");
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_TRUE(contains(s, "version 7")) << s.message();
}

TEST(TokenShard, WidthDisagreesWithVersion) {
  TempDir d;
  testing::write_file(d / "w.bin", header_bytes(kShardMagic, 1, 0, 4));
  EXPECT_TRUE(contains(open_status(d / "w.bin"), "bytes per token"));
}

TEST(TokenShard, TruncatedAndOversized) {
  TempDir d;
  ASSERT_TRUE(write_token_shard(d / "t.bin", ramp(100, 1, 256), 1).ok());
  std::filesystem::resize_file(d / "t.bin", 1024 + 150);
  Status s = open_status(d / "t.bin");
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_TRUE(contains(s, "truncated")) << s.message();
  EXPECT_TRUE(contains(s, "100 tokens")) << s.message();
  std::filesystem::resize_file(d / "t.bin", 1024 + 202);
  s = open_status(d / "t.bin");
  EXPECT_EQ(s.code(), StatusCode::corrupt_data);
  EXPECT_TRUE(contains(s, "bytes after")) << s.message();
  testing::write_file(d / "neg.bin", header_bytes(kShardMagic, 2, -5, 4));
  EXPECT_TRUE(contains(open_status(d / "neg.bin"), "negative"));
}

TEST(TokenShard, DirectoryIsNotAShard) {
  TempDir d;
  EXPECT_FALSE(open_status(d.path()).ok());
}

}  // namespace
}  // namespace tessera
