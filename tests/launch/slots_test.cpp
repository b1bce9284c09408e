// Slots files: a bare count or an Open MPI hostfile, and the errors for anything else.
#include <gtest/gtest.h>

#include "launch/slots.h"

using tessera::launch::parse_slots;

TEST(LaunchSlots, BareCount) {
  auto r = parse_slots("4\n", "f");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, 4);
  EXPECT_EQ(*parse_slots("  0  ", "f"), 0);
}

TEST(LaunchSlots, HostfileSumsSlots) {
  auto r = parse_slots("# cluster\nnode1 slots=4 max_slots=8\nnode2 slots=2  # half\n\nnode3\n", "f");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, 7);  // node3 without slots= counts 1; max_slots does not add
}

TEST(LaunchSlots, SingleHostLineIsAHostfile) { EXPECT_EQ(*parse_slots("localhost slots=3", "f"), 3); }

TEST(LaunchSlots, RejectsBadInput) {
  for (const char* bad : {"", "# only a comment\n", "-2", "node1 slots=x", "node1 slots=-1", "slots=4"}) {
    auto r = parse_slots(bad, "hosts.txt");
    EXPECT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("hosts.txt"), std::string::npos);
    }
  }
}

TEST(LaunchSlots, MissingFileIsAnError) {
  auto r = tessera::launch::read_slots_file("/nonexistent/h6/slots");
  EXPECT_FALSE(r.ok());
}
