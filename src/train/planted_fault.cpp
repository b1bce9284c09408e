// Planted faults (test-only): failing, hanging or perturbing one rank at one step.
#include "train/planted_fault.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace tessera {

namespace {
int64_t env_number(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}
[[noreturn]] void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
}  // namespace

PlantedFault PlantedFault::from_env(int rank) {
  PlantedFault f;
  f.rank_ = rank;
  f.fail_ = static_cast<int>(env_number("TESSERA_TEST_FAIL_RANK", -1));
  f.hang_ = static_cast<int>(env_number("TESSERA_TEST_HANG_RANK", -1));
  f.perturb_ = static_cast<int>(env_number("TESSERA_TEST_PERTURB_RANK", -1));
  f.step_ = env_number("TESSERA_TEST_FAULT_STEP", 2);
  const char* at = std::getenv("TESSERA_TEST_HANG_AT");
  f.hang_at_loss_ = at && std::string_view(at) == "loss";
  return f;
}

Status PlantedFault::at(StepPoint point, int64_t step, ParamStore& store) {
  if (step != step_) return Status::ok_status();
  if (point == StepPoint::step_begin) {
    if (fail_ == rank_)
      return internal_error("planted failure (TESSERA_TEST_FAIL_RANK) on rank " + std::to_string(rank_) +
                            " at step " + std::to_string(step_));
    if (hang_ == rank_ && !hang_at_loss_) hang_forever();  // its peers wait in the gradient all-reduce
  } else if (point == StepPoint::after_update) {
    if (perturb_ == rank_) store.params()[0] = std::nextafter(store.params()[0], 1e30f);
    if (hang_ == rank_ && hang_at_loss_) hang_forever();
  }
  return Status::ok_status();
}

}  // namespace tessera
