// The MFU reference: the set-up sgemm peak, measured again when a step beats it.
#include "train/matmul_peak.h"

#include <algorithm>
#include <utility>

namespace tessera {

MatmulPeak::MatmulPeak(std::function<double()> measure_gflops, int max_remeasures)
    : measure_(std::move(measure_gflops)), gflops_(measure_()), max_remeasures_(max_remeasures) {}

double MatmulPeak::mfu(double achieved_gflops) {
  while (achieved_gflops > gflops_ && remeasures_ < max_remeasures_) {
    gflops_ = std::max(gflops_, measure_());
    ++remeasures_;
  }
  return gflops_ > 0 ? achieved_gflops / gflops_ : 0;
}

}  // namespace tessera
