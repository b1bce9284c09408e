// Collective correctness at 2 and 4 ranks for f32, bf16, f16 (and i32), odd sizes included.
// Values are small integers so sums are exact in every dtype and results compare exactly.
#include <gtest/gtest.h>

#include <vector>

#include "mpi_test_world.h"

using namespace tessera;
using tessera::testing::world;

namespace {

float value(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 7) - 3 * (i % 3)); }

std::vector<uint16_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = dt == DType::bf16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  return out;
}

// A buffer of `dt` holding `v` (f32 values), readable back as floats.
struct Buf {
  DType dt;
  std::vector<float> f;
  std::vector<uint16_t> h;
  Buf(DType d, const std::vector<float>& v) : dt(d), f(v) {
    if (dt != DType::f32) h = encode(v, dt);
  }
  void* data() { return dt == DType::f32 ? static_cast<void*>(f.data()) : static_cast<void*>(h.data()); }
  float at(size_t i) const {
    if (dt == DType::f32) return f[i];
    return dt == DType::bf16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  }
  // Rounded to the dtype, as the result of a reduction in that dtype would be.
  static float round(DType dt, float x) {
    return dt == DType::f32 ? x : dt == DType::bf16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
  }
};

std::vector<float> fill(int rank, int64_t n, int64_t offset = 0) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i + offset);
  return v;
}

class Collectives : public ::testing::TestWithParam<DType> {};

const int64_t kSizes[] = {1, 7, 1000, 4099};

}  // namespace

TEST_P(Collectives, AllReduceSumAvgMaxMin) {
  DType dt = GetParam();
  Communicator& w = world();
  int n = w.size();
  for (int64_t count : kSizes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      Buf in(dt, fill(w.rank(), count)), out(dt, std::vector<float>(count, 0.f));
      ASSERT_TRUE(w.all_reduce(in.data(), out.data(), count, dt, op).ok());
      for (int64_t i = 0; i < count; ++i) {
        float s = 0, mx = value(0, i), mn = value(0, i);
        for (int r = 0; r < n; ++r) {
          s += value(r, i);
          mx = std::max(mx, value(r, i));
          mn = std::min(mn, value(r, i));
        }
        float want = op == ReduceOp::sum ? s : op == ReduceOp::avg ? Buf::round(dt, s) / n : op == ReduceOp::max ? mx : mn;
        ASSERT_EQ(out.at(i), Buf::round(dt, want))
            << dtype_name(dt) << " " << reduce_op_name(op) << " count " << count << " i " << i;
      }
    }
  }
}

TEST_P(Collectives, AllReduceInPlaceAndAsync) {
  DType dt = GetParam();
  Communicator& w = world();
  Buf a(dt, fill(w.rank(), 4099)), b(dt, fill(w.rank(), 1001, 5));
  // Two ops in flight at once: poll the first with test(), then wait for the second and the first.
  Work wa = w.all_reduce_async(a.data(), a.data(), 4099, dt);
  Work wb = w.all_reduce_async(b.data(), b.data(), 1001, dt, ReduceOp::max);
  while (!wa.test()) {
  }
  ASSERT_TRUE(wb.wait().ok());
  ASSERT_TRUE(wa.wait().ok());
  for (int64_t i = 0; i < 4099; ++i) {
    float s = 0;
    for (int r = 0; r < w.size(); ++r) s += value(r, i);
    ASSERT_EQ(a.at(i), Buf::round(dt, s)) << i;
  }
  for (int64_t i = 0; i < 1001; ++i) ASSERT_EQ(b.at(i), Buf::round(dt, value(w.size() - 1, i + 5)));
}

TEST_P(Collectives, ReduceScatter) {
  DType dt = GetParam();
  Communicator& w = world();
  int n = w.size();
  for (int64_t count : kSizes) {
    Buf in(dt, fill(w.rank(), count * n)), out(dt, std::vector<float>(count, 0.f));
    ASSERT_TRUE(w.reduce_scatter(in.data(), out.data(), count, dt).ok());
    for (int64_t i = 0; i < count; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += value(r, w.rank() * count + i);
      ASSERT_EQ(out.at(i), Buf::round(dt, s)) << "count " << count << " i " << i;
    }
    Buf out2(dt, std::vector<float>(count, 0.f));
    ASSERT_TRUE(w.reduce_scatter_async(in.data(), out2.data(), count, dt, ReduceOp::avg).wait().ok());
    for (int64_t i = 0; i < count; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += value(r, w.rank() * count + i);
      ASSERT_EQ(out2.at(i), Buf::round(dt, Buf::round(dt, s) / n));
    }
  }
}

TEST_P(Collectives, AllGather) {
  DType dt = GetParam();
  Communicator& w = world();
  int n = w.size();
  for (int64_t count : kSizes) {
    Buf in(dt, fill(w.rank(), count)), out(dt, std::vector<float>(count * n, -99.f));
    ASSERT_TRUE(w.all_gather(in.data(), out.data(), count, dt).ok());
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out.at(r * count + i), Buf::round(dt, value(r, i)));
    Buf out2(dt, std::vector<float>(count * n, -99.f));
    ASSERT_TRUE(w.all_gather_async(in.data(), out2.data(), count, dt).wait().ok());
    for (int64_t i = 0; i < count * n; ++i) ASSERT_EQ(out2.at(i), out.at(i));
  }
}

// Block s of rank r's send buffer holds value(r * n + s, i): rank s must receive it as its block r.
TEST_P(Collectives, AllToAll) {
  DType dt = GetParam();
  Communicator& w = world();
  const int n = w.size(), me = w.rank();
  for (int64_t count : kSizes) {
    std::vector<float> send;
    for (int s = 0; s < n; ++s) {
      const std::vector<float> block = fill(me * n + s, count);
      send.insert(send.end(), block.begin(), block.end());
    }
    Buf in(dt, send), out(dt, std::vector<float>(count * n, -99.f)), out2(dt, std::vector<float>(count * n, -99.f));
    ASSERT_TRUE(w.all_to_all(in.data(), out.data(), count, dt).ok());
    ASSERT_TRUE(w.all_to_all_async(in.data(), out2.data(), count, dt).wait().ok());
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(out.at(r * count + i), Buf::round(dt, value(r * n + me, i))) << "block " << r << " element " << i;
        ASSERT_EQ(out2.at(r * count + i), out.at(r * count + i));
      }
  }
}

// Rank r sends (r + 2 s) % 3 x count elements to rank s (0 for some pairs), element i of that block
// value(r * n + s, i): every rank must receive each sender's block whole, in rank order.
TEST_P(Collectives, AllToAllV) {
  DType dt = GetParam();
  Communicator& w = world();
  const int n = w.size(), me = w.rank();
  for (int64_t count : kSizes) {
    auto elements = [&](int from, int to) { return static_cast<int64_t>((from + 2 * to) % 3) * count; };
    std::vector<int64_t> send_counts(n), recv_counts(n);
    std::vector<float> send;
    for (int s = 0; s < n; ++s) {
      send_counts[s] = elements(me, s);
      recv_counts[s] = elements(s, me);
      const std::vector<float> block = fill(me * n + s, send_counts[s]);
      send.insert(send.end(), block.begin(), block.end());
    }
    int64_t total = 0;
    for (int64_t c : recv_counts) total += c;
    Buf in(dt, send), out(dt, std::vector<float>(total, -99.f)), out2(dt, std::vector<float>(total, -99.f));
    ASSERT_TRUE(w.all_to_allv(in.data(), send_counts.data(), out.data(), recv_counts.data(), dt).ok());
    ASSERT_TRUE(w.all_to_allv_async(in.data(), send_counts.data(), out2.data(), recv_counts.data(), dt).wait().ok());
    int64_t at = 0;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < recv_counts[r]; ++i, ++at) {
        ASSERT_EQ(out.at(at), Buf::round(dt, value(r * n + me, i))) << "from rank " << r << " element " << i;
        ASSERT_EQ(out2.at(at), out.at(at));
      }
  }
  std::vector<int64_t> bad(n, 1);
  bad[0] = -1;
  float x = 0;
  const Status s = w.all_to_allv(&x, bad.data(), &x, bad.data(), DType::f32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("negative element count for rank 0"), std::string::npos) << s.message();
}

TEST_P(Collectives, Broadcast) {
  DType dt = GetParam();
  Communicator& w = world();
  int root = w.size() - 1;
  for (int64_t count : kSizes) {
    Buf b(dt, fill(w.rank(), count));
    ASSERT_TRUE(w.broadcast(b.data(), count, dt, root).ok());
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(b.at(i), Buf::round(dt, value(root, i)));
    Buf c(dt, fill(w.rank(), count, 3));
    ASSERT_TRUE(w.broadcast_async(c.data(), count, dt, 0).wait().ok());
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(c.at(i), Buf::round(dt, value(0, i + 3)));
  }
}

TEST_P(Collectives, SendRecvRing) {
  DType dt = GetParam();
  Communicator& w = world();
  int n = w.size(), next = (w.rank() + 1) % n, prev = (w.rank() + n - 1) % n;
  for (int64_t count : kSizes) {
    Buf out(dt, fill(w.rank(), count)), in(dt, std::vector<float>(count, 0.f));
    Work s = w.send_async(out.data(), count, dt, next, 7);
    ASSERT_TRUE(w.recv(in.data(), count, dt, prev, 7).ok());
    ASSERT_TRUE(s.wait().ok());
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(in.at(i), Buf::round(dt, value(prev, i)));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Collectives, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CollectivesI32, SumAndMax) {
  Communicator& w = world();
  std::vector<int32_t> x(13);
  for (int i = 0; i < 13; ++i) x[i] = (w.rank() + 1) * 1000003 + i;
  std::vector<int32_t> s(13), m(13);
  ASSERT_TRUE(w.all_reduce(x.data(), s.data(), 13, DType::i32).ok());
  ASSERT_TRUE(w.all_reduce(x.data(), m.data(), 13, DType::i32, ReduceOp::max).ok());
  int n = w.size();
  for (int i = 0; i < 13; ++i) {
    EXPECT_EQ(s[i], 1000003 * n * (n + 1) / 2 + n * i);
    EXPECT_EQ(m[i], n * 1000003 + i);
  }
}

TEST(CollectivesTensor, InPlaceAllReduceAndShapeChecks) {
  Communicator& w = world();
  std::vector<float> buf(6, 1.0f + w.rank());
  Tensor t{buf.data(), DType::f32, {2, 3}};
  ASSERT_TRUE(w.all_reduce(t, ReduceOp::avg).ok());
  EXPECT_FLOAT_EQ(buf[5], (w.size() + 1) / 2.0f);
  std::vector<float> full(6 * w.size());
  Tensor g{full.data(), DType::f32, {w.size() * 2, 3}};
  ASSERT_TRUE(w.all_gather(t, g).ok());
  Tensor wrong{full.data(), DType::f32, {5}};
  EXPECT_EQ(w.reduce_scatter(t, wrong).code(), StatusCode::invalid_argument);
}

TEST(CollectivesErrors, TruncatedRecvIsAStatusNamingTheOp) {
  Communicator& w = world();
  std::vector<float> buf(10, 1.f);
  if (w.rank() == 0) {
    ASSERT_TRUE(w.send(buf.data(), 10, DType::f32, 1, 3).ok());
  } else if (w.rank() == 1) {
    Status s = w.recv(buf.data(), 5, DType::f32, 0, 3);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::comm_error);
    EXPECT_NE(s.message().find("recv #"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("from rank 0"), std::string::npos) << s.message();
  }
  ASSERT_TRUE(w.barrier().ok());
}

// A receive nobody sends to is withdrawn (cancel() true, recorded "cancelled"); one whose message
// has arrived is not (false, the data is there), so a caller never loses a message it cancels.
TEST(CancelledRecv, WithdrawsOnlyAnUnmatchedReceive) {
  Communicator& w = world();
  int32_t never = -1;
  Work unmatched = w.recv_async(&never, 1, DType::i32, (w.rank() + 1) % w.size(), 41);
  EXPECT_TRUE(unmatched.cancel());
  EXPECT_EQ(never, -1);
  EXPECT_EQ(w.recent_ops().back().state, OpState::cancelled);
  EXPECT_TRUE(unmatched.wait().ok());  // nothing left in flight: returns at once

  const int next = (w.rank() + 1) % w.size(), prev = (w.rank() + w.size() - 1) % w.size();
  int32_t mine = 100 + w.rank(), got = -1;
  Work recv = w.recv_async(&got, 1, DType::i32, prev, 42);
  ASSERT_TRUE(w.send(&mine, 1, DType::i32, next, 42).ok());
  ASSERT_TRUE(w.barrier().ok());  // every message has been sent; it may or may not have landed yet
  while (!recv.test()) {
  }
  EXPECT_FALSE(recv.cancel());
  EXPECT_EQ(got, 100 + prev);
}

// Work::abandon: a receive is withdrawn; a rendezvous-sized send its peer has not received is handed
// to MPI at once (handed_over, recorded "released") instead of waited for -- and MPI still delivers it when
// the peer does receive later, which is why the caller must keep the buffer alive.
TEST(AbandonedSend, HandsAnUnreceivedSendToMpiAtOnce) {
  Communicator& w = world();
  const bool paired = w.rank() < w.size() / 2 * 2;
  auto pair = w.split(paired ? w.rank() / 2 : -1, w.rank(), "pair");
  ASSERT_TRUE(pair.ok());
  if (paired) {
    Communicator& p = **pair;
    const int64_t n = 1 << 18;  // 1 MiB: far above the eager limits, so the send needs its receiver
    std::vector<float> buf(static_cast<size_t>(n), 0.f);
    int32_t never = -1;
    Work unmatched = p.recv_async(&never, 1, DType::i32, 1 - p.rank(), 44);
    EXPECT_EQ(unmatched.abandon(), Abandoned::withdrawn);
    EXPECT_EQ(p.recent_ops().back().state, OpState::cancelled);
    if (p.rank() == 0) {
      for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i);
      Work send = p.send_async(buf.data(), n, DType::f32, 1, 45);
      const double t0 = steady_seconds();
      EXPECT_EQ(send.abandon(), Abandoned::handed_over);
      EXPECT_LT(steady_seconds() - t0, 0.5);
      EXPECT_EQ(p.recent_ops().back().state, OpState::released);
      EXPECT_TRUE(send.wait().ok());  // nothing left to wait for
      ASSERT_TRUE(p.barrier().ok());
      ASSERT_TRUE(p.barrier().ok());  // the peer has received it from `buf`, still alive
    } else {
      ASSERT_TRUE(p.barrier().ok());  // rank 0 has abandoned its send
      ASSERT_TRUE(p.recv(buf.data(), n, DType::f32, 0, 45).ok());
      EXPECT_EQ(buf[12345], 12345.f);
      EXPECT_EQ(buf[static_cast<size_t>(n - 1)], static_cast<float>(n - 1));
      ASSERT_TRUE(p.barrier().ok());
    }
  }
  ASSERT_TRUE(w.barrier().ok());
}

// Communicator::without: the remaining ranks alone build it (rank 1 takes no part, as a dead or
// hung rank would not) and keep their order; a collective on it involves them only.
TEST(Without, TheRemainingRanksAloneBuildIt) {
  Communicator& w = world();
  if (w.rank() != 1) {
    auto rest = w.without({1}, "rest");
    ASSERT_TRUE(rest.ok()) << rest.status().to_string();
    EXPECT_EQ((*rest)->size(), w.size() - 1);
    EXPECT_EQ((*rest)->rank(), w.rank() > 1 ? w.rank() - 1 : w.rank());
    int32_t mine = w.rank(), sum = -1;
    ASSERT_TRUE((*rest)->all_reduce(&mine, &sum, 1, DType::i32).ok());
    EXPECT_EQ(sum, w.size() * (w.size() - 1) / 2 - 1);  // every world rank but 1
    EXPECT_FALSE(w.without({w.rank()}, "self").ok());   // a rank cannot exclude itself
  }
  ASSERT_TRUE(w.barrier().ok());
}

TEST(Diagnostics, SequenceNumbersMatchAcrossRanks) {
  Communicator& w = world();
  ASSERT_TRUE(w.barrier().ok());
  uint64_t seq = w.collective_seq();
  std::vector<uint64_t> all(w.size());
  ASSERT_TRUE(w.all_gather(&seq, all.data(), 8, DType::u8).ok());
  for (uint64_t s : all) EXPECT_EQ(s, seq);
  std::vector<CollectiveRecord> r = w.recent_ops();
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.back().kind, CollectiveKind::all_gather);
  EXPECT_EQ(r.back().seq, seq + 1);
  EXPECT_EQ(r.back().bytes, 8u * w.size());
}

TEST(WatchBlocking, BlockingOpsThroughTheTimedPath) {
  CommOptions opt;
  opt.watch_blocking = true;
  opt.timeout_s = 30;
  auto c = MpiCommunicator::create_world(opt);
  ASSERT_TRUE(c.ok());
  std::vector<float> x(333, 1.0f);
  ASSERT_TRUE((*c)->all_reduce(x.data(), x.data(), 333, DType::f32).ok());
  EXPECT_EQ(x[332], static_cast<float>(world().size()));
  ASSERT_TRUE((*c)->barrier().ok());
}
