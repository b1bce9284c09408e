// Atomicity and housekeeping: unfinished saves stay invisible, keep-last-K pruning deletes only
// Tessera checkpoints, and an existing checkpoint is never overwritten.
#include <gtest/gtest.h>

#include "checkpoint_test_util.h"
#include "checkpoint/background_prune.h"

namespace tessera::checkpoint {
namespace {
namespace fs = std::filesystem;
using testing::iota_floats;
using testing::ScratchDir;
using testing::slurp;
using testing::spit;

std::vector<int64_t> complete_steps(const std::string& run_dir) {
  auto all = list_complete_checkpoints(run_dir);
  EXPECT_TRUE(all.ok());
  std::vector<int64_t> steps;
  for (const auto& c : all.value()) steps.push_back(c.step);
  return steps;
}

TEST(CheckpointCatalog, NoCheckpointIsNotFound) {
  ScratchDir run;
  auto latest = find_latest_complete(run.str());
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), StatusCode::not_found);
  EXPECT_NE(latest.status().message().find("start a new run"), std::string::npos);
}

TEST(CheckpointCatalog, IgnoresStagingAndIncompleteDirectories) {
  ScratchDir run;
  ASSERT_TRUE(testing::save_single(run.str(), 1, {{"x", iota_floats(8, 0.f)}}).ok());
  ASSERT_TRUE(testing::save_single(run.str(), 2, {{"x", iota_floats(8, 1.f)}}).ok());

  // A save of step 3 interrupted after the manifest: still only a .tmp directory.
  std::vector<float> x = iota_floats(8, 2.f);
  CheckpointTarget t3 = checkpoint_target(run.str(), 3);
  CheckpointWriter w(t3, 0);
  ASSERT_TRUE(w.add("x", DType::f32, {8}, 0, 8, x.data()).ok());
  ASSERT_TRUE(w.write_shard().ok());
  ASSERT_TRUE(write_manifest(t3, {w.record()}, {}, {}).ok());
  ASSERT_TRUE(fs::exists(t3.staging_dir()));

  // A step_4 directory without COMPLETE (e.g. copied by hand and cut short).
  ASSERT_TRUE(testing::save_single(run.str(), 4, {{"x", iota_floats(8, 3.f)}}).ok());
  const fs::path dir4 = run.path() / "checkpoints" / "step_00000004";
  fs::remove(dir4 / "COMPLETE");
  // Unrelated entries in checkpoints/ are ignored.
  fs::create_directories(run.path() / "checkpoints" / "step_5");
  spit(run.path() / "checkpoints" / "step_00000006", "a file, not a directory");

  auto latest = find_latest_complete(run.str());
  ASSERT_TRUE(latest.ok()) << latest.status().to_string();
  EXPECT_EQ(latest->step, 2);
  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{1, 2}));

  auto r4 = open_checkpoint(dir4.string());
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.status().message().find("no COMPLETE marker"), std::string::npos) << r4.status().message();
  EXPECT_FALSE(open_checkpoint(t3.staging_dir()).ok());

  // Finishing the interrupted save makes it the latest.
  ASSERT_TRUE(finalize(t3).ok());
  latest = find_latest_complete(run.str());
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 3);
}

TEST(CheckpointCatalog, PruneKeepsExactlyKAndTouchesNothingElse) {
  ScratchDir run;
  for (int64_t step = 10; step <= 50; step += 10)
    ASSERT_TRUE(testing::save_single(run.str(), step, {{"x", iota_floats(16, float(step))}}).ok());
  const fs::path ckpts = run.path() / "checkpoints";
  // Things prune must leave alone:
  fs::create_directories(ckpts / "notes");
  spit(ckpts / "notes" / "README", "keep me");
  fs::create_directories(ckpts / "step_00000001");  // looks complete, but its manifest is not ours
  spit(ckpts / "step_00000001" / "manifest.json", R"({"format": "someone-else"})");
  spit(ckpts / "step_00000001" / "COMPLETE", "");
  spit(ckpts / "step_00000001" / "weights.pt", "precious");
  fs::create_directories(ckpts / "step_00000099");  // a newer look-alike must not count towards K
  spit(ckpts / "step_00000099" / "manifest.json", "not json at all");
  spit(ckpts / "step_00000099" / "COMPLETE", "");
  fs::create_directories(ckpts / "step_00000002.tmp-00000000000000aa");  // another save's staging
  spit(ckpts / "step_00000002.tmp-00000000000000aa" / "shard_0.bin", "partial");
  // An old Tessera checkpoint into which a user put a file of their own.
  ASSERT_TRUE(testing::save_single(run.str(), 5, {{"x", iota_floats(16, 5.f)}}).ok());
  spit(ckpts / "step_00000005" / "my_notes.txt", "mine");

  ASSERT_FALSE(prune_checkpoints(run.str(), 0).ok());
  Status s = prune_checkpoints(run.str(), 2);
  ASSERT_TRUE(s.ok()) << s.to_string();

  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{1, 5, 40, 50, 99}));
  for (int64_t step : {10, 20, 30}) EXPECT_FALSE(fs::exists(ckpts / step_dir_name(step))) << step;
  EXPECT_EQ(slurp(ckpts / "notes" / "README"), "keep me");
  EXPECT_EQ(slurp(ckpts / "step_00000099" / "manifest.json"), "not json at all");
  EXPECT_EQ(slurp(ckpts / "step_00000001" / "weights.pt"), "precious");
  EXPECT_EQ(slurp(ckpts / "step_00000002.tmp-00000000000000aa" / "shard_0.bin"), "partial");
  EXPECT_EQ(slurp(ckpts / "step_00000005" / "my_notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(ckpts / "step_00000005" / "shard_0.bin"));
  // The kept ones still load.
  for (int64_t step : {40, 50}) {
    auto r = open_checkpoint((ckpts / step_dir_name(step)).string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    std::vector<float> x(16);
    ASSERT_TRUE(r->read_f32("x", 0, 16, x.data()).ok());
    EXPECT_EQ(x, iota_floats(16, float(step)));
  }
  // Pruning again changes nothing; with K larger than the count nothing goes.
  ASSERT_TRUE(prune_checkpoints(run.str(), 2).ok());
  ASSERT_TRUE(prune_checkpoints(run.str(), 10).ok());
  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{1, 5, 40, 50, 99}));
}

TEST(CheckpointCatalog, PruneWithOnlyTesseraCheckpointsKeepsExactlyK) {
  ScratchDir run;
  for (int64_t step = 1; step <= 4; ++step) {
    ASSERT_TRUE(testing::save_single(run.str(), step, {{"x", iota_floats(4, 0.f)}}).ok());
    ASSERT_TRUE(prune_checkpoints(run.str(), 3).ok());  // as a trainer does after each save
  }
  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{2, 3, 4}));
  ASSERT_TRUE(prune_checkpoints(run.str(), 1).ok());
  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{4}));
}

TEST(CheckpointCatalog, BackgroundPruneRetiresAtOnceAndDeletesLater) {
  ScratchDir run;
  const fs::path ckpts = run.path() / "checkpoints";
  BackgroundPruner pruner;
  for (int64_t step = 1; step <= 4; ++step) {
    ASSERT_TRUE(testing::save_single(run.str(), step, {{"x", iota_floats(4, 0.f)}}).ok());
    ASSERT_TRUE(pruner.prune(run.str(), 2).ok());
    // Already when prune returns, only the newest two are complete (a resume never picks a
    // checkpoint whose files are being deleted).
    EXPECT_EQ(complete_steps(run.str()).size(), static_cast<size_t>(std::min<int64_t>(step, 2))) << step;
    EXPECT_EQ(find_latest_complete(run.str())->step, step);
  }
  // A user's file keeps its directory, complete, as prune_checkpoints does.
  spit(ckpts / step_dir_name(3) / "mine.txt", "mine");
  ASSERT_TRUE(testing::save_single(run.str(), 5, {{"x", iota_floats(4, 0.f)}}).ok());
  ASSERT_TRUE(pruner.prune(run.str(), 1).ok());
  EXPECT_FALSE(pruner.prune(run.str(), 0).ok());
  pruner.finish();
  EXPECT_EQ(complete_steps(run.str()), (std::vector<int64_t>{3, 5}));
  for (int64_t step : {1, 2, 4}) EXPECT_FALSE(fs::exists(ckpts / step_dir_name(step))) << step;
}

TEST(CheckpointCatalog, RefusesToOverwriteAnExistingCheckpoint) {
  ScratchDir run;
  std::vector<float> original = iota_floats(8, 1.f), other = iota_floats(8, -7.f);
  ASSERT_TRUE(testing::save_single(run.str(), 3, {{"x", original}}).ok());

  // A second save of the same step is refused before any data is written...
  Status again = testing::save_single(run.str(), 3, {{"x", other}});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("already exists and is never overwritten"), std::string::npos) << again.message();

  // ...and also at the rename, when the checkpoint appeared while the save was in flight.
  CheckpointTarget late = checkpoint_target(run.str(), 4, /*staging_tag=*/1);
  CheckpointWriter w(late, 0);
  ASSERT_TRUE(w.add("x", DType::f32, {8}, 0, 8, other.data()).ok());
  ASSERT_TRUE(w.write_shard().ok());
  ASSERT_TRUE(write_manifest(late, {w.record()}, {}, {}).ok());
  ASSERT_TRUE(testing::save_single(run.str(), 4, {{"x", original}}).ok());  // another tag wins the race
  Status fin = finalize(late);
  ASSERT_FALSE(fin.ok());
  EXPECT_NE(fin.message().find("already exists"), std::string::npos) << fin.message();
  // Even an empty directory in the way is not replaced by the atomic rename.
  CheckpointTarget t5 = checkpoint_target(run.str(), 5, /*staging_tag=*/2);
  CheckpointWriter w5(t5, 0);
  ASSERT_TRUE(w5.add("x", DType::f32, {8}, 0, 8, other.data()).ok());
  ASSERT_TRUE(w5.write_shard().ok());
  ASSERT_TRUE(write_manifest(t5, {w5.record()}, {}, {}).ok());
  fs::create_directories(t5.final_dir());
  EXPECT_FALSE(finalize(t5).ok());
  EXPECT_TRUE(fs::is_empty(t5.final_dir()));

  for (int64_t step : {3, 4}) {
    auto r = open_checkpoint(checkpoint_target(run.str(), step).final_dir());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    std::vector<float> x(8);
    ASSERT_TRUE(r->read_f32("x", 0, 8, x.data()).ok());
    EXPECT_EQ(x, original) << "step " << step;
  }
}

TEST(CheckpointCatalog, StepDirectoryNames) {
  EXPECT_EQ(step_dir_name(42), "step_00000042");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
  int64_t step = -1;
  EXPECT_TRUE(parse_step_dir_name("step_00000042", &step));
  EXPECT_EQ(step, 42);
  EXPECT_TRUE(parse_step_dir_name("step_123456789", &step));
  EXPECT_EQ(step, 123456789);
  EXPECT_FALSE(parse_step_dir_name("step_42", &step));
  EXPECT_FALSE(parse_step_dir_name("step_00000042.tmp-1", &step));
  EXPECT_FALSE(parse_step_dir_name("step_000000042", &step));
  EXPECT_FALSE(parse_step_dir_name("step_-0000042", &step));
}

}  // namespace
}  // namespace tessera::checkpoint
