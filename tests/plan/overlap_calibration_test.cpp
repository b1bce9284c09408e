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

}  // namespace
}  // namespace tessera
