// Whole-checkpoint verification (`tessera checkpoint inspect`): every piece is read and checked,
// damage is named by file, tensor and element range, and the advice names the checkpoint to use.
#include <gtest/gtest.h>

#include "checkpoint/inspect.h"
#include "checkpoint_test_util.h"

namespace tessera::checkpoint {
namespace {
using testing::DamagedCheckpoint;
namespace fs = std::filesystem;

// The verification of the fixture's checkpoint as it is on disk now.
VerifyReport verify(const std::string& dir) {
  auto m = read_manifest(dir);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? verify_checkpoint(dir, *m) : VerifyReport{};
}

TEST_F(DamagedCheckpoint, VerifyReadsEveryPieceWithProgress) {
  auto m = read_manifest(dir_);
  ASSERT_TRUE(m.ok());
  int64_t last = -1, total = -1;
  VerifyReport r = verify_checkpoint(dir_, *m, [&](int64_t done, int64_t t) {
    EXPECT_GE(done, last);
    last = done;
    total = t;
  });
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.pieces, 3);
  EXPECT_EQ(r.pieces_ok, 3);
  EXPECT_EQ(r.bytes, (32 + 48) * 4);
  EXPECT_EQ(last, r.bytes);
  EXPECT_EQ(total, r.bytes);
}

TEST_F(DamagedCheckpoint, VerifyNamesTheCorruptPieceAndChecksTheOthers) {
  auto m = read_manifest(dir_);
  ASSERT_TRUE(m.ok());
  const TensorPiece& b1 = m->tensors.at(1).pieces.at(1);  // b's elements [20, 48), rank 1
  std::string bytes = testing::slurp(file("shard_1.bin"));
  bytes[static_cast<size_t>(b1.offset_in_file) + 7] ^= 0x10;
  testing::spit(file("shard_1.bin"), bytes);
  VerifyReport r = verify(dir_);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_EQ(r.damaged_pieces, 1);
  EXPECT_EQ(r.pieces_ok, 2);
  const Damage& d = r.damage[0];
  EXPECT_EQ(d.file, file("shard_1.bin").string());
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.key, "b");
  EXPECT_EQ(d.begin, 20);
  EXPECT_EQ(d.end, 48);
  EXPECT_EQ(d.what, "checksum mismatch");
}

TEST_F(DamagedCheckpoint, VerifyNamesPiecesCutOffByTruncation) {
  std::string bytes = testing::slurp(file("shard_0.bin"));
  testing::spit(file("shard_0.bin"), bytes.substr(0, bytes.size() - 4));  // cuts the last piece (b [0, 20))
  VerifyReport r = verify(dir_);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_EQ(r.pieces_ok, 2);  // a on rank 0, before the cut, and b's piece on rank 1
  EXPECT_EQ(r.damage[0].key, "b");
  EXPECT_EQ(r.damage[0].end, 20);
  EXPECT_NE(r.damage[0].what.find("truncated"), std::string::npos) << r.damage[0].what;
}

TEST_F(DamagedCheckpoint, VerifyReportsMissingOrOddShardFiles) {
  fs::remove(file("shard_0.bin"));
  VerifyReport r = verify(dir_);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_EQ(r.damaged_pieces, 2);
  EXPECT_EQ(r.pieces_ok, 1);
  EXPECT_TRUE(r.damage[0].key.empty());
  EXPECT_NE(r.damage[0].what.find("missing"), std::string::npos);

  fs::create_directory(file("shard_0.bin"));  // not a regular file: never opened
  r = verify(dir_);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_NE(r.damage[0].what.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(open_checkpoint(dir_).ok());
}

TEST_F(DamagedCheckpoint, VerifyReportsExtraBytes) {
  testing::spit(file("shard_1.bin"), testing::slurp(file("shard_1.bin")) + "junk");
  VerifyReport r = verify(dir_);
  ASSERT_EQ(r.damage.size(), 1u);
  EXPECT_EQ(r.damaged_pieces, 0);
  EXPECT_EQ(r.pieces_ok, 3);
  EXPECT_NE(r.damage[0].what.find("extra data"), std::string::npos);
}

TEST_F(DamagedCheckpoint, RecoveryAdviceNamesThePreviousCompleteCheckpoint) {
  EXPECT_NE(recovery_advice(dir_).find("no earlier complete checkpoint"), std::string::npos) << recovery_advice(dir_);
  ASSERT_TRUE(testing::save_single(run_.str(), 3, {{"a", a_}}).ok());
  ASSERT_TRUE(testing::save_single(run_.str(), 9, {{"a", a_}}).ok());  // newer: not a candidate
  const std::string advice = recovery_advice(dir_);
  EXPECT_NE(advice.find("resume from the previous checkpoint step_00000003"), std::string::npos) << advice;
  EXPECT_NE(advice.find("step_00000005"), std::string::npos) << advice;  // what to move away
}

}  // namespace
}  // namespace tessera::checkpoint
