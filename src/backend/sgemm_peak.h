// The practical matmul peak of this machine with the current OpenMP thread count: the reference that
// MFU is measured against (the trainer's progress line, the step benchmark).
#pragma once
#include <cstdint>

namespace tessera::ops {

// Best GFLOP/s of `reps` n x n x n sgemm calls after one warm-up call. Best-of rather than mean,
// because a single timing is easily disturbed by whatever else runs.
double measure_sgemm_peak_gflops(int64_t n = 1024, int reps = 8);

}  // namespace tessera::ops
