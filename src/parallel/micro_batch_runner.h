// MicroBatchRunner: runs the forward and backward passes of one training step's micro-batches and
// tells the gradient reduction which backward completes the step. PipelineRunner
// (parallel/pipeline_runner.h) is the implementation every training run uses: a pipeline stage's
// schedule, which over one stage is plain gradient accumulation.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/memory.h"
#include "core/status.h"
#include "model/transformer.h"
#include "parallel/gradient_reduction.h"
#include "parallel/evaluate.h"
#include "observe/timeline.h"

namespace tessera {

// Fills one micro-batch: B*T input tokens and their B*T targets.
using BatchSource = std::function<void(int32_t* inputs, int32_t* targets)>;

class MicroBatchRunner {
 public:
  virtual ~MicroBatchRunner() = default;
  // Runs every micro-batch of one step, accumulating parameter gradients into the model's store
  // (zeroed by the caller) and the micro-batches' losses into one double of device memory.
  virtual Status run(Timeline& timeline) = 0;
  // This rank's mean loss over the last run()'s micro-batches. The named point where the step's loss
  // crosses to the host: once per step, at its end (train_step). Collective over a pipeline's stages.
  virtual Result<double> step_loss() = 0;
  // Mean loss over up to max_batches batches of `loader` (<= 0: all), forward passes only: the
  // validation loss. Collective over the ranks of one model replica.
  virtual Result<EvalResult> evaluate(EvalLoader& loader, int64_t max_batches) = 0;
  // Runs the last run()'s micro-batches again on the same data, with the gradient reduction left
  // out (nothing is communicated across replicas; gradients are accumulated locally): for tracing
  // an anomaly with a probe. The caller zeroes the gradients before and discards them after.
  virtual Status replay(Timeline& timeline) = 0;
  // Reads one step's micro-batches and drops them (a step skipped without computing).
  virtual void skip_batches() = 0;
  // The probe every model of the runner calls after each op (nullptr: none); it is told each
  // micro-batch's index before its forward and backward.
  virtual void set_numerics_probe(NumericsProbe* probe) = 0;
  // The expert load of this rank's MoE layers over the last run()'s micro-batches (merged over the
  // model instances of one layer; empty for a dense model), then reset.
  virtual std::vector<Transformer::MoeLayerLoad> take_moe_load() { return {}; }
  // Seconds blocked on other pipeline stages since the runner was made (receiving their activations
  // and gradients, waiting for sends to them): the bubble and the pipeline messages. 0 without stages.
  virtual double neighbour_wait_s() const { return 0; }
  // Factor on the loss gradient of every backward (fp16 loss scaling); 1 by default.
  void set_loss_scale(float scale) { loss_scale_ = scale; }

 protected:
  float loss_scale_ = 1.f;
};

}  // namespace tessera
