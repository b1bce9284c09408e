// The step-time parts of `tessera plan`: --hardware (the prediction under the memory plan),
// --search (the ranked layouts) and --calibrate (measure this machine into a hardware file).
#pragma once
#include <string>

#include "config/run_config.h"
#include "plan/hardware.h"
#include "plan/step_time_model.h"

namespace tessera::cli {

void print_step_time(const StepTimePrediction& p, const HardwareSpec& hw);
// Ranked layouts: a table of the best `top` (all with top <= 0), or JSON ({"candidates": [...]}).
int run_plan_search(const RunConfig& cfg, int world, const HardwareSpec& hw, bool json, int top);
// Measures this rank's device and, under mpirun, the collectives; rank 0 writes `out` (or stdout).
// run: measure for that run's model (calibrate.h aim_calibration_at); null: the generic probe.
int run_plan_calibrate(const std::string& out, const std::string& name, bool quick, const RunConfig* run);

}  // namespace tessera::cli
