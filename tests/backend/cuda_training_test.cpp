// Training on the CUDA backend against the CPU oracle: 20 steps of tiny GPT-2 and LLaMA models (tied
// and untied heads; fp32 and bf16) from the same initial parameters and batches, comparing the loss
// and the pre-clip gradient norm of every step (clipping plus AdamW would hide a constant gradient
// scale in the loss alone), and two GPU runs bit for bit. Skipped without a GPU or the CUDA plugin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "../token_util.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_plugin.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "optim/adamw.h"

namespace tessera {
namespace {

struct Curve {
  std::vector<float> loss, grad_norm;
};

struct RunSetup {
  const char* preset;
  bool tied;
  Precision precision;
};

// The same parameters on every backend: initialised on the host, then copied across.
Curve train(Backend& be, const RunSetup& s, int64_t steps) {
  ModelConfig cfg = model_preset(s.preset).value();
  cfg.tied_embeddings = s.tied;
  const int64_t B = 2, T = 32;
  ParamStore host{ParamLayout(cfg)};
  init_parameters(host, cfg, 1234);
  ParamStore store(ParamLayout(cfg), StoreOptions{.backend = &be});
  const size_t bytes = static_cast<size_t>(store.numel()) * sizeof(float);
  be.copy_to_device(store.params(), host.params(), bytes);
  Transformer net(be, cfg, store, B, T);
  net.set_precision(s.precision);
  AdamW opt(store.layout(), AdamWConfig{}, 0, -1, &be);
  Curve c;
  for (int64_t step = 0; step < steps; ++step) {
    const auto tokens = testing::random_tokens(B * T, 16, 100 + step);  // learnable in a few steps
    std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
    targets.push_back(tokens[0]);
    store.zero_grads();
    c.loss.push_back(net.forward(tokens.data(), targets.data()));
    net.backward();
    c.grad_norm.push_back(clip_grad_norm(be, store.grads(), store.numel(), 1.0f));
    opt.step(store.params(), store.grads(), 3e-3f);
  }
  be.synchronize();
  return c;
}

double worst_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::abs(double(b[i])));
  return worst;
}

std::string name(const RunSetup& s) {
  return std::string(s.preset) + (s.tied ? " tied " : " untied ") + std::string(precision_name(s.precision));
}

void PrintTo(const RunSetup& s, std::ostream* os) { *os << name(s); }  // test names without pointer bytes

class CudaTraining : public ::testing::TestWithParam<RunSetup> {
 protected:
  void SetUp() override {
    std::string why;
    const CudaPlugin* cuda = load_cuda_plugin(&why);
    if (!cuda) GTEST_SKIP() << why;
    if (cuda->device_count() == 0) GTEST_SKIP() << "no CUDA device visible: the CUDA backend is built but not run";
    gpu_.reset(cuda->open(0, 0, &why));
    ASSERT_TRUE(gpu_) << why;
  }
  std::unique_ptr<Backend> gpu_;
};

TEST_P(CudaTraining, TwentyStepsFollowTheCpu) {
  const RunSetup s = GetParam();
  constexpr int64_t kSteps = 20;
  CpuBackend cpu;
  const Curve want = train(cpu, s, kSteps);
  const Curve got = train(*gpu_, s, kSteps);
  const double loss_rel = worst_rel(got.loss, want.loss), norm_rel = worst_rel(got.grad_norm, want.grad_norm);
  std::printf("[ cuda     ] %s: loss %.5f -> %.5f (cpu %.5f -> %.5f), worst rel loss %.2e, grad norm %.2e\n",
              name(s).c_str(), got.loss.front(), got.loss.back(), want.loss.front(), want.loss.back(), loss_rel,
              norm_rel);
  if (s.precision == Precision::fp32) {
    EXPECT_LT(loss_rel, 1e-4);
    EXPECT_LT(norm_rel, 1e-4);
  } else {
    // bf16 on either side rounds the matmul operands: the GPU run must stay within twice the band the
    // CPU's own bf16 run keeps from its fp32 run.
    RunSetup f32 = s;
    f32.precision = Precision::fp32;
    const Curve ref = train(cpu, f32, kSteps);
    const double band = std::max(worst_rel(want.loss, ref.loss), 1e-4);
    EXPECT_LT(worst_rel(got.loss, ref.loss), 2 * band) << "CPU bf16 band " << band;
  }
  EXPECT_LT(got.loss.back(), got.loss.front() - 0.5) << "the GPU run must learn";
  const Curve again = train(*gpu_, s, kSteps);
  EXPECT_EQ(again.loss, got.loss) << "two GPU runs must give the same bits";
  EXPECT_EQ(again.grad_norm, got.grad_norm);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTraining,
                         ::testing::Values(RunSetup{"tiny", true, Precision::fp32}, RunSetup{"tiny", false, Precision::fp32},
                                           RunSetup{"tiny-llama", false, Precision::fp32},
                                           RunSetup{"tiny-llama", true, Precision::fp32},
                                           RunSetup{"tiny", true, Precision::bf16},
                                           RunSetup{"tiny-llama", false, Precision::bf16}),
                         [](const auto& info) {
                           const RunSetup& s = info.param;
                           std::string n = std::string(s.preset) + (s.tied ? "_tied_" : "_untied_") +
                                           std::string(precision_name(s.precision));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tessera
