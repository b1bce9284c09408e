// Ring buffer of recent ops: order, wrap-around, stale tickets.
#include <gtest/gtest.h>

#include "comm/collective_log.h"

using namespace tessera;

TEST(CollectiveLog, KeepsTheLastCapacityRecordsOldestFirst) {
  CollectiveLog log(4);
  std::vector<uint64_t> tickets;
  for (uint64_t s = 1; s <= 6; ++s) tickets.push_back(log.begin({s, CollectiveKind::all_reduce, -1, 16 * s}));
  log.finish(tickets[5], OpState::done);
  log.finish(tickets[0], OpState::failed);  // overwritten: ignored
  std::vector<CollectiveRecord> r = log.recent();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.front().seq, 3u);
  EXPECT_EQ(r.back().seq, 6u);
  EXPECT_EQ(r.back().state, OpState::done);
  EXPECT_GE(r.back().end_s, r.back().start_s);
  EXPECT_EQ(r[0].state, OpState::running);
  EXPECT_NE(log.format().find("all_reduce #6"), std::string::npos) << log.format();
}
