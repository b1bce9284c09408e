// The responses to an anomaly: stop, skip_step, rollback.
#include "train/anomaly_response.h"

#include <limits>
#include <string>

#include "core/log.h"

namespace tessera {
namespace {

nlohmann::json origin_json(const AnomalyOrigin& o) {
  if (!o.found) return nullptr;
  return {{"rank", o.rank}, {"layer", o.layer}, {"pass", std::string(model_pass_name(o.pass))}, {"op", o.op},
          {"micro_batch", o.micro_batch}};
}

// Back to the newest checkpoint: parameters, optimizer, loader, the strategies' state, and a new
// ledger invocation from there (voiding the records of the steps taken again).
Status roll_back(TrainingRun& run, int64_t bad_step) {
  TS_RETURN_IF_ERROR(run.async_saver.wait());
  const Status restored = restore_latest_checkpoint(run);
  if (restored.code() == StatusCode::not_found)
    return not_found("train.on_anomaly = \"rollback\" at step " + std::to_string(bad_step) +
                     ": no checkpoint saved yet to roll back to; lower train.checkpoint_interval");
  TS_RETURN_IF_ERROR(restored);
  TS_RETURN_IF_ERROR(restore_strategy_state(run));
  TS_RETURN_IF_ERROR(run.update().broadcast_parameters());
  TS_RETURN_IF_ERROR(start_ledger_invocation(run));
  run.rolled_back_steps.insert(bad_step);
  const auto kept = static_cast<size_t>(std::max<int64_t>(0, run.state.step - run.summary.first_step));
  if (run.summary.losses.size() > kept) run.summary.losses.resize(kept);
  return Status::ok_status();
}

}  // namespace

Result<AnomalyOutcome> respond_to_anomaly(TrainingRun& run, const StepResult& r) {
  const std::string& action = run.cfg.train.on_anomaly;
  const int64_t step = run.state.step + 1;
  const Anomaly& a = r.anomaly;
  const std::string line = "step " + std::to_string(step) + ": " + describe_origin(a.origin, a.kind) + " [" +
                           a.measure + "]";
  run.update().discard_gradients();
  if (run.lead) {
    if (action != "stop") log_warn("anomaly at " + line + "; train.on_anomaly = \"" + action + "\"");
    TS_RETURN_IF_ERROR(run.metrics->write({{"event", "anomaly"},
                                           {"step", step},
                                           {"kind", a.kind},
                                           {"measure", a.measure},
                                           {"origin", origin_json(a.origin)},
                                           {"action", action}}));
  }
  if (action == "skip_step") return AnomalyOutcome::skipped;
  if (action == "rollback") {
    TS_RETURN_IF_ERROR(roll_back(run, step));
    if (run.lead) {
      log_warn("rolled back to step " + std::to_string(run.state.step) + "; step " + std::to_string(step) +
               "'s batch will be skipped");
      TS_RETURN_IF_ERROR(
          run.metrics->write({{"event", "rollback"}, {"step", step}, {"from_step", step}, {"to_step", run.state.step}}));
    }
    return AnomalyOutcome::rolled_back;
  }
  return Status(StatusCode::internal, "anomaly at " + line +
                                          "; the run stops (train.on_anomaly = \"stop\"; \"skip_step\" or "
                                          "\"rollback\" continue past it)");
}

std::optional<StepResult> skip_rolled_back_step(TrainingRun& run) {
  const int64_t step = run.state.step + 1;
  if (!run.rolled_back_steps.count(step)) return std::nullopt;
  run.runner->skip_batches();
  if (run.lead) {
    log_warn("step " + std::to_string(step) + ": its batch skipped (the anomaly rolled back from)");
    (void)run.metrics->write({{"event", "skipped_batch"}, {"step", step}});
  }
  StepResult r;
  r.skipped = true;
  r.loss = std::numeric_limits<float>::quiet_NaN();
  r.anomaly.detected = true;
  r.anomaly.kind = "skipped after rollback";
  return r;
}

}  // namespace tessera
