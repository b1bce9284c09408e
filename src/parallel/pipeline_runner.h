// PipelineRunner: runs one training step of a pipeline stage as its schedule says
// (parallel/pipeline_schedule.h: gpipe, 1f1b, interleaved), exchanging activations and their
// gradients with the neighbouring stages over the grid's pp communicator.
//
// - Model chunks: this rank holds V chunks (V = 1 except interleaved), each a ParamStore.
// - Activation slots: a Transformer keeps one micro-batch's activations, so each chunk gets as many
//   Transformer instances over its one ParamStore as the schedule has micro-batches of that chunk
//   in flight at once (1F1B: at most p - s; GPipe: m). A slot is taken at the first action of a
//   (micro-batch, chunk) and freed after its backward.
// - Messages: sends are non-blocking and waited before their buffer is reused or at the end of the
//   step; receives block (with the communicator's timeout), as the schedule's runner rule requires.
//   Tags: activation 1, gradient 2.
// - Data: every stage reads the step's m micro-batches (the first stage needs the tokens, the
//   last the targets), so the loaders of one pipeline stay in step.
// - Loss: the last stage's mean over the micro-batches, broadcast over the pp group.
// Works at p = 1 too: the schedule is then plain gradient accumulation (one activation slot under
// 1F1B), and every training run -- data parallelism alone included -- uses this runner.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/micro_batch_runner.h"

namespace tessera {

class PipelineRunner final : public MicroBatchRunner {
 public:
  // Called once for every Transformer the runner makes (chunk index, model): sets the precision,
  // tensor-parallel hooks and the grad-ready callback.
  using ConfigureModel = std::function<void(int chunk, Transformer& model)>;

  // chunks[c]: the store of model chunk c (virtual stage c * p + pp.rank()); every model is built
  // with `recompute` (train.recompute). Everything passed by reference or pointer outlives the runner.
  PipelineRunner(Backend& backend, const ModelConfig& cfg, std::vector<ParamStore*> chunks, int64_t B, int64_t T,
                 Recompute recompute, Communicator& pp,
                 PipelineScheduleKind kind, PipelineShape shape, GradientReduction& reduction, ConfigureModel configure,
                 BatchSource next_batch);
  ~PipelineRunner() override;

  Status run(Timeline& timeline) override;
  // The last stage's mean loss, broadcast over the pp group (on the device) and then read.
  Result<double> step_loss() override;
  Result<EvalResult> evaluate(EvalLoader& loader, int64_t max_batches) override;
  Status replay(Timeline& timeline) override;
  void skip_batches() override;
  void set_numerics_probe(NumericsProbe* probe) override;
  std::vector<Transformer::MoeLayerLoad> take_moe_load() override;
  double neighbour_wait_s() const override { return neighbour_wait_s_; }

  const std::vector<PipeAction>& actions() const { return actions_; }
  // Activation slots (Transformer instances) of chunk c.
  int slots(int chunk) const { return static_cast<int>(models_.at(chunk).size()); }

 private:
  struct Slot;
  Slot& slot_for(int micro, int chunk);
  void release(int micro, int chunk);
  bool first_virtual(int chunk) const { return chunk == 0 && stage_ == 0; }
  bool last_virtual(int chunk) const { return chunk == shape_.virtual_stages - 1 && stage_ == shape_.stages - 1; }
  Status run_action(const PipeAction& a, Timeline& timeline);
  Status run_actions(Timeline& timeline);  // the schedule over the step's micro-batches in inputs_
  Status wait_sends();
  Status broadcast_from_last_stage(double& value);

  Backend& backend_;
  const ModelConfig& cfg_;
  int64_t B_, T_, C_;
  Communicator& pp_;
  int stage_;
  PipelineShape shape_;
  GradientReduction& reduction_;
  BatchSource next_batch_;
  std::vector<PipeAction> actions_;
  std::vector<std::vector<std::unique_ptr<Slot>>> models_;  // [chunk][slot]
  std::map<std::pair<int, int>, Slot*> in_flight_;          // (micro, chunk) -> its slot
  std::vector<Work> sends_;                                 // this step's sends not yet waited
  std::vector<int32_t> inputs_, targets_;                   // the step's m micro-batches
  NumericsProbe* probe_ = nullptr;
  bool replaying_ = false;  // replay(): no gradient reduction
  bool split_ = false;      // the schedule splits each backward into input- and weight-gradient passes (zb-h1)
  double neighbour_wait_s_ = 0;  // blocked on the neighbouring stages in run() and replay() (receives, sends)
  Buffer loss_sum_;  // one double on the device: the last stage's sum of the micro-batch losses
};

}  // namespace tessera
