// run_training: set up the run, then step until done; each step is train_step (train_step.h)
// followed by its bookkeeping (after_step in after_step.cpp).
#include "train/trainer.h"

#include "optim/lr_schedule.h"
#include "train/anomaly_response.h"
#include "train/ps_training.h"
#include "train/training_run.h"

namespace tessera {

Result<TrainSummary> run_training(const RunConfig& cfg, Communicator& world, const TrainerOptions& opts) {
  TS_ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run, set_up_training(cfg, world, opts));
  if (is_param_server_rank(cfg, world.rank())) return serve_parameters(*run);  // servers take no steps
  if (is_spare_worker_rank(cfg, world.rank())) {  // stands by until a lost worker's place is free
    TS_ASSIGN_OR_RETURN(const bool replaced, stand_by_as_spare(*run));
    if (!replaced) return finish_training(*run);
  }
  StepParts parts = run->step_parts();
  while (run->state.step < cfg.train.steps) {
    const StepStart start = start_step_clock(*run);
    const float lr = lr_at(run->state.step, cfg.optim, cfg.train.steps);
    std::optional<StepResult> skipped = skip_rolled_back_step(*run);
    StepResult result;
    if (skipped) {
      result = *skipped;
    } else {
      TS_ASSIGN_OR_RETURN(result, train_step(parts, run->state.step + 1, lr, cfg.optim.grad_clip));
    }
    if (result.anomaly.detected && !skipped) {
      TS_ASSIGN_OR_RETURN(const AnomalyOutcome outcome, respond_to_anomaly(*run, result));
      if (outcome == AnomalyOutcome::rolled_back) continue;
    }
    TS_ASSIGN_OR_RETURN(bool stop, after_step(*run, result, lr, start));
    if (stop) break;
  }
  if (is_param_server_run(cfg)) report_param_server_traffic(*run);
  return finish_training(*run);
}

}  // namespace tessera
