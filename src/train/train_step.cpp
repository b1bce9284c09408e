// The training step, top to bottom.
#include "train/train_step.h"

namespace tessera {

namespace {
// Runs a wait on communication, adding its duration to *waited (the straggler report's "wait")
// and drawing it on the timeline.
template <typename F>
Status timed_wait(Timeline& tl, const char* name, double* waited, F&& wait) {
  const double t0 = Timeline::now_s();
  Status st = wait();
  const double t1 = Timeline::now_s();
  *waited += t1 - t0;
  tl.add(name, "comm", t0, t1);
  return st;
}
}  // namespace

Result<StepResult> train_step(StepParts& s, int64_t step, float lr, float grad_clip) {
  TS_RETURN_IF_ERROR(s.hooks.at(StepPoint::step_begin, step, s.store));
  s.store.zero_grads();
  for (ParamStore* chunk : s.more_chunks) chunk->zero_grads();
  TS_RETURN_IF_ERROR(s.runner.run(s.timeline));
  StepResult r;
  TS_RETURN_IF_ERROR(timed_wait(s.timeline, "grad sync wait", &r.comm_wait_s, [&] { return s.sync.finish(); }));
  if (s.scaler) {  // fp16: unscale, or skip the update when any rank's gradient overflowed
    std::vector<GradSpan> grads{{s.store.grads(), s.store.numel()}};
    for (ParamStore* chunk : s.more_chunks) grads.push_back({chunk->grads(), chunk->numel()});
    TS_ASSIGN_OR_RETURN(bool take_step, s.scaler->unscale_or_skip(grads, s.world));
    s.runner.set_loss_scale(s.scaler->scale());
    r.skipped = !take_step;
  }
  if (!r.skipped) {
    {
      TimelineSpan span(s.timeline, "optimizer", "compute");
      TS_ASSIGN_OR_RETURN(r.grad_norm, s.sync.clip_grad_norm(grad_clip));
      s.sync.optimizer_step(lr);
    }
    TS_RETURN_IF_ERROR(timed_wait(s.timeline, "parameter sync wait", &r.comm_wait_s,
                                  [&] { return s.sync.gather_parameters(); }));
  }
  TS_RETURN_IF_ERROR(s.hooks.at(StepPoint::after_update, step, s.store));
  TS_ASSIGN_OR_RETURN(const double local_loss, s.runner.step_loss());  // the step's loss crosses to the host
  r.loss = static_cast<float>(local_loss);
  TS_RETURN_IF_ERROR(timed_wait(s.timeline, "loss average wait", &r.comm_wait_s,
                                [&] { return s.sync.average_over_replicas(&r.loss, 1); }));
  return r;
}

}  // namespace tessera
