// The matmul peak that MFU is measured against, corrected when a step beats it.
#pragma once
#include <functional>

#include "backend/backend.h"
#include "model/precision.h"

namespace tessera {

// The peak is one short sgemm measurement at set-up. When it catches a busy moment (another process,
// a virtual machine's host taking the core) it reads low, and every later MFU exceeds 100 %: a step
// cannot beat the practical peak, so such a step measures the peak again (a few times at most, each
// keeping the higher reading) before its MFU is reported.
class MatmulPeak {
 public:
  MatmulPeak(std::function<double()> measure_gflops, int max_remeasures = 3);

  double gflops() const { return gflops_; }
  int remeasures() const { return remeasures_; }
  // The MFU of a step that ran `achieved_gflops` per rank.
  double mfu(double achieved_gflops);

 private:
  std::function<double()> measure_;
  double gflops_;
  int max_remeasures_;
  int remeasures_ = 0;
};

// How a run measures its peak: the f32 sgemm, or on the CPU at train.precision bf16 / fp16 the
// backend's own reduced-precision matmul (a native bf16 kernel runs ~2x the sgemm, so against the
// sgemm a bf16 step read MFU above 100 % and set off the busy-moment re-measurements every step).
std::function<double()> peak_measurement(Backend& backend, Precision precision);
// Whether that measurement is the f32 sgemm's (which the step-time calibration can then reuse).
bool peak_is_sgemm(const Backend& backend, Precision precision);

}  // namespace tessera
