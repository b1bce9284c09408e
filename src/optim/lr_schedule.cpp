// Learning-rate schedule (see lr_schedule.h); computed in double so long runs do not drift.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace tessera {

std::string_view lr_schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::cosine: return "cosine";
    case LrSchedule::linear: return "linear";
    case LrSchedule::constant: return "constant";
  }
  return "?";
}

Result<LrSchedule> parse_lr_schedule(std::string_view s) {
  if (s == "cosine") return LrSchedule::cosine;
  if (s == "linear") return LrSchedule::linear;
  if (s == "constant") return LrSchedule::constant;
  return invalid_argument("unknown lr schedule '" + std::string(s) + "': use \"cosine\", \"linear\" or \"constant\"");
}

float lr_at(int64_t step, const LrScheduleConfig& cfg, int64_t total_steps) {
  const double lr = cfg.lr, min_lr = cfg.min_lr;
  if (step < 0) step = 0;
  if (step < cfg.warmup_steps) return static_cast<float>(lr * double(step + 1) / double(cfg.warmup_steps));
  if (cfg.schedule == LrSchedule::constant) return cfg.lr;
  const int64_t decay_steps = total_steps - 1 - cfg.warmup_steps;
  if (decay_steps <= 0) return cfg.lr;  // warmup covers the whole run: nothing left to decay over
  const double progress = std::min(1.0, double(step - cfg.warmup_steps) / double(decay_steps));
  double coeff = cfg.schedule == LrSchedule::cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * progress))
                                                    : 1.0 - progress;
  return static_cast<float>(min_lr + coeff * (lr - min_lr));
}

}  // namespace tessera
