// Async all-reduce around libnbc's 64 KiB switch, bit for bit against libnbc's summation orders
// simulated here: the binomial tree (every in-place call before the communicator pinned an
// algorithm), Rabenseifner (pinned in place at >= 4 ranks; what the same call out of place runs)
// and, at 2 ranks, the ring (one sum of two: the tree's bits). Tree and Rabenseifner agree at 2, 4,
// 6, 7, 8 ranks; at 5 they differ, so the np5 run shows that Open MPI really ran the pinned
// algorithm. Also the pin itself: the op log names it, the variable is reset after the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_world.h"

using namespace tessera;
using tessera::testing::world;

namespace {

// Values of many magnitudes, so a different summation order would change the last bits.
float noisy(int rank, int64_t i) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
  return (static_cast<float>(h % 100003) / 100003.0f - 0.3f) * std::ldexp(1.0f, static_cast<int>(h % 23) - 11);
}

// Raw element bits of `dt` (f32: 4 bytes, bf16: 2) for rank `rank`.
std::vector<uint8_t> inputs(DType dt, int rank, int64_t n) {
  std::vector<uint8_t> b(static_cast<size_t>(n) * dtype_size(dt));
  for (int64_t i = 0; i < n; ++i) {
    const float x = noisy(rank, i);
    if (dt == DType::f32) {
      std::memcpy(b.data() + i * 4, &x, 4);
    } else {
      const uint16_t h = f32_to_bf16(x);
      std::memcpy(b.data() + i * 2, &h, 2);
    }
  }
  return b;
}

// a (op) b for one element as the communicator's reduction does it (bf16: through f32, rounded back).
void add_into(DType dt, uint8_t* acc, const uint8_t* x) {
  if (dt == DType::f32) {
    float a, b;
    std::memcpy(&a, acc, 4);
    std::memcpy(&b, x, 4);
    a = a + b;
    std::memcpy(acc, &a, 4);
  } else {
    uint16_t a, b;
    std::memcpy(&a, acc, 2);
    std::memcpy(&b, x, 2);
    a = f32_to_bf16(bf16_to_f32(a) + bf16_to_f32(b));
    std::memcpy(acc, &a, 2);
  }
}

// Pairwise sums in libnbc's binomial pattern: in round r every index that is a multiple of 2^r
// adds the partial sum of index + 2^(r-1). (IEEE addition is commutative: only the grouping counts.)
std::vector<uint8_t> tree_sum(DType dt, std::vector<std::vector<uint8_t>> acc, int64_t n) {
  const size_t es = dtype_size(dt);
  const int m = static_cast<int>(acc.size());
  for (int step = 1; step < m; step *= 2)
    for (int v = 0; v + step < m; v += 2 * step)
      for (int64_t i = 0; i < n; ++i) add_into(dt, acc[v].data() + i * es, acc[v + step].data() + i * es);
  return acc[0];
}

// libnbc's binomial tree (allred_sched_diss, root 0) over the ranks in order.
std::vector<uint8_t> binomial_sum(DType dt, int p, int64_t n) {
  std::vector<std::vector<uint8_t>> acc;
  for (int r = 0; r < p; ++r) acc.push_back(inputs(dt, r, n));
  return tree_sum(dt, std::move(acc), n);
}

// libnbc's Rabenseifner (allred_sched_redscat_allgather): with pof2 the largest power of two <= p and
// rem = p - pof2, ranks 2i and 2i+1 (i < rem) first combine; then recursive halving with distance
// doubling over the pof2 survivors groups every element like the binomial tree over them.
std::vector<uint8_t> rabenseifner_sum(DType dt, int p, int64_t n) {
  int pof2 = 1;
  while (pof2 * 2 <= p) pof2 *= 2;
  const int rem = p - pof2;
  std::vector<std::vector<uint8_t>> acc;
  for (int r = 0; r < p; ++r) {
    acc.push_back(inputs(dt, r, n));
    if (r < 2 * rem && r % 2 == 1) {
      std::vector<uint8_t> pair = inputs(dt, r - 1, n);
      for (int64_t i = 0; i < n; ++i)
        add_into(dt, pair.data() + i * dtype_size(dt), acc.back().data() + i * dtype_size(dt));
      acc.pop_back();
      acc.back() = pair;
    }
  }
  return tree_sum(dt, std::move(acc), n);
}

// Index of the first element whose bytes differ, -1 when equal (gtest would print whole buffers).
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType dt) {
  if (a.size() != b.size()) return 0;
  const size_t es = dtype_size(dt);
  for (size_t i = 0; i < a.size(); i += es)
    if (std::memcmp(a.data() + i, b.data() + i, es) != 0) return static_cast<int64_t>(i / es);
  return -1;
}

struct Case {
  DType dt;
  int64_t count;
};

// f32 and bf16 one element under, at and over 64 KiB.
const Case kCases[] = {{DType::f32, 16383}, {DType::f32, 16384}, {DType::f32, 16385},
                       {DType::bf16, 32767}, {DType::bf16, 32768}, {DType::bf16, 32769}};

}  // namespace

TEST(InPlaceAllReduce, BitsOfTheAlgorithmOutOfPlaceWouldRun) {
  MpiCommunicator& w = world();
  const int p = w.size();
  for (const Case& c : kCases) {
    const bool big = static_cast<size_t>(c.count) * dtype_size(c.dt) >= 65536;
    const std::vector<uint8_t> before = binomial_sum(c.dt, p, c.count);
    // At 3 ranks the ring's order differs by segment (not simulated): in place == out of place only.
    const bool simulated = p != 3 || !big;
    const std::vector<uint8_t> want = p >= 4 && big ? rabenseifner_sum(c.dt, p, c.count) : before;
    std::vector<uint8_t> buf = inputs(c.dt, w.rank(), c.count);
    ASSERT_TRUE(w.all_reduce_async(buf.data(), buf.data(), c.count, c.dt).wait().ok());
    if (simulated) {
      ASSERT_EQ(first_difference(buf, want, c.dt), -1) << dtype_name(c.dt) << " count " << c.count << " at " << p
                                                       << " ranks: not the bits of the algorithm pinned";
    }
    // Out of place: the same bits.
    std::vector<uint8_t> in = inputs(c.dt, w.rank(), c.count), out(in.size());
    ASSERT_TRUE(w.all_reduce_async(in.data(), out.data(), c.count, c.dt).wait().ok());
    ASSERT_EQ(first_difference(out, buf, c.dt), -1) << dtype_name(c.dt) << " count " << c.count << " out of place";
    // Where the pin changed nothing numerically (2, 4, 6, 7, 8 ranks), the result is the old one.
    if (p != 5 && p != 3) {
      ASSERT_EQ(first_difference(buf, before, c.dt), -1) << dtype_name(c.dt) << " count " << c.count;
    }
  }
}

TEST(InPlaceAllReduce, PinsWhereLibnbcWouldTakeTheTree) {
  MpiCommunicator& w = world();
  const LibnbcAllreduceKnob& knob = w.allreduce_knob();
  ASSERT_TRUE(knob.usable()) << "under Open MPI the knob must work: " << knob.why_not();
  for (const Case& c : kCases) {
    std::vector<uint8_t> buf = inputs(c.dt, w.rank(), c.count);
    ASSERT_TRUE(w.all_reduce_async(buf.data(), buf.data(), c.count, c.dt, ReduceOp::avg).wait().ok());
    const CollectiveRecord rec = w.recent_ops().back();
    ASSERT_EQ(rec.kind, CollectiveKind::all_reduce);
    const bool big = static_cast<size_t>(c.count) * dtype_size(c.dt) >= 65536;
    const std::string want = !big ? "" : w.size() >= 4 ? "rabenseifner" : "ring";
    EXPECT_EQ(std::string(rec.algorithm), want) << dtype_name(c.dt) << " count " << c.count;
    EXPECT_EQ(knob.current(), 0) << "the variable must be back to libnbc's default after the call";
    // Out of place: pinned at 2-3 ranks only (libnbc picks Rabenseifner itself at >= 4). Blocking
    // calls are left to Open MPI.
    std::vector<uint8_t> out(buf.size());
    ASSERT_TRUE(w.all_reduce_async(buf.data(), out.data(), c.count, c.dt).wait().ok());
    EXPECT_EQ(std::string(w.recent_ops().back().algorithm), big && w.size() < 4 ? "ring" : "");
    ASSERT_TRUE(w.all_reduce(buf.data(), buf.data(), c.count, c.dt).ok());
    EXPECT_TRUE(w.recent_ops().back().algorithm.empty());
  }
  // A sub-communicator shares the knob: its calls are pinned by its own size.
  auto sub = w.split(w.rank() % 2, w.rank(), "halves");
  ASSERT_TRUE(sub.ok());
  std::vector<uint8_t> buf = inputs(DType::f32, w.rank(), 1 << 16);
  ASSERT_TRUE((*sub)->all_reduce_async(buf.data(), buf.data(), 1 << 16, DType::f32).wait().ok());
  const int p = (*sub)->size();
  EXPECT_EQ(std::string((*sub)->recent_ops().back().algorithm), p >= 4 ? "rabenseifner" : p >= 2 ? "ring" : "");
}

// Run by mpi_comm_np4_user_algorithm with OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 (a user's
// --mca ... 1): the communicator must leave that choice alone. Skipped when the variable is unset.
TEST(InPlaceAllReduce, UserSettingWins) {
  const char* env = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  if (env == nullptr || std::string(env) == "0") GTEST_SKIP() << "needs OMPI_MCA_coll_libnbc_iallreduce_algorithm set";
  MpiCommunicator& w = world();
  const LibnbcAllreduceKnob& knob = w.allreduce_knob();
  EXPECT_FALSE(knob.usable());
  EXPECT_NE(knob.why_not().find("by the user"), std::string::npos) << knob.why_not();
  std::vector<uint8_t> buf = inputs(DType::f32, w.rank(), 1 << 16);
  ASSERT_TRUE(w.all_reduce_async(buf.data(), buf.data(), 1 << 16, DType::f32).wait().ok());
  EXPECT_TRUE(w.recent_ops().back().algorithm.empty());
}
