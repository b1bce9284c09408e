// The staged communicator (comm/staged_communicator.h) against the plain MPI communicator on the same
// data: every kind of op, blocking and asynchronous, in place and not, and a split. Its "device" is a
// test backend whose memory holds every byte XOR-ed with a key, so an op that hands device memory to
// MPI without staging it (or copies back the wrong bytes) computes on scrambled numbers and fails.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/staged_communicator.h"
#include "../forwarding_backend.h"
#include "mpi_test_world.h"

using namespace tessera;
using tessera::testing::world;

namespace {

constexpr uint8_t kKey = 0xA5;

// Device memory that is not host memory in disguise: its bytes are the host bytes XOR kKey.
struct OwnsCpuBackend {
  CpuBackend cpu;
};

// Its device memory is what DeviceFloats registers, holding the host bytes XOR kKey; everything
// else is host memory. Ops run on a CpuBackend.
class ScrambledBackend final : private OwnsCpuBackend, public tessera::testing::ForwardingBackend {
 public:
  ScrambledBackend() : ForwardingBackend(cpu) {}
  Device device() const override { return Device::cuda; }
  void copy_to_device(void* d, const void* h, size_t n) override {
    for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(d)[i] = static_cast<const uint8_t*>(h)[i] ^ kKey;
  }
  void copy_to_host(void* h, const void* d, size_t n) override {
    for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(h)[i] = static_cast<const uint8_t*>(d)[i] ^ kKey;
  }
  bool is_device_memory(const void* p) const override {
    const auto* b = static_cast<const uint8_t*>(p);
    for (const auto& [begin, n] : regions_)
      if (b >= begin && b < begin + n) return true;
    return false;
  }
  void add_region(const uint8_t* p, size_t n) { regions_.emplace_back(p, n); }
  void remove_region(const uint8_t* p) { std::erase_if(regions_, [p](const auto& r) { return r.first == p; }); }

 private:
  std::vector<std::pair<const uint8_t*, size_t>> regions_;
};

// A buffer of n floats in the scrambled device memory.
struct DeviceFloats {
  ScrambledBackend& be;
  std::vector<uint8_t> bytes;
  DeviceFloats(ScrambledBackend& b, const std::vector<float>& host) : be(b), bytes(host.size() * sizeof(float)) {
    be.add_region(bytes.data(), bytes.size());
    be.copy_to_device(bytes.data(), host.data(), bytes.size());
  }
  ~DeviceFloats() { be.remove_region(bytes.data()); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* data() { return reinterpret_cast<float*>(bytes.data()); }
  std::vector<float> host() const {
    std::vector<float> h(bytes.size() / sizeof(float));
    be.copy_to_host(h.data(), bytes.data(), bytes.size());
    return h;
  }
};

std::vector<float> values(int rank, int64_t n, int salt = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank + 1) * (i % 5) - (i + salt) % 3);
  return v;
}

class StagedComm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dup = world().split(0, world().rank(), "staged");
    ASSERT_TRUE(dup.ok()) << dup.status().message();
    staged_ = std::make_unique<StagedCommunicator>(std::move(dup).value(), be_);
  }
  ScrambledBackend be_;
  std::unique_ptr<StagedCommunicator> staged_;
};

TEST_F(StagedComm, ReductionsMatchMpi) {
  Communicator& w = world();
  const int64_t n = 1001;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<float> want(n), in = values(w.rank(), n);
    ASSERT_TRUE(w.all_reduce(in.data(), want.data(), n, DType::f32, op).ok());
    DeviceFloats src(be_, in), dst(be_, std::vector<float>(n, -1.f)), inplace(be_, in);
    ASSERT_TRUE(staged_->all_reduce(src.data(), dst.data(), n, DType::f32, op).ok());
    ASSERT_TRUE(staged_->all_reduce(inplace.data(), inplace.data(), n, DType::f32, op).ok());
    EXPECT_EQ(dst.host(), want);
    EXPECT_EQ(inplace.host(), want);
  }
  const int p = w.size();
  std::vector<float> in = values(w.rank(), n * p), want(n);
  ASSERT_TRUE(w.reduce_scatter(in.data(), want.data(), n, DType::f32).ok());
  DeviceFloats src(be_, in), dst(be_, std::vector<float>(n));
  ASSERT_TRUE(staged_->reduce_scatter(src.data(), dst.data(), n, DType::f32).ok());
  EXPECT_EQ(dst.host(), want);
}

TEST_F(StagedComm, DataMovementMatchesMpi) {
  Communicator& w = world();
  const int p = w.size(), r = w.rank();
  const int64_t n = 37;
  {  // all-gather
    std::vector<float> in = values(r, n), want(n * p);
    ASSERT_TRUE(w.all_gather(in.data(), want.data(), n, DType::f32).ok());
    DeviceFloats src(be_, in), dst(be_, std::vector<float>(n * p));
    ASSERT_TRUE(staged_->all_gather(src.data(), dst.data(), n, DType::f32).ok());
    EXPECT_EQ(dst.host(), want);
  }
  {  // all-to-all and all-to-allv (block s of rank r holds s + r + 1 elements)
    std::vector<float> in = values(r, n * p), want(n * p);
    ASSERT_TRUE(w.all_to_all(in.data(), want.data(), n, DType::f32).ok());
    DeviceFloats src(be_, in), dst(be_, std::vector<float>(n * p));
    ASSERT_TRUE(staged_->all_to_all(src.data(), dst.data(), n, DType::f32).ok());
    EXPECT_EQ(dst.host(), want);
    std::vector<int64_t> sc(p), rc(p);
    for (int s = 0; s < p; ++s) sc[s] = s + r + 1, rc[s] = r + s + 1;
    const int64_t total_in = std::accumulate(sc.begin(), sc.end(), int64_t{0});
    const int64_t total_out = std::accumulate(rc.begin(), rc.end(), int64_t{0});
    std::vector<float> vin = values(r, total_in, 1), vwant(total_out);
    ASSERT_TRUE(w.all_to_allv(vin.data(), sc.data(), vwant.data(), rc.data(), DType::f32).ok());
    DeviceFloats vsrc(be_, vin), vdst(be_, std::vector<float>(total_out));
    ASSERT_TRUE(staged_->all_to_allv(vsrc.data(), sc.data(), vdst.data(), rc.data(), DType::f32).ok());
    EXPECT_EQ(vdst.host(), vwant);
  }
  {  // broadcast from the last rank
    DeviceFloats buf(be_, values(r, n, 2));
    ASSERT_TRUE(staged_->broadcast(buf.data(), n, DType::f32, p - 1).ok());
    EXPECT_EQ(buf.host(), values(p - 1, n, 2));
  }
  {  // a ring of sends, asynchronous
    DeviceFloats out(be_, values(r, n, 3)), in(be_, std::vector<float>(n));
    Work rx = staged_->recv_async(in.data(), n, DType::f32, (r + p - 1) % p, 7);
    Work tx = staged_->send_async(out.data(), n, DType::f32, (r + 1) % p, 7);
    ASSERT_TRUE(tx.wait().ok());
    ASSERT_TRUE(rx.wait().ok());
    EXPECT_EQ(in.host(), values((r + p - 1) % p, n, 3));
  }
  EXPECT_TRUE(staged_->barrier().ok());
}

TEST_F(StagedComm, AsyncOpsCopyBackWhenTheyEnd) {
  Communicator& w = world();
  const int64_t n = 4099;
  std::vector<float> in = values(w.rank(), n), want(n);
  ASSERT_TRUE(w.all_reduce(in.data(), want.data(), n, DType::f32).ok());
  DeviceFloats a(be_, in), b(be_, in);
  Work wa = staged_->all_reduce_async(a.data(), a.data(), n, DType::f32);
  Work wb = staged_->all_reduce_async(b.data(), b.data(), n, DType::f32);
  while (!wa.test()) {
  }
  EXPECT_EQ(a.host(), want) << "a finished test() must have copied the result back";
  ASSERT_TRUE(wb.wait().ok());
  EXPECT_EQ(b.host(), want);
}

TEST_F(StagedComm, HostBuffersPassAsTheyAre) {  // a run's control traffic shares the staged world
  Communicator& w = world();
  const int64_t n = 257;
  std::vector<float> in = values(w.rank(), n), want(n), got(n);
  ASSERT_TRUE(w.all_reduce(in.data(), want.data(), n, DType::f32).ok());
  ASSERT_TRUE(staged_->all_reduce(in.data(), got.data(), n, DType::f32).ok());
  EXPECT_EQ(got, want);
  int tag = w.rank() == 0 ? 42 : 0;
  ASSERT_TRUE(staged_->broadcast(&tag, 1, DType::i32, 0).ok());
  EXPECT_EQ(tag, 42);
}

TEST_F(StagedComm, SplitsStayStaged) {
  Communicator& w = world();
  auto half = staged_->split(w.rank() % 2, w.rank(), "staged/half");
  ASSERT_TRUE(half.ok()) << half.status().message();
  Communicator& h = *half.value();
  EXPECT_EQ(h.device(), Device::cuda);
  const int64_t n = 13;
  DeviceFloats buf(be_, values(w.rank(), n));
  ASSERT_TRUE(h.all_reduce(buf.data(), buf.data(), n, DType::f32).ok());
  std::vector<float> want(n, 0.f);
  for (int q = w.rank() % 2; q < w.size(); q += 2) {
    const std::vector<float> v = values(q, n);
    for (int64_t i = 0; i < n; ++i) want[i] += v[i];
  }
  EXPECT_EQ(buf.host(), want);
}

}  // namespace
