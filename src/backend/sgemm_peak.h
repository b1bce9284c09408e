// The practical matmul peak of this machine with the current OpenMP thread count: the reference that
// MFU is measured against (the trainer's progress line, the step benchmark).
#pragma once
#include <cstdint>
#include <functional>

#include "backend/backend.h"

namespace tessera::ops {

// When to stop timing: a core that was idle runs its first tens of milliseconds slower (its clock
// rising, a virtual CPU being scheduled back), so a fixed count of calls right at start-up can see
// only the slow ones (measured: 8 calls at 170-185 GFLOP/s, then 300-360). Timings go on until
// `settled_after` calls in a row fail to beat the best by more than 3 %.
class PeakSearch {
 public:
  explicit PeakSearch(int settled_after) : settled_after_(settled_after < 1 ? 1 : settled_after) {}
  // One timing's rate; true while more timings are wanted.
  bool add(double rate);
  double best() const { return best_; }

 private:
  int settled_after_;
  int since_gain_ = 0;
  double best_ = 0;
};

// Best GFLOP/s of n x n x n sgemm calls after one warm-up call, timed until the rate settles
// (PeakSearch(reps)) or for 0.5 s at most. Best-of rather than mean, because a single timing is easily
// disturbed by whatever else runs.
double measure_sgemm_peak_gflops(int64_t n = 1024, int reps = 8);

// The same search for any n x n x n matmul: `multiply(a, b, c)` forms c = a b^T on n x n matrices.
double measure_matmul_peak_gflops(int64_t n, int reps, const std::function<void(const float*, const float*, float*)>& multiply);

// The peak of `backend`'s reduced-precision linear layer (matmul_forward_lowp at `p`) by the same
// search: what a run at train.precision bf16 / fp16 multiplies at (MFU, calibration, the benchmark).
double measure_lowp_peak_gflops(Backend& backend, MatmulPrecision p, int64_t n = 1024, int reps = 8);

}  // namespace tessera::ops
