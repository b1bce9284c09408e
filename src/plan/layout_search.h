// `tessera plan --search --ranks N` and parallel.layout = "auto": every valid layout of a run config
// on N ranks (dp x tp x pp x cp (both modes) or x ep (MoE models), pipeline schedule (zb-h1 included)
// and virtual stages, ZeRO stage, micro-batch, recompute, sequence parallelism), keeping the model,
// sequence length and global batch (train.batch_tokens);
// those whose predicted peak memory (plan/memory_plan.h) is over the budget are dropped, the rest
// ranked by predicted tokens/s (plan/step_time_model.h), fastest first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "plan/hardware.h"
#include "plan/step_time_model.h"

namespace tessera {

struct LayoutCandidate {
  RunConfig cfg;          // the base config with this layout's keys set (grad_accum re-derived)
  std::string overrides;  // those keys as command-line overrides: "parallel.dp=2 parallel.tp=1 ..."
  StepTimePrediction time;
  int64_t peak_bytes = 0;  // the worst rank's predicted peak
};

struct LayoutSearch {
  std::vector<LayoutCandidate> ranked;  // fits the budget, fastest first (ties: less memory)
  int64_t budget_bytes = 0;             // train.memory_budget_mb, else the device's memory
  int enumerated = 0;                   // valid layouts considered
  int over_budget = 0;                  // of those, dropped for memory
};

// Error when no layout is valid or none fits (the message says which budget and the smallest peak).
Result<LayoutSearch> search_layouts(const RunConfig& base, int world_size, const HardwareSpec& hw);

// "dp=2 tp=2 pp=1 zero=1 mb=4 recompute=none" (+ the schedule at pp > 1, "sp" with sequence parallelism).
std::string short_layout_name(const RunConfig& cfg);

// The config keys a candidate sets, "key=value" each (what `overrides` joins).
std::vector<std::string> layout_overrides(const RunConfig& cfg);

}  // namespace tessera
