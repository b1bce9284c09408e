#include <gtest/gtest.h>

#include "model/param_layout.h"
#include "plan/calibrate.h"

namespace tessera {
namespace {

TEST(OverlapFromTimings, NothingHiddenWhenThePairTakesBoth) {
  EXPECT_DOUBLE_EQ(overlap_from_timings(2.0, 3.0, 5.0), 0.0);
}

TEST(OverlapFromTimings, AllHiddenWhenThePairTakesTheComputeAlone) {
  EXPECT_DOUBLE_EQ(overlap_from_timings(2.0, 3.0, 3.0), 1.0);
  EXPECT_DOUBLE_EQ(overlap_from_timings(2.0, 3.0, 2.9), 1.0);  // a faster pair: noise, not more than all
}

TEST(OverlapFromTimings, PartOfTheCommunicationShowing) {
  EXPECT_DOUBLE_EQ(overlap_from_timings(2.0, 3.0, 3.5), 0.75);
  EXPECT_DOUBLE_EQ(overlap_from_timings(2.0, 3.0, 9.0), 0.0);  // slower than both in turn: none hidden
}

// A run probes its own model: at most 2 of its layers, at most 1024 tokens, at least one sequence.
TEST(ProbeForRun, CutsTheModelToTwoLayersAndTheMicroBatchTo1024Tokens) {
  ModelConfig m = model_preset("tiny").value();
  m.n_layer = 12;
  CalibrationProbe p = probe_for_run(m, 8, 512);
  EXPECT_EQ(p.model.n_layer, 2);
  EXPECT_EQ(p.model.d_model, m.d_model);
  EXPECT_EQ(p.micro_batch, 2);
  EXPECT_EQ(p.seq_len, 512);
  EXPECT_EQ(probe_for_run(m, 4, 4096).micro_batch, 1);
  m.n_layer = 1;
  p = probe_for_run(m, 2, 128);
  EXPECT_EQ(p.model.n_layer, 1);
  EXPECT_EQ(p.micro_batch, 2);
}

// A bf16 run is measured as it will run: its probe's linear layers in bf16 (the scales then carry the
// operand rounding) and the bf16 matmul's peak timed even by the quick measurement, which an fp32
// run's skips.
TEST(AimCalibrationAt, ABf16RunProbesInBf16AndTimesTheBf16Peak) {
  RunConfig cfg;
  cfg.model = model_preset("tiny").value();
  CalibrationOptions quick;
  quick.quick = true;
  aim_calibration_at(quick, cfg);
  EXPECT_EQ(quick.probe->precision, Precision::fp32);
  EXPECT_FALSE(quick.bf16_peak);
  cfg.train.precision = Precision::bf16;
  aim_calibration_at(quick, cfg);
  EXPECT_EQ(quick.probe->precision, Precision::bf16);
  EXPECT_TRUE(quick.bf16_peak);
  CalibrationOptions full;  // tessera plan --calibrate --config: always both peaks
  cfg.train.precision = Precision::fp32;
  aim_calibration_at(full, cfg);
  EXPECT_TRUE(full.bf16_peak);
}

// A run's quick measurement times the all-reduce at its gradient's size (past the caches the rate
// falls by half on the 2-core VM), up to the full calibration's 64 MiB; a small gradient adds nothing.
TEST(AllReduceCalibrationCounts, ReachTheRunsGradientUpTo64MiB) {
  CalibrationOptions full;
  EXPECT_EQ(all_reduce_calibration_counts(full).back(), int64_t{16} << 20);
  CalibrationOptions quick;
  quick.quick = true;
  const int64_t sixteen_mib = int64_t{4} << 20;  // floats
  EXPECT_EQ(all_reduce_calibration_counts(quick).back(), sixteen_mib);
  quick.largest_message_bytes = 55959552;  // bench-small's gradient
  EXPECT_EQ(all_reduce_calibration_counts(quick).back(), 55959552 / 4);
  EXPECT_EQ(all_reduce_calibration_counts(quick).size(), 5u);
  quick.largest_message_bytes = int64_t{500} << 20;  // GPT-2's: capped
  EXPECT_EQ(all_reduce_calibration_counts(quick).back(), int64_t{16} << 20);
  quick.largest_message_bytes = int64_t{8} << 20;  // already covered
  EXPECT_EQ(all_reduce_calibration_counts(quick).back(), sixteen_mib);
  EXPECT_EQ(all_reduce_calibration_counts(quick).size(), 4u);
}

// The optimizer rate is timed over the run's own parameters (its rate falls past the caches),
// bounded to [256 Ki, 16 Mi]; without a run, 16 Mi (quick: 4 Mi).
TEST(OptimizerCalibrationParams, TheRunsParametersWithinBounds) {
  CalibrationOptions o;
  EXPECT_EQ(optimizer_calibration_params(o), int64_t{16} << 20);
  o.quick = true;
  EXPECT_EQ(optimizer_calibration_params(o), int64_t{4} << 20);
  o.optimizer_params = 13989888;  // bench-small
  EXPECT_EQ(optimizer_calibration_params(o), 13989888);
  o.optimizer_params = 1000;
  EXPECT_EQ(optimizer_calibration_params(o), int64_t{1} << 18);
  o.optimizer_params = int64_t{124} << 20;
  EXPECT_EQ(optimizer_calibration_params(o), int64_t{16} << 20);
}

// `plan --calibrate --config` and a run's start-up measurement aim at the run: its model's probe,
// its gradient and parameters, its buckets and its layers per pipeline rank.
TEST(AimCalibrationAt, TakesTheRunsModelBucketsAndLayersPerStage) {
  RunConfig cfg;
  cfg.model = model_preset("tiny").value();
  cfg.model.n_layer = 8;
  cfg.train.micro_batch = 4;
  cfg.data.seq_len = 64;
  cfg.parallel.pp = 2;
  cfg.parallel.bucket_mb = 2;
  CalibrationOptions o;
  aim_calibration_at(o, cfg);
  ASSERT_TRUE(o.probe.has_value());
  EXPECT_EQ(o.probe->model.n_layer, 2);
  EXPECT_EQ(o.probe->model.d_model, cfg.model.d_model);
  const int64_t params = ParamLayout(cfg.model).total_numel();
  EXPECT_EQ(o.largest_message_bytes, 4 * params);
  EXPECT_EQ(o.optimizer_params, params);
  EXPECT_EQ(o.bucket_bytes, int64_t{2} << 20);
  EXPECT_EQ(o.backward_layers, 4);
  EXPECT_EQ(o.matmul_width, cfg.model.d_model);
}

// Below the model's width the timed matmul is a layer's (few rows through the whole weight); at or
// above it, the generic shape.
TEST(CalibrationMatmulShape, NarrowerThanTheModelIsALayersMatmul) {
  const MatmulShape narrow = calibration_matmul_shape(32, 384);
  EXPECT_EQ(narrow.rows, 32);
  EXPECT_EQ(narrow.in, 384);
  EXPECT_EQ(narrow.out, 1536);
  const MatmulShape wide = calibration_matmul_shape(512, 384);
  EXPECT_EQ(wide.rows, 4096);
  EXPECT_EQ(wide.in, 512);
  EXPECT_EQ(wide.out, 2048);
  const MatmulShape generic = calibration_matmul_shape(32, 0);
  EXPECT_EQ(generic.rows, 256);
  EXPECT_EQ(generic.in, 32);
  EXPECT_EQ(generic.out, 128);
}

}  // namespace
}  // namespace tessera
