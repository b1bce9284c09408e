// libnbc's MPI_Iallreduce choice as mirrored from Open MPI 4.1.4, and what the communicator pins
// for in-place calls. Pure functions: no MPI job needed.
#include "comm/mpi/libnbc_allreduce.h"

#include <gtest/gtest.h>

using namespace tessera;

TEST(LibnbcAllreduce, DefaultChoiceFollowsNbcIallreduce) {
  using A = NbcAllreduceAlg;
  // Out of place, commutative, p >= 4, >= 64 KiB: Rabenseifner (reduce-scatter + all-gather).
  EXPECT_EQ(libnbc_default_allreduce(4, 16384, 4, true, false), A::rabenseifner);
  EXPECT_EQ(libnbc_default_allreduce(5, 32768, 2, true, false), A::rabenseifner);
  // Each condition alone sends it to the binomial tree.
  EXPECT_EQ(libnbc_default_allreduce(4, 16383, 4, true, false), A::binomial);  // 65532 B < 64 KiB
  EXPECT_EQ(libnbc_default_allreduce(3, 1 << 20, 4, true, false), A::binomial);  // p < 4
  EXPECT_EQ(libnbc_default_allreduce(4, 1 << 20, 4, false, false), A::binomial);  // not commutative
  EXPECT_EQ(libnbc_default_allreduce(4, 1 << 20, 4, true, true), A::binomial);  // in place
  // count < the largest power of two <= p (only with huge elements): the ring.
  EXPECT_EQ(libnbc_default_allreduce(8, 4, 65536, true, false), A::ring);
}

TEST(LibnbcAllreduce, PinsWhereLibnbcWouldTakeTheTree) {
  using A = NbcAllreduceAlg;
  // >= 4 ranks, in place: libnbc's own out-of-place choice.
  EXPECT_EQ(allreduce_pin(4, 16384, 4, true, true), A::rabenseifner);
  EXPECT_EQ(allreduce_pin(4, 32768, 2, true, true), A::rabenseifner);  // bf16 at 64 KiB
  EXPECT_EQ(allreduce_pin(16, 1 << 22, 4, true, true), A::rabenseifner);
  EXPECT_EQ(allreduce_pin(4, 1 << 22, 4, true, false), A::library);  // out of place: libnbc picks it itself
  // 2 and 3 ranks: the ring, in place or not.
  EXPECT_EQ(allreduce_pin(2, 16384, 4, true, true), A::ring);
  EXPECT_EQ(allreduce_pin(2, 1 << 22, 4, true, false), A::ring);
  EXPECT_EQ(allreduce_pin(3, 32768, 2, true, true), A::ring);
  // Under 64 KiB, a non-commutative op, or one rank: libnbc decides (same result as before).
  EXPECT_EQ(allreduce_pin(4, 16383, 4, true, true), A::library);
  EXPECT_EQ(allreduce_pin(4, 32767, 2, true, true), A::library);
  EXPECT_EQ(allreduce_pin(2, 16383, 4, true, true), A::library);
  EXPECT_EQ(allreduce_pin(4, 1 << 22, 4, false, true), A::library);
  EXPECT_EQ(allreduce_pin(2, 1 << 22, 4, false, true), A::library);
  EXPECT_EQ(allreduce_pin(1, 1 << 22, 4, true, true), A::library);
  EXPECT_EQ(nbc_allreduce_alg_name(A::rabenseifner), "rabenseifner");
}
