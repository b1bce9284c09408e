// Learning-rate schedule: linear warmup, then cosine / linear decay to min_lr at the last step, or constant.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace tessera {

enum class LrSchedule { cosine, linear, constant };
std::string_view lr_schedule_name(LrSchedule s);
Result<LrSchedule> parse_lr_schedule(std::string_view s);

// The [optim] keys the schedule reads (the run config's OptimConfig derives from it).
struct LrScheduleConfig {
  float lr = 3e-4f;
  float min_lr = 3e-5f;  // default lr / 10
  int64_t warmup_steps = 10;
  LrSchedule schedule = LrSchedule::cosine;
};

// step counts from 0. Warmup: lr * (step + 1) / warmup_steps for step < warmup_steps. Then the decay
// runs from lr at step == warmup_steps to min_lr at step == total_steps - 1 (and stays there beyond).
float lr_at(int64_t step, const LrScheduleConfig& cfg, int64_t total_steps);

}  // namespace tessera
