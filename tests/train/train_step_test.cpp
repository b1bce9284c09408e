// train_step and its seams: the call order the reduction and the update see, equality with the plain
// accumulate-clip-update sequence, and the step hooks.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "train/fault_injection.h"
#include "train/numerics_fault.h"
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


// ---- the anomaly guard (train.on_anomaly): detection before the update and the trace ----

Fault numerics_fault(FaultKind kind, int64_t step, int layer, ModelPass pass, int micro_batch, std::string op = "") {
  Fault f;
  f.kind = kind;
  f.step = step;
  f.layer = layer;
  f.pass = pass;
  f.micro_batch = micro_batch;
  f.op = std::move(op);
  if (kind == FaultKind::spike) f.factor = 1000;
  return f;
}

// A replica whose steps go through a guard, with a fault probe planted in its runner.
struct GuardedReplica {
  Replica rep;
  NumericsFaultProbe faults;
  AnomalyGuard guard;
  StepHooks no_hooks;
  Timeline tl{false, 0};
  GuardedReplica(Fixture& f, std::vector<Fault> planted, double spike_grad_factor)
      : rep(f, static_cast<int>(f.kMicro)),
        faults(tessera::testing::cpu_backend(), std::move(planted)),
        guard(tessera::testing::cpu_backend(), world_of_one(), {&rep.store}, *rep.runner, rep.update,
              static_cast<int>(f.cfg.n_layer), SpikeFactors{0, spike_grad_factor}, &faults) {
    rep.runner->set_numerics_probe(&faults);
  }
  Result<StepResult> step(int64_t n) {
    faults.set_step(n);
    StepParts parts{rep.store, *rep.runner, rep.reduction, rep.update, no_hooks, tl};
    parts.guard = &guard;
    return train_step(parts, n, 1e-3f, 1.f);
  }
};

TEST(AnomalyGuard, TracesAPlantedNanToItsLayerPassOpAndMicroBatch) {
  Fixture f;
  GuardedReplica g(f, {numerics_fault(FaultKind::nan, 1, 1, ModelPass::backward, 2)}, 0);
  auto r = g.step(1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->anomaly.detected);
  EXPECT_EQ(r->anomaly.kind, "non-finite value");
  const AnomalyOrigin& o = r->anomaly.origin;
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.layer, 1);
  EXPECT_EQ(o.pass, ModelPass::backward);
  EXPECT_EQ(o.op, "mlp_proj");  // the layer's first op in backward
  EXPECT_EQ(o.micro_batch, 2);
  EXPECT_TRUE(r->skipped);
  EXPECT_EQ(std::count(g.rep.calls.begin(), g.rep.calls.end(), "update"), 0) << "an anomalous step must not update";
}

TEST(AnomalyGuard, TracesAForwardNanAtANamedOp) {
  Fixture f;
  GuardedReplica g(f, {numerics_fault(FaultKind::nan, 1, 0, ModelPass::forward, 1, "attention")}, 0);
  auto r = g.step(1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->anomaly.origin.found);
  EXPECT_EQ(r->anomaly.origin.layer, 0);
  EXPECT_EQ(r->anomaly.origin.pass, ModelPass::forward);
  EXPECT_EQ(r->anomaly.origin.op, "attention");
  EXPECT_EQ(r->anomaly.origin.micro_batch, 1);
}

TEST(AnomalyGuard, CleanStepsPassAndMatchAnUnguardedStep) {
  Fixture f;
  GuardedReplica g(f, {}, 3.0);
  Replica plain(f, static_cast<int>(f.kMicro));
  StepHooks no_hooks;
  Timeline tl(false, 0);
  for (int64_t n = 1; n <= 8; ++n) {
    auto r = g.step(n);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->anomaly.detected) << "step " << n;
    StepParts parts{plain.store, *plain.runner, plain.reduction, plain.update, no_hooks, tl};
    auto p = train_step(parts, n, 1e-3f, 1.f);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(r->loss, p->loss) << "step " << n;
  }
  EXPECT_EQ(0, std::memcmp(g.rep.store.params(), plain.store.params(), plain.store.numel() * sizeof(float)));
}

TEST(AnomalyGuard, TracesAGradientSpikeAfterTheWarmup) {
  Fixture f;
  const int64_t at = AnomalyGuard::kWarmup + 2;
  GuardedReplica g(f, {numerics_fault(FaultKind::spike, at, 1, ModelPass::backward, 2)}, 5.0);
  for (int64_t n = 1; n < at; ++n) {
    auto r = g.step(n);
    ASSERT_TRUE(r.ok());
    ASSERT_FALSE(r->anomaly.detected) << "step " << n;
  }
  auto r = g.step(at);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->anomaly.detected);
  EXPECT_EQ(r->anomaly.kind, "spike");
  const AnomalyOrigin& o = r->anomaly.origin;
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.layer, 1);
  EXPECT_EQ(o.pass, ModelPass::backward);
  EXPECT_EQ(o.op, "mlp_proj");
  EXPECT_EQ(o.micro_batch, 2);
  EXPECT_GT(o.rms, 100 * o.reference);
}

TEST(FaultSpec, ParsesNanAndSpikeCoordinates) {
  auto f = parse_faults("nan:rank=1:step=5:layer=1:pass=backward:micro_batch=2,spike:rank=0:step=3:layer=-1:op=embedding:factor=50");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 2u);
  EXPECT_EQ((*f)[0].kind, FaultKind::nan);
  EXPECT_EQ((*f)[0].rank, 1);
  EXPECT_EQ((*f)[0].step, 5);
  EXPECT_EQ((*f)[0].layer, 1);
  EXPECT_EQ((*f)[0].pass, ModelPass::backward);
  EXPECT_EQ((*f)[0].micro_batch, 2);
  EXPECT_EQ((*f)[0].op, "");
  EXPECT_EQ((*f)[1].kind, FaultKind::spike);
  EXPECT_EQ((*f)[1].layer, -1);
  EXPECT_EQ((*f)[1].pass, ModelPass::forward);
  EXPECT_EQ((*f)[1].op, "embedding");
  EXPECT_EQ((*f)[1].factor, 50);
}

TEST(FaultSpec, RefusesBadNumericsCoordinates) {
  for (const char* bad : {"nan:rank=1:step=5:pass=sideways", "nan:rank=1:step=5:layer=-2", "spike:rank=0:step=2:factor=0",
                          "crash:rank=0:step=2:layer=1", "nan:rank=0:step=1:micro_batch=-1"}) {
    auto f = parse_faults(bad);
    EXPECT_FALSE(f.ok()) << bad;
  }
  EXPECT_NE(parse_faults("nan:rank=1:step=5:pass=sideways").status().message().find("forward or backward"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
