// Hostile manifests: every field a manifest controls -- offsets, sizes, shapes, ranks, file names,
// nesting -- is checked before use, so a crafted manifest.json is rejected with a clear error and
// can never make the reader open a file outside the checkpoint directory, overflow an integer or
// allocate memory the checkpoint's real files do not back.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>

#include "checkpoint/inspect.h"
#include "checkpoint_test_util.h"

namespace tessera::checkpoint {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::slurp;
using testing::spit;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

class HostileManifest : public testing::DamagedCheckpoint {
 protected:
  void SetUp() override {
    DamagedCheckpoint::SetUp();
    good_ = slurp(file("manifest.json"));
  }
  void TearDown() override {
    spit(file("manifest.json"), good_);
    EXPECT_TRUE(open_checkpoint(dir_).ok()) << "the untouched manifest must still open";
  }
  // The good manifest changed by `f`. Pieces of tensor "a" (index 0): one, on rank 0; of "b"
  // (index 1): [0, 20) on rank 0 and [20, 48) on rank 1.
  std::string edit(const std::function<void(json&)>& f) const {
    json j = json::parse(good_);
    f(j);
    return j.dump();
  }
  // open_checkpoint (and read_manifest) must refuse `text` with every needle in the message, which
  // names manifest.json.
  void expect_refused(const std::string& text, std::initializer_list<const char*> needles) {
    spit(file("manifest.json"), text);
    for (bool full : {true, false}) {
      Status s = full ? open_checkpoint(dir_).status() : read_manifest(dir_).status();
      ASSERT_FALSE(s.ok()) << "accepted: " << text.substr(0, 300);
      EXPECT_EQ(s.code(), StatusCode::corrupt_data) << s.message();
      EXPECT_NE(s.message().find("manifest.json"), std::string::npos) << s.message();
      for (const char* n : needles) EXPECT_NE(s.message().find(n), std::string::npos) << n << " in: " << s.message();
    }
  }
  void expect_refused(const std::function<void(json&)>& f, std::initializer_list<const char*> needles) {
    expect_refused(edit(f), needles);
  }
  std::string good_;
};

json& jpiece(json& j, int tensor, int i) { return j["tensors"][tensor]["pieces"][i]; }

TEST_F(HostileManifest, PieceRangesPastTheTensorOrOverflowingAreRefused) {
  expect_refused([](json& j) { jpiece(j, 0, 0)["numel"] = 33; }, {"tensor 'a'", "past the tensor's 32 elements"});
  expect_refused([](json& j) { jpiece(j, 0, 0)["global_offset"] = int64_t{1} << 60; }, {"past the tensor's"});
  expect_refused([](json& j) { jpiece(j, 0, 0)["numel"] = kMax; }, {"past the tensor's"});
  // global_offset + numel overflows int64: must not wrap around into "in range".
  expect_refused([](json& j) {
    jpiece(j, 1, 1)["global_offset"] = kMax - 4;
    jpiece(j, 1, 1)["numel"] = 28;
  }, {"tensor 'b'", "past the tensor's"});
}

TEST_F(HostileManifest, PiecesPastTheShardFileAreRefused) {
  expect_refused([](json& j) { jpiece(j, 0, 0)["offset_in_file"] = j["shards"][0]["bytes"].get<int64_t>() - 4; },
                 {"tensor 'a'", "past its recorded size"});
  expect_refused([](json& j) { jpiece(j, 0, 0)["offset_in_file"] = kMax; }, {"past its recorded size"});
  expect_refused([](json& j) { jpiece(j, 1, 1)["offset_in_file"] = kMax - 8; }, {"tensor 'b'", "shard_1.bin"});
}

TEST_F(HostileManifest, NegativeAndOutOfRangeNumbersAreRefused) {
  for (const char* f : {"global_offset", "numel", "offset_in_file", "rank"})
    expect_refused([&](json& j) { jpiece(j, 0, 0)[f] = -1; }, {f, "is -1"});
  expect_refused([](json& j) { j["shards"][1]["bytes"] = -5; }, {"'bytes' is -5"});
  expect_refused([](json& j) { j["step"] = -1; }, {"'step' is -1"});
  expect_refused([](json& j) { j["world_size"] = 0; }, {"'world_size' is 0"});
  // Values that a cast to int would wrap into a valid rank or world size (2^32 + 1 -> 1).
  expect_refused([](json& j) { jpiece(j, 0, 0)["rank"] = (int64_t{1} << 32); }, {"'rank' is 4294967296"});
  expect_refused([](json& j) { j["world_size"] = (int64_t{1} << 32) + 2; }, {"'world_size' is 4294967298"});
  expect_refused([](json& j) { j["version"] = (int64_t{1} << 32) + 1; }, {"'version'"});
  // Above INT64_MAX (parsed as unsigned), fractional, or not a number at all.
  expect_refused(edit([](json& j) { jpiece(j, 0, 0)["numel"] = std::numeric_limits<uint64_t>::max(); }),
                 {"'numel' must be an integer that fits in 64 bits"});
  expect_refused([](json& j) { jpiece(j, 0, 0)["numel"] = 1.5; }, {"'numel' must be an integer"});
  expect_refused([](json& j) { jpiece(j, 0, 0)["numel"] = "32"; }, {"'numel' must be an integer"});
  expect_refused([](json& j) {
    jpiece(j, 0, 0)["rank"] = 2;
    jpiece(j, 0, 0)["file"] = "shard_2.bin";
  }, {"rank 2", "ranks 0..1"});
}

TEST_F(HostileManifest, ShapesWhoseSizeOverflowsAreRefused) {
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {int64_t{1} << 32, int64_t{1} << 32}; },
                 {"tensor 'a'", "more elements or bytes than fit in 64 bits"});
  // 2^62 elements fit, 2^62 * 4 bytes do not.
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {int64_t{1} << 62}; }, {"fit in 64 bits"});
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {kMax, 2}; }, {"fit in 64 bits"});
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {4, -8}; }, {"global_shape must hold integers"});
  expect_refused(edit([](json& j) { j["tensors"][0]["global_shape"] = {std::numeric_limits<uint64_t>::max()}; }),
                 {"global_shape must hold integers"});
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {4.5, 8}; }, {"global_shape must hold integers"});
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                              1, 1, 1, 1}); },
                 {"17 dimensions"});
  // A huge shape whose element count fits: the pieces no longer cover it.
  expect_refused([](json& j) { j["tensors"][0]["global_shape"] = {int64_t{1} << 40}; }, {"stored by no rank"});
}

TEST_F(HostileManifest, FileNamesThatEscapeTheDirectoryAreRefused) {
  const std::string nul("shard_0.bin\0../x", 16);
  for (const std::string& name : {std::string("../x"), std::string("/etc/passwd"), std::string("a/../../b"),
                                  std::string("../shard_0.bin"), std::string("sub/shard_0.bin"), std::string(".."),
                                  std::string("."), std::string(""), std::string("shard_0.bin/"), nul,
                                  std::string("shard_1.bin"), std::string("SHARD_0.BIN"), std::string("shard_00.bin"),
                                  std::string("shard_0.bin.tmp")}) {
    SCOPED_TRACE(name);
    expect_refused([&](json& j) { jpiece(j, 0, 0)["file"] = name; }, {"is not allowed", "'shard_0.bin'"});
    expect_refused([&](json& j) { j["shards"][0]["file"] = name; }, {"is not allowed"});
  }
  // The NUL is shown escaped, never cut the message short.
  spit(file("manifest.json"), edit([&](json& j) { jpiece(j, 0, 0)["file"] = nul; }));
  EXPECT_NE(read_manifest(dir_).status().message().find("shard_0.bin\\x00../x"), std::string::npos)
      << read_manifest(dir_).status().message();
}

TEST_F(HostileManifest, AShardListedOutsideTheDirectoryIsNeverOpened) {
  // A real file outside the checkpoint with exactly the recorded size: only the name gives it away.
  const std::string outside = (run_.path() / "outside.bin").string();
  spit(outside, slurp(file("shard_1.bin")));
  for (const std::string& name : {outside, std::string("../../outside.bin")}) {
    expect_refused([&](json& j) { j["shards"][1]["file"] = name; }, {"is not allowed"});
    expect_refused([&](json& j) {
      j["shards"][1]["file"] = name;
      jpiece(j, 1, 1)["file"] = name;
    }, {"is not allowed"});
  }
}

TEST_F(HostileManifest, DuplicateAndOverlappingPiecesAreRefused) {
  expect_refused([](json& j) { j["tensors"][1]["pieces"].push_back(jpiece(j, 1, 0)); }, {"stored twice"});
  expect_refused([](json& j) { jpiece(j, 1, 1)["global_offset"] = 19; }, {"elements [19, 20) are stored twice"});
  expect_refused([](json& j) { j["tensors"].push_back(j["tensors"][0]); }, {"tensor 'a' is listed twice"});
  // Two tensors' pieces on the same bytes of a shard (each covering its own tensor exactly).
  expect_refused([](json& j) { jpiece(j, 1, 0)["offset_in_file"] = jpiece(j, 0, 0)["offset_in_file"]; },
                 {"share bytes", "'a'", "'b'", "shard_0.bin"});
}

TEST_F(HostileManifest, UnknownDtypesAndWrongTypesAreRefused) {
  for (const json& dtype : {json("f64"), json("F32"), json(""), json(4), json(nullptr)}) {
    expect_refused([&](json& j) { j["tensors"][0]["dtype"] = dtype; }, {"dtype"});
  }
  expect_refused("[]", {"expected a JSON object"});
  expect_refused("42", {"expected a JSON object"});
  expect_refused("\"manifest\"", {"expected a JSON object"});
  expect_refused("null", {"expected a JSON object"});
  expect_refused([](json& j) { j["tensors"] = json::object(); }, {"must be an array"});
  expect_refused([](json& j) { j["tensors"][0] = 5; }, {"expected a JSON object"});
  expect_refused([](json& j) { j["tensors"][0]["pieces"] = "x"; }, {"pieces must be an array"});
  expect_refused([](json& j) { j["shards"] = json::object(); }, {"'shards' must be an array"});
  expect_refused([](json& j) { j["config"] = json::array(); }, {"'config' must be an object"});
  expect_refused([](json& j) { j["tensors"][0]["key"] = ""; }, {"empty key"});
  expect_refused([](json& j) { j["tensors"][0]["key"] = std::string("a\0b", 3); j["tensors"].push_back(j["tensors"][0]); },
                 {"'a\\x00b' is listed twice"});
}

TEST_F(HostileManifest, DeepNestingIsRefusedWithoutRecursing) {
  const int depth = 200000;  // recursing once per level would overflow the stack
  expect_refused(std::string(depth, '[') + std::string(depth, ']'), {"deeper than 64 levels"});
  // Deep inside an otherwise valid manifest's opaque config.
  std::string nested = "1";
  for (int i = 0; i < 100; ++i) nested = "{\"x\":" + nested + "}";
  std::string text = edit([](json& j) { j["config"] = "PLACEHOLDER"; });
  text.replace(text.find("\"PLACEHOLDER\""), 13, nested);
  expect_refused(text, {"deeper than 64 levels"});
}

TEST_F(HostileManifest, AHugePieceClaimIsCheckedAgainstTheRealFileBeforeAnyRead) {
  // A consistent manifest for a 4 TiB tensor: the shard's real size gives it away, before any
  // buffer of that size could be allocated; verification streams and stops at the real end.
  const int64_t n = int64_t{1} << 40;
  spit(file("manifest.json"), edit([&](json& j) {
    const int64_t at = j["shards"][0]["bytes"].get<int64_t>() + 64;  // behind b's piece
    j["tensors"][0]["global_shape"] = {n};
    jpiece(j, 0, 0)["numel"] = n;
    jpiece(j, 0, 0)["offset_in_file"] = at;
    j["shards"][0]["bytes"] = at + 4 * n;
  }));
  auto r = open_checkpoint(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shard_0.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("(truncated)"), std::string::npos) << r.status().message();

  auto m = read_manifest(dir_);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  VerifyReport v = verify_checkpoint(dir_, *m);
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.damaged_pieces, 1);  // the huge piece
  EXPECT_EQ(v.pieces_ok, 2);       // both pieces of b are fine
  ASSERT_FALSE(v.damage.empty());
  EXPECT_EQ(v.damage[0].key, "a");
  EXPECT_NE(v.damage[0].what.find("cut off"), std::string::npos) << v.damage[0].what;
}

}  // namespace
}  // namespace tessera::checkpoint
