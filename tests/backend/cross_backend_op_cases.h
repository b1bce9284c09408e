// The op cases of the cross-backend test (cross_backend_ops_test.cpp): one case_<op> per op of
// TESSERA_BACKEND_OPS, each running its op on deterministic inputs and reporting the outputs.
#pragma once
#include <cstdint>
#include <memory_resource>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"

namespace tessera {

// The cases' buffers are std::pmr vectors from the default memory resource, which the test sets to
// memory the backend under test can reach while a case runs (host memory for the CPU, pinned host
// memory for a GPU), so one case body serves every backend: inputs are written and outputs read on
// the host, after the backend has finished (sync).
template <class T>
using Vec = std::pmr::vector<T>;

// One run of a case: deterministic inputs (the same sequence for every backend) and the outputs
// the case reports, widened to double for the comparison.
struct OpRun {
  Rng rng{0xBACC0DEull};
  double tol = 0;  // allowed |oracle - candidate| per output, relative to max(1, its largest |oracle|)
  std::vector<std::vector<double>> outputs;
  Backend* be = nullptr;  // the backend the case runs on: waited for before the host reads

  void sync() {
    if (be) be->synchronize();
  }
  Vec<float> rand(int64_t n, float lo = -1.f, float hi = 1.f) {
    Vec<float> v(static_cast<size_t>(n));
    for (float& x : v) x = lo + (hi - lo) * rng.uniform();
    return v;
  }
  Vec<int32_t> ints(int64_t n, int32_t lo, int32_t hi) {  // in [lo, hi)
    Vec<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = lo + static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(hi - lo));
    return v;
  }
  template <class T>
  void out(const Vec<T>& v) {
    sync();
    outputs.emplace_back(v.begin(), v.end());
  }
  void out(double x) { outputs.push_back({x}); }
};

using Case = void (*)(Backend& be, OpRun& r);

struct NamedCase {
  const char* op;
  Case run;
};

// Every op of the list, in its order (an op without its case_<op> does not link).
std::span<const NamedCase> op_cases();

namespace op_case {
// Tolerances: reductions and transcendental kernels may round differently in another kernel copy;
// element-wise arithmetic, casts and index ops must agree exactly.
inline constexpr double kKernelTol = 2e-4;

// case_<op> for every op, defined in cross_backend_op_cases.cpp (attention's in
// cross_backend_attention_cases.cpp).
#define TESSERA_DECLARE_CASE(name, ret, params, args) void case_##name(Backend& be, OpRun& r);
TESSERA_BACKEND_OPS(TESSERA_DECLARE_CASE)
#undef TESSERA_DECLARE_CASE
}  // namespace op_case

}  // namespace tessera
