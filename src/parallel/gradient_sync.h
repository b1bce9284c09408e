// GradientSync: the seam between the backward pass and the parameter update -- how this rank's
// gradients are combined with other ranks' and which part of the parameters (and optimizer state)
// this rank updates and saves. DataParallel (all-reduce, full replicas) is the first strategy;
// ZeRO (sharded optimizer/gradients/parameters) and the parameter server plug in here.
//
// One step, as train_step drives it (see docs/architecture.md):
//   set_sync(last micro-batch?)  before each micro-batch's backward
//   on_layer_ready(layer)        from the model's backward, as each layer's gradients become final
//   finish()                     after the last backward: owned gradients are final
//   clip_grad_norm(max)          global norm over what every rank owns, then clipping
//   optimizer_step(lr)           update of the owned range
//   gather_parameters()          make parameters updated elsewhere visible here
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "optim/adamw.h"

namespace tessera {

// A range [begin, end) of elements of this rank's flat parameter buffer.
struct FlatRange {
  int64_t begin = 0, end = 0;
  int64_t numel() const { return end - begin; }
};

// An owned part of a model chunk: the optimizer over `range` of the chunk's flat buffers.
struct OwnedState {
  int chunk = 0;
  AdamW* optimizer = nullptr;
  FlatRange range;
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual std::string_view name() const = 0;

  // Start of a run (after any resume): every replica holds the same parameters.
  virtual Status broadcast_parameters() = 0;
  // Before each micro-batch's backward: true for the one that completes the step's gradients
  // (earlier micro-batches only accumulate locally).
  virtual void set_sync(bool last_micro_batch) = 0;
  // The model's grad-ready callback (layer n_layer = final norm/head, -1 = embeddings).
  virtual void on_layer_ready(int layer) = 0;
  // After the last backward of the step: the gradients this rank owns are final.
  virtual Status finish() = 0;
  // Global L2 norm of the gradient (over every rank's owned part, each element counted once);
  // scales the owned gradients by max_norm / norm when the norm exceeds max_norm > 0.
  virtual Result<float> clip_grad_norm(float max_norm) = 0;
  // AdamW update of the owned range.
  virtual void optimizer_step(float lr) = 0;
  // After the update: parameters updated by other ranks become visible on this one.
  virtual Status gather_parameters() = 0;

  // Mean of values[0, n) over the ranks that each saw a different slice of the batch (in place).
  virtual Status average_over_replicas(float* values, int64_t n) = 0;
  // Checks that the ranks meant to hold identical parameters do (--verify-replicas).
  virtual Status verify_replicas(std::string_view what) = 0;

  // What this rank saves and restores: for each of its model chunks (1, or V under the interleaved
  // pipeline schedule; each its own ParamStore), the optimizers over the parts of the chunk's flat
  // buffers it owns -- parameters and AdamW moments. Over all ranks of one layout the ranges cover
  // each chunk's buffer exactly once. Never empty; every optimizer has taken the same steps.
  virtual std::vector<OwnedState> owned_state() = 0;

  // Seconds spent in finish() waiting for communication not hidden behind the backward pass.
  virtual double exposed_wait_s() const = 0;
  // Called with (bucket index, launch time, completion time) of each gradient communication, for the timeline.
  using TraceFn = std::function<void(size_t bucket, double t_launch, double t_done)>;
  virtual void set_trace(TraceFn fn) = 0;
};

}  // namespace tessera
