#include "train/matmul_peak.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

// Readings handed out in order, the last one repeated.
std::function<double()> readings(std::vector<double> values, int* calls) {
  return [values, calls] { return values[static_cast<size_t>(std::min<int>((*calls)++, static_cast<int>(values.size()) - 1))]; };
}

TEST(MatmulPeak, AStepBelowThePeakDoesNotMeasureAgain) {
  int calls = 0;
  MatmulPeak peak(readings({200}, &calls));
  EXPECT_DOUBLE_EQ(peak.mfu(150), 0.75);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(peak.remeasures(), 0);
}

TEST(MatmulPeak, ALowSetUpReadingIsMeasuredAgainWhenAStepBeatsIt) {
  int calls = 0;
  MatmulPeak peak(readings({100, 300}, &calls));  // set-up caught a busy moment
  EXPECT_DOUBLE_EQ(peak.mfu(150), 0.5);
  EXPECT_DOUBLE_EQ(peak.gflops(), 300);
  EXPECT_EQ(peak.remeasures(), 1);
  EXPECT_DOUBLE_EQ(peak.mfu(240), 0.8);  // later steps use the corrected peak
  EXPECT_EQ(calls, 2);
}

TEST(MatmulPeak, KeepsTheHigherReadingAndStopsAfterTheLimit) {
  int calls = 0;
  MatmulPeak peak(readings({100, 80, 120, 90}, &calls), 3);
  const double mfu = peak.mfu(150);  // never reached: three more readings, then report against the best
  EXPECT_DOUBLE_EQ(peak.gflops(), 120);
  EXPECT_DOUBLE_EQ(mfu, 150.0 / 120);
  EXPECT_EQ(calls, 4);
  peak.mfu(150);
  EXPECT_EQ(calls, 4);  // no more measuring once the limit is spent
}

}  // namespace
}  // namespace tessera
