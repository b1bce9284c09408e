#include "train/matmul_peak.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "../forwarding_backend.h"

namespace tessera {
namespace {

// Readings handed out in order, the last one repeated.
std::function<double()> readings(std::vector<double> values, int* calls) {
  return [values, calls] { return values[static_cast<size_t>(std::min<int>((*calls)++, static_cast<int>(values.size()) - 1))]; };
}

TEST(MatmulPeak, AStepBelowThePeakDoesNotMeasureAgain) {
  int calls = 0;
  MatmulPeak peak(readings({200}, &calls));
  EXPECT_DOUBLE_EQ(peak.mfu(150), 0.75);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(peak.remeasures(), 0);
}

TEST(MatmulPeak, ALowSetUpReadingIsMeasuredAgainWhenAStepBeatsIt) {
  int calls = 0;
  MatmulPeak peak(readings({100, 300}, &calls));  // set-up caught a busy moment
  EXPECT_DOUBLE_EQ(peak.mfu(150), 0.5);
  EXPECT_DOUBLE_EQ(peak.gflops(), 300);
  EXPECT_EQ(peak.remeasures(), 1);
  EXPECT_DOUBLE_EQ(peak.mfu(240), 0.8);  // later steps use the corrected peak
  EXPECT_EQ(calls, 2);
}

TEST(MatmulPeak, KeepsTheHigherReadingAndStopsAfterTheLimit) {
  int calls = 0;
  MatmulPeak peak(readings({100, 80, 120, 90}, &calls), 3);
  const double mfu = peak.mfu(150);  // never reached: three more readings, then report against the best
  EXPECT_DOUBLE_EQ(peak.gflops(), 120);
  EXPECT_DOUBLE_EQ(mfu, 150.0 / 120);
  EXPECT_EQ(calls, 4);
  peak.mfu(150);
  EXPECT_EQ(calls, 4);  // no more measuring once the limit is spent
}

// Counts the reduced-precision matmuls and the precision they ran at.
class CountingBackend : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void matmul_forward_lowp(ops::MatmulPrecision p, float* out, const float* inp, const float* weight, const float* bias,
                           int64_t N, int64_t C, int64_t OC) override {
    ++lowp_calls;
    last = p;
    inner_.matmul_forward_lowp(p, out, inp, weight, bias, N, C, OC);
  }
  int lowp_calls = 0;
  ops::MatmulPrecision last = ops::MatmulPrecision::fp32;
};

// A bf16 run's MFU is against the matmul its steps run (the backend's bf16 one), an fp32 run's
// against the sgemm: against the sgemm a native-bf16 step read MFU above 100 %.
TEST(MatmulPeak, ABf16RunMeasuresTheBackendsBf16Matmul) {
  CpuBackend cpu;
  CountingBackend backend(cpu);
  EXPECT_GT(peak_measurement(backend, Precision::fp32)(), 0);
  EXPECT_EQ(backend.lowp_calls, 0);
  EXPECT_GT(peak_measurement(backend, Precision::bf16)(), 0);
  EXPECT_GT(backend.lowp_calls, 1);  // a warm-up call and the timed ones
  EXPECT_EQ(backend.last, Precision::bf16);
  EXPECT_TRUE(peak_is_sgemm(backend, Precision::fp32));  // the calibration may reuse only that one
  EXPECT_FALSE(peak_is_sgemm(backend, Precision::bf16));
}

}  // namespace
}  // namespace tessera
