// Reduced-precision matmul (ops.h, "reduced-precision matmul"): operands rounded to bf16 / fp16,
// f32 accumulation, f32 outputs. bf16 runs oneDNN's matmul primitive (bf16 src/weights, f32 dst)
// where oneDNN has a native kernel for this CPU (AVX512-BF16 / AMX); otherwise the operands are
// rounded into f32 scratch and multiplied by the f32 sgemm (products of bf16 or fp16 values are exact
// in f32, so both paths compute the same model up to f32 summation order). The oneDNN objects, the
// operand copies and the bf16 setting live in the caller's workspace (matmul_lowp.h), none here.
#include <immintrin.h>

#include <bit>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/matmul_bias.h"
#include "backend/cpu/matmul_lowp.h"
#include "backend/cpu/sgemm_padded.h"
#include "backend/ops.h"
#include "core/log.h"

namespace tessera::ops {
namespace {

// f32 -> bf16 bits, round-to-nearest-even; NaN stays a quiet NaN, overflow rounds to inf.
inline uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  const uint32_t nan = u | 0x00400000u;
  return static_cast<uint16_t>((((u & 0x7fffffffu) > 0x7f800000u) ? nan : rounded) >> 16);
}
inline float bf16_round(float x) { return std::bit_cast<float>(static_cast<uint32_t>(bf16_bits(x)) << 16); }

// GCC 12's AVX-512 conversion intrinsics start from an "undefined" vector it then reports as maybe
// uninitialized; the value is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// n floats rounded to IEEE half and back (round-to-nearest-even, F16C / AVX-512 conversions).
void fp16_round_n(float* out, const float* in, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<_Float16>(in[i]));
}
#pragma GCC diagnostic pop

void round_n(float* out, const float* in, int64_t n, MatmulPrecision p) {
  if (p == MatmulPrecision::fp16) {
    fp16_round_n(out, in, n);
  } else if (p == MatmulPrecision::bf16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_round(in[i]);
  } else if (out != in) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  }
}

// rows x cols of a row-major matrix with leading dimension ld, rounded into an f32 buffer with leading
// dimension out_ld.
void round_matrix(float* out, const float* in, int64_t rows, int64_t cols, int64_t ld, int64_t out_ld,
                  MatmulPrecision p) {
#pragma omp parallel for schedule(static) if (rows * cols > 32768)
  for (int64_t r = 0; r < rows; ++r) round_n(out + r * out_ld, in + r * ld, cols, p);
}

// Workspace scratch, grown only (no allocation after the first call with a given size).
template <typename T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// ---- oneDNN bf16 matmul ----
using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;

// C(M,N) (row stride ldc, f32) = alpha * A(M,K) B(K,N) + beta * C with A, B compact bf16 as stored:
// A is (M,K) row-major or, transposed, (K,M); B is (K,N) or, transposed, (N,K).
struct Bf16Prim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

std::unique_ptr<Bf16Prim> make_bf16_prim(const dnnl::engine& engine, bool ta, bool tb, int64_t M, int64_t N,
                                         int64_t K, float alpha, float beta, int64_t ldc) {
  const dnnl::memory::desc a_md(Dims{M, K}, dt::bf16, ta ? Dims{1, M} : Dims{K, 1});
  const dnnl::memory::desc b_md(Dims{K, N}, dt::bf16, tb ? Dims{1, K} : Dims{N, 1});
  const dnnl::memory::desc c_md(Dims{M, N}, dt::f32, Dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::desc d(a_md, b_md, c_md);
  auto p = std::make_unique<Bf16Prim>();
  p->pd = dnnl::matmul::primitive_desc(d, attr, engine);
  p->prim = dnnl::matmul(p->pd);
  return p;
}

// Whether oneDNN runs bf16 matmuls on a native kernel here (not its reference implementation).
struct NativeInfo {
  bool native = false;
  std::string impl;
};
NativeInfo probe_native(const dnnl::engine& engine) {
  NativeInfo i;
  try {
    auto p = make_bf16_prim(engine, false, true, 64, 64, 64, 1.0f, 0.0f, 64);
    i.impl = p->pd.impl_info_str();
    i.native = i.impl.find("ref") == std::string::npos;
  } catch (const dnnl::error& e) {
    i.impl = std::string("unavailable: ") + e.what();
  }
  return i;
}

}  // namespace

// One workspace's oneDNN objects (engine, stream, the primitive per shape, layout, alpha, beta) and
// operand copies: what were per-thread statics, now the backend's.
struct LowpMatmulState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::optional<NativeInfo> native;  // probed at the first question
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, float, float>, std::unique_ptr<Bf16Prim>>
      prims;
  std::vector<uint16_t> a16, b16, c16;  // compact bf16 operands
  std::vector<float> ar, br;            // rounded f32 operands (emulated path)
};

void LowpMatmulStateDeleter::operator()(LowpMatmulState* s) const noexcept { delete s; }

namespace {

LowpMatmulState& state(CpuWorkspace& ws) {
  if (!ws.lowp) ws.lowp.reset(new LowpMatmulState);
  return *ws.lowp;
}

// Whether oneDNN runs bf16 matmuls on a native kernel here (not its reference implementation).
const NativeInfo& native_info(LowpMatmulState& st) {
  if (!st.native) st.native = probe_native(st.engine);
  return *st.native;
}

// Compact bf16 copies of up to three row-major matrices (rows x cols, leading dimension ld), all in one
// parallel region (one fork/join per matmul instead of one per operand).
struct Bf16Src {
  uint16_t* out;
  const float* in;
  int64_t rows, cols, ld;
};
void to_bf16_matrices(std::initializer_list<Bf16Src> list) {
  Bf16Src m[3] = {};  // initialised: GCC cannot see that nm >= 1
  int nm = 0;
  int64_t total = 0;
  for (const Bf16Src& x : list) {
    m[nm++] = x;
    total += x.rows * x.cols;
  }
  const int64_t r0 = m[0].rows, r1 = nm > 1 ? r0 + m[1].rows : r0, r2 = nm > 2 ? r1 + m[2].rows : r1;
#pragma omp parallel for schedule(static) if (total > 32768)
  for (int64_t r = 0; r < r2; ++r) {
    const Bf16Src& x = r < r0 ? m[0] : (r < r1 ? m[1] : m[2]);
    const int64_t rr = r < r0 ? r : (r < r1 ? r - r0 : r - r1);
    const float* s = x.in + rr * x.ld;
    uint16_t* d = x.out + rr * x.cols;
    const int64_t n = x.cols;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) d[j] = bf16_bits(s[j]);
  }
}

// The primitive for one (shape, layout, alpha, beta), created once per workspace and reused.
Bf16Prim& bf16_prim(LowpMatmulState& st, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                    int64_t ldc) {
  auto& slot = st.prims[{M, N, K, ldc, ta, tb, alpha, beta}];
  if (!slot) slot = make_bf16_prim(st.engine, ta, tb, M, N, K, alpha, beta, ldc);
  return *slot;
}

// C = alpha * op(a) op(b) + beta * C on compact bf16 operands a, b (stored orientation).
void bf16_exec(LowpMatmulState& st, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* a, const uint16_t* b, float beta, float* C, int64_t ldc) {
  Bf16Prim& p = bf16_prim(st, ta, tb, M, N, K, alpha, beta, ldc);
  dnnl::memory am(p.pd.src_desc(), st.engine, const_cast<uint16_t*>(a));
  dnnl::memory bm(p.pd.weights_desc(), st.engine, const_cast<uint16_t*>(b));
  dnnl::memory cm(p.pd.dst_desc(), st.engine, C);
  p.prim.execute(st.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  st.stream.wait();
}

void bf16_native_gemm(LowpMatmulState& st, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // Compact bf16 copies in the stored orientation.
  uint16_t* a = scratch(st.a16, M * K);
  uint16_t* b = scratch(st.b16, K * N);
  to_bf16_matrices({{a, A, ta ? K : M, ta ? M : K, lda}, {b, B, tb ? N : K, tb ? K : N, ldb}});
  bf16_exec(st, ta, tb, M, N, K, alpha, a, b, beta, C, ldc);
}

bool use_native(CpuWorkspace& ws, MatmulPrecision p) {
  return p == MatmulPrecision::bf16 && ws.bf16_gemm_native && native_info(state(ws)).native;
}

}  // namespace

void round_to_precision(float* out, const float* in, int64_t n, MatmulPrecision p) {
  const int64_t chunk = 16384;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
  for (int64_t i = 0; i < n; i += chunk) round_n(out + i, in + i, std::min(chunk, n - i), p);
}

std::string bf16_gemm_kernel(CpuWorkspace& ws) {
  const NativeInfo& i = native_info(state(ws));
  return (i.native && ws.bf16_gemm_native) ? "onednn:" + i.impl : std::string("emulated");
}

void sgemm_lowp(CpuWorkspace& ws, MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  if (p == MatmulPrecision::fp32 || M == 0 || N == 0 || K == 0) {
    sgemm(ws, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (use_native(ws, p)) {
    bf16_native_gemm(state(ws), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  LowpMatmulState& st = state(ws);
  const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  // The rounded copies are laid out as the padded ones sgemm(ws, ...) would make, where it would.
  const bool pad_a = detail::pads_transposed_a(detail::onednn_runs_avx2(), trans_a, trans_b, N, K, a_cols);
  const bool pad_b = detail::pads_transposed_b(trans_a, trans_b, N, K, b_cols);
  const int64_t a_ld = pad_a ? detail::unaliased_ld(a_cols) : a_cols;
  const int64_t b_ld = pad_b ? detail::unaliased_ld(b_cols) : b_cols;
  float* a = scratch(st.ar, a_rows * a_ld);
  float* b = scratch(st.br, b_rows * b_ld);
  round_matrix(a, A, a_rows, a_cols, lda, a_ld, p);
  round_matrix(b, B, b_rows, b_cols, ldb, b_ld, p);
  sgemm(trans_a, trans_b, M, N, K, alpha, a, a_ld, b, b_ld, beta, C, ldc);
}

void matmul_forward_lowp(CpuWorkspace& ws, MatmulPrecision p, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C, int64_t OC) {
  if (p == MatmulPrecision::fp32) {
    matmul_forward(ws, out, inp, weight, bias, N, C, OC);
    return;
  }
  const float beta = detail::seed_with_bias(out, bias, N, OC);
  sgemm_lowp(ws, p, false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward_lowp(CpuWorkspace& ws, MatmulPrecision p, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  if (p == MatmulPrecision::fp32) {
    matmul_backward(ws, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    return;
  }
  if (use_native(ws, p) && N > 0 && C > 0 && OC > 0) {
    // dout is an operand of both products: rounded once, with weight and inp, in one parallel region.
    LowpMatmulState& st = state(ws);
    uint16_t* d16 = scratch(st.a16, N * OC);
    uint16_t* i16 = dweight != nullptr ? scratch(st.b16, N * C) : nullptr;
    uint16_t* w16 = dinp != nullptr ? scratch(st.c16, OC * C) : nullptr;
    const Bf16Src d{d16, dout, N, OC, OC}, i{i16, inp, N, C, C}, w{w16, weight, OC, C, C};
    if (dinp != nullptr && dweight != nullptr) to_bf16_matrices({d, i, w});
    else if (dweight != nullptr) to_bf16_matrices({d, i});
    else if (dinp != nullptr) to_bf16_matrices({d, w});
    else to_bf16_matrices({d});
    if (dinp != nullptr) bf16_exec(st, false, false, N, C, OC, 1.0f, d16, w16, 1.0f, dinp, C);
    if (dweight != nullptr) bf16_exec(st, true, false, OC, C, N, 1.0f, d16, i16, 1.0f, dweight, C);
  } else {
    if (dinp != nullptr) sgemm_lowp(ws, p, false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight != nullptr) sgemm_lowp(ws, p, true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  }
  // The bias gradient is the f32 column sum of dout (the same code as the f32 backward).
  if (dbias != nullptr) detail::accumulate_bias_grad(dbias, dout, N, OC);
}

// The ops.h entry points without a workspace: one of the call's own (tests, one-off calls; allocates).
void sgemm_lowp(MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  CpuWorkspace ws;
  sgemm_lowp(ws, p, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void matmul_forward_lowp(MatmulPrecision p, float* out, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC) {
  CpuWorkspace ws;
  matmul_forward_lowp(ws, p, out, inp, weight, bias, N, C, OC);
}
void matmul_backward_lowp(MatmulPrecision p, float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  CpuWorkspace ws;
  matmul_backward_lowp(ws, p, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

}  // namespace tessera::ops
