// StepHooks: fixed points of a training step where test and drill code may act (planted faults,
// later fault injection); production runs use the no-op default.
#pragma once
#include <cstdint>

#include "core/status.h"
#include "model/param_layout.h"

namespace tessera {

enum class StepPoint {
  step_begin,    // before the step's first micro-batch (so before its gradient communication)
  after_update,  // after the optimizer step, before the step's loss is averaged over ranks
};

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // step: the 1-based number of the step being taken. An error ends the step (and the run).
  virtual Status at(StepPoint point, int64_t step, ParamStore& store) { return Status::ok_status(); }
};

}  // namespace tessera
