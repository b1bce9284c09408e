// tessera checkpoint convert: a checkpoint saved under a multi-rank layout (tensor-parallel pieces,
// data-parallel ranges) becomes model.safetensors + optimizer.safetensors + state.json with every
// value bitwise intact, converts back into a one-rank checkpoint holding the same values and state,
// and neither direction ever overwrites anything.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "model/config.h"
#include "model/config_json.h"
#include "model/param_layout.h"
#include "model/safetensors.h"
#include "train/checkpoint_convert.h"
#include "train/model_source.h"
#include "train/train_checkpoint.h"
#include "../test_util.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class CheckpointConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = model_preset("tiny");
    ASSERT_TRUE(c.ok());
    cfg_ = *c;
    cfg_.n_layer = 1;
    const ParamLayout full(cfg_);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (auto* v : {&params_, &m_, &v_}) {
      v->resize(static_cast<size_t>(full.total_numel()));
      for (float& x : *v) x = normal(rng);
    }
    for (float& x : v_) x = x * x;  // second moments are >= 0
    state_ = {{"step", 7}, {"loader", {{"epoch", 1}, {"index", 5}}}, {"adam_steps", 7},
              {"run_config", {{"parallel", {{"dp", 2}, {"tp", 2}}}, {"optim", {{"lr", 0.001}}}}}};
  }

  // Saves the global model as ranks of a dp x tp grid would: each tp rank's shard of every tensor,
  // its flat buffer split into dp ranges; plus an extra tensor "local_sgd/anchor" from rank 0.
  void save_grid(const std::string& run_dir, int dp, int tp) {
    const ParamLayout full(cfg_);
    const auto target = checkpoint::checkpoint_target(run_dir, 7);
    std::vector<checkpoint::ShardRecord> records;
    for (int r = 0; r < dp * tp; ++r) {
      const int t = r % tp, d = r / tp;
      const ParamLayout layout(cfg_, 0, static_cast<int>(cfg_.n_layer), TensorParallelShard{t, tp});
      const int64_t n = layout.total_numel();
      std::vector<std::vector<float>> local(3, std::vector<float>(static_cast<size_t>(n)));
      for (const ParamInfo& p : layout.params())
        for (const TensorPiece& q : layout.shard_pieces(p))
          for (int k = 0; k < 3; ++k) {
            const std::vector<float>& global = k == 0 ? params_ : k == 1 ? m_ : v_;
            std::copy_n(global.data() + full.get(p.name).offset + q.global_offset, q.numel,
                        local[k].data() + p.offset + q.local_offset);
          }
      checkpoint::CheckpointWriter w(target, r);
      for (const SavedPiece& s : checkpoint_pieces(layout, FlatRange{d * n / dp, (d + 1) * n / dp})) {
        int k = 0;
        for (const char* prefix : {"param/", "adam_m/", "adam_v/"})
          ASSERT_TRUE(w.add(prefix + s.param->name, DType::f32, s.param->global_shape, s.global_offset, s.numel,
                            local[k++].data() + s.flat_offset).ok());
      }
      if (r == 0) ASSERT_TRUE(w.add("local_sgd/anchor", DType::f32, {2, 3}, 0, 6, anchor_).ok());
      ASSERT_TRUE(w.write_shard().ok());
      records.push_back(w.record());
    }
    ASSERT_TRUE(checkpoint::write_manifest(target, records, model_config_json(cfg_), state_).ok());
    ASSERT_TRUE(checkpoint::finalize(target).ok());
  }

  // Every tensor of the checkpoint at `dir` equals the global model bitwise.
  void expect_same_values(const std::string& dir) {
    auto r = checkpoint::open_checkpoint(dir);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const ParamLayout full(cfg_);
    EXPECT_EQ(r->tensors().size(), 3 * full.params().size() + 1);
    for (const ParamInfo& p : full.params()) {
      int k = 0;
      for (const char* prefix : {"param/", "adam_m/", "adam_v/"}) {
        std::vector<float> got(static_cast<size_t>(p.numel));
        ASSERT_TRUE(r->read_f32(prefix + p.name, 0, p.numel, got.data()).ok());
        const std::vector<float>& want = k == 0 ? params_ : k == 1 ? m_ : v_;
        EXPECT_EQ(0, std::memcmp(got.data(), want.data() + p.offset, got.size() * 4)) << prefix << p.name;
        ++k;
      }
    }
    float anchor[6];
    ASSERT_TRUE(r->read_f32("local_sgd/anchor", 0, 6, anchor).ok());
    EXPECT_EQ(0, std::memcmp(anchor, anchor_, sizeof anchor));
  }

  testing::TempDir tmp_;
  ModelConfig cfg_;
  std::vector<float> params_, m_, v_;
  float anchor_[6] = {1, -2, 3.5f, 0, -0.f, 1e-30f};
  json state_;
};

TEST_F(CheckpointConvert, AnyLayoutRoundTripsBitwise) {
  for (auto [dp, tp] : {std::pair{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
    SCOPED_TRACE("dp " + std::to_string(dp) + " tp " + std::to_string(tp));
    const std::string tag = std::to_string(dp) + "x" + std::to_string(tp);
    const fs::path run = tmp_.path() / ("run" + tag), out = tmp_.path() / ("out" + tag);
    save_grid(run.string(), dp, tp);
    const std::string src = (run / "checkpoints/step_00000007").string();
    expect_same_values(src);

    auto e = export_consolidated(src, out.string());
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e->ranks, dp * tp);
    EXPECT_TRUE(is_consolidated_dir(out.string()));
    // model.safetensors: Hugging Face names, loads as a model with the same parameters.
    auto lm = load_model_from_weights((out / kConsolidatedModelFile).string());
    ASSERT_TRUE(lm.ok()) << lm.status().to_string();
    for (const ParamInfo& p : lm->store->layout().params())
      EXPECT_EQ(0, std::memcmp(lm->store->param(p.name), params_.data() + ParamLayout(cfg_).get(p.name).offset,
                               static_cast<size_t>(p.numel) * 4))
          << p.name;
    auto st = open_safetensors((out / kConsolidatedModelFile).string());
    ASSERT_TRUE(st.ok());
    EXPECT_TRUE(st->has("h.0.attn.c_attn.weight"));
    auto opt = open_safetensors((out / kConsolidatedOptimizerFile).string());
    ASSERT_TRUE(opt.ok());
    EXPECT_TRUE(opt->has("adam_m/h.0.attn.qkv.w") && opt->has("adam_v/wte"));
    const json state = json::parse(testing::read_file(out / kConsolidatedStateFile));
    for (const char* key : {"step", "loader", "adam_steps", "run_config"}) EXPECT_EQ(state[key], state_[key]) << key;
    EXPECT_EQ(state["model_config"], model_config_json(cfg_));
    EXPECT_EQ(state["source"]["ranks"], dp * tp);

    // Back into a new run directory: one rank, the same values, state and config.
    const fs::path run2 = tmp_.path() / ("back" + tag);
    auto i = import_consolidated(out.string(), run2.string());
    ASSERT_TRUE(i.ok()) << i.status().to_string();
    EXPECT_EQ(i->to, (run2 / "checkpoints/step_00000007").string());
    expect_same_values(i->to);
    auto back = checkpoint::open_checkpoint(i->to);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->world_size(), 1);
    EXPECT_EQ(back->state(), state_);
    EXPECT_EQ(back->config(), model_config_json(cfg_));

    // And out again: the same files, byte for byte.
    const fs::path out2 = tmp_.path() / ("out2" + tag);
    ASSERT_TRUE(export_consolidated(i->to, out2.string()).ok());
    for (const char* f : {kConsolidatedModelFile, kConsolidatedOptimizerFile, kConsolidatedExtraFile})
      EXPECT_EQ(testing::read_file(out / f), testing::read_file(out2 / f)) << f;
  }
}

TEST_F(CheckpointConvert, NothingIsOverwritten) {
  save_grid((tmp_.path() / "run").string(), 2, 1);
  const std::string src = (tmp_.path() / "run/checkpoints/step_00000007").string();
  const std::string out = (tmp_.path() / "out").string();
  ASSERT_TRUE(export_consolidated(src, out).ok());
  const std::string before = testing::read_file(fs::path(out) / kConsolidatedStateFile);
  auto again = export_consolidated(src, out);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists and is never overwritten"), std::string::npos)
      << again.status().message();
  EXPECT_EQ(before, testing::read_file(fs::path(out) / kConsolidatedStateFile));

  // Into the run that holds step 7 already.
  auto into = import_consolidated(out, (tmp_.path() / "run").string());
  ASSERT_FALSE(into.ok());
  EXPECT_NE(into.status().message().find("step_00000007' already exists"), std::string::npos)
      << into.status().message();
  expect_same_values(src);
}

TEST_F(CheckpointConvert, BadConvertedDirectoriesAreRefused) {
  save_grid((tmp_.path() / "run").string(), 1, 1);
  const fs::path out = tmp_.path() / "out";
  ASSERT_TRUE(export_consolidated((tmp_.path() / "run/checkpoints/step_00000007").string(), out.string()).ok());
  const std::string good_state = testing::read_file(out / kConsolidatedStateFile);
  auto expect_refused = [&](const std::string& needle) {
    auto r = import_consolidated(out.string(), (tmp_.path() / "new").string());
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(tmp_.path() / "new/checkpoints/step_00000007"));
  };
  auto with_state = [&](auto f) {
    json j = json::parse(good_state);
    f(j);
    testing::write_file(out / kConsolidatedStateFile, j.dump());
  };
  with_state([](json& j) { j["format"] = "other"; });
  expect_refused("'format' is not");
  with_state([](json& j) { j["step"] = -3; });
  expect_refused("'step' must be an integer >= 0");
  with_state([](json& j) { j["model_config"]["n_layer"] = 2; });  // the files hold one layer
  expect_refused("model.safetensors");
  testing::write_file(out / kConsolidatedStateFile, std::string(1000, '[') + std::string(1000, ']'));
  expect_refused("deeper than");
  testing::write_file(out / kConsolidatedStateFile, good_state);

  // A moment with the wrong shape, or one too many.
  const ParamLayout full(cfg_);
  std::vector<NamedTensor> moments;
  for (const char* prefix : {"adam_m/", "adam_v/"})
    for (const ParamInfo& p : full.params())
      moments.push_back({prefix + p.name, p.global_shape, std::vector<float>(static_cast<size_t>(p.numel))});
  moments[0].shape = {moments[0].shape[1], moments[0].shape[0]};
  ASSERT_TRUE(write_safetensors((out / kConsolidatedOptimizerFile).string(), moments).ok());
  expect_refused("tensor 'adam_m/wte' has shape");
  moments[0].shape = {moments[0].shape[1], moments[0].shape[0]};
  moments.push_back({"adam_m/bogus", {1}, {0.f}});
  ASSERT_TRUE(write_safetensors((out / kConsolidatedOptimizerFile).string(), moments).ok());
  expect_refused("'adam_m/bogus'");
}

}  // namespace
}  // namespace tessera
