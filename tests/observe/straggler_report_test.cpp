// The straggler analysis: which rank is slowest, and what the others lost waiting for it.
#include <gtest/gtest.h>

#include "observe/straggler_report.h"

namespace tessera {
namespace {

TEST(StragglerReport, NamesTheSlowRankAndTheWaitItCaused) {
  // Rank 2 computes 1.8 s, the others 0.9 s and then wait for it; 0.05 s is the collective itself.
  const std::vector<RankStepTime> ranks{{0.90, 0.95, 0.0}, {0.92, 0.93, 0.0}, {1.80, 0.05, 0.0}, {0.88, 0.97, 0.0}};
  const StragglerReport r = analyse_stragglers(ranks);
  EXPECT_EQ(r.slowest_rank, 2);
  EXPECT_DOUBLE_EQ(r.slowest_compute_s, 1.80);
  EXPECT_NEAR(r.median_compute_s, 0.91, 1e-12);
  EXPECT_NEAR(r.lost_s, 0.90, 1e-12);  // median of 0.90, 0.88, 0.92
  EXPECT_NEAR(r.step_s, 1.85, 1e-12);
  EXPECT_NEAR(r.lost_fraction, 0.90 / 1.85, 1e-12);
  EXPECT_EQ(describe(r),
            "slowest rank 2: compute 1.8 s/step vs median 0.91; the others waited 0.9 s/step for it (49% of step time)");
}

TEST(StragglerReport, BalancedRanksLoseNothing) {
  const std::vector<RankStepTime> ranks{{1.0, 0.1, 0.0}, {1.0, 0.1, 0.0}};
  const StragglerReport r = analyse_stragglers(ranks);
  EXPECT_EQ(r.slowest_rank, 0);
  EXPECT_DOUBLE_EQ(r.lost_s, 0.0);
}

TEST(StragglerReport, JsonKeepsEveryRank) {
  const nlohmann::json j = step_times_json({{1, 2, 3}, {4, 5, 6}});
  ASSERT_EQ(j.size(), 2u);
  EXPECT_DOUBLE_EQ(j[1]["wait_s"].get<double>(), 5.0);
}

}  // namespace
}  // namespace tessera
