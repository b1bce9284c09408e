#include "backend/sgemm_peak.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera::ops {
namespace {

// Feeds rates until the search stops; returns how many it took.
int feed(PeakSearch& search, const std::vector<double>& rates) {
  int used = 0;
  for (double r : rates) {
    ++used;
    if (!search.add(r)) break;
  }
  return used;
}

TEST(PeakSearch, AColdStartIsTimedUntilTheRateSettles) {
  // A core back from idle (measured shape): slow calls, a short plateau, then the real rate.
  const std::vector<double> rates = {102, 92, 168, 167, 173, 178, 184, 183, 184, 182, 178, 158, 266,
                                     318, 322, 352, 335, 335, 316, 364, 359, 295, 346, 358, 351, 302,
                                     312, 312, 315, 299, 289};
  PeakSearch search(8);
  const int used = feed(search, rates);
  EXPECT_DOUBLE_EQ(search.best(), 364);  // a fixed 8 calls would have said 184
  EXPECT_EQ(used, 28);                   // 364 at call 20, then 8 calls without a 3 % gain
}

TEST(PeakSearch, AWarmMachineStopsAfterTheGivenCount) {
  PeakSearch search(8);
  const int used = feed(search, std::vector<double>(20, 300));
  EXPECT_EQ(used, 9);  // the first call sets the best, 8 more confirm it
  EXPECT_DOUBLE_EQ(search.best(), 300);
}

TEST(PeakSearch, GainsBelowThreePercentDoNotProlongIt) {
  PeakSearch search(2);
  EXPECT_TRUE(search.add(100));
  EXPECT_TRUE(search.add(102));   // kept as the best, but not a gain
  EXPECT_FALSE(search.add(101));  // two in a row without a 3 % gain
  EXPECT_DOUBLE_EQ(search.best(), 102);
}

}  // namespace
}  // namespace tessera::ops
