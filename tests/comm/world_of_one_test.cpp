// A process started without mpirun is a world of one (MPI singleton init): every op works and
// validation errors are reported before anything reaches MPI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/grid.h"
#include "comm/mpi/libnbc_allreduce.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "../world_of_one.h"

using namespace tessera;

namespace {
MpiCommunicator& world() { return tessera::testing::world_of_one(); }
}  // namespace

TEST(WorldOfOne, OpsAreIdentities) {
  MpiCommunicator& w = world();
  ASSERT_EQ(w.size(), 1);
  ASSERT_EQ(w.rank(), 0);
  std::vector<float> x{1.5f, -2.0f, 3.0f}, y(3);
  ASSERT_TRUE(w.all_reduce(x.data(), y.data(), 3, DType::f32).ok());
  EXPECT_EQ(y, x);
  ASSERT_TRUE(w.all_reduce(x.data(), x.data(), 3, DType::f32, ReduceOp::avg).ok());
  EXPECT_EQ(x[0], 1.5f);
  ASSERT_TRUE(w.all_gather(x.data(), y.data(), 3, DType::f32).ok());
  EXPECT_EQ(y, x);
  Work a = w.all_reduce_async(y.data(), y.data(), 3, DType::f32, ReduceOp::max);
  EXPECT_TRUE(a.wait().ok());
  EXPECT_TRUE(w.barrier().ok());
  EXPECT_TRUE(check_agreement(w, "config", agreement_hash("same")).ok());
}

// Nothing crosses a link in a world of one: the all-reduce knob stays unused, without starting MPI_T
// (which registers every MCA component's variables, ~0.2 s of every one-process run).
TEST(WorldOfOne, PinsNoAlgorithmAndLeavesMpiTAlone) {
  const LibnbcAllreduceKnob& knob = world().allreduce_knob();
  EXPECT_FALSE(knob.usable());
  EXPECT_NE(knob.why_not().find("world of one"), std::string::npos) << knob.why_not();
}

// The singleton runs without Open MPI's helper daemon (orted): no child process of this one.
TEST(WorldOfOne, StartsNoHelperDaemon) {
  world();
  std::string children;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    std::string pids;
    std::getline(in, pids);
    children += pids;
  }
  EXPECT_EQ(children.find_first_not_of(' '), std::string::npos) << "child processes: " << children;
}

TEST(WorldOfOne, ValidationErrorsNameTheProblem) {
  MpiCommunicator& w = world();
  uint64_t before = w.collective_seq();
  std::vector<int32_t> x(4, 1);
  Status s = w.all_reduce(x.data(), x.data(), 4, DType::i32, ReduceOp::avg);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("avg of i32"), std::string::npos) << s.message();
  s = w.all_reduce(x.data(), x.data(), 4, DType::u8);
  EXPECT_NE(s.message().find("cannot reduce dtype u8"), std::string::npos) << s.message();
  s = w.broadcast(x.data(), 4, DType::i32, 3);
  EXPECT_NE(s.message().find("outside this communicator"), std::string::npos) << s.message();
  float buf[6];
  Tensor in{buf, DType::f32, {6}}, out{buf, DType::f32, {4}};
  s = w.all_gather(in, out);
  EXPECT_NE(s.message().find("do not fit"), std::string::npos) << s.message();
  Tensor dev{buf, DType::f32, {6}, Device::cuda};
  EXPECT_FALSE(w.all_reduce(dev).ok());
  EXPECT_EQ(w.collective_seq(), before);  // rejected ops take no sequence number
}

TEST(WorldOfOne, SequenceNumbersAndHistory) {
  MpiCommunicator& w = world();
  uint64_t s0 = w.collective_seq();
  ASSERT_TRUE(w.barrier().ok());
  float v = 1;
  ASSERT_TRUE(w.broadcast(&v, 1, DType::f32, 0).ok());
  EXPECT_EQ(w.collective_seq(), s0 + 2);
  std::vector<CollectiveRecord> r = w.recent_ops();
  ASSERT_GE(r.size(), 2u);
  EXPECT_EQ(r.back().kind, CollectiveKind::broadcast);
  EXPECT_EQ(r.back().seq, s0 + 2);
  EXPECT_EQ(r.back().bytes, 4u);
  EXPECT_EQ(r.back().state, OpState::done);
}

TEST(WorldOfOne, GridOfOneAndBadShape) {
  MpiCommunicator& w = world();
  Result<Grid> g = Grid::create(w, {1, 1, 1});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->tp().size(), 1);
  EXPECT_EQ(g->dp().name(), "world/dp");
  Result<Grid> bad = Grid::create(w, {2, 1, 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dp=1 pp=1 tp=1"), std::string::npos);
}
