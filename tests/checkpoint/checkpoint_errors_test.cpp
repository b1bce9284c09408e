// Damaged and mismatched checkpoints give clear errors (naming the file, key or field), and
// loading -- even a failing load -- never modifies a file.
#include <gtest/gtest.h>

#include <map>

#include "checkpoint_test_util.h"

namespace tessera::checkpoint {
namespace {
namespace fs = std::filesystem;
using testing::DamagedCheckpoint;
using testing::slurp;
using testing::spit;

TEST_F(DamagedCheckpoint, FlippedByteIsAChecksumErrorNamingFileAndKey) {
  int64_t offset;
  {
    auto r = open_checkpoint(dir_);
    ASSERT_TRUE(r.ok());
    const TensorPiece& p = piece(r.value(), "b", 0);
    ASSERT_EQ(p.file, "shard_0.bin");
    offset = p.offset_in_file + 13;
  }
  std::string bytes = slurp(file("shard_0.bin"));
  bytes[offset] ^= 0x01;
  spit(file("shard_0.bin"), bytes);

  auto r = open_checkpoint(dir_);  // the size is unchanged, so opening succeeds
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<float> out(48);
  EXPECT_TRUE(r->read_f32("a", 0, 32, out.data()).ok());     // other pieces are fine
  EXPECT_TRUE(r->read_f32("b", 20, 28, out.data()).ok());    // rank 1's piece of b too
  for (auto [off, n] : {std::pair<int64_t, int64_t>{0, 48}, {2, 3}}) {  // whole, or a sub-range
    Status s = r->read_f32("b", off, n, out.data());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::corrupt_data);
    EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("shard_0.bin"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("tensor 'b'"), std::string::npos) << s.message();
  }
}

TEST_F(DamagedCheckpoint, TruncatedShardIsAnError) {
  std::string bytes = slurp(file("shard_1.bin"));
  spit(file("shard_1.bin"), bytes.substr(0, bytes.size() - 4));
  auto r = open_checkpoint(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::corrupt_data);
  EXPECT_NE(r.status().message().find("shard_1.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

TEST_F(DamagedCheckpoint, MissingShardIsAnError) {
  fs::remove(file("shard_1.bin"));
  auto r = open_checkpoint(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_found);
  EXPECT_NE(r.status().message().find("rank 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("shard_1.bin"), std::string::npos) << r.status().message();
}

TEST_F(DamagedCheckpoint, MissingManifestIsAnError) {
  fs::remove(file("manifest.json"));
  auto r = open_checkpoint(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_found);
  EXPECT_NE(r.status().message().find("manifest.json"), std::string::npos) << r.status().message();
  // find_latest_complete does not offer it either.
  EXPECT_FALSE(find_latest_complete(run_.str()).ok());
}

TEST_F(DamagedCheckpoint, MissingCompleteMarkerIsAnError) {
  fs::remove(file("COMPLETE"));
  auto r = open_checkpoint(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("COMPLETE"), std::string::npos) << r.status().message();
}

TEST_F(DamagedCheckpoint, BadManifestsAreErrorsNamingTheProblem) {
  const std::string good = slurp(file("manifest.json"));
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    spit(file("manifest.json"), text);
    auto r = open_checkpoint(dir_);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("manifest.json"), std::string::npos) << r.status().message();
  };
  expect_error(good.substr(0, good.size() / 2), "not valid JSON");
  auto edit = [&](auto f) {
    nlohmann::json j = nlohmann::json::parse(good);
    f(j);
    return j.dump();
  };
  expect_error(edit([](auto& j) { j.erase("tensors"); }), "missing field 'tensors'");
  expect_error(edit([](auto& j) { j["format"] = "other"; }), "'format'");
  expect_error(edit([](auto& j) { j["version"] = 99; }), "newer");
  expect_error(edit([](auto& j) { j["step"] = 6; }), "named for step 5");
  expect_error(edit([](auto& j) { j["tensors"][0]["dtype"] = "f64"; }), "unknown dtype 'f64'");
  expect_error(edit([](auto& j) { j["tensors"][0]["pieces"][0]["checksum"] = "xyz"; }), "16 hex digits");
  expect_error(edit([](auto& j) { j["tensors"][0]["pieces"][0]["file"] = "../shard_0.bin"; }), "plain file name");
  expect_error(edit([](auto& j) { j["tensors"][1]["pieces"].erase(1); }), "stored by no rank");
  expect_error(edit([](auto& j) { j["tensors"][0]["pieces"][0]["numel"] = 1000; }), "past");
  expect_error(edit([](auto& j) { j["shards"].erase(1); }), "world_size");
  spit(file("manifest.json"), good);
  EXPECT_TRUE(open_checkpoint(dir_).ok());
}

TEST_F(DamagedCheckpoint, IncompatibleConfigNamesTheField) {
  auto r = open_checkpoint(dir_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->check_compatible(config_).ok());
  nlohmann::json other = config_;
  other["n_layer"] = 4;
  Status s = r->check_compatible(other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("different model: n_layer 2 vs 4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("use a matching config or start a new run"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("d_model"), std::string::npos) << s.message();  // only differing fields

  other = config_;
  other["attn"]["n_head"] = 8;
  other["arch"] = "llama";
  other.erase("d_model");
  other["vocab_size"] = 256;
  s = r->check_compatible(other);
  ASSERT_FALSE(s.ok());
  for (const char* needle : {"arch \"gpt2\" vs \"llama\"", "attn.n_head 4 vs 8", "d_model 64 vs (absent)",
                             "vocab_size (absent) vs 256"})
    EXPECT_NE(s.message().find(needle), std::string::npos) << needle << " in " << s.message();
}

TEST_F(DamagedCheckpoint, BadReadRequestsAreErrors) {
  auto r = open_checkpoint(dir_);
  ASSERT_TRUE(r.ok());
  std::vector<float> out(64);
  Status s = r->read_f32("c", 0, 1, out.data());
  EXPECT_EQ(s.code(), StatusCode::not_found);
  EXPECT_NE(s.message().find("no tensor 'c'"), std::string::npos);
  EXPECT_EQ(r->read_f32("a", 30, 3, out.data()).code(), StatusCode::invalid_argument);
  EXPECT_EQ(r->read_f32("a", -1, 3, out.data()).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(open_checkpoint((run_.path() / "nope").string()).ok());

  EXPECT_TRUE(r->check_tensor("b", DType::f32, {6, 8}).ok());
  s = r->check_tensor("b", DType::f32, {8, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'b'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("f32 [6,8] but the model expects f32 [8,6]"), std::string::npos) << s.message();
  EXPECT_FALSE(r->check_tensor("b", DType::bf16, {6, 8}).ok());
  EXPECT_EQ(r->check_tensor("c", DType::f32, {1}).code(), StatusCode::not_found);
}

TEST_F(DamagedCheckpoint, LoadingNeverModifiesFiles) {
  // Damage one shard so that failing paths run too.
  std::string bytes = slurp(file("shard_1.bin"));
  bytes[5] ^= 0x40;
  spit(file("shard_1.bin"), bytes);
  std::map<std::string, std::pair<std::string, fs::file_time_type>> before;
  for (const auto& e : fs::recursive_directory_iterator(run_.path()))
    if (e.is_regular_file()) before[e.path().string()] = {slurp(e.path()), fs::last_write_time(e.path())};

  auto latest = find_latest_complete(run_.str());
  ASSERT_TRUE(latest.ok());
  auto r = open_checkpoint(latest->path);
  ASSERT_TRUE(r.ok());
  std::vector<float> out(48);
  EXPECT_TRUE(r->read_f32("a", 0, 32, out.data()).ok());
  EXPECT_FALSE(r->read_f32("b", 0, 48, out.data()).ok());
  EXPECT_FALSE(r->check_compatible({{"n_layer", 3}}).ok());

  std::map<std::string, std::pair<std::string, fs::file_time_type>> after;
  for (const auto& e : fs::recursive_directory_iterator(run_.path()))
    if (e.is_regular_file()) after[e.path().string()] = {slurp(e.path()), fs::last_write_time(e.path())};
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace tessera::checkpoint
