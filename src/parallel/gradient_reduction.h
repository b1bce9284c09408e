// GradientReduction: the communication half of the seam between the backward pass and the update --
// how this rank's gradients are combined with other ranks' while the backward pass runs. It never
// touches parameters or optimizer state (that is ParameterUpdate, parallel/parameter_update.h).
//
// One step, as train_step drives it (see docs/architecture.md):
//   begin_micro_batch(completes_step)  before each micro-batch's backward
//   on_layer_ready(layer)              from the model's backward, as each layer's gradients become final
//   finish()                           after the last backward: the gradients this rank owns are final
//   average_over_replicas(loss)        after the update: the step's loss over the replicas
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>

#include "core/status.h"

namespace tessera {

class GradientReduction {
 public:
  virtual ~GradientReduction() = default;
  virtual std::string_view name() const = 0;

  // Before each micro-batch's backward: true for the one that completes the step's gradients
  // (earlier micro-batches only accumulate locally).
  virtual void begin_micro_batch(bool completes_step) = 0;
  // The model's grad-ready callback (layer n_layer = final norm/head, -1 = embeddings).
  virtual void on_layer_ready(int layer) = 0;
  // After the last backward of the step: the gradients this rank owns are final.
  virtual Status finish() = 0;
  // Mean of values[0, n) over the ranks that each saw a different slice of the batch (in place).
  virtual Status average_over_replicas(float* values, int64_t n) = 0;

  // Seconds spent in finish() (and the update's parameter exchange) waiting for communication not
  // hidden behind compute.
  virtual double exposed_wait_s() const = 0;
  // Called with (bucket index, launch time, completion time) of each gradient communication, for the timeline.
  using TraceFn = std::function<void(size_t bucket, double t_launch, double t_done)>;
  virtual void set_trace(TraceFn fn) = 0;
};

}  // namespace tessera
