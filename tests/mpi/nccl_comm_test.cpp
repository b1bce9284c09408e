// The NCCL communicator (comm/nccl/) against MPI on the same data: every op at the job's size, on
// buffers in GPU memory (the CUDA backend's). Needs the CUDA and NCCL plugins and one GPU per rank;
// without them every test reports itself skipped. On one GPU shared by several ranks, creating it must
// fail naming the shared GPU and the way out.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "comm/nccl_plugin.h"
#include "mpi_test_world.h"

using namespace tessera;
using tessera::testing::world;

namespace {

std::vector<float> values(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank + 1) * (i % 5) - i % 3);
  return v;
}

class NcclComm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const CudaPlugin* cuda = load_cuda_plugin(&why);
    if (!cuda) GTEST_SKIP() << why;
    const NcclPlugin* nccl = load_nccl_plugin(&why);
    if (!nccl) GTEST_SKIP() << why;
    // Every rank decides alike: skip unless every rank sees a GPU.
    int gpus = cuda->device_count() > 0 ? 1 : 0;
    ASSERT_TRUE(world().all_reduce(&gpus, &gpus, 1, DType::i32, ReduceOp::min).ok());
    if (gpus == 0) GTEST_SKIP() << "no CUDA device visible on every rank";
    be_.reset(cuda->open(0, world().rank(), &why));
    ASSERT_TRUE(be_) << why;
    auto dup = world().split(0, world().rank(), "nccl");
    ASSERT_TRUE(dup.ok());
    comm_.reset(nccl->create(std::move(dup).value().release(), *be_, &why));
    int shared = why.find("share GPU") != std::string::npos ? 1 : 0;
    ASSERT_TRUE(world().all_reduce(&shared, &shared, 1, DType::i32, ReduceOp::max).ok());
    if (shared) {  // one GPU for several ranks: refused, naming the GPU and the way out
      if (!comm_) {
        EXPECT_NE(why.find("share GPU"), std::string::npos) << why;
        EXPECT_NE(why.find("staged communicator"), std::string::npos) << why;
      }
      GTEST_SKIP() << "ranks share a GPU: NCCL refuses them (the error was checked)";
    }
    ASSERT_TRUE(comm_) << why;
  }
  // n floats in GPU memory, from the host and back.
  Buffer device(const std::vector<float>& host) {
    Buffer b = be_->allocate(host.size() * sizeof(float), MemCategory::communication);
    be_->copy_to_device(b.data(), host.data(), host.size() * sizeof(float));
    return b;
  }
  std::vector<float> host(const Buffer& b) {
    std::vector<float> h(b.bytes() / sizeof(float));
    be_->copy_to_host(h.data(), b.data(), b.bytes());
    return h;
  }
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(NcclComm, ReductionsMatchMpi) {
  Communicator& w = world();
  const int64_t n = 4099;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    std::vector<float> in = values(w.rank(), n), want(n);
    ASSERT_TRUE(w.all_reduce(in.data(), want.data(), n, DType::f32, op).ok());
    Buffer src = device(in), dst = device(std::vector<float>(n)), inplace = device(in);
    ASSERT_TRUE(comm_->all_reduce(src.data(), dst.data(), n, DType::f32, op).ok());
    ASSERT_TRUE(comm_->all_reduce(inplace.data(), inplace.data(), n, DType::f32, op).ok());
    EXPECT_EQ(host(dst), want) << reduce_op_name(op);
    EXPECT_EQ(host(inplace), want) << reduce_op_name(op);
  }
  const int p = w.size();
  std::vector<float> in = values(w.rank(), n * p), want(n);
  ASSERT_TRUE(w.reduce_scatter(in.data(), want.data(), n, DType::f32).ok());
  Buffer src = device(in), dst = device(std::vector<float>(n));
  ASSERT_TRUE(comm_->reduce_scatter(src.data(), dst.data(), n, DType::f32).ok());
  EXPECT_EQ(host(dst), want);
}

TEST_F(NcclComm, DataMovementMatchesMpi) {
  Communicator& w = world();
  const int p = w.size(), r = w.rank();
  const int64_t n = 37;
  std::vector<float> in = values(r, n), want(n * p);
  ASSERT_TRUE(w.all_gather(in.data(), want.data(), n, DType::f32).ok());
  Buffer src = device(in), dst = device(std::vector<float>(n * p));
  ASSERT_TRUE(comm_->all_gather(src.data(), dst.data(), n, DType::f32).ok());
  EXPECT_EQ(host(dst), want);

  std::vector<float> a2a = values(r, n * p), a2a_want(n * p);
  ASSERT_TRUE(w.all_to_all(a2a.data(), a2a_want.data(), n, DType::f32).ok());
  Buffer a2a_src = device(a2a), a2a_dst = device(std::vector<float>(n * p));
  ASSERT_TRUE(comm_->all_to_all(a2a_src.data(), a2a_dst.data(), n, DType::f32).ok());
  EXPECT_EQ(host(a2a_dst), a2a_want);

  std::vector<int64_t> sc(p), rc(p);
  for (int s = 0; s < p; ++s) sc[s] = s + r + 1, rc[s] = r + s + 1;
  const int64_t total_in = std::accumulate(sc.begin(), sc.end(), int64_t{0});
  const int64_t total_out = std::accumulate(rc.begin(), rc.end(), int64_t{0});
  std::vector<float> v = values(r, total_in), v_want(total_out);
  ASSERT_TRUE(w.all_to_allv(v.data(), sc.data(), v_want.data(), rc.data(), DType::f32).ok());
  Buffer v_src = device(v), v_dst = device(std::vector<float>(total_out));
  ASSERT_TRUE(comm_->all_to_allv(v_src.data(), sc.data(), v_dst.data(), rc.data(), DType::f32).ok());
  EXPECT_EQ(host(v_dst), v_want);

  Buffer b = device(values(r, n));
  ASSERT_TRUE(comm_->broadcast(b.data(), n, DType::f32, p - 1).ok());
  EXPECT_EQ(host(b), values(p - 1, n));
  EXPECT_TRUE(comm_->barrier().ok());
}

TEST_F(NcclComm, AsyncOpsFinish) {
  Communicator& w = world();
  const int64_t n = 1 << 16;
  std::vector<float> in = values(w.rank(), n), want(n);
  ASSERT_TRUE(w.all_reduce(in.data(), want.data(), n, DType::f32).ok());
  Buffer a = device(in);
  Work work = comm_->all_reduce_async(a.data(), a.data(), n, DType::f32);
  ASSERT_TRUE(work.wait().ok());
  EXPECT_EQ(host(a), want);
  if (w.size() > 1) {  // a ring of sends
    const int r = w.rank(), p = w.size();
    Buffer out = device(values(r, 100)), got = device(std::vector<float>(100));
    Work rx = comm_->recv_async(got.data(), 100, DType::f32, (r + p - 1) % p);
    Work tx = comm_->send_async(out.data(), 100, DType::f32, (r + 1) % p);
    ASSERT_TRUE(tx.wait().ok());
    ASSERT_TRUE(rx.wait().ok());
    EXPECT_EQ(host(got), values((r + p - 1) % p, 100));
  }
}

}  // namespace
