// One training step, shared by the trainer and bench/train_step.cpp: zero the gradients, run the
// micro-batches, finish the gradient reduction, update (clip, optimizer step, parameter exchange),
// and average the loss. Each parallelism changes one of its parts (runner, reduction, update),
// never this sequence.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "model/param_layout.h"
#include "parallel/gradient_reduction.h"
#include "parallel/parameter_update.h"
#include "parallel/micro_batch_runner.h"
#include "optim/loss_scaler.h"
#include "train/anomaly_guard.h"
#include "train/step_hooks.h"
#include "observe/timeline.h"

namespace tessera {

// What one step works on; every member outlives the step.
struct StepParts {
  ParamStore& store;  // model chunk 0 (the only one unless interleaved): what the hooks see
  MicroBatchRunner& runner;
  GradientReduction& reduction;
  ParameterUpdate& update;
  StepHooks& hooks;
  Timeline& timeline;
  std::vector<ParamStore*> more_chunks = {};  // chunks 1..V-1 of an interleaved pipeline stage
  // fp16: dynamic loss scaling (nullptr otherwise); `world` makes every rank agree on an overflow.
  LossScaler* scaler = nullptr;
  Communicator* world = nullptr;
  // Runs before the optimizer changes the parameters (an asynchronous save still writing them from
  // the live buffers); returns the seconds it waited.
  std::function<double()> before_update = {};
  // train.on_anomaly: checks the step before its update (nullptr: no check).
  AnomalyGuard* guard = nullptr;
};

struct StepResult {
  float loss = 0;       // mean over the step's micro-batches and the data-parallel replicas
  float grad_norm = 0;  // global gradient norm before clipping
  double checkpoint_wait_s = 0;  // waited for an asynchronous save to finish reading the parameters
  bool skipped = false; // fp16: a gradient overflowed, the update was skipped (loss scale halved)
  double comm_wait_s = 0;  // blocked in the step's collectives: gradient sync, parameter sync, loss average
  double update_s = 0;     // in the optimizer update (norm, clipping, AdamW), its parameter sync wait excluded
  // The guard found an anomaly: the step was not updated (skipped is set), `loss` is this rank's
  // own, and the caller decides what follows (train.on_anomaly).
  Anomaly anomaly;
};

// step: the 1-based number of the step being taken (for the hooks); grad_clip: max norm (0 = off).
Result<StepResult> train_step(StepParts& parts, int64_t step, float lr, float grad_clip);

}  // namespace tessera
