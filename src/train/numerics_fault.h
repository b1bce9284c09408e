// The nan and spike faults of TESSERA_FAULT (fault_injection.h), injected through the model's
// numerics probe into one op's output at one (step, micro-batch, layer, pass) of this rank.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/numerics_probe.h"
#include "train/fault_injection.h"

namespace tessera {

class NumericsFaultProbe final : public NumericsProbe {
 public:
  // faults: this rank's nan / spike faults of this launch attempt.
  NumericsFaultProbe(Backend& backend, std::vector<Fault> faults);
  void set_step(int64_t step) { step_ = step; }
  void begin_micro_batch(int micro_batch) override { micro_batch_ = micro_batch; }
  void after_op(const ProbePoint& at, float* out, int64_t n) override;

 private:
  Backend& backend_;
  std::vector<Fault> faults_;
  int64_t step_ = 0;
  int micro_batch_ = 0;
  // The (micro-batch, layer, pass) of the previous op: an op with another is its layer's first in
  // that pass (layers differ in which ops they have: a MoE layer has no dense MLP).
  int last_micro_batch_ = -1, last_layer_ = -2;
  ModelPass last_pass_ = ModelPass::forward;
  int logged_ = 0;  // injections logged (a replay of the step injects again, silently)
};

}  // namespace tessera
