// Asynchronous saves from the live buffers (AsyncSaveOptions::live_allowed): the checkpoint holds the
// parameters and moments as they were at start(), although the caller changes them right after
// release_live_buffers() -- what the writer had not reached by then was copied, the piece it was
// writing finished first. A ~150 MB state keeps the writer busy long enough that a release at once
// copies nearly all of it, and one a few milliseconds later only a part.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
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
  auto fill_state = [&] {
    for (int64_t i = 0; i < n; ++i) store.params()[i] = static_cast<float>(i % 1000) * 1e-3f;
    for (int64_t i = 0; i < n; ++i) opt.m()[i] = static_cast<float>(i % 77), opt.v()[i] = static_cast<float>(i % 13);
  };
  const std::string run_dir = ::testing::TempDir() + "/async_live_" + std::to_string(::getpid());
  std::filesystem::remove_all(run_dir);
  TrainingState state;
  AsyncCheckpointer saver;
  AsyncSaveOptions o;
  o.live_allowed = true;
  o.keep_last = 4;
  const int64_t total_bytes = 3 * n * static_cast<int64_t>(sizeof(float));
  for (int delay_ms : {0, 15, 2000}) {
    SCOPED_TRACE("release after " + std::to_string(delay_ms) + " ms");
    fill_state();
    state.step = 7 + delay_ms;
    ASSERT_TRUE(saver.start(world(), run_dir, cfg, {CheckpointChunk{&store, &opt, FlatRange{0, n}}}, state, o).ok());
    EXPECT_TRUE(saver.last_live());
    if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    (void)saver.release_live_buffers();
    EXPECT_LE(saver.last_frozen_bytes(), total_bytes);
    if (delay_ms == 2000) EXPECT_EQ(saver.last_frozen_bytes(), 0);  // the writer was done: nothing to copy
    // The optimizer update the trainer would now run.
    std::fill(store.params(), store.params() + n, -1.f);
    std::fill(opt.m(), opt.m() + n, -1.f);
    std::fill(opt.v(), opt.v() + n, -1.f);
    ASSERT_TRUE(saver.wait().ok());

    auto reader = checkpoint::open_checkpoint(run_dir + "/checkpoints/" + checkpoint::step_dir_name(state.step));
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    std::vector<float> got;
    for (const ParamInfo& p : store.layout().params()) {
      got.resize(static_cast<size_t>(p.numel));
      ASSERT_TRUE(reader->read_f32("param/" + p.name, 0, p.numel, got.data()).ok());
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>((p.offset + i) % 1000) * 1e-3f) << p.name << " " << i;
      ASSERT_TRUE(reader->read_f32("adam_m/" + p.name, 0, p.numel, got.data()).ok());
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>((p.offset + i) % 77)) << p.name << " " << i;
      ASSERT_TRUE(reader->read_f32("adam_v/" + p.name, 0, p.numel, got.data()).ok());
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>((p.offset + i) % 13)) << p.name << " " << i;
    }
  }
  std::filesystem::remove_all(run_dir);
}
