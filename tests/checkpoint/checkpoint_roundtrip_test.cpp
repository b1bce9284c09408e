// Save/load round trips: several tensors and dtypes from one rank, and a two-rank save read back
// under a different split (reshard on load), with the per-rank records gathered as JSON.
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint_test_util.h"

namespace tessera::checkpoint {
namespace {
using testing::iota_floats;
using testing::ScratchDir;

TEST(CheckpointRoundTrip, SeveralTensorsAndDtypes) {
  ScratchDir run;
  std::vector<float> w = iota_floats(4 * 6, -3.f);  // (4, 6)
  std::vector<float> b = iota_floats(6, 10.f);      // (6,)
  std::vector<uint16_t> tokens = {1, 2, 3, 65535, 7, 0, 42};
  std::vector<uint16_t> bf(9);
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = f32_to_bf16(0.5f * static_cast<float>(i) - 1.f);
  std::vector<int32_t> empty;  // a zero-element tensor must survive too

  nlohmann::json config = {{"arch", "gpt2"}, {"n_layer", 2}, {"d_model", 64}, {"norm_eps", 1e-5}};
  nlohmann::json state = {{"step", 7}, {"lr_step", 7}, {"loader", {{"shard", 1}, {"pos", 12345}}},
                          {"rng", "0123456789abcdef"}};
  CheckpointTarget target = checkpoint_target(run.str(), 7);
  CheckpointWriter writer(target, 0);
  ASSERT_TRUE(writer.add("param/w", DType::f32, {4, 6}, 0, 24, w.data()).ok());
  ASSERT_TRUE(writer.add("param/b", DType::f32, {6}, 0, 6, b.data()).ok());
  ASSERT_TRUE(writer.add("data/tokens", DType::u16, {7}, 0, 7, tokens.data()).ok());
  ASSERT_TRUE(writer.add("param/bf", DType::bf16, {3, 3}, 0, 9, bf.data()).ok());
  ASSERT_TRUE(writer.add("param/empty", DType::i32, {0, 5}, 0, 0, empty.data()).ok());
  ASSERT_TRUE(writer.write_shard().ok());
  ASSERT_TRUE(write_manifest(target, {writer.record()}, config, state).ok());
  // Before finalize nothing is visible.
  EXPECT_FALSE(find_latest_complete(run.str()).ok());
  Status fin = finalize(target);
  ASSERT_TRUE(fin.ok()) << fin.to_string();
  EXPECT_FALSE(std::filesystem::exists(target.staging_dir()));

  auto latest = find_latest_complete(run.str());
  ASSERT_TRUE(latest.ok()) << latest.status().to_string();
  EXPECT_EQ(latest->step, 7);
  EXPECT_EQ(latest->path, target.final_dir());
  EXPECT_TRUE(std::filesystem::exists(target.final_dir() + "/COMPLETE"));

  auto reader = open_checkpoint(latest->path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ(reader->step(), 7);
  EXPECT_EQ(reader->world_size(), 1);
  EXPECT_EQ(reader->config(), config);
  EXPECT_EQ(reader->state(), state);
  EXPECT_EQ(reader->tensors().size(), 5u);
  ASSERT_NE(reader->find("param/w"), nullptr);
  EXPECT_EQ(reader->find("param/w")->global_shape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(reader->find("param/bf")->dtype, DType::bf16);

  std::vector<float> w2(24), b2(6);
  std::vector<uint16_t> tokens2(7), bf2(9);
  ASSERT_TRUE(reader->read_f32("param/w", 0, 24, w2.data()).ok());
  ASSERT_TRUE(reader->read_f32("param/b", 0, 6, b2.data()).ok());
  ASSERT_TRUE(reader->read("data/tokens", 0, 7, tokens2.data()).ok());
  ASSERT_TRUE(reader->read("param/bf", 0, 9, bf2.data()).ok());
  ASSERT_TRUE(reader->read("param/empty", 0, 0, nullptr).ok());
  EXPECT_EQ(w2, w);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(tokens2, tokens);
  EXPECT_EQ(bf2, bf);
  EXPECT_TRUE(reader->check_compatible(config).ok());

  // A sub-range of one piece.
  std::vector<float> mid(5);
  ASSERT_TRUE(reader->read_f32("param/w", 7, 5, mid.data()).ok());
  EXPECT_EQ(mid, std::vector<float>(w.begin() + 7, w.begin() + 12));
}

// Two "ranks" save a tensor split at an uneven point; a three-way layout reads it back.
TEST(CheckpointRoundTrip, ReshardTwoRanksIntoThreeRanges) {
  ScratchDir run;
  const int64_t rows = 25, cols = 40, n = rows * cols;  // (25, 40)
  std::vector<float> full = iota_floats(n, 1.f);
  std::vector<float> moment = iota_floats(n, -100.f);
  const int64_t split = 437;  // rank 0: [0, 437), rank 1: [437, 1000)

  CheckpointTarget target = checkpoint_target(run.str(), 100, /*staging_tag=*/0xabc);
  std::vector<nlohmann::json> gathered;  // what the trainer's gather would deliver to rank 0
  for (int rank = 0; rank < 2; ++rank) {
    CheckpointWriter w(target, rank);
    int64_t lo = rank == 0 ? 0 : split, hi = rank == 0 ? split : n;
    ASSERT_TRUE(w.add("param/h.0.mlp.fc.w", DType::f32, {rows, cols}, lo, hi - lo, full.data() + lo).ok());
    // A second tensor split the other way round, and as two pieces on rank 1.
    if (rank == 0) {
      ASSERT_TRUE(w.add("adam_m/h.0.mlp.fc.w", DType::f32, {rows, cols}, 900, 100, moment.data() + 900).ok());
    } else {
      ASSERT_TRUE(w.add("adam_m/h.0.mlp.fc.w", DType::f32, {rows, cols}, 0, 500, moment.data()).ok());
      ASSERT_TRUE(w.add("adam_m/h.0.mlp.fc.w", DType::f32, {rows, cols}, 500, 400, moment.data() + 500).ok());
    }
    Status s = w.write_shard();
    ASSERT_TRUE(s.ok()) << s.to_string();
    gathered.push_back(shard_record_to_json(w.record()));
  }
  std::vector<ShardRecord> records;
  for (auto it = gathered.rbegin(); it != gathered.rend(); ++it) {  // arrival order does not matter
    auto r = shard_record_from_json(nlohmann::json::parse(it->dump()));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    records.push_back(r.value());
  }
  Status s = write_manifest(target, records, {{"n_layer", 1}}, {{"step", 100}});
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(finalize(target).ok());

  auto reader = open_checkpoint(target.final_dir());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ(reader->world_size(), 2);
  EXPECT_EQ(reader->find("param/h.0.mlp.fc.w")->pieces.size(), 2u);
  EXPECT_EQ(reader->find("adam_m/h.0.mlp.fc.w")->pieces.size(), 3u);
  for (const char* key : {"param/h.0.mlp.fc.w", "adam_m/h.0.mlp.fc.w"}) {
    const std::vector<float>& ref = std::string(key).starts_with("param") ? full : moment;
    std::vector<float> assembled;
    const int64_t bounds[] = {0, 333, 666, n};
    for (int r = 0; r < 3; ++r) {
      std::vector<float> part(bounds[r + 1] - bounds[r]);
      Status rs = reader->read_f32(key, bounds[r], static_cast<int64_t>(part.size()), part.data());
      ASSERT_TRUE(rs.ok()) << rs.to_string();
      EXPECT_EQ(part, std::vector<float>(ref.begin() + bounds[r], ref.begin() + bounds[r + 1])) << key << " range " << r;
      assembled.insert(assembled.end(), part.begin(), part.end());
    }
    EXPECT_EQ(assembled, ref) << key;
    // One range that spans all pieces at odd offsets.
    std::vector<float> odd(n - 3);
    ASSERT_TRUE(reader->read_f32(key, 1, n - 3, odd.data()).ok());
    EXPECT_EQ(odd, std::vector<float>(ref.begin() + 1, ref.end() - 2));
  }
}

TEST(CheckpointRoundTrip, RankWithNothingToSave) {
  ScratchDir run;
  std::vector<float> x = iota_floats(10, 0.f);
  CheckpointTarget target = checkpoint_target(run.str(), 1);
  CheckpointWriter w0(target, 0), w1(target, 1);
  ASSERT_TRUE(w0.add("param/x", DType::f32, {10}, 0, 10, x.data()).ok());
  ASSERT_TRUE(w1.add("param/x", DType::f32, {10}, 10, 0, nullptr).ok());
  ASSERT_TRUE(w0.write_shard().ok());
  ASSERT_TRUE(w1.write_shard().ok());
  EXPECT_EQ(w1.record().bytes, 0);
  ASSERT_TRUE(write_manifest(target, {w0.record(), w1.record()}, {}, {}).ok());
  ASSERT_TRUE(finalize(target).ok());
  auto reader = open_checkpoint(target.final_dir());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  std::vector<float> y(10);
  ASSERT_TRUE(reader->read_f32("param/x", 0, 10, y.data()).ok());
  EXPECT_EQ(x, y);
}

TEST(CheckpointRoundTrip, ManifestRejectsGapsOverlapsAndDisagreeingRanks) {
  std::vector<float> x = iota_floats(100, 0.f);
  auto try_save = [&](auto add_pieces) {
    ScratchDir run;
    CheckpointTarget target = checkpoint_target(run.str(), 1);
    CheckpointWriter w0(target, 0), w1(target, 1);
    add_pieces(w0, w1);
    EXPECT_TRUE(w0.write_shard().ok());
    EXPECT_TRUE(w1.write_shard().ok());
    Status s = write_manifest(target, {w0.record(), w1.record()}, {}, {});
    EXPECT_FALSE(std::filesystem::exists(target.staging_dir() + "/manifest.json"));
    return s;
  };
  Status gap = try_save([&](CheckpointWriter& a, CheckpointWriter& b) {
    ASSERT_TRUE(a.add("t", DType::f32, {100}, 0, 40, x.data()).ok());
    ASSERT_TRUE(b.add("t", DType::f32, {100}, 50, 50, x.data() + 50).ok());
  });
  EXPECT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("[40, 50) are stored by no rank"), std::string::npos) << gap.message();

  Status overlap = try_save([&](CheckpointWriter& a, CheckpointWriter& b) {
    ASSERT_TRUE(a.add("t", DType::f32, {100}, 0, 60, x.data()).ok());
    ASSERT_TRUE(b.add("t", DType::f32, {100}, 50, 50, x.data() + 50).ok());
  });
  EXPECT_FALSE(overlap.ok());
  EXPECT_NE(overlap.message().find("stored twice (ranks 0 and 1)"), std::string::npos) << overlap.message();

  Status shape = try_save([&](CheckpointWriter& a, CheckpointWriter& b) {
    ASSERT_TRUE(a.add("t", DType::f32, {10, 10}, 0, 50, x.data()).ok());
    ASSERT_TRUE(b.add("t", DType::f32, {100}, 50, 50, x.data() + 50).ok());
  });
  EXPECT_FALSE(shape.ok());
  EXPECT_NE(shape.message().find("[10,10] by rank 0 but as f32 [100] by rank 1"), std::string::npos)
      << shape.message();

  // A missing record (a rank that never reported) is an error, not a silently smaller world.
  ScratchDir run;
  CheckpointTarget target = checkpoint_target(run.str(), 1);
  CheckpointWriter w1(target, 1);
  ASSERT_TRUE(w1.add("t", DType::f32, {100}, 0, 100, x.data()).ok());
  ASSERT_TRUE(w1.write_shard().ok());
  EXPECT_FALSE(write_manifest(target, {w1.record()}, {}, {}).ok());
}

TEST(CheckpointRoundTrip, WriterRejectsBadArguments) {
  ScratchDir run;
  float x[4] = {};
  CheckpointWriter w(checkpoint_target(run.str(), 1), 0);
  EXPECT_FALSE(w.add("", DType::f32, {4}, 0, 4, x).ok());
  EXPECT_FALSE(w.add("t", DType::f32, {4}, 2, 3, x).ok());
  EXPECT_FALSE(w.add("t", DType::f32, {-4}, 0, 0, x).ok());
  EXPECT_FALSE(w.add("t", DType::f32, {4}, 0, 4, nullptr).ok());
  ASSERT_TRUE(w.add("t", DType::f32, {4}, 0, 4, x).ok());
  ASSERT_TRUE(w.write_shard().ok());
  EXPECT_FALSE(w.add("u", DType::f32, {4}, 0, 4, x).ok());
  EXPECT_FALSE(w.write_shard().ok());
  EXPECT_FALSE(finalize(checkpoint_target(run.str(), 1, w.target().staging_tag)).ok());  // no manifest yet
}

}  // namespace
}  // namespace tessera::checkpoint
