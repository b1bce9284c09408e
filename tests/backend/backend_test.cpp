// The Backend object: the element-wise ops of the contract against plain loops, the CPU kernels'
// scratch as each backend's own, and the choice of backend by train.device (a device the build lacks
// is an error naming it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

std::vector<float> ramp(int64_t n, float a, float b) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = a * static_cast<float>(i % 97) - b;
  return v;
}

TEST(Backend, CpuElementwiseOpsMatchPlainLoops) {
  CpuBackend be;
  const int64_t n = 10007;  // not a multiple of any vector width
  const std::vector<float> x = ramp(n, 0.37f, 3.f), y = ramp(n, -0.11f, -5.f);

  std::vector<float> out(static_cast<size_t>(n), 1.f);
  be.fill(out.data(), n, -2.5f);
  for (float v : out) ASSERT_EQ(v, -2.5f);

  be.copy(out.data(), x.data(), n);
  EXPECT_EQ(out, x);
  be.copy(out.data() + 1, out.data(), n - 1);  // overlapping ranges move as memmove does
  for (int64_t i = 1; i < n; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], x[static_cast<size_t>(i - 1)]) << i;

  be.add(out.data(), y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], y[static_cast<size_t>(i)] + x[static_cast<size_t>(i)]);
  std::vector<float> acc = y;
  be.add(acc.data(), acc.data(), x.data(), n);  // in place: y += x
  EXPECT_EQ(acc, out);

  acc = y;
  be.axpy(acc.data(), 0.75f, x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    ASSERT_FLOAT_EQ(acc[k], y[k] + 0.75f * x[k]) << i;
  }

  std::vector<float> bad = x;
  EXPECT_EQ(be.count_nonfinite(bad.data(), n), 0);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  bad[500] = std::numeric_limits<float>::infinity();
  bad[static_cast<size_t>(n - 1)] = -std::numeric_limits<float>::infinity();
  bad[7] = std::numeric_limits<float>::max();  // large but finite
  EXPECT_EQ(be.count_nonfinite(bad.data(), n), 3);
}

// RoPE and attention, forward and backward, on one size: every output, concatenated.
std::vector<float> rope_attention(Backend& be, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
  const int64_t C3 = (NH + 2 * NKV) * HS, CO = NH * HS;
  std::vector<float> qkv = ramp(B * T * C3, 0.013f, 0.6f), dout = ramp(B * T * CO, -0.017f, -0.4f);
  std::vector<float> out(static_cast<size_t>(B * T * CO)), lse(static_cast<size_t>(B * NH * T));
  std::vector<float> dqkv(qkv.size());
  be.rope_forward(qkv.data(), B, T, NH, NKV, HS, 10000.f);
  be.attention_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NKV, HS);
  be.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, NH, NKV, HS);
  be.rope_backward(dqkv.data(), B, T, NH, NKV, HS, 10000.f);
  std::vector<float> all = qkv;
  for (const auto* v : {&out, &lse, &dqkv}) all.insert(all.end(), v->begin(), v->end());
  return all;
}

// The kernels' scratch (cpu/cpu_workspace.h) belongs to one backend and only carries capacity from
// one call to the next: two backends interleaving calls of different sizes give the bits each gets
// alone on a fresh backend.
TEST(Backend, CpuKernelsScratchIsTheBackendsOwn) {
  auto fresh = [](int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
    CpuBackend be;
    return rope_attention(be, B, T, NH, NKV, HS);
  };
  const std::vector<float> large = fresh(2, 150, 4, 2, 32), small = fresh(1, 70, 2, 1, 16);
  CpuBackend a, b;
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(rope_attention(a, 2, 150, 4, 2, 32), large));
  EXPECT_TRUE(same(rope_attention(b, 1, 70, 2, 1, 16), small));
  EXPECT_TRUE(same(rope_attention(a, 1, 70, 2, 1, 16), small));  // a's scratch is larger now, b's not
  EXPECT_TRUE(same(rope_attention(b, 2, 150, 4, 2, 32), large));
  EXPECT_TRUE(same(rope_attention(a, 2, 150, 4, 2, 32), large));
}

TEST(Backend, CpuCopiesAcrossTheHostDeviceLine) {
  CpuBackend be;
  const std::vector<float> host = ramp(100, 1.f, 0.f);
  std::vector<float> device(100), back(100);
  be.copy_to_device(device.data(), host.data(), host.size() * sizeof(float));
  be.copy_to_host(back.data(), device.data(), device.size() * sizeof(float));
  be.synchronize();
  EXPECT_EQ(back, host);
}

TEST(Backend, ChosenByDevice) {
  Result<std::unique_ptr<Backend>> cpu = make_backend(Device::cpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ(cpu.value()->device(), Device::cpu);
  // Without a CUDA backend in the build, or without a GPU, the error says which and names the way out.
  Result<std::unique_ptr<Backend>> cuda = make_backend(Device::cuda);
  const CudaPlugin* plugin = load_cuda_plugin();
  const bool gpu = plugin && plugin->device_count() > 0;
  if (gpu) {
    ASSERT_TRUE(cuda.ok()) << cuda.status().message();
    EXPECT_EQ(cuda.value()->device(), Device::cuda);
  } else {
    ASSERT_FALSE(cuda.ok());
    const std::string& m = cuda.status().message();
    EXPECT_TRUE(m.find("no CUDA backend") != std::string::npos || m.find("no CUDA device") != std::string::npos ||
                m.find("plugin") != std::string::npos)
        << m;
    EXPECT_NE(m.find("train.device = \"cpu\""), std::string::npos) << m;
  }
  EXPECT_EQ(parse_device("cuda").value(), Device::cuda);
  EXPECT_FALSE(parse_device("tpu").ok());
  EXPECT_EQ(device_name(Device::cpu), "cpu");
}

}  // namespace
}  // namespace tessera
