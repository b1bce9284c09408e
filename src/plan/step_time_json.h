// A step-time prediction as JSON, the one form `tessera plan --json/--search --json` print and the
// trainer writes to metrics.jsonl.
#pragma once
#include <nlohmann/json.hpp>

#include "plan/step_time_model.h"

namespace tessera {

// {"step_s", "tokens_per_s", "tokens_per_step", "flops_per_device", "mfu", "breakdown": {compute_s,
// recompute_s, bubble_s, tp_comm_s, pp_comm_s, dp_comm_s, dp_comm_total_s, optimizer_s, other_s}}.
nlohmann::json step_time_json(const StepTimePrediction& p);

}  // namespace tessera
