// Test-only planted faults for the multi-rank failure tests (tests/mpi/dp_*.sh), read from the
// environment; with the variables unset (every real run) nothing is planted.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>

namespace tessera {

// Test-only planted faults (tests/mpi/dp_*.sh; unset in real runs). At step TESSERA_TEST_FAULT_STEP
// (default 2) the rank named by TESSERA_TEST_FAIL_RANK fails; TESSERA_TEST_HANG_RANK stops answering, as a
// rank stuck in compute would, before the gradient all-reduce (TESSERA_TEST_HANG_AT=grad_sync, default)
// or the loss all-reduce (=loss); TESSERA_TEST_PERTURB_RANK nudges one parameter (--verify-replicas must fail).
struct PlantedFault {
  int fail = -1, hang = -1, perturb = -1;
  int64_t step = 2;
  bool hang_at_loss = false;
  static PlantedFault from_env() {
    auto num = [](const char* name, int64_t dflt) {
      const char* v = std::getenv(name);
      return v && *v ? std::atoll(v) : dflt;
    };
    const char* at = std::getenv("TESSERA_TEST_HANG_AT");
    return {static_cast<int>(num("TESSERA_TEST_FAIL_RANK", -1)), static_cast<int>(num("TESSERA_TEST_HANG_RANK", -1)),
            static_cast<int>(num("TESSERA_TEST_PERTURB_RANK", -1)), num("TESSERA_TEST_FAULT_STEP", 2),
            at && std::string_view(at) == "loss"};
  }
  [[noreturn]] static void hang_forever() {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
};

}  // namespace tessera
