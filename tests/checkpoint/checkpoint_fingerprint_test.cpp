// Logical fingerprints (checkpoint/fingerprint.h): additive over any cut of a tensor, sensitive to
// position and value; recorded per tensor in the manifest; recomputed from the stored pieces by
// verify_checkpoint (`tessera checkpoint fingerprint`), which catches a dropped piece, a duplicated
// range and a zeroed piece that were planted with valid checksums and coverage; the training state's
// fingerprint is checked as the manifest is read; old manifests without fingerprints still read.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "checkpoint/fingerprint.h"
#include "checkpoint/inspect.h"
#include "checkpoint_test_util.h"

namespace tessera::checkpoint {
namespace {
using testing::DamagedCheckpoint;
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

uint64_t fp(const std::vector<float>& v, int64_t offset = 0) {
  return fingerprint_elements(DType::f32, offset, static_cast<int64_t>(v.size()), v.data());
}

TEST(Fingerprint, IsTheSameForAnyCutIntoPieces) {
  const std::vector<float> v = random_floats(1000, 1);
  const uint64_t whole = fp(v);
  for (int64_t a : {0, 1, 7, 333, 999})
    for (int64_t b : {a, a + 1, int64_t{1000}}) {
      if (b > 1000) continue;
      const uint64_t parts = fingerprint_elements(DType::f32, 0, a, v.data()) +
                             fingerprint_elements(DType::f32, a, b - a, v.data() + a) +
                             fingerprint_elements(DType::f32, b, 1000 - b, v.data() + b);
      EXPECT_EQ(parts, whole) << a << " " << b;
    }
  // Across the 2^32-element boundary, where the position's high bits change.
  const int64_t edge = (int64_t{1} << 32) - 300;
  EXPECT_EQ(fp(v, edge), fingerprint_elements(DType::f32, edge, 300, v.data()) +
                             fingerprint_elements(DType::f32, edge + 300, 700, v.data() + 300));
  EXPECT_NE(fp(v, edge), fp(v, edge + (int64_t{1} << 32)));
  // 16-bit elements (bf16) too.
  std::vector<uint16_t> h(101);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
  EXPECT_EQ(fingerprint_elements(DType::bf16, 5, 101, h.data()),
            fingerprint_elements(DType::bf16, 5, 40, h.data()) + fingerprint_elements(DType::bf16, 45, 61, h.data() + 40));
}

TEST(Fingerprint, SeesMovedDuplicatedMissingAndZeroedRanges) {
  const std::vector<float> v = random_floats(512, 2);
  const uint64_t want = fp(v);
  std::vector<float> swapped = v;  // two ranges of equal size exchanged: same bytes, other places
  std::swap_ranges(swapped.begin(), swapped.begin() + 64, swapped.begin() + 256);
  EXPECT_NE(fp(swapped), want);
  EXPECT_NE(fp(v, 1), want);  // the whole tensor one element off
  std::vector<float> dup = v;
  std::copy_n(v.begin(), 64, dup.begin() + 64);
  EXPECT_NE(fp(dup), want);
  std::vector<float> zeroed = v;
  std::fill(zeroed.begin() + 100, zeroed.begin() + 101, 0.f);  // one element
  EXPECT_NE(fp(zeroed), want);
  // A missing range (its partial never added) differs from the range stored as zeros, and from the whole.
  const uint64_t missing = fingerprint_elements(DType::f32, 0, 256, v.data());
  EXPECT_NE(missing, want);
  std::vector<float> zeros(256, 0.f);
  EXPECT_NE(missing + fingerprint_elements(DType::f32, 256, 256, zeros.data()), missing);
  std::vector<float> negzero = v;  // -0.0 and 0.0 have different bits: a checkpoint must keep bits
  negzero[3] = 0.f;
  std::vector<float> poszero = v;
  poszero[3] = -0.f;
  EXPECT_NE(fp(negzero), fp(poszero));
}

TEST(Fingerprint, HexRoundTripAcceptsOnlyTheCanonicalForm) {
  uint64_t x = 0;
  EXPECT_EQ(fingerprint_hex(0x0123456789abcdefull), "0123456789abcdef");
  EXPECT_TRUE(parse_fingerprint_hex("0123456789abcdef", &x));
  EXPECT_EQ(x, 0x0123456789abcdefull);
  for (const char* bad : {"0123456789ABCDEF", "123", "0123456789abcdef0", "0x23456789abcdef", "-123456789abcdef"})
    EXPECT_FALSE(parse_fingerprint_hex(bad, &x)) << bad;
}

// The fixture's manifest as JSON, and back.
json load_manifest(const fs::path& dir) { return json::parse(testing::slurp(dir / "manifest.json")); }
void store_manifest(const fs::path& dir, const json& j) { testing::spit(dir / "manifest.json", j.dump(1)); }
json& tensor_json(json& m, const std::string& key) {
  for (json& t : m["tensors"])
    if (t["key"] == key) return t;
  throw std::runtime_error("no tensor " + key);
}
std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

VerifyReport verify(const std::string& dir) {
  auto m = read_manifest(dir);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? verify_checkpoint(dir, *m) : VerifyReport{};
}

// The planted damage passed every check but the fingerprint: exactly tensor `key` is named.
void expect_only_fingerprint_catches(const std::string& dir, const std::string& key) {
  auto reader = open_checkpoint(dir);  // manifest, coverage and shard sizes are all fine
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  std::vector<float> all(48);
  ASSERT_TRUE(reader->read_f32(key, 0, 48, all.data()).ok());  // and every checksum
  const VerifyReport r = verify(dir);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.damaged_pieces, 0);
  EXPECT_EQ(r.fingerprint_mismatches, 1);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_EQ(r.damage[0].key, key);
  EXPECT_EQ(r.damage[0].rank, -1);
  EXPECT_NE(r.damage[0].what.find("fingerprint mismatch"), std::string::npos) << r.damage[0].what;
}

TEST_F(DamagedCheckpoint, ManifestRecordsEachTensorsFingerprintNotThePieces) {
  auto m = read_manifest(dir_);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->tensors.at(0).fingerprint && m->tensors.at(1).fingerprint);
  EXPECT_EQ(*m->tensors[0].fingerprint, fp(a_));
  EXPECT_EQ(*m->tensors[1].fingerprint, fp(b_));  // saved as two pieces by two ranks: the whole tensor's
  const json j = load_manifest(dir_);
  EXPECT_EQ(j["tensors"][1]["fingerprint"], hex(fp(b_)));
  for (const json& t : j["tensors"])
    for (const json& p : t["pieces"]) EXPECT_FALSE(p.contains("fingerprint")) << p.dump();
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.fingerprints.size(), 2u);
  EXPECT_TRUE(r.fingerprints[0].matches() && r.fingerprints[1].matches());
  EXPECT_EQ(r.unfingerprinted, 0);
}

TEST_F(DamagedCheckpoint, ManifestWithoutFingerprintsStillLoadsWithoutTheCheck) {
  json j = load_manifest(dir_);
  for (json& t : j["tensors"]) t.erase("fingerprint");
  store_manifest(dir_, j);
  auto reader = open_checkpoint(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_FALSE(reader->find("b")->fingerprint.has_value());
  const VerifyReport r = verify(dir_);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.unfingerprinted, 2);
  EXPECT_FALSE(r.fingerprints[1].saved.has_value());
}

TEST_F(DamagedCheckpoint, RefusesAMalformedFingerprint) {
  json j = load_manifest(dir_);
  tensor_json(j, "b")["fingerprint"] = "not hex";
  store_manifest(dir_, j);
  auto m = read_manifest(dir_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'b'"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("fingerprint"), std::string::npos) << m.status().message();
}

// The training state (step, data position, ...) is not a tensor: the manifest fingerprints its JSON.
TEST_F(DamagedCheckpoint, TrainingStateIsFingerprintedToo) {
  json j = load_manifest(dir_);
  ASSERT_TRUE(j.contains("state_fingerprint"));
  EXPECT_EQ(j["state_fingerprint"], hex(state_fingerprint(j["state"])));
  j["state"]["step"] = 6;  // edited (or a damaged digit) without its fingerprint
  store_manifest(dir_, j);
  auto m = read_manifest(dir_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::corrupt_data);
  EXPECT_NE(m.status().message().find("state_fingerprint"), std::string::npos) << m.status().message();
  j.erase("state_fingerprint");  // a checkpoint from before fingerprints: read without the check
  store_manifest(dir_, j);
  m = read_manifest(dir_);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_FALSE(m->state_fingerprint.has_value());
  EXPECT_EQ(m->state["step"], 6);
}

// b's rank-1 piece (elements [20, 48)) now holds a copy of elements [0, 20) in its first 20: the
// shard bytes and the piece's checksum were rewritten together, so only the fingerprint sees it.
TEST_F(DamagedCheckpoint, PlantedDuplicatedRangeIsNamedByTheFingerprint) {
  json j = load_manifest(dir_);
  json& b1 = tensor_json(j, "b")["pieces"][1];
  ASSERT_EQ(b1["rank"], 1);
  std::string shard = testing::slurp(file("shard_1.bin"));
  const size_t at = b1["offset_in_file"].get<size_t>();
  std::memcpy(shard.data() + at, b_.data(), 20 * sizeof(float));
  testing::spit(file("shard_1.bin"), shard);
  b1["checksum"] = hex(checksum_bytes(shard.data() + at, 28 * sizeof(float)));
  store_manifest(dir_, j);
  expect_only_fingerprint_catches(dir_, "b");
}

TEST_F(DamagedCheckpoint, PlantedZeroedPieceIsNamedByTheFingerprint) {
  json j = load_manifest(dir_);
  json& b1 = tensor_json(j, "b")["pieces"][1];
  std::string shard = testing::slurp(file("shard_1.bin"));
  const size_t at = b1["offset_in_file"].get<size_t>();
  std::memset(shard.data() + at, 0, 28 * sizeof(float));
  testing::spit(file("shard_1.bin"), shard);
  b1["checksum"] = hex(checksum_bytes(shard.data() + at, 28 * sizeof(float)));
  store_manifest(dir_, j);
  expect_only_fingerprint_catches(dir_, "b");
}

// Rank 1's piece of b is dropped and rank 0's piece stretched over its range with zeros (a new blob
// at the end of shard_0.bin, checksum and shard size updated): coverage and checksums are fine.
TEST_F(DamagedCheckpoint, PlantedDroppedPieceIsNamedByTheFingerprint) {
  json j = load_manifest(dir_);
  json& b = tensor_json(j, "b");
  json& b0 = b["pieces"][0];
  std::string shard = testing::slurp(file("shard_0.bin"));
  std::string blob = shard.substr(b0["offset_in_file"].get<size_t>(), 20 * sizeof(float)) +
                     std::string(28 * sizeof(float), '\0');
  shard.resize((shard.size() + 63) / 64 * 64, '\0');
  b0["offset_in_file"] = shard.size();
  b0["numel"] = 48;
  b0["checksum"] = hex(checksum_bytes(blob.data(), blob.size()));
  shard += blob;
  testing::spit(file("shard_0.bin"), shard);
  b["pieces"].erase(1);
  j["shards"][0]["bytes"] = shard.size();
  store_manifest(dir_, j);
  expect_only_fingerprint_catches(dir_, "b");
}

}  // namespace
}  // namespace tessera::checkpoint
