// The pipeline runner's waits on its own sends: a stage waits for a sent buffer only before a pass
// writes that buffer again, never before taking the next micro-batch's activation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "observe/timeline.h"
#include "parallel/gradient_reduction.h"
#include "parallel/pipeline_runner.h"
#include "../backend_util.h"

namespace tessera {
namespace {

// One rank of a two-rank pipeline group whose peer is scripted: every receive completes at once
// (zeros), every send completes when waited. Both are logged in order: "recv a", "send g", "wait g", ...
class ScriptedPeer final : public Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  uint64_t collective_seq() const override { return 0; }
  std::vector<CollectiveRecord> recent_ops() const override { return {}; }
  Result<std::unique_ptr<Communicator>> split(int, int, const std::string&) override { return internal_error("split"); }
  Result<std::unique_ptr<Communicator>> without(const std::vector<int>&, const std::string&) override {
    return internal_error("without");
  }
  std::vector<std::string> log;

 protected:
  Status run(const CommOp& op) override { return start(op).wait(); }
  Work start(const CommOp& op) override {
    const std::string kind = op.tag == 1 ? "a" : "g";
    if (op.kind == CollectiveKind::recv) {
      std::memset(op.recv, 0, static_cast<size_t>(op.count) * sizeof(float));
      log.push_back("recv " + kind);
      return Work();
    }
    if (op.kind != CollectiveKind::send) return Work();  // the loss broadcast: not part of this check
    log.push_back("send " + kind);
    return Work(std::make_unique<LoggedSend>(log, "wait " + kind));
  }

 private:
  class LoggedSend final : public WorkImpl {
   public:
    LoggedSend(std::vector<std::string>& log, std::string entry) : log_(log), entry_(std::move(entry)) {}
    bool test() override { return wait().ok(); }
    Status wait() override {
      if (!waited_) log_.push_back(entry_);
      waited_ = true;
      return Status::ok_status();
    }

   private:
    std::vector<std::string>& log_;
    std::string entry_;
    bool waited_ = false;
  };
  std::string name_ = "scripted";
};

class NoReduction final : public GradientReduction {
 public:
  std::string_view name() const override { return "none"; }
  void begin_micro_batch(bool) override {}
  void on_layer_ready(int) override {}
  Status finish() override { return Status::ok_status(); }
  Status average_over_replicas(float*, int64_t) override { return Status::ok_status(); }
  double exposed_wait_s() const override { return 0; }
  void set_trace(TraceFn) override {}
};

// Position of the n-th (0-based) occurrence of `entry` in the log, or the log's size.
size_t nth(const std::vector<std::string>& log, const std::string& entry, int n) {
  for (size_t i = 0; i < log.size(); ++i)
    if (log[i] == entry && n-- == 0) return i;
  return log.size();
}

TEST(PipelineRunner, TakesTheNextActivationWithoutWaitingForItsLastGradientToBeReceived) {
  // The last of two stages under 1F1B holds one micro-batch: micro-batch k + 1 reuses the slot whose
  // input gradient k was just sent. Receiving k + 1's activation must not wait for that send (under
  // interleaving the previous stage may receive it a whole backward and forward later); only the
  // next backward, which writes the gradient buffer again, does.
  ModelConfig cfg = model_preset("tiny").value();
  cfg.n_layer = 2;
  constexpr int64_t B = 1, T = 8;
  constexpr int kMicro = 3;
  ParamStore store{ParamLayout(cfg, 1, 2)};
  init_parameters(store, cfg, 1);
  ScriptedPeer pp;
  NoReduction reduction;
  Rng rng(5);
  PipelineRunner runner(
      tessera::testing::cpu_backend(), cfg, {&store}, B, T, Recompute::none, pp, PipelineScheduleKind::one_f_one_b,
      PipelineShape{2, kMicro, 1}, reduction, [](int, Transformer&) {},
      [&](int32_t* in, int32_t* tg) {
        for (int64_t i = 0; i < B * T; ++i) {
          in[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
          tg[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
        }
      });
  Timeline timeline(false, 0);
  ASSERT_TRUE(runner.run(timeline).ok());
  std::string all;
  for (const std::string& e : pp.log) all += e + ", ";
  ASSERT_EQ(std::count(pp.log.begin(), pp.log.end(), "send g"), kMicro) << all;
  ASSERT_EQ(std::count(pp.log.begin(), pp.log.end(), "wait g"), kMicro) << all;
  for (int k = 0; k + 1 < kMicro; ++k)
    EXPECT_GT(nth(pp.log, "wait g", k), nth(pp.log, "recv a", k + 1))
        << "gradient " << k << " was waited for before activation " << k + 1 << " came in: " << all;
}

}  // namespace
}  // namespace tessera
