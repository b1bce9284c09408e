// Hardware descriptions (plan/hardware.h): the shipped files parse with their published numbers, the
// TOML form round-trips, and mistakes (unknown keys, missing sections, bad values) name the key.
#include <gtest/gtest.h>

#include <filesystem>

#include "plan/hardware.h"

namespace tessera {
namespace {

const std::string kDir = std::string(TESSERA_SOURCE_DIR) + "/configs/hardware/";

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(Hardware, ShippedFilesParse) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    if (e.path().extension() != ".toml") continue;
    auto h = load_hardware(e.path().string());
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    EXPECT_FALSE(h->name.empty()) << e.path();
    EXPECT_FALSE(h->source.empty()) << e.path();
    EXPECT_GT(h->peak_flops_fp32, 0);
    EXPECT_GT(h->memory_bandwidth, 0);
    ++files;
  }
  EXPECT_GE(files, 3);
  auto a100 = load_hardware(kDir + "a100-80gb-8x.toml");
  ASSERT_TRUE(a100.ok());
  EXPECT_DOUBLE_EQ(a100->peak_flops("bf16"), 312e12);
  EXPECT_DOUBLE_EQ(a100->peak_flops("fp32"), 19.5e12);
  EXPECT_EQ(a100->devices_per_node, 8);
  EXPECT_LT(a100->inter.bandwidth, a100->intra.bandwidth);
}

TEST(Hardware, RoundTripsThroughToml) {
  HardwareSpec h;
  h.name = "x";
  h.source = "a \"quoted\" source";
  h.peak_flops_fp32 = 1.5e11;
  h.gemm_efficiency = {{32, 0.25}, {256, 0.8}};
  h.attention_efficiency = 0.3;
  h.attention_precision = "fp32";
  h.peak_flops_bf16 = 3e11;
  h.memory_bytes = 8.0 * 1073741824.0;
  h.memory_bandwidth = 2e10;
  h.op_overhead_s = 2e-6;
  h.refault_bandwidth = 3e9;
  h.optimizer_bandwidth = 1.5e10;
  h.devices_per_node = 2;
  h.cores_per_node = 4;
  h.threads_per_device = 2;
  h.node_stream_bandwidth = 2.5e10;
  h.intra = {1e-6, 5e9};
  h.inter = {1e-5, 1e9};
  h.overlap_efficiency = 0.5;
  h.step_overhead_s = 1e-3;
  h.compute_scale = 1.25;
  h.matmul_scale = 1.1;
  h.attention_scale = 1.4;
  h.memory_op_scale = 1.7;
  h.measured = {{2, {2e-6, 4e9}}};
  auto back = parse_hardware(hardware_to_toml(h));
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << hardware_to_toml(h);
  EXPECT_EQ(back->name, h.name);
  EXPECT_EQ(back->source, h.source);
  EXPECT_NEAR(back->peak_flops_fp32, h.peak_flops_fp32, 1e5);
  EXPECT_NEAR(back->peak_flops_bf16, h.peak_flops_bf16, 1e5);
  EXPECT_EQ(back->attention_precision, "fp32");
  ASSERT_EQ(back->gemm_efficiency.size(), 2u);
  EXPECT_EQ(back->gemm_efficiency[1].size, 256);
  EXPECT_NEAR(back->gemm_efficiency[1].efficiency, 0.8, 1e-9);
  EXPECT_NEAR(back->memory_bytes, h.memory_bytes, 1e3);
  EXPECT_NEAR(back->intra.latency_s, 1e-6, 1e-12);
  EXPECT_NEAR(back->inter.bandwidth, 1e9, 1);
  EXPECT_NEAR(back->overlap_efficiency, 0.5, 1e-9);
  EXPECT_NEAR(back->step_overhead_s, 1e-3, 1e-12);
  EXPECT_NEAR(back->compute_scale, 1.25, 1e-9);
  EXPECT_NEAR(back->matmul_scale, 1.1, 1e-9);
  EXPECT_NEAR(back->attention_scale, 1.4, 1e-9);
  EXPECT_NEAR(back->memory_op_scale, 1.7, 1e-9);
  EXPECT_NEAR(back->refault_bandwidth, 3e9, 1e3);
  EXPECT_NEAR(back->optimizer_bandwidth, 1.5e10, 1e4);
  EXPECT_EQ(back->cores_per_node, 4);
  EXPECT_EQ(back->threads_per_device, 2);
  EXPECT_NEAR(back->node_stream_bandwidth, 2.5e10, 1e4);
  ASSERT_EQ(back->measured.size(), 1u);
  EXPECT_EQ(back->measured[0].ranks, 2);
  EXPECT_NEAR(back->collective_link(2, false).bandwidth, 4e9, 1);
  EXPECT_NEAR(back->collective_link(2, true).bandwidth, 1e9, 1);  // across nodes: the network
}

TEST(Hardware, ErrorsNameTheKey) {
  const std::string ok =
      "[device]\npeak_tflops_fp32 = 1\nmemory_gib = 1\nmemory_bandwidth_gbs = 10\n"
      "[node]\ndevices = 2\nlink_bandwidth_gbs = 5\nlink_latency_us = 1\n";
  EXPECT_TRUE(parse_hardware(ok).ok());
  auto unknown = parse_hardware(ok + "[network]\nbandwith_gbs = 3\n", "h.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_HAS(unknown.status().message(), "network.bandwith_gbs");
  EXPECT_HAS(unknown.status().message(), "h.toml");
  auto missing = parse_hardware("[node]\ndevices = 2\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(), "[device]");
  auto negative = parse_hardware(
      "[device]\npeak_tflops_fp32 = -1\nmemory_gib = 1\nmemory_bandwidth_gbs = 10\n"
      "[node]\ndevices = 2\nlink_bandwidth_gbs = 5\nlink_latency_us = 1\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_HAS(negative.status().message(), "device.peak_tflops_fp32");
  auto table = parse_hardware(ok + "gemm_efficiency = 3\n");  // lands in [node]: unknown there
  ASSERT_FALSE(table.ok());
  auto bad_gemm = parse_hardware(
      "[device]\npeak_tflops_fp32 = 1\nmemory_gib = 1\nmemory_bandwidth_gbs = 10\ngemm_efficiency = [[64, 1.5]]\n"
      "[node]\ndevices = 2\nlink_bandwidth_gbs = 5\nlink_latency_us = 1\n");
  ASSERT_FALSE(bad_gemm.ok());
  EXPECT_HAS(bad_gemm.status().message(), "device.gemm_efficiency");
  auto bad_precision = parse_hardware(
      "[device]\npeak_tflops_fp32 = 1\nmemory_gib = 1\nmemory_bandwidth_gbs = 10\nattention_precision = \"f32\"\n"
      "[node]\ndevices = 2\nlink_bandwidth_gbs = 5\nlink_latency_us = 1\n");
  ASSERT_FALSE(bad_precision.ok());
  EXPECT_HAS(bad_precision.status().message(), "device.attention_precision");
  EXPECT_HAS(bad_precision.status().message(), "\"fp32\"");
  auto file = load_hardware("/nonexistent/hw.toml");
  ASSERT_FALSE(file.ok());
  EXPECT_HAS(file.status().message(), "--calibrate");
}

// Tessera's CPU attention computes in f32 under train.precision = "bf16": a CPU file says so, and a
// bf16 run's attention is then timed at the f32 peak while its matmuls take the bf16 one. A GPU file
// leaves it out (flash attention in the matmuls' precision).
TEST(Hardware, AttentionRunsAtItsOwnPrecisionWhereTheFileSaysSo) {
  HardwareSpec h;
  h.peak_flops_fp32 = 1e11;
  h.peak_flops_bf16 = 2e11;
  EXPECT_DOUBLE_EQ(h.attention_peak_flops("bf16"), 2e11);
  EXPECT_DOUBLE_EQ(h.attention_peak_flops("fp32"), 1e11);
  h.attention_precision = "fp32";
  EXPECT_DOUBLE_EQ(h.attention_peak_flops("bf16"), 1e11);
  EXPECT_DOUBLE_EQ(h.peak_flops("bf16"), 2e11);
  auto cpu = load_hardware(kDir + "cpu-2core.toml");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->attention_precision, "fp32");
  auto h100 = load_hardware(kDir + "h100-80gb-8x.toml");
  ASSERT_TRUE(h100.ok());
  EXPECT_TRUE(h100->attention_precision.empty());
}

}  // namespace
}  // namespace tessera
