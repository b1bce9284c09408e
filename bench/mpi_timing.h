// Timing helpers shared by the MPI benchmarks: the median of samples, and one op's seconds on the
// slowest rank (barrier before, max-reduce after).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace tessera::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double time_once(const std::function<void()>& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  op();
  double dt = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

}  // namespace tessera::bench
