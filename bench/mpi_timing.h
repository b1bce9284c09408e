// Timing helpers shared by the MPI benchmarks: timing.h's, and one op's seconds on the slowest rank
// (barrier before, max-reduce after).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "timing.h"

namespace tessera::bench {

inline double time_once(const std::function<void()>& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  op();
  double dt = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

}  // namespace tessera::bench
