// Training checkpoints under tensor-, pipeline- and data-parallel layouts: every rank of a
// dp x pp x tp grid saves its shard of a known model (init_parameters, AdamW moments that are a
// function of (tensor, global element)) with save_training_checkpoint; then (a) every rank loads
// the checkpoint into the whole model and compares bitwise, (b) every rank loads a whole-model
// checkpoint (written by one process) into its shard and compares bitwise with what it saved, and
// (c) reloads its own checkpoint into its shard; load_model_from_checkpoint (eval, sample, export)
// reads the sharded checkpoint into the whole model too. Vocabulary sizes not divisible by tp (padding
// rows stay 0), tied and untied heads, GPT-2 and LLaMA; at 4 ranks tp 2 x pp 2, tp 2 x dp 2 and
// pp 4, at 2 ranks tp 2, pp 2 and dp 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/format.h"
#include "comm/grid.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "mpi_test_world.h"
#include "optim/adamw.h"
#include "train/model_source.h"
#include "train/train_checkpoint.h"

using namespace tessera;
using tessera::testing::world;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSeed = 1234;

struct Case {
  std::string name;
  ModelConfig cfg;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  ModelConfig gpt2 = model_preset("tiny").value();  // C 64, NH 4, d_ff 256, tied head
  gpt2.n_layer = 4;                                   // one layer per stage at pp 4
  gpt2.vocab_size = 255;                              // not divisible by tp 2: the last shard has a padding row
  out.push_back({"gpt2_tied_v255", gpt2});
  gpt2.tied_embeddings = false;
  out.push_back({"gpt2_untied_v255", gpt2});
  ModelConfig llama = model_preset("tiny-llama").value();  // untied, RoPE, SwiGLU, d_ff 160, GQA 4/2
  llama.n_layer = 4;
  llama.vocab_size = 255;
  out.push_back({"llama_untied_v255", llama});
  llama.tied_embeddings = true;
  out.push_back({"llama_tied_v255", llama});
  return out;
}

std::vector<GridShape> shapes(int world_size) {
  if (world_size == 4) return {{1, 2, 2}, {2, 1, 2}, {1, 4, 1}};  // {dp, pp, tp}
  if (world_size == 2) return {{1, 1, 2}, {1, 2, 1}, {2, 1, 1}};
  return {};
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
// The AdamW moment of element i of global tensor `name` (which = 0: m, 1: v); v is positive.
float moment(const std::string& name, int64_t i, int which) {
  uint64_t x = hash_name(name) ^ (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull) ^ (which ? 0x5555ull : 0);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  const float u = static_cast<float>(x >> 40) / static_cast<float>(1 << 24);  // [0, 1)
  return which ? 1e-6f + u : u - 0.5f;
}

// Fills the moments of every tensor of `layout` with moment(); vocabulary padding rows 0.
void fill_moments(const ParamLayout& layout, AdamW& opt) {
  for (const ParamInfo& p : layout.params()) {
    float* m = opt.m() + (p.offset - opt.begin());
    float* v = opt.v() + (p.offset - opt.begin());
    std::fill(m, m + p.numel, 0.f);
    std::fill(v, v + p.numel, 0.f);
    for (const TensorPiece& q : layout.shard_pieces(p))
      for (int64_t k = 0; k < q.numel; ++k) {
        m[q.local_offset + k] = moment(p.name, q.global_offset + k, 0);
        v[q.local_offset + k] = moment(p.name, q.global_offset + k, 1);
      }
  }
}

// Parameters and moments of every tensor bitwise equal (padding included), as bytes.
void expect_same(const ParamStore& got, const AdamW& got_opt, const ParamStore& want, const AdamW& want_opt,
                 const std::string& where) {
  ASSERT_EQ(got.layout().params().size(), want.layout().params().size()) << where;
  auto* gm = const_cast<AdamW&>(got_opt).m();
  auto* gv = const_cast<AdamW&>(got_opt).v();
  auto* wm = const_cast<AdamW&>(want_opt).m();
  auto* wv = const_cast<AdamW&>(want_opt).v();
  for (const ParamInfo& p : want.layout().params()) {
    const ParamInfo& g = got.layout().get(p.name);
    ASSERT_EQ(g.numel, p.numel) << where << " " << p.name;
    const size_t bytes = static_cast<size_t>(p.numel) * sizeof(float);
    EXPECT_EQ(std::memcmp(got.params() + g.offset, want.params() + p.offset, bytes), 0) << where << " param " << p.name;
    EXPECT_EQ(std::memcmp(gm + g.offset - got_opt.begin(), wm + p.offset - want_opt.begin(), bytes), 0)
        << where << " adam_m " << p.name;
    EXPECT_EQ(std::memcmp(gv + g.offset - got_opt.begin(), wv + p.offset - want_opt.begin(), bytes), 0)
        << where << " adam_v " << p.name;
  }
}

// NaN everywhere, so anything a load leaves unwritten shows up.
void poison(ParamStore& store, AdamW& opt) {
  std::memset(store.params(), 0xff, static_cast<size_t>(store.numel()) * sizeof(float));
  std::memset(opt.m(), 0xff, static_cast<size_t>(opt.numel()) * sizeof(float));
  std::memset(opt.v(), 0xff, static_cast<size_t>(opt.numel()) * sizeof(float));
}

// A fresh directory every rank agrees on (rank 0 creates it).
std::string shared_temp_dir(Communicator& comm) {
  char path[256] = {};
  if (comm.rank() == 0) {
    std::string t = (fs::temp_directory_path() / "tessera_ckpt_layouts_XXXXXX").string();
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) std::snprintf(path, sizeof path, "%s", buf.data());
  }
  EXPECT_TRUE(comm.broadcast(path, sizeof path, DType::u8, 0).ok());
  return path;
}

struct Shard {
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<AdamW> opt;
};

Shard make_shard(const ModelConfig& cfg, int first, int last, TensorParallelShard tp) {
  Shard s;
  s.store = std::make_unique<ParamStore>(ParamLayout(cfg, first, last, tp));
  s.opt = std::make_unique<AdamW>(s.store->layout(), AdamWConfig{});
  return s;
}

TEST(CheckpointLayouts, SaveShardsLoadWholeAndBack) {
  Communicator& w = world();
  const std::vector<GridShape> grid_shapes = shapes(w.size());
  if (grid_shapes.empty()) GTEST_SKIP() << "run at 2 or 4 ranks";
  auto self = w.split(w.rank(), 0, "self");
  ASSERT_TRUE(self.ok()) << self.status().message();
  const std::string root = shared_temp_dir(w);
  ASSERT_FALSE(root.empty());

  for (const Case& c : cases()) {
    const ModelConfig& cfg = c.cfg;
    const int L = static_cast<int>(cfg.n_layer);
    // The whole model as one process holds it: the expected contents of every load.
    Shard whole = make_shard(cfg, 0, L, {});
    init_parameters(*whole.store, cfg, kSeed);
    fill_moments(whole.store->layout(), *whole.opt);
    // (b)'s input: the whole model saved by rank 0 alone.
    const std::string whole_dir = root + "/" + c.name + "_whole";
    TrainingState st{3, {1, 17}, 3};
    if (w.rank() == 0) {
      Status s = save_training_checkpoint(**self, whole_dir, cfg, *whole.store, *whole.opt,
                                          FlatRange{0, whole.store->numel()}, st, 1, nlohmann::json::object());
      ASSERT_TRUE(s.ok()) << s.message();
    }
    ASSERT_TRUE(w.barrier().ok());

    for (const GridShape& shape : grid_shapes) {
      const std::string where = c.name + " " + grid_shape_string(shape);
      SCOPED_TRACE(where);
      auto grid = Grid::create(w, shape);
      ASSERT_TRUE(grid.ok()) << grid.status().message();
      const GridCoord at = grid->coord();
      const int first = at.pp * L / shape.pp, last = (at.pp + 1) * L / shape.pp;
      const TensorParallelShard tp{at.tp, shape.tp};
      Shard mine = make_shard(cfg, first, last, tp);
      init_parameters(*mine.store, cfg, kSeed);
      fill_moments(mine.store->layout(), *mine.opt);
      const int64_t n = mine.store->numel();
      const FlatRange owned{n * at.dp / shape.dp, n * (at.dp + 1) / shape.dp};
      const std::string run_dir = root + "/" + c.name + "_dp" + std::to_string(shape.dp) + "_pp" +
                                  std::to_string(shape.pp) + "_tp" + std::to_string(shape.tp);
      TrainingState saved{7, {2, 40}, 7};
      Status s = save_training_checkpoint(w, run_dir, cfg, *mine.store, *mine.opt, owned, saved, 1,
                                          nlohmann::json::object());
      ASSERT_TRUE(s.ok()) << s.message();
      const std::string dir = run_dir + "/checkpoints/" + checkpoint::step_dir_name(7);

      // (a) the sharded checkpoint into the whole model, on every rank.
      Shard loaded = make_shard(cfg, 0, L, {});
      poison(*loaded.store, *loaded.opt);
      auto ls = load_training_checkpoint(dir, cfg, *loaded.store, loaded.opt.get());
      ASSERT_TRUE(ls.ok()) << ls.status().message();
      EXPECT_EQ(ls->step, 7);
      EXPECT_EQ(ls->loader.epoch, 2);
      EXPECT_EQ(ls->loader.index, 40);
      EXPECT_EQ(loaded.opt->steps_taken(), 7);
      expect_same(*loaded.store, *loaded.opt, *whole.store, *whole.opt, where + " (a) sharded -> whole");
      // ... and as eval, sample and export load it (whole model, parameters only).
      auto lm = load_model_from_checkpoint(run_dir);
      ASSERT_TRUE(lm.ok()) << lm.status().message();
      ASSERT_EQ(lm->store->numel(), whole.store->numel());
      for (const ParamInfo& p : whole.store->layout().params())
        EXPECT_EQ(std::memcmp(lm->store->params() + p.offset, whole.store->params() + p.offset,
                              static_cast<size_t>(p.numel) * sizeof(float)),
                  0)
            << where << " load_model_from_checkpoint " << p.name;

      // (b) the whole-model checkpoint into this rank's shard.
      Shard back = make_shard(cfg, first, last, tp);
      poison(*back.store, *back.opt);
      auto bs = load_training_checkpoint(whole_dir + "/checkpoints/" + checkpoint::step_dir_name(3), cfg,
                                         *back.store, back.opt.get());
      ASSERT_TRUE(bs.ok()) << bs.status().message();
      EXPECT_EQ(bs->step, 3);
      expect_same(*back.store, *back.opt, *mine.store, *mine.opt, where + " (b) whole -> shard");

      // (c) the sharded checkpoint into the same shard (resume under the same layout).
      poison(*back.store, *back.opt);
      auto cs = load_training_checkpoint(dir, cfg, *back.store, back.opt.get());
      ASSERT_TRUE(cs.ok()) << cs.status().message();
      expect_same(*back.store, *back.opt, *mine.store, *mine.opt, where + " (c) shard -> shard");
      ASSERT_TRUE(w.barrier().ok());
    }
  }
  ASSERT_TRUE(w.barrier().ok());
  if (w.rank() == 0) fs::remove_all(root);
}

// A ZeRO-style optimizer over part of the flat buffer receives exactly the moments of its range.
TEST(CheckpointLayouts, LoadsMomentsOfAnOptimizerShard) {
  Communicator& w = world();
  auto self = w.split(w.rank(), 0, "self");
  ASSERT_TRUE(self.ok()) << self.status().message();
  const std::string root = shared_temp_dir(w);
  ASSERT_FALSE(root.empty());
  const ModelConfig cfg = cases()[2].cfg;  // llama, untied, V 255
  Shard whole = make_shard(cfg, 0, static_cast<int>(cfg.n_layer), {});
  init_parameters(*whole.store, cfg, kSeed);
  fill_moments(whole.store->layout(), *whole.opt);
  if (w.rank() == 0) {
    Status s = save_training_checkpoint(**self, root, cfg, *whole.store, *whole.opt,
                                        FlatRange{0, whole.store->numel()}, TrainingState{5, {}, 5}, 1,
                                        nlohmann::json::object());
    ASSERT_TRUE(s.ok()) << s.message();
  }
  ASSERT_TRUE(w.barrier().ok());
  // tp 2 rank (world rank % 2); its AdamW covers the middle third of the flat buffer, cutting tensors.
  ParamStore shard(ParamLayout(cfg, TensorParallelShard{w.rank() % 2, 2}));
  init_parameters(shard, cfg, kSeed);
  AdamW full(shard.layout(), AdamWConfig{});
  fill_moments(shard.layout(), full);
  const int64_t b = shard.numel() / 3 + 5, e = 2 * shard.numel() / 3 + 7;
  AdamW part(shard.layout(), AdamWConfig{}, b, e);
  std::memset(part.m(), 0xff, static_cast<size_t>(part.numel()) * sizeof(float));
  std::memset(part.v(), 0xff, static_cast<size_t>(part.numel()) * sizeof(float));
  auto st = load_training_checkpoint(root + "/checkpoints/" + checkpoint::step_dir_name(5), cfg, shard, &part);
  ASSERT_TRUE(st.ok()) << st.status().message();
  // Compare inside tensors only (alignment gaps between tensors are never saved).
  for (const ParamInfo& p : shard.layout().params()) {
    const int64_t lo = std::max(p.offset, b), hi = std::min(p.offset + p.numel, e);
    if (hi <= lo) continue;
    const size_t bytes = static_cast<size_t>(hi - lo) * sizeof(float);
    EXPECT_EQ(std::memcmp(part.m() + (lo - b), full.m() + lo, bytes), 0) << p.name;
    EXPECT_EQ(std::memcmp(part.v() + (lo - b), full.v() + lo, bytes), 0) << p.name;
  }
  ASSERT_TRUE(w.barrier().ok());
  if (w.rank() == 0) fs::remove_all(root);
}

}  // namespace
