// The MFU reference: the set-up matmul peak (at the run's precision), measured again when a step beats it.
#include "train/matmul_peak.h"

#include <algorithm>
#include <utility>

#include "backend/sgemm_peak.h"

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

bool peak_is_sgemm(const Backend& backend, Precision precision) {
  return precision == Precision::fp32 || backend.device() != Device::cpu;
}

std::function<double()> peak_measurement(Backend& backend, Precision precision) {
  if (peak_is_sgemm(backend, precision)) return [] { return ops::measure_sgemm_peak_gflops(); };
  return [&backend, precision] { return ops::measure_lowp_peak_gflops(backend, precision); };
}

}  // namespace tessera
