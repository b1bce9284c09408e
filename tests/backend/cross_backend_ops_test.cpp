// Every op of every registered backend against the CPU oracle (the CpuBackend at the baseline AVX2
// level), in the spirit of ggml's test-backend-ops. The cases are tied to the op list: each op of
// TESSERA_BACKEND_OPS needs a case_<op> function (cross_backend_op_cases.cpp), so a new op without a case does not link.
//
// What it proves depends on the build and the machine. In a CUDA build on a machine with a GPU the
// CudaBackend is compared op by op (without a GPU that test reports itself skipped). The CPU candidates are the CpuBackend
// at each kernel level this CPU runs (avx512 where the CPU has it: the other compiled copy of every
// kernel in backend/cpu/kernel_table.h). oneDNN's matmuls and the element-wise ops have one
// implementation per process, so for them, and for everything on an AVX2-only CPU (where the only
// level is the oracle's own), the test proves only that every op has a case that runs, and that each
// op gives the same bits when run twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu_isa.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "../forwarding_backend.h"
#include "cross_backend_op_cases.h"
#include "backend/cuda_plugin.h"
#include "reachable_memory.h"

namespace tessera {
namespace {

// The CPU levels to hold against the oracle.
std::vector<std::pair<std::string, std::unique_ptr<Backend>>> cpu_candidates() {
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> out;
  const CpuFeatures cpu = detect_cpu_features();
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512})  // avx512_bf16 runs the avx512 kernels
    if (cpu_isa_supported(isa, cpu))
      out.emplace_back(std::string("cpu@") + cpu_isa_name(isa), std::make_unique<CpuBackend>(isa));
  return out;
}

// Runs a case on `be`, its buffers in memory `be` reaches.
OpRun run_case(const NamedCase& c, Backend& be) {
  const DefaultMemoryScope memory(reachable_memory(be));
  OpRun r;
  r.be = &be;
  c.run(be, r);
  be.synchronize();
  return r;
}

// "" when every output of `got` is within the oracle's tolerance, else the first difference.
std::string mismatch(const OpRun& oracle, const OpRun& got) {
  if (oracle.outputs.empty()) return "the case reports no output";
  if (oracle.outputs.size() != got.outputs.size()) return "a different number of outputs";
  for (size_t k = 0; k < oracle.outputs.size(); ++k) {
    const auto& a = oracle.outputs[k];
    const auto& b = got.outputs[k];
    if (a.size() != b.size()) return "output " + std::to_string(k) + " has another size";
    double scale = 1;
    for (double x : a)
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;  // also equal infinities
      if (std::isnan(a[i]) || std::isnan(b[i]) || !(std::fabs(a[i] - b[i]) <= oracle.tol * scale))
        return "output " + std::to_string(k) + "[" + std::to_string(i) + "]: oracle " + std::to_string(a[i]) +
               ", got " + std::to_string(b[i]);
    }
  }
  return "";
}

// One element of one op off by 0.01 (about 0.2 % of its largest output): a subtly wrong kernel.
class WrongGelu final : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void gelu_forward(float* out, const float* inp, int64_t n) override {
    ForwardingBackend::gelu_forward(out, inp, n);
    out[n / 2] += 1e-2f;
  }
};

TEST(CrossBackendOps, EveryOpHasACase) {
  // By construction (the table expands the op list); the count guards against a case table edited by hand.
#define TESSERA_COUNT_OP(name, ret, params, args) +1
  constexpr size_t ops = 0 TESSERA_BACKEND_OPS(TESSERA_COUNT_OP);
#undef TESSERA_COUNT_OP
  EXPECT_EQ(op_cases().size(), ops);
}

TEST(CrossBackendOps, EveryOpIsDeterministicOnTheOracle) {
  CpuBackend oracle(CpuIsa::avx2);
  for (const NamedCase& c : op_cases()) {
    const OpRun a = run_case(c, oracle), b = run_case(c, oracle);
    ASSERT_EQ(a.outputs, b.outputs) << c.op << " gave different bits when run twice";
  }
}

void expect_every_op_matches(const std::string& name, Backend& be) {
  CpuBackend oracle(CpuIsa::avx2);
  std::printf("[ backend  ] %s against cpu@avx2\n", name.c_str());
  for (const NamedCase& c : op_cases()) EXPECT_EQ(mismatch(run_case(c, oracle), run_case(c, be)), "") << name << " " << c.op;
}

TEST(CrossBackendOps, EveryOpOfEveryCpuLevelMatchesTheCpuOracle) {
  const auto candidates = cpu_candidates();
  ASSERT_FALSE(candidates.empty());
  for (const auto& [name, be] : candidates) expect_every_op_matches(name, *be);
}

TEST(CrossBackendOps, EveryOpOfTheCudaBackendMatchesTheCpuOracle) {
  std::string why;
  const CudaPlugin* cuda = load_cuda_plugin(&why);
  if (!cuda) GTEST_SKIP() << why;
  if (cuda->device_count() == 0) GTEST_SKIP() << "no CUDA device visible: the CUDA backend is built but not run";
  const std::unique_ptr<Backend> be(cuda->open(0, 0, &why));
  ASSERT_TRUE(be) << why;
  expect_every_op_matches("cuda:0 " + cuda->device_summary(0), *be);
  // Twice the same bits: no atomics, no order that depends on scheduling.
  for (const NamedCase& c : op_cases())
    EXPECT_EQ(run_case(c, *be).outputs, run_case(c, *be).outputs) << c.op << " is not deterministic on the GPU";
}

TEST(CrossBackendOps, CatchesAWrongOp) {  // the comparison itself: a perturbed op must not pass
  CpuBackend oracle(CpuIsa::avx2);
  WrongGelu wrong(oracle);
  for (const NamedCase& c : op_cases()) {
    const std::string m = mismatch(run_case(c, oracle), run_case(c, wrong));
    if (std::string(c.op) == "gelu_forward") EXPECT_NE(m, "") << "the perturbed gelu_forward passed";
    else EXPECT_EQ(m, "") << c.op;
  }
}

}  // namespace
}  // namespace tessera
