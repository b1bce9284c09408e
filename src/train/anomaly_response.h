// What a run does about an anomaly its guard found (train.on_anomaly): report it in one line and
// in metrics.jsonl, then stop, skip the step's update, or roll back to the last checkpoint and
// skip the offending batch when the run reaches it again.
#pragma once
#include "core/status.h"
#include "train/training_run.h"

namespace tessera {

enum class AnomalyOutcome { skipped, rolled_back };

// `r`: a step train_step returned with r.anomaly.detected. Collective over the world. An error
// when the run must stop (train.on_anomaly = "stop", or a rollback without a checkpoint).
Result<AnomalyOutcome> respond_to_anomaly(TrainingRun& run, const StepResult& r);

// Whether the next step is one a rollback skips; if so reads its batches without computing and
// returns the step's result (skipped, loss NaN) for after_step.
std::optional<StepResult> skip_rolled_back_step(TrainingRun& run);

}  // namespace tessera
