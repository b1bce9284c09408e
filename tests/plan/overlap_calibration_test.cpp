#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tessera
