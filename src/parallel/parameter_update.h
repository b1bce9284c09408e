// ParameterUpdate: the update half of the seam -- after GradientReduction::finish(), the update of
// the parameters as one operation (clip by the global norm, the optimizer step of the state this
// rank owns, and whatever makes the parameters updated elsewhere visible here: ZeRO's all-gather,
// local SGD's outer step, the parameter server's answers), plus the state this rank owns, which
// checkpoints save and restore.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "observe/timeline.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"

namespace tessera {

// A range [begin, end) of elements of this rank's flat parameter buffer.
struct FlatRange {
  int64_t begin = 0, end = 0;
  int64_t numel() const { return end - begin; }
};

// An owned part of a model chunk: the optimizer over `range` of the chunk's flat buffers. A rank
// that owns no optimizer state (a parameter-server worker) has one part with no optimizer and an
// empty range: its checkpoint pieces carry the run's state only.
struct OwnedState {
  int chunk = 0;
  AdamW* optimizer = nullptr;
  FlatRange range;
};

struct UpdateResult {
  float grad_norm = 0;          // global gradient norm before clipping
  double parameter_wait_s = 0;  // blocked on the parameter exchange after the optimizer step
};

class ParameterUpdate {
 public:
  virtual ~ParameterUpdate() = default;

  // Start of a run (after any resume): every replica holds the same parameters.
  virtual Status broadcast_parameters() = 0;
  // Clips the gradients this rank owns by max_norm / norm when the global norm (every element of the
  // model counted once) exceeds max_norm > 0, updates the owned state with learning rate lr, and
  // makes the parameters updated by other ranks visible here. Draws "optimizer" and "parameter sync
  // wait" on the timeline.
  virtual Result<UpdateResult> update(float lr, float max_norm, Timeline& timeline) = 0;
  // Checks that the ranks meant to hold identical parameters do (--verify-replicas).
  virtual Status verify_replicas(std::string_view what) = 0;

  // What this rank saves and restores: for each of its model chunks (1, or V under the interleaved
  // pipeline schedule; each its own ParamStore), the optimizers over the parts of the chunk's flat
  // buffers it owns -- parameters and AdamW moments. Over all ranks of one layout the ranges cover
  // each chunk's buffer exactly once. Never empty.
  virtual std::vector<OwnedState> owned_state() = 0;
  // A step that will not be updated (train.on_anomaly): drops what was accumulated for its update
  // beyond the gradient buffers (ZeRO 2/3's reduced shards), so the next step starts clean.
  virtual void discard_gradients() {}
  // After finish(): where the gradients the update reads are, when that is not the model chunks'
  // gradient buffers (ZeRO 2/3: the reduced slices this rank owns); empty: those buffers.
  virtual std::vector<GradSpan> reduced_gradients() { return {}; }
  // Optimizer steps the model has taken (the same on every rank; resumed runs continue the count).
  virtual int64_t optimizer_steps() const = 0;
};

// Runs a wait on communication, adding its duration to *waited and drawing it on the timeline as
// `name` ("comm").
template <typename F>
Status timed_wait(Timeline& tl, const char* name, double* waited, F&& wait) {
  const double t0 = Timeline::now_s();
  Status st = wait();
  const double t1 = Timeline::now_s();
  *waited += t1 - t0;
  tl.add(name, "comm", t0, t1);
  return st;
}

}  // namespace tessera
