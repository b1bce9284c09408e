// What the step-time tests share (step_time_model_test.cpp, op_costs_test.cpp): a small run config,
// compute-only hardware, and predict_step_time that fails the test on an error.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/run_config.h"
#include "plan/hardware.h"
#include "plan/step_time_model.h"

namespace tessera::step_time_test {

inline const std::string kToml =
    "[model]\npreset = \"tiny\"\nn_layer = 4\nd_model = 128\nd_ff = 512\n[data]\ndir = \"data/x\"\nseq_len = 64\n"
    "[train]\nmicro_batch = 4\n[parallel]\ndp = 1\n";

inline RunConfig config(const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(kToml, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

// Compute-only hardware: 1 TFLOP/s at every shape, free memory traffic and ops, a 1 GB/s link.
inline HardwareSpec ideal() {
  HardwareSpec h;
  h.peak_flops_fp32 = 1e12;
  h.attention_efficiency = 1;
  h.memory_bandwidth = 1e30;
  h.memory_bytes = 1e12;
  h.devices_per_node = 8;
  h.intra = {0, 1e9};
  h.inter = {0, 1e8};
  return h;
}

// ideal() as a CPU node of `cores` cores whose rates were measured with one thread per rank.
inline HardwareSpec cpu_node(int cores) {
  HardwareSpec h = ideal();
  h.cores_per_node = cores;
  h.threads_per_device = 1;
  return h;
}

inline StepTimePrediction predict(const RunConfig& cfg, int world, const HardwareSpec& hw) {
  auto r = predict_step_time(cfg, world, hw);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : StepTimePrediction{};
}

}  // namespace tessera::step_time_test
