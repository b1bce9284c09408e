// assign_device: the ranks on one machine take its visible GPUs round-robin; bad input is named.
#include <gtest/gtest.h>

#include <vector>

#include "backend/device_assignment.h"

namespace tessera {
namespace {

std::vector<int> ordinals(int ranks, int devices) {
  std::vector<int> out;
  for (int r = 0; r < ranks; ++r) {
    Result<int> d = assign_device({r, ranks}, devices);
    EXPECT_TRUE(d.ok()) << d.status().message();
    out.push_back(d.ok() ? *d : -1);
  }
  return out;
}

TEST(DeviceAssignment, RanksOnAMachineTakeItsDevicesRoundRobin) {
  EXPECT_EQ(ordinals(1, 1), (std::vector<int>{0}));
  EXPECT_EQ(ordinals(8, 8), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));  // one GPU per rank (NCCL)
  EXPECT_EQ(ordinals(4, 2), (std::vector<int>{0, 1, 0, 1}));              // shared (the staged communicator)
  EXPECT_EQ(ordinals(3, 1), (std::vector<int>{0, 0, 0}));                 // the layouts' tests on one GPU
  EXPECT_EQ(ordinals(2, 4), (std::vector<int>{0, 1}));
}

TEST(DeviceAssignment, NoDeviceOrAnImpossibleRankIsAnError) {
  Result<int> none = assign_device({0, 1}, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no CUDA device"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("train.device = \"cpu\""), std::string::npos);
  EXPECT_FALSE(assign_device({2, 2}, 1).ok());
  EXPECT_FALSE(assign_device({-1, 2}, 1).ok());
  EXPECT_FALSE(assign_device({0, 0}, 1).ok());
}

}  // namespace
}  // namespace tessera
