// train_step and its seams: the call order a gradient strategy sees, equality with the plain
// accumulate-clip-update sequence, and the step hooks.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/gradient_sync.h"
#include "parallel/micro_batch_runner.h"
#include "train/train_step.h"
#include "../backend_util.h"

namespace tessera {
namespace {

// A single-rank strategy that records what the step asks of it.
class RecordingSync final : public GradientSync {
 public:
  RecordingSync(ParamStore& store) : store_(store), opt_(store.layout(), AdamWConfig{}) {}
  std::string_view name() const override { return "recording"; }
  Status broadcast_parameters() override { return log("broadcast"); }
  void set_sync(bool last) override { (void)log(last ? "sync" : "nosync"); }
  void on_layer_ready(int layer) override { (void)log("ready" + std::to_string(layer)); }
  Status finish() override { return log("finish"); }
  Result<float> clip_grad_norm(float max_norm) override {
    (void)log("clip");
    return tessera::clip_grad_norm(store_.grads(), store_.numel(), max_norm);
  }
  void optimizer_step(float lr) override {
    (void)log("update");
    opt_.step(store_.params(), store_.grads(), lr);
  }
  Status gather_parameters() override { return log("gather"); }
  Status average_over_replicas(float* v, int64_t n) override { return log("average"); }
  Status verify_replicas(std::string_view) override { return log("verify"); }
  std::vector<OwnedState> owned_state() override { return {{0, &opt_, {0, store_.numel()}}}; }
  double exposed_wait_s() const override { return 0; }
  void set_trace(TraceFn) override {}
  std::vector<std::string> calls;

 private:
  Status log(std::string s) {
    calls.push_back(std::move(s));
    return Status::ok_status();
  }
  ParamStore& store_;
  AdamW opt_;
};

class RecordingHooks final : public StepHooks {
 public:
  Status at(StepPoint p, int64_t step, ParamStore&) override {
    seen.push_back((p == StepPoint::step_begin ? "begin" : "after_update") + std::to_string(step));
    return fail_at_begin ? internal_error("planted") : Status::ok_status();
  }
  std::vector<std::string> seen;
  bool fail_at_begin = false;
};

struct Fixture {
  static constexpr int64_t B = 2, T = 16, kMicro = 3;
  ModelConfig cfg;
  std::vector<std::vector<int32_t>> inputs, targets;
  Fixture() {
    cfg = model_preset("tiny").value();
    cfg.n_layer = 2;
    Rng rng(3);
    for (int m = 0; m < kMicro; ++m) {
      inputs.emplace_back(B * T);
      targets.emplace_back(B * T);
      for (int64_t i = 0; i < B * T; ++i) {
        inputs[m][i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
        targets[m][i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
      }
    }
  }
  BatchSource source() {
    return [this, m = 0](int32_t* in, int32_t* tg) mutable {
      std::memcpy(in, inputs[m % kMicro].data(), B * T * sizeof(int32_t));
      std::memcpy(tg, targets[m % kMicro].data(), B * T * sizeof(int32_t));
      ++m;
    };
  }
};

ParamStore initialised_store(const ModelConfig& cfg) {
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 1);
  return store;
}

// One model replica with its recording strategy.
struct Replica {
  ParamStore store;
  Transformer model;
  RecordingSync sync;
  explicit Replica(const Fixture& f)
      : store(initialised_store(f.cfg)), model(tessera::testing::cpu_backend(), f.cfg, store, f.B, f.T), sync(store) {}
};

TEST(TrainStep, StrategySeesTheDocumentedOrder) {
  Fixture f;
  Replica rep(f);
  auto& [store, model, sync] = rep;
  model.set_grad_ready_callback([&](int l) { sync.on_layer_ready(l); });
  AccumulationRunner runner(model, sync, f.source(), 2);
  RecordingHooks hooks;
  Timeline tl(false, 0);
  StepParts parts{store, runner, sync, hooks, tl};
  ASSERT_TRUE(train_step(parts, 7, 1e-3f, 1.f).ok());
  const std::vector<std::string> backward = {"ready2", "ready1", "ready0", "ready-1"};
  std::vector<std::string> expected = {"nosync"};
  expected.insert(expected.end(), backward.begin(), backward.end());
  expected.push_back("sync");
  expected.insert(expected.end(), backward.begin(), backward.end());
  for (const char* s : {"finish", "clip", "update", "gather", "average"}) expected.push_back(s);
  EXPECT_EQ(sync.calls, expected);
  EXPECT_EQ(hooks.seen, (std::vector<std::string>{"begin7", "after_update7"}));
}

TEST(TrainStep, EqualsThePlainAccumulateClipUpdateSequence) {
  Fixture f;
  const float lr = 2e-3f, clip = 0.5f;
  // Reference: written out by hand.
  ParamStore ref = initialised_store(f.cfg);
  Transformer ref_model(tessera::testing::cpu_backend(), f.cfg, ref, f.B, f.T);
  AdamW ref_opt(ref.layout(), AdamWConfig{});
  ref.zero_grads();
  double ref_loss = 0;
  for (int m = 0; m < f.kMicro; ++m) {
    ref_loss += ref_model.forward(f.inputs[m].data(), f.targets[m].data());
    ref_model.backward(1.f / f.kMicro);
  }
  const float ref_norm = clip_grad_norm(ref.grads(), ref.numel(), clip);
  ref_opt.step(ref.params(), ref.grads(), lr);

  Replica rep(f);
  auto& [store, model, sync] = rep;
  AccumulationRunner runner(model, sync, f.source(), f.kMicro);
  StepHooks no_hooks;
  Timeline tl(false, 0);
  StepParts parts{store, runner, sync, no_hooks, tl};
  auto r = train_step(parts, 1, lr, clip);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->loss, static_cast<float>(ref_loss / f.kMicro));
  EXPECT_EQ(r->grad_norm, ref_norm);
  EXPECT_EQ(0, std::memcmp(store.params(), ref.params(), store.numel() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(store.grads(), ref.grads(), store.numel() * sizeof(float)));
}

TEST(TrainStep, AHookErrorEndsTheStepBeforeAnyWork) {
  Fixture f;
  Replica rep(f);
  auto& [store, model, sync] = rep;
  AccumulationRunner runner(model, sync, f.source(), 1);
  RecordingHooks hooks;
  hooks.fail_at_begin = true;
  Timeline tl(false, 0);
  StepParts parts{store, runner, sync, hooks, tl};
  auto r = train_step(parts, 1, 1e-3f, 1.f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "planted");
  EXPECT_TRUE(sync.calls.empty());
}

}  // namespace
}  // namespace tessera
