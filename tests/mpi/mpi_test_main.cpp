// main() for multi-rank GoogleTest programs: MPI up, every rank runs every test, and the job's
// exit code is non-zero if any rank failed (so mpirun reports failure whichever rank saw it).
#include <gtest/gtest.h>
#include <mpi.h>

#include "comm/mpi/mpi_runtime.h"
#include "mpi_test_world.h"

namespace tessera::testing {
MpiCommunicator* g_world = nullptr;
}

int main(int argc, char** argv) {
  tessera::MpiRuntime mpi;
  ::testing::InitGoogleTest(&argc, argv);
  auto world = tessera::MpiCommunicator::create_world();
  if (!world.ok()) tessera::abort_job(world.status());
  tessera::testing::g_world = world->get();
  int rc = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  tessera::testing::g_world = nullptr;
  world->reset();
  return rc;
}
