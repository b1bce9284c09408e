// Test-only planted faults for the multi-rank failure tests (tests/mpi/dp_*.sh), read from the
// environment; with the variables unset (every real run) nothing is planted.
#pragma once
#include <cstdint>

#include "train/step_hooks.h"

namespace tessera {

// At step TESSERA_TEST_FAULT_STEP (default 2) the rank named by TESSERA_TEST_FAIL_RANK fails;
// TESSERA_TEST_HANG_RANK stops answering, as a rank stuck in compute would, before the step's
// gradient all-reduce (TESSERA_TEST_HANG_AT=grad_sync, default) or its loss all-reduce (=loss);
// TESSERA_TEST_PERTURB_RANK nudges one parameter after the update (--verify-replicas must fail).
class PlantedFault final : public StepHooks {
 public:
  // rank: this rank's world rank.
  static PlantedFault from_env(int rank);
  bool any() const { return fail_ >= 0 || hang_ >= 0 || perturb_ >= 0; }
  Status at(StepPoint point, int64_t step, ParamStore& store) override;

 private:
  int rank_ = 0, fail_ = -1, hang_ = -1, perturb_ = -1;
  int64_t step_ = 2;
  bool hang_at_loss_ = false;
};

}  // namespace tessera
