// Learning-rate schedule: warmup boundaries, decay end points, constant, short runs.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/lr_schedule.h"

namespace tessera {
namespace {

LrScheduleConfig cfg(LrSchedule s, float lr = 1e-3f, float min_lr = 1e-4f, int64_t warmup = 10) {
  LrScheduleConfig o;
  o.lr = lr;
  o.min_lr = min_lr;
  o.warmup_steps = warmup;
  o.schedule = s;
  return o;
}

TEST(LrSchedule, WarmupIsLinearFromFirstStep) {
  auto o = cfg(LrSchedule::cosine);
  EXPECT_FLOAT_EQ(lr_at(0, o, 100), 1e-4f);     // lr * 1/10
  EXPECT_FLOAT_EQ(lr_at(4, o, 100), 5e-4f);     // lr * 5/10
  EXPECT_FLOAT_EQ(lr_at(9, o, 100), 1e-3f);     // last warmup step reaches lr
  EXPECT_FLOAT_EQ(lr_at(10, o, 100), 1e-3f);    // decay starts at lr
}

TEST(LrSchedule, CosineEndsAtMinLrAndPassesMidpoint) {
  auto o = cfg(LrSchedule::cosine);
  EXPECT_FLOAT_EQ(lr_at(99, o, 100), 1e-4f);
  // decay over steps 10..99 (89 intervals); halfway is the mean of lr and min_lr
  const int64_t total = 10 + 1 + 2 * 40;  // decay_steps = 80, midpoint step 50
  EXPECT_NEAR(lr_at(50, o, total), 5.5e-4f, 1e-9);
  EXPECT_FLOAT_EQ(lr_at(500, o, 100), 1e-4f);  // beyond the end it stays at min_lr
  for (int64_t s = 11; s < 100; ++s) EXPECT_LT(lr_at(s, o, 100), lr_at(s - 1, o, 100)) << s;
}

TEST(LrSchedule, LinearDecay) {
  auto o = cfg(LrSchedule::linear, 1.0f, 0.0f, 0);
  EXPECT_FLOAT_EQ(lr_at(0, o, 11), 1.0f);
  EXPECT_FLOAT_EQ(lr_at(5, o, 11), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(10, o, 11), 0.0f);
  EXPECT_FLOAT_EQ(lr_at(3, o, 11), 0.7f);
}

TEST(LrSchedule, ConstantAfterWarmup) {
  auto o = cfg(LrSchedule::constant, 2e-3f, 0, 4);
  EXPECT_FLOAT_EQ(lr_at(0, o, 50), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(3, o, 50), 2e-3f);
  EXPECT_FLOAT_EQ(lr_at(49, o, 50), 2e-3f);
}

TEST(LrSchedule, WarmupLongerThanRun) {
  auto o = cfg(LrSchedule::cosine, 1.0f, 0.1f, 10);
  EXPECT_FLOAT_EQ(lr_at(4, o, 5), 0.5f);  // still warming up at the last step
  auto z = cfg(LrSchedule::cosine, 1.0f, 0.1f, 0);
  EXPECT_FLOAT_EQ(lr_at(0, z, 1), 1.0f);  // single-step run: no decay possible
}

}  // namespace
}  // namespace tessera
