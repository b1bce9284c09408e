// Mixed precision (model/precision.h): fp32 is bitwise the default model (also after switching back
// from bf16); bf16 / fp16 change the linear layers only and stay close to fp32 in loss and
// gradients; the native and emulated bf16 kernels agree to f32 summation order; training in bf16
// follows the fp32 trajectory; the names parse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../token_util.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "../backend_util.h"

using namespace tessera;
using tessera::testing::random_tokens;

namespace {

double rel_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct FwdBwd {
  float loss;
  std::vector<float> grads;
};

FwdBwd forward_backward(const ModelConfig& cfg, Precision p, bool native_bf16 = true, bool set_then_reset = false) {
  const int64_t B = 2, T = 32;
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 1234);
  CpuBackend be;  // its bf16 switch is its own
  be.set_bf16_gemm_native(native_bf16);
  Transformer net(be, cfg, store, B, T);
  if (set_then_reset) net.set_precision(Precision::bf16);
  net.set_precision(p);
  EXPECT_EQ(net.precision(), p);
  auto tokens = random_tokens(B * T, cfg.vocab_size, 7), targets = random_tokens(B * T, cfg.vocab_size, 8);
  store.zero_grads();
  FwdBwd r;
  if (set_then_reset) {  // a bf16 step first, then back to fp32 for the step that is compared
    net.set_precision(Precision::bf16);
    net.forward(tokens.data(), targets.data());
    net.backward();
    store.zero_grads();
    net.set_precision(p);
  }
  r.loss = net.forward(tokens.data(), targets.data());
  net.backward();
  r.grads.assign(store.grads(), store.grads() + store.numel());
  return r;
}

class PrecisionModels : public ::testing::TestWithParam<const char*> {};

TEST_P(PrecisionModels, Fp32IsBitwiseTheDefaultModelAlsoAfterBf16) {
  const ModelConfig cfg = model_preset(GetParam()).value();
  const FwdBwd a = forward_backward(cfg, Precision::fp32);
  const FwdBwd b = forward_backward(cfg, Precision::fp32, true, /*set_then_reset=*/true);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, 4), 0);
  EXPECT_EQ(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * 4), 0);
}

TEST_P(PrecisionModels, ReducedPrecisionStaysCloseToFp32) {
  const ModelConfig cfg = model_preset(GetParam()).value();
  const FwdBwd f32 = forward_backward(cfg, Precision::fp32);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    const FwdBwd r = forward_backward(cfg, p);
    const double loss_rel = std::abs(double(r.loss) - f32.loss) / f32.loss;
    const double grad_rel = rel_diff(r.grads.data(), f32.grads.data(), int64_t(r.grads.size()));
    std::printf("%s %s: loss %.6f vs %.6f (rel %.2e), grad rel %.2e\n", GetParam(),
                std::string(precision_name(p)).c_str(), r.loss, f32.loss, loss_rel, grad_rel);
    EXPECT_NE(r.loss, f32.loss) << "the reduced-precision branch must run";
    // bf16 keeps 8 mantissa bits (relative rounding 2^-9), fp16 11 (2^-12).
    EXPECT_LT(loss_rel, p == Precision::bf16 ? 5e-3 : 1e-3);
    EXPECT_LT(grad_rel, p == Precision::bf16 ? 5e-2 : 1e-2);
  }
}

TEST_P(PrecisionModels, NativeAndEmulatedBf16Agree) {
  const ModelConfig cfg = model_preset(GetParam()).value();
  const FwdBwd a = forward_backward(cfg, Precision::bf16, /*native_bf16=*/true);
  const FwdBwd b = forward_backward(cfg, Precision::bf16, /*native_bf16=*/false);
  EXPECT_LT(std::abs(a.loss - b.loss) / b.loss, 1e-5);
  EXPECT_LT(rel_diff(a.grads.data(), b.grads.data(), int64_t(a.grads.size())), 1e-3);
}

TEST_P(PrecisionModels, Bf16TrainingFollowsFp32) {
  const ModelConfig cfg = model_preset(GetParam()).value();
  const int64_t B = 2, T = 32, steps = 15;
  std::vector<float> losses[2];
  for (int i = 0; i < 2; ++i) {
    ParamStore store{ParamLayout(cfg)};
    init_parameters(store, cfg, 1234);
    Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
    net.set_precision(i == 0 ? Precision::fp32 : Precision::bf16);
    AdamW opt(store.layout(), AdamWConfig{});
    for (int64_t s = 0; s < steps; ++s) {
      auto tokens = random_tokens(B * T, 16, 100 + s);  // a small alphabet: learnable in a few steps
      std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
      targets.push_back(tokens[0]);
      store.zero_grads();
      losses[i].push_back(net.forward(tokens.data(), targets.data()));
      net.backward();
      opt.step(store.params(), store.grads(), 3e-3f);
    }
  }
  double worst = 0;
  for (int64_t s = 0; s < steps; ++s)
    worst = std::max(worst, std::abs(double(losses[1][s]) - losses[0][s]) / losses[0][s]);
  std::printf("%s: fp32 loss %.4f -> %.4f, bf16 %.4f -> %.4f, max rel diff %.2e\n", GetParam(), losses[0][0],
              losses[0].back(), losses[1][0], losses[1].back(), worst);
  EXPECT_LT(losses[1].back(), losses[1][0] - 0.5);
  EXPECT_LT(worst, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Precision, PrecisionModels, ::testing::Values("tiny", "tiny-llama"),
                         [](const auto& info) { return std::string(info.param) == "tiny" ? "tiny" : "tiny_llama"; });

TEST(PrecisionNames, RoundTripAndRejectUnknown) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
    EXPECT_EQ(parse_precision(precision_name(p)).value(), p);
  auto bad = parse_precision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.precision"), std::string::npos);
}

}  // namespace
