// Learning-rate schedule: linear warmup, then cosine / linear decay to min_lr at the last step, or constant.
#pragma once
#include <cstdint>

#include "train/run_config.h"

namespace tessera {

// step counts from 0. Warmup: lr * (step + 1) / warmup_steps for step < warmup_steps. Then the decay
// runs from lr at step == warmup_steps to min_lr at step == total_steps - 1 (and stays there beyond).
float lr_at(int64_t step, const OptimConfig& cfg, int64_t total_steps);

}  // namespace tessera
