// Dynamic loss scaling (optim/loss_scaler.h).
//
// Trainer hook (train/train_step.cpp, train_step), for train.precision == "fp16" only; bf16 and fp32
// pass no scaler and run unchanged:
//   1. MicroBatchRunner: model.backward(1.f / m) becomes model.backward(scaler.scale() / m).
//   2. After TS_RETURN_IF_ERROR(s.reduction.finish()):
//        GradSpan g{store.grads(), store.numel()};   // + one per extra chunk (more_chunks)
//        TS_ASSIGN_OR_RETURN(bool step_ok, scaler.unscale_or_skip({&g, 1}, world));
//        if (!step_ok) { r.skipped = true; /* no update */ }
//      then s.update.update(lr, grad_clip, timeline) only when step_ok.
//   The flat gradient buffer holds the owned, reduced gradient after finish() for DataParallel and
//   ZeRO-1. ZeRO-2/3 keep the reduced shard elsewhere: there the spans must be that shard (a
//   ParameterUpdate accessor is needed) -- checking the local flat buffer still detects every fp16
//   overflow (inf enters the local gradient before any reduction), but unscaling must reach the shard.
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace tessera {

LossScaler::LossScaler(Backend& backend, LossScalerConfig cfg)
    : backend_(backend), cfg_(cfg), scale_(cfg.init_scale) {
  TS_CHECK(cfg.init_scale > 0 && cfg.growth_factor >= 1 && cfg.backoff_factor > 0 && cfg.backoff_factor < 1 &&
           cfg.growth_interval >= 1)
      << "invalid loss scaler config";
}

bool LossScaler::has_non_finite(const float* x, int64_t n) const { return backend_.count_nonfinite(x, n) > 0; }

Result<bool> LossScaler::found_overflow(std::span<const GradSpan> grads, Communicator* comm) const {
  float flag = 0.f;
  for (const GradSpan& g : grads)
    if (has_non_finite(g.data, g.n)) {
      flag = 1.f;
      break;
    }
  if (comm != nullptr)
    TS_RETURN_IF_ERROR(comm->all_reduce(&flag, &flag, 1, DType::f32, ReduceOp::max));
  return flag > 0.f;
}

void LossScaler::unscale(std::span<const GradSpan> grads) const {
  const float inv = 1.f / scale_;  // a power of two for the default factors: exact
  for (const GradSpan& g : grads) backend_.scale_inplace(g.data, g.n, inv);
}

bool LossScaler::update(bool overflow) {
  if (overflow) {
    scale_ = std::max(cfg_.min_scale, scale_ * cfg_.backoff_factor);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= cfg_.growth_interval) {
    const float grown = scale_ * cfg_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
    good_ = 0;
  }
  return true;
}

Result<bool> LossScaler::unscale_or_skip(std::span<const GradSpan> grads, Communicator* comm) {
  TS_ASSIGN_OR_RETURN(bool overflow, found_overflow(grads, comm));
  if (!overflow) unscale(grads);
  return update(overflow);
}

}  // namespace tessera
