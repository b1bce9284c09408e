// The end-of-run pipeline report (train/step_time_report.h): each stage's idle share and its waits on
// the other stages, averaged over the stage's ranks, and predicted vs measured at pp > 1.
#include "train/step_time_report.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// dp 2 x pp 2: world ranks 0..3 in the grid's order; each stage's shares are the mean of its two ranks.
TEST(PipelineStageShares, AveragesEachStageOverItsRanks) {
  const GridShape shape{.dp = 2, .pp = 2};
  std::vector<RankStepTime> ranks(4);
  for (int r = 0; r < 4; ++r) {
    const bool first_stage = grid_coord(shape, r).pp == 0;
    const double replica = grid_coord(shape, r).dp;  // the two replicas of a stage differ a little
    // step 1 s: compute, waits (of them pipeline waits), data
    ranks[static_cast<size_t>(r)] = first_stage ? RankStepTime{0.9 - 0.02 * replica, 0.1 + 0.02 * replica, 0.0, 0.05}
                                                : RankStepTime{0.7, 0.3, 0.0, 0.2 + 0.02 * replica};
  }
  const PipelineStageShares s = pipeline_stage_shares(shape, ranks);
  ASSERT_EQ(s.idle.size(), 2u);
  EXPECT_NEAR(s.idle[0], 0.11, 1e-12);
  EXPECT_NEAR(s.idle[1], 0.30, 1e-12);
  EXPECT_NEAR(s.pipeline_wait[0], 0.05, 1e-12);
  EXPECT_NEAR(s.pipeline_wait[1], 0.21, 1e-12);
  EXPECT_EQ(pipeline_idle_line(s, 1.0 / 9),
            "pipeline stages idle 11.0 % / 30.0 % of the step (waiting on the other stages 5.0 % / 21.0 %); "
            "the schedule's bubble with equal stages 11.1 %");
}

// The optimizer update and the runner apart; the busiest stage's compute and the rest of the runner's
// time, each beside its prediction; one stage: no split.
TEST(PredictedVsMeasured, SplitsAPipelinesRunnerIntoTheBusiestComputeAndItsWaits) {
  StepTimePrediction p;
  p.step_s = 1.0;
  p.layout.grid.pp = 2;
  p.breakdown.compute_s = 0.6;
  p.breakdown.tp_s = 0.1;
  p.breakdown.bubble_s = 0.15;
  p.breakdown.pp_s = 0.05;
  p.breakdown.optimizer_s = 0.04;
  // step 1.15 s = 0.1 collective wait + 0.05 optimizer + 1.0 runner (0.75 busiest compute + 0.25 waits)
  MeasuredStep m{.step_s = 1.15, .comm_wait_s = 0.1, .loader_wait_s = 0.0, .steps = 3, .update_s = 0.05,
                 .busiest_compute_s = 0.75};
  const nlohmann::json j = predicted_vs_measured_json(p, m);
  EXPECT_NEAR(j["measured"]["runner_s"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(j["measured"]["pipeline_wait_s"].get<double>(), 0.25, 1e-12);
  EXPECT_NEAR(j["predicted_pipeline_wait_s"].get<double>(), 0.2, 1e-12);
  const std::string line = predicted_vs_measured_line(p, m);
  EXPECT_NE(line.find("optimizer predicted 0.04 s, measured 0.05 s"), std::string::npos) << line;
  EXPECT_NE(line.find("runner (compute, tp, pp, bubble) predicted 0.9 s, measured 1 s"), std::string::npos) << line;
  EXPECT_NE(line.find("the busiest stage's compute (tp included) predicted 0.7 s, measured 0.75 s"), std::string::npos)
      << line;
  EXPECT_NE(line.find("pipeline waits (bubble + pp messages) predicted 0.2 s, measured 0.25 s"), std::string::npos) << line;
  p.layout.grid.pp = 1;
  EXPECT_EQ(predicted_vs_measured_line(p, m).find("busiest"), std::string::npos);
}

}  // namespace
}  // namespace tessera
