// The step-time prediction in every run (plan/step_time_model.h): the hardware it predicts with
// (train.hardware, or a brief measurement at start), parallel.layout = "auto", and the predicted
// step next to the measured one in the end-of-run summary and metrics.jsonl.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "config/run_config.h"
#include "core/status.h"
#include "observe/straggler_report.h"
#include "plan/hardware.h"
#include "plan/step_time_model.h"

namespace tessera {

// Where a run's hardware comes from when train.hardware is "".
struct RunHardwareDefaults {
  // The environment's TESSERA_HARDWARE (a site's or a test suite's file for every run); "" = none.
  std::string file;
  // The sgemm peak the run has already measured with its threads (GFLOP/s), so the measurement at
  // start does not time it twice; 0 = measure it.
  double sgemm_peak_gflops = 0;
};
// The environment variable that names a hardware file for runs whose config sets no train.hardware.
inline constexpr const char* kHardwareEnvVar = "TESSERA_HARDWARE";

// train.hardware loaded, else defaults.file loaded, else this rank's device and the world's
// all-reduce measured briefly (plan/calibrate.h, quick). Collective: every rank calls it and gets the
// same ok / error.
Result<HardwareSpec> hardware_for_run(const RunConfig& cfg, Communicator& world, int ranks_per_node,
                                      const RunHardwareDefaults& defaults);

// parallel.layout = "auto": world rank 0 ranks the layouts on world.size() ranks (plan/layout_search.h)
// and every rank receives its choice as config overrides, with a line saying why. Collective.
struct AutoLayout {
  std::vector<std::string> overrides;  // the layout keys, plus parallel.layout=manual
  std::string why;
};
Result<AutoLayout> choose_auto_layout(const RunConfig& cfg, Communicator& world, const HardwareSpec& hw);

// What a run measured per timed step (rank 0's clock; the first step is not timed).
struct MeasuredStep {
  double step_s = 0;
  double comm_wait_s = 0;    // blocked in the step's collectives (gradient sync, parameter sync, loss)
  double loader_wait_s = 0;  // waiting for the data loader
  int64_t steps = 0;
  double update_s = 0;  // in the optimizer update (norm, clipping, AdamW)
  // The largest forward + backward compute of any rank (its step less its optimizer update, every
  // wait on other ranks and the loader): the busiest pipeline stage's, against which the model
  // counts the bubble.
  double busiest_compute_s = 0;
};

// {"predicted": <step_time_json>, "measured": {step_s, comm_wait_s, loader_wait_s, update_s, runner_s,
//  busiest_compute_s, pipeline_wait_s, steps}, "predicted_runner_s", "predicted_pipeline_wait_s",
// "step_error": measured / predicted - 1}. runner_s = step - comm wait - loader wait - update: the
// runner's time, which the model splits into compute, tp, cp, ep, pp and bubble; pipeline_wait_s =
// runner_s - busiest_compute_s: the bubble and the pipeline messages as the busiest stage sees them.
nlohmann::json predicted_vs_measured_json(const StepTimePrediction& p, const MeasuredStep& m);
// "step time: predicted 0.120 s, measured 0.130 s (+8.3 %); exposed dp communication predicted 0.010 s,
// measured wait 0.012 s; optimizer predicted 0.004 s, measured 0.005 s; runner (compute, tp, pp, bubble)
// predicted 0.105 s, measured 0.115 s", and at
// pp > 1 "; of it the busiest stage's compute (tp included) predicted 0.090 s, measured 0.095 s,
// pipeline waits (bubble + pp messages) predicted 0.015 s, measured 0.020 s".
std::string predicted_vs_measured_line(const StepTimePrediction& p, const MeasuredStep& m);

// Each pipeline stage's shares of its step, mean over the stage's ranks (dp, tp, ... replicas), by
// stage; `ranks` by world rank (gather_step_times). idle: not computing (any wait, the loader);
// pipeline_wait: blocked on the other stages' activations and gradients, the part of idle that the
// stages' messages show (a stage done early waits out the rest in the step's collectives instead).
struct PipelineStageShares {
  std::vector<double> idle, pipeline_wait;
};
PipelineStageShares pipeline_stage_shares(const GridShape& shape, const std::vector<RankStepTime>& ranks);
// "pipeline stages idle 7.2 % / 20.1 % of the step (waiting on the other stages 5.0 % / 11.5 %); the
// schedule's bubble with equal stages 11.1 %".
std::string pipeline_idle_line(const PipelineStageShares& shares, double equal_stage_bubble);

}  // namespace tessera
