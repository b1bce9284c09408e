// The training step, top to bottom.
#include "train/train_step.h"

#include <algorithm>
#include <optional>

namespace tessera {

Result<StepResult> train_step(StepParts& s, int64_t step, float lr, float grad_clip) {
  TS_RETURN_IF_ERROR(s.hooks.at(StepPoint::step_begin, step, s.store));
  s.store.zero_grads();
  for (ParamStore* chunk : s.more_chunks) chunk->zero_grads();
  TS_RETURN_IF_ERROR(s.runner.run(s.timeline));
  StepResult r;
  TS_RETURN_IF_ERROR(timed_wait(s.timeline, "grad sync wait", &r.comm_wait_s, [&] { return s.reduction.finish(); }));
  if (s.scaler) {  // fp16: unscale, or skip the update when any rank's gradient overflowed
    std::vector<GradSpan> grads{{s.store.grads(), s.store.numel()}};
    for (ParamStore* chunk : s.more_chunks) grads.push_back({chunk->grads(), chunk->numel()});
    TS_ASSIGN_OR_RETURN(bool take_step, s.scaler->unscale_or_skip(grads, s.world));
    s.runner.set_loss_scale(s.scaler->scale());
    r.skipped = !take_step;
  }
  std::optional<double> local_loss;  // the step's loss crosses to the host once: here when the guard needs it
  if (s.guard && !r.skipped) {
    TS_ASSIGN_OR_RETURN(local_loss, s.runner.step_loss());
    TS_ASSIGN_OR_RETURN(r.anomaly, s.guard->check(*local_loss, s.timeline));
    if (r.anomaly.detected) {
      r.skipped = true;
      r.loss = static_cast<float>(*local_loss);
      return r;
    }
  }
  if (!r.skipped) {
    if (s.before_update) r.checkpoint_wait_s = s.before_update();
    const double t0 = Timeline::now_s();
    TS_ASSIGN_OR_RETURN(const UpdateResult u, s.update.update(lr, grad_clip, s.timeline));
    r.update_s = std::max(0.0, Timeline::now_s() - t0 - u.parameter_wait_s);
    r.grad_norm = u.grad_norm;
    r.comm_wait_s += u.parameter_wait_s;
  }
  TS_RETURN_IF_ERROR(s.hooks.at(StepPoint::after_update, step, s.store));
  if (!local_loss) {
    TS_ASSIGN_OR_RETURN(local_loss, s.runner.step_loss());  // the step's loss crosses to the host
  }
  r.loss = static_cast<float>(*local_loss);
  TS_RETURN_IF_ERROR(timed_wait(s.timeline, "loss average wait", &r.comm_wait_s,
                                [&] { return s.reduction.average_over_replicas(&r.loss, 1); }));
  return r;
}

}  // namespace tessera
