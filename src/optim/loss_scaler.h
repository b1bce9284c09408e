// Dynamic loss scaling for fp16 training (train.precision = "fp16"; model/precision.h).
// fp16 operands keep 11 mantissa bits but only the range [6e-8, 65504]: small output gradients
// underflow to 0 and large ones overflow to inf. The loss gradient is multiplied by a scale S
// (start 2^16) so the backward's gradients sit in fp16's range; after backward every rank checks
// its gradients for inf/NaN (one max all-reduce, so all ranks agree), and
//   overflow:  the step is skipped (no optimizer update, the optimizer's step count unchanged) and
//              S is halved (backoff_factor);
//   otherwise: the gradients are unscaled (x 1/S) BEFORE clipping and the optimizer step, and after
//              growth_interval consecutive good steps S is doubled (growth_factor).
// The same rules as torch.cuda.amp.GradScaler. Gradients stay f32 throughout.
//
// One step, in train_step's order (see the trainer hook in loss_scaler.cpp's comment):
//   model.backward(scaler.scale() / accumulation_steps)      every micro-batch
//   sync.finish()
//   bool step = scaler.unscale_or_skip(owned gradient ranges, world communicator)
//   if (step) update.update(lr, max_norm, timeline);
#pragma once
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "core/status.h"

namespace tessera {

struct LossScalerConfig {
  float init_scale = 65536.f;  // 2^16
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;  // good steps in a row before the scale grows
  float min_scale = 1.f;           // the scale never backs off below this
};

// A range of f32 gradients this rank owns (e.g. the flat gradient buffer, or a ZeRO shard).
struct GradSpan {
  float* data = nullptr;
  int64_t n = 0;
};

class LossScaler {
 public:
  // The checks and the unscaling run as ops of `backend` (the gradients are its memory).
  explicit LossScaler(Backend& backend, LossScalerConfig cfg = {});

  // The factor on the loss gradient: pass scale() / accumulation_steps to Transformer::backward.
  float scale() const { return scale_; }

  // Whether any element of x[0, n) is inf or NaN (local).
  bool has_non_finite(const float* x, int64_t n) const;
  // Collective over `comm` (every rank calls it; nullptr = a single rank): true when any rank's
  // gradient ranges hold inf or NaN (a max all-reduce of one float).
  Result<bool> found_overflow(std::span<const GradSpan> grads, Communicator* comm) const;
  // grads *= 1 / scale() (the scale the backward used: call before update()).
  void unscale(std::span<const GradSpan> grads) const;
  // After the step's overflow check: halves the scale on overflow (counting a skipped step), else
  // counts a good step and grows the scale after growth_interval of them. Returns !overflow.
  bool update(bool overflow);

  // The three above in order: found_overflow (collective), unscale when there was none, update.
  // Returns whether to take the optimizer step (false: skip clipping, the update and the gather).
  Result<bool> unscale_or_skip(std::span<const GradSpan> grads, Communicator* comm);

  int64_t good_steps_in_a_row() const { return good_; }
  int64_t skipped_steps() const { return skipped_; }
  // Checkpoint state: the scale and the good steps since the last change.
  void set_state(float scale, int64_t good_steps_in_a_row) {
    scale_ = scale;
    good_ = good_steps_in_a_row;
  }
  const LossScalerConfig& config() const { return cfg_; }

 private:
  Backend& backend_;
  LossScalerConfig cfg_;
  float scale_;
  int64_t good_ = 0, skipped_ = 0;
};

}  // namespace tessera
