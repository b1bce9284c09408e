// Asynchronous saves from the live buffers (AsyncSaveOptions::live_allowed): the checkpoint holds the
// parameters and moments as they were at start(), although the caller changes them right after
// wait_until_written() -- the writer reads them before that returns. A ~150 MB state keeps the
// writer busy long enough that a missing wait would let the change into the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "../world_of_one.h"
#include "model/config.h"
#include "optim/adamw.h"
#include "train/async_checkpoint.h"

using namespace tessera;

namespace {
MpiCommunicator& world() { return tessera::testing::world_of_one(); }
}  // namespace

TEST(AsyncCheckpoint, LiveSaveHoldsTheStateAtStart) {
  ModelConfig cfg = model_preset("tiny").value();
  cfg.d_model = 512;
  cfg.d_ff = 2048;
  cfg.n_head = 8;
  cfg.n_layer = 4;  // ~13M parameters: params + m + v ~ 150 MB
  ParamStore store{ParamLayout(cfg)};
  AdamW opt(store.layout(), AdamWConfig{});
  const int64_t n = store.numel();
  for (int64_t i = 0; i < n; ++i) store.params()[i] = static_cast<float>(i % 1000) * 1e-3f;
  for (int64_t i = 0; i < n; ++i) opt.m()[i] = static_cast<float>(i % 77), opt.v()[i] = static_cast<float>(i % 13);

  const std::string run_dir = ::testing::TempDir() + "/async_live_" + std::to_string(::getpid());
  std::filesystem::remove_all(run_dir);
  TrainingState state;
  state.step = 7;
  AsyncCheckpointer saver;
  AsyncSaveOptions o;
  o.live_allowed = true;
  o.step_s = 1e9;  // steps far longer than a write: the live way, from the second save on
  ASSERT_TRUE(saver.start(world(), run_dir, cfg, {CheckpointChunk{&store, &opt, FlatRange{0, n}}}, state, o).ok());
  EXPECT_FALSE(saver.last_live());  // the first save copies: no write time measured yet
  state.step = 8;
  ASSERT_TRUE(saver.start(world(), run_dir, cfg, {CheckpointChunk{&store, &opt, FlatRange{0, n}}}, state, o).ok());
  EXPECT_TRUE(saver.last_live());
  (void)saver.wait_until_written();
  // The optimizer update the trainer would now run.
  std::fill(store.params(), store.params() + n, -1.f);
  std::fill(opt.m(), opt.m() + n, -1.f);
  ASSERT_TRUE(saver.wait().ok());

  auto latest = checkpoint::find_latest_complete(run_dir);
  ASSERT_TRUE(latest.ok()) << latest.status().message();
  auto reader = checkpoint::open_checkpoint(latest->path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const ParamInfo& last = store.layout().params().back();
  std::vector<float> got(static_cast<size_t>(last.numel));
  ASSERT_TRUE(reader->read_f32("param/" + last.name, 0, last.numel, got.data()).ok());
  for (int64_t i = 0; i < last.numel; ++i)
    ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>((last.offset + i) % 1000) * 1e-3f) << last.name << " " << i;
  ASSERT_TRUE(reader->read_f32("adam_m/" + last.name, 0, last.numel, got.data()).ok());
  for (int64_t i = 0; i < last.numel; ++i)
    ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>((last.offset + i) % 77)) << last.name << " " << i;
  std::filesystem::remove_all(run_dir);
}
