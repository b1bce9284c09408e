// train_step and its seams: the call order the reduction and the update see, equality with the plain
// accumulate-clip-update sequence, and the step hooks.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/gradient_reduction.h"
#include "parallel/parameter_update.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "parallel/pipeline_runner.h"
#include "train/train_step.h"
#include "../backend_util.h"

namespace tessera {
namespace {

// The two halves of a single-rank strategy, as separate objects that record what the step asks of
// each in one shared log: the step must not need them to be one object.
class RecordingReduction final : public GradientReduction {
 public:
  explicit RecordingReduction(std::vector<std::string>& calls) : calls_(calls) {}
  std::string_view name() const override { return "recording"; }
  void begin_micro_batch(bool completes_step) override { calls_.push_back(completes_step ? "sync" : "nosync"); }
  void on_layer_ready(int layer) override { calls_.push_back("ready" + std::to_string(layer)); }
  Status finish() override { return log("finish"); }
  Status average_over_replicas(float*, int64_t) override { return log("average"); }
  double exposed_wait_s() const override { return 0; }
  void set_trace(TraceFn) override {}

 private:
  Status log(std::string s) {
    calls_.push_back(std::move(s));
    return Status::ok_status();
  }
  std::vector<std::string>& calls_;
};

class RecordingUpdate final : public ParameterUpdate {
 public:
  RecordingUpdate(ParamStore& store, std::vector<std::string>& calls)
      : store_(store), opt_(store.layout(), AdamWConfig{}), calls_(calls) {}
  Status broadcast_parameters() override { return log("broadcast"); }
  Result<UpdateResult> update(float lr, float max_norm, Timeline&) override {
    calls_.push_back("update");
    UpdateResult r;
    r.grad_norm = tessera::clip_grad_norm(store_.grads(), store_.numel(), max_norm);
    opt_.step(store_.params(), store_.grads(), lr);
    return r;
  }
  Status verify_replicas(std::string_view) override { return log("verify"); }
  std::vector<OwnedState> owned_state() override { return {{0, &opt_, {0, store_.numel()}}}; }
  int64_t optimizer_steps() const override { return opt_.steps_taken(); }

 private:
  Status log(std::string s) {
    calls_.push_back(std::move(s));
    return Status::ok_status();
  }
  ParamStore& store_;
  AdamW opt_;
  std::vector<std::string>& calls_;
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

MpiCommunicator& world_of_one() {
  static MpiRuntime runtime;  // MPI singleton init, on first use: test listing does not start MPI
  static std::unique_ptr<MpiCommunicator> comm = std::move(MpiCommunicator::create_world().value());
  return *comm;
}

// One model replica with its recording strategy, run as the trainer runs every layout: the pipeline
// runner over one stage (gradient accumulation, 1F1B order).
struct Replica {
  ParamStore store;
  std::vector<std::string> calls;
  RecordingReduction reduction{calls};
  RecordingUpdate update;
  std::unique_ptr<PipelineRunner> runner;
  Replica(Fixture& f, int micro_batches) : store(initialised_store(f.cfg)), update(store, calls) {
    runner = std::make_unique<PipelineRunner>(
        tessera::testing::cpu_backend(), f.cfg, std::vector<ParamStore*>{&store}, f.B, f.T, Recompute::none,
        world_of_one(), PipelineScheduleKind::one_f_one_b, PipelineShape{1, micro_batches, 1}, reduction,
        [this](int, Transformer& model) { model.set_grad_ready_callback([this](int l) { reduction.on_layer_ready(l); }); },
        f.source());
  }
};

TEST(TrainStep, StrategySeesTheDocumentedOrder) {
  Fixture f;
  Replica rep(f, 2);
  RecordingHooks hooks;
  Timeline tl(false, 0);
  StepParts parts{rep.store, *rep.runner, rep.reduction, rep.update, hooks, tl};
  ASSERT_TRUE(train_step(parts, 7, 1e-3f, 1.f).ok());
  const std::vector<std::string> backward = {"ready2", "ready1", "ready0", "ready-1"};
  std::vector<std::string> expected = {"nosync"};
  expected.insert(expected.end(), backward.begin(), backward.end());
  expected.push_back("sync");
  expected.insert(expected.end(), backward.begin(), backward.end());
  for (const char* s : {"finish", "update", "average"}) expected.push_back(s);
  EXPECT_EQ(rep.calls, expected);
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

  Replica rep(f, f.kMicro);
  StepHooks no_hooks;
  Timeline tl(false, 0);
  StepParts parts{rep.store, *rep.runner, rep.reduction, rep.update, no_hooks, tl};
  auto r = train_step(parts, 1, lr, clip);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->loss, static_cast<float>(ref_loss / f.kMicro));
  EXPECT_EQ(r->grad_norm, ref_norm);
  EXPECT_EQ(0, std::memcmp(rep.store.params(), ref.params(), ref.numel() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(rep.store.grads(), ref.grads(), ref.numel() * sizeof(float)));
}

TEST(TrainStep, AHookErrorEndsTheStepBeforeAnyWork) {
  Fixture f;
  Replica rep(f, 1);
  RecordingHooks hooks;
  hooks.fail_at_begin = true;
  Timeline tl(false, 0);
  StepParts parts{rep.store, *rep.runner, rep.reduction, rep.update, hooks, tl};
  auto r = train_step(parts, 1, 1e-3f, 1.f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "planted");
  EXPECT_TRUE(rep.calls.empty());
}

}  // namespace
}  // namespace tessera
