// The op cases (cross_backend_op_cases.h) but attention's (cross_backend_attention_cases.cpp). Each
// fills its op's inputs from OpRun's generator and reports every output; tol says how far another
// kernel copy may round differently.
#include "cross_backend_op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>
#include "backend/backend.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace tessera {
namespace op_case {

// ---- matmuls ----
void case_sgemm(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t M = 13, N = 11, K = 7;
  auto A = r.rand(M * K), B = r.rand(K * N), C = r.rand(M * N), D = r.rand(M * N);
  be.sgemm(false, false, M, N, K, 0.7f, A.data(), K, B.data(), N, 0.3f, C.data(), N);
  be.sgemm(true, true, M, N, K, 1.f, A.data(), M, B.data(), K, 0.f, D.data(), N);  // A as (K,M), B as (N,K)
  r.out(C);
  r.out(D);
}
void case_matmul_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 10, C = 12, OC = 9;
  auto out = r.rand(N * OC), inp = r.rand(N * C), w = r.rand(OC * C), b = r.rand(OC);
  be.matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
  r.out(out);
}
void case_matmul_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 10, C = 12, OC = 9;
  auto dinp = r.rand(N * C), dw = r.rand(OC * C), db = r.rand(OC), dout = r.rand(N * OC), inp = r.rand(N * C),
       w = r.rand(OC * C);
  be.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  r.out(dinp);
  r.out(dw);
  r.out(db);
}
void case_round_to_precision(Backend& be, OpRun& r) {
  auto in = r.rand(257, -70000.f, 70000.f), bf = in, hf = in;
  be.round_to_precision(bf.data(), in.data(), 257, ops::MatmulPrecision::bf16);
  be.round_to_precision(hf.data(), hf.data(), 257, ops::MatmulPrecision::fp16);  // in place
  r.out(bf);
  r.out(hf);
}
void case_matmul_forward_lowp(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 8, C = 16, OC = 6;
  auto out = r.rand(N * OC), inp = r.rand(N * C), w = r.rand(OC * C), b = r.rand(OC), out16 = out;
  be.matmul_forward_lowp(ops::MatmulPrecision::bf16, out.data(), inp.data(), w.data(), b.data(), N, C, OC);
  be.matmul_forward_lowp(ops::MatmulPrecision::fp16, out16.data(), inp.data(), w.data(), nullptr, N, C, OC);
  r.out(out);
  r.out(out16);
}
void case_matmul_backward_lowp(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 8, C = 16, OC = 6;
  auto dinp = r.rand(N * C), dw = r.rand(OC * C), db = r.rand(OC), dout = r.rand(N * OC), inp = r.rand(N * C),
       w = r.rand(OC * C);
  be.matmul_backward_lowp(ops::MatmulPrecision::fp16, dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                          w.data(), N, C, OC);
  r.out(dinp);
  r.out(dw);
  r.out(db);
}

// ---- embedding ----
constexpr int64_t kB = 2, kT = 5, kC = 8, kV = 20;
void case_embedding_forward(Backend& be, OpRun& r) {
  auto tokens = r.ints(kB * kT, 0, kV);
  auto out = r.rand(kB * kT * kC), wte = r.rand(kV * kC), wpe = r.rand(kT * kC);
  be.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, kC);
  r.out(out);
}
void case_embedding_backward(Backend& be, OpRun& r) {
  auto tokens = r.ints(kB * kT, 0, kV);
  auto dwte = r.rand(kV * kC), dwpe = r.rand(kT * kC), dout = r.rand(kB * kT * kC);
  be.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, kC);
  r.out(dwte);
  r.out(dwpe);
}
void case_embedding_forward_range(Backend& be, OpRun& r) {
  const int64_t lo = 5, hi = 15;
  auto tokens = r.ints(kB * kT, 0, kV);
  auto out = r.rand(kB * kT * kC), wte = r.rand((hi - lo) * kC), wpe = r.rand(kT * kC);
  be.embedding_forward_range(out.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, kC, lo, hi);
  r.out(out);
}
void case_embedding_backward_range(Backend& be, OpRun& r) {
  const int64_t lo = 5, hi = 15;
  auto tokens = r.ints(kB * kT, 0, kV);
  auto dwte = r.rand((hi - lo) * kC), dwpe = r.rand(kT * kC), dout = r.rand(kB * kT * kC);
  be.embedding_backward_range(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, kC, lo, hi);
  r.out(dwte);
  r.out(dwpe);
}

// ---- normalisation ----
constexpr int64_t kN = 6, kNC = 40;  // C not a multiple of any vector width
void case_layernorm_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kN * kNC), mean = r.rand(kN), rstd = r.rand(kN), inp = r.rand(kN * kNC, -3.f, 3.f),
       w = r.rand(kNC), b = r.rand(kNC);
  be.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kNC, 1e-5f);
  r.out(out);
  r.out(mean);
  r.out(rstd);
}
void case_layernorm_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kN * kNC), mean = r.rand(kN), rstd = r.rand(kN), inp = r.rand(kN * kNC, -3.f, 3.f),
       w = r.rand(kNC), b = r.rand(kNC), dinp = r.rand(kN * kNC), dw = r.rand(kNC), db = r.rand(kNC),
       dout = r.rand(kN * kNC);
  be.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kNC, 1e-5f);
  be.layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                        rstd.data(), kN, kNC);
  r.out(dinp);
  r.out(dw);
  r.out(db);
}
void case_rmsnorm_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kN * kNC), rstd = r.rand(kN), inp = r.rand(kN * kNC, -3.f, 3.f), w = r.rand(kNC);
  be.rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), kN, kNC, 1e-6f);
  r.out(out);
  r.out(rstd);
}
void case_rmsnorm_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kN * kNC), rstd = r.rand(kN), inp = r.rand(kN * kNC, -3.f, 3.f), w = r.rand(kNC),
       dinp = r.rand(kN * kNC), dw = r.rand(kNC), dout = r.rand(kN * kNC);
  be.rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), kN, kNC, 1e-6f);
  be.rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), kN, kNC);
  r.out(dinp);
  r.out(dw);
}

// ---- activations ----
void case_gelu_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(301), inp = r.rand(301, -6.f, 6.f);
  be.gelu_forward(out.data(), inp.data(), 301);
  r.out(out);
}
void case_gelu_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto dinp = r.rand(301), inp = r.rand(301, -6.f, 6.f), dout = r.rand(301);
  be.gelu_backward(dinp.data(), inp.data(), dout.data(), 301);
  r.out(dinp);
}
void case_swiglu_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 5, H = 19;
  auto out = r.rand(N * H), inp = r.rand(N * 2 * H, -5.f, 5.f);
  be.swiglu_forward(out.data(), inp.data(), N, H);
  r.out(out);
}
void case_swiglu_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t N = 5, H = 19;
  auto dinp = r.rand(N * 2 * H), dout = r.rand(N * H), inp = r.rand(N * 2 * H, -5.f, 5.f);
  be.swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  r.out(dinp);
}

// ---- cross-entropy (whole vocabulary and split) ----
constexpr int64_t kCN = 6, kCV = 37, kVl = 12, kValid = 10, kLo = 12;
Vec<int32_t> ce_targets(OpRun& r, int32_t V) {
  auto t = r.ints(kCN, 0, V);
  t[2] = -1;  // an ignored row
  return t;
}
void case_softmax_crossentropy(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto losses = r.rand(kCN), logits = r.rand(kCN * kCV, -4.f, 4.f), dlogits = logits;
  const auto targets = ce_targets(r, kCV);
  be.softmax_crossentropy(losses.data(), logits.data(), targets.data(), kCN, kCV, 0.f);  // losses only
  r.out(losses);
  be.softmax_crossentropy(losses.data(), dlogits.data(), targets.data(), kCN, kCV, 0.2f);
  r.out(losses);
  r.out(dlogits);
}
void case_crossentropy_rowmax(Backend& be, OpRun& r) {
  auto row_max = r.rand(kCN), logits = r.rand(kCN * kVl, -4.f, 4.f);
  be.crossentropy_rowmax(row_max.data(), logits.data(), kCN, kVl, kValid);
  r.out(row_max);
}
void case_crossentropy_sumexp_target(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto row_max = r.rand(kCN), logits = r.rand(kCN * kVl, -4.f, 4.f), stats = r.rand(kCN * 2);
  const auto targets = ce_targets(r, 2 * kVl);
  be.crossentropy_rowmax(row_max.data(), logits.data(), kCN, kVl, kValid);
  be.crossentropy_sumexp_target(stats.data(), logits.data(), row_max.data(), targets.data(), kCN, kVl, kValid, kLo);
  r.out(stats);
}
void case_crossentropy_finish(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto row_max = r.rand(kCN), logits = r.rand(kCN * kVl, -4.f, 4.f), stats = r.rand(kCN * 2), losses = r.rand(kCN);
  const auto targets = ce_targets(r, 2 * kVl);
  be.crossentropy_rowmax(row_max.data(), logits.data(), kCN, kVl, kValid);
  be.crossentropy_sumexp_target(stats.data(), logits.data(), row_max.data(), targets.data(), kCN, kVl, kValid, kLo);
  be.crossentropy_finish(losses.data(), logits.data(), stats.data(), row_max.data(), targets.data(), kCN, kVl, kValid,
                         kLo, 0.25f);
  r.out(losses);
  r.out(logits);
}

// ---- optimizer, norms ----
void case_adamw_update(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t n = 203;
  auto p = r.rand(n), g = r.rand(n), m = r.rand(n, -0.1f, 0.1f), v = r.rand(n, 0.f, 0.01f);
  be.adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.75f);
  r.out(p);
  r.out(m);
  r.out(v);
}
void case_sum_of_squares(Backend& be, OpRun& r) {
  r.tol = 1e-12;
  auto x = r.rand(100003);  // more than one of the CPU's fixed blocks
  r.out(be.sum_of_squares(x.data(), 100003));
}
void case_scale_inplace(Backend& be, OpRun& r) {
  auto x = r.rand(1001);
  be.scale_inplace(x.data(), 1001, -0.37f);
  r.out(x);
}

// ---- element-wise ----
void case_fill(Backend& be, OpRun& r) {
  auto x = r.rand(1001);
  be.fill(x.data() + 3, 997, 2.5f);
  r.out(x);
}
void case_copy(Backend& be, OpRun& r) {
  auto x = r.rand(1001), y = r.rand(1001);
  be.copy(y.data(), x.data(), 1001);
  be.copy(x.data() + 1, x.data(), 1000);  // overlapping
  r.out(x);
  r.out(y);
}
void case_add(Backend& be, OpRun& r) {
  auto out = r.rand(1001), x = r.rand(1001), y = r.rand(1001);
  be.add(out.data(), y.data(), x.data(), 1001);
  be.add(y.data(), y.data(), x.data(), 1001);  // in place
  r.out(out);
  r.out(y);
}
void case_axpy(Backend& be, OpRun& r) {
  auto y = r.rand(1001), x = r.rand(1001);
  be.axpy(y.data(), 0.3f, x.data(), 1001);
  r.out(y);
}
void case_count_nonfinite(Backend& be, OpRun& r) {
  auto x = r.rand(1001);
  x[7] = std::numeric_limits<float>::infinity();
  x[500] = std::nanf("");
  x[1000] = -std::numeric_limits<float>::infinity();
  r.out(static_cast<double>(be.count_nonfinite(x.data(), 1001)));
}
void case_sub(Backend& be, OpRun& r) {
  auto out = r.rand(1001), a = r.rand(1001), b = r.rand(1001);
  be.sub(out.data(), a.data(), b.data(), 1001);
  r.out(out);
}

// ---- bf16 storage ----
void case_cast_f32_to_bf16(Backend& be, OpRun& r) {
  auto x = r.rand(1001, -1e4f, 1e4f);
  x[3] = std::nanf("");
  Vec<uint16_t> h(1001);
  be.cast_f32_to_bf16(h.data(), x.data(), 1001);
  be.cast_f32_to_bf16(reinterpret_cast<uint16_t*>(x.data()), x.data(), 1001);  // in place
  r.out(h);  // waits for the backend
  r.out(Vec<uint16_t>(reinterpret_cast<uint16_t*>(x.data()), reinterpret_cast<uint16_t*>(x.data()) + 1001));
}
void case_cast_bf16_to_f32(Backend& be, OpRun& r) {
  auto x = r.rand(1001, -1e4f, 1e4f);
  Vec<uint16_t> h(1001);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16(x[i]);
  Vec<float> out(1001), inplace(1001);
  std::copy(h.begin(), h.end(), reinterpret_cast<uint16_t*>(inplace.data()));
  be.cast_bf16_to_f32(out.data(), h.data(), 1001);
  be.cast_bf16_to_f32(inplace.data(), reinterpret_cast<const uint16_t*>(inplace.data()), 1001);  // in place
  r.out(out);
  r.out(inplace);
}
void case_sub_bf16(Backend& be, OpRun& r) {
  auto x = r.rand(1001), out = r.rand(1001);
  Vec<uint16_t> h(1001);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16(x[i] * 0.9f);
  be.sub_bf16(out.data(), x.data(), h.data(), 1001);
  be.sub_bf16(x.data(), x.data(), h.data(), 1001);  // in place
  r.out(out);
  r.out(x);
}
void case_accumulate_bf16(Backend& be, OpRun& r) {
  auto out = r.rand(1001), x = r.rand(1001);
  Vec<uint16_t> h(1001);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16(x[i]);
  be.accumulate_bf16(out.data(), 0.5f, h.data(), 1001);
  r.out(out);
}

// ---- gather / scatter ----
void case_gather(Backend& be, OpRun& r) {
  auto x = r.rand(500), out = r.rand(64);
  const auto idx = r.ints(64, 0, 500);
  be.gather(out.data(), x.data(), idx.data(), 64);
  r.out(out);
}
void case_scatter_add(Backend& be, OpRun& r) {
  auto out = r.rand(50), val = r.rand(64);
  const auto idx = r.ints(64, 0, 50);  // repeats: they add up in index order
  be.scatter_add(out.data(), 0.7f, idx.data(), val.data(), 64);
  r.out(out);
}
void case_scatter_fill(Backend& be, OpRun& r) {
  auto out = r.rand(500);
  const auto idx = r.ints(64, 0, 500);
  be.scatter_fill(out.data(), idx.data(), 64, 0.f);
  r.out(out);
}
void case_nonzero_rows(Backend& be, OpRun& r) {
  const int64_t rows = 31, cols = 9;
  auto x = r.rand(rows * cols);
  for (int64_t row : {0, 4, 5, 30}) std::fill_n(x.begin() + row * cols, cols, row == 5 ? -0.f : 0.f);
  Vec<int32_t> mask(rows, 7);
  be.nonzero_rows(mask.data(), x.data(), rows, cols);
  r.out(mask);
}
void case_gather_rows(Backend& be, OpRun& r) {
  const int64_t rows = 31, cols = 9;
  auto x = r.rand(rows * cols), out = r.rand(5 * cols);
  const Vec<int64_t> idx = {0, 3, 4, 17, 30};  // ascending: also packs in place
  be.gather_rows(out.data(), x.data(), idx.data(), 5, cols);
  be.gather_rows(x.data(), x.data(), idx.data(), 5, cols);
  r.out(out);
  r.out(x);
}
void case_scatter_add_rows(Backend& be, OpRun& r) {
  const int64_t rows = 31, cols = 9;
  auto out = r.rand(rows * cols), x = r.rand(5 * cols);
  const Vec<int64_t> idx = {1, 2, 8, 20, 29};
  be.scatter_add_rows(out.data(), idx.data(), x.data(), 5, cols);
  r.out(out);
}

// ---- mixture-of-experts routing ----
namespace moe {
constexpr int64_t N = 13, E = 5, K = 2, C = 6;
}
void case_moe_router_forward(Backend& be, OpRun& r) {
  using namespace moe;
  r.tol = kKernelTol;
  auto logits = r.rand(N * E, -2.f, 2.f);
  logits[3 * E + 1] = logits[3 * E + 4];  // a tie: the lower expert index wins
  Vec<float> probs(N * E), lse(N), w(N * K);
  Vec<int32_t> idx(N * K);
  be.moe_router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), N, E, K);
  r.out(probs); r.out(lse); r.out(idx); r.out(w);
}
void case_moe_dispatch_plan(Backend& be, OpRun& r) {
  using namespace moe;
  auto idx = r.ints(N * K, 0, E);
  for (int64_t n = 0; n < N; ++n)
    if (idx[n * K] == idx[n * K + 1]) idx[n * K + 1] = (idx[n * K] + 1) % E;
  Vec<int64_t> slot_token(N * K, -7);
  Vec<int32_t> slot_of(N * K), counts(E), routed(E);
  be.moe_dispatch_plan(slot_token.data(), slot_of.data(), counts.data(), routed.data(), idx.data(), N, E, K, 4);
  r.out(slot_token); r.out(slot_of); r.out(counts); r.out(routed);
}
void case_moe_combine_forward(Backend& be, OpRun& r) {
  using namespace moe;
  auto y = r.rand(N * K * C), w = r.rand(N * K, 0.f, 1.f), out = r.rand(N * C);
  Vec<int32_t> slot_of(N * K);
  for (int64_t i = 0; i < N * K; ++i) slot_of[i] = i % 5 == 3 ? -1 : static_cast<int32_t>((i * 7) % (N * K));
  be.moe_combine_forward(out.data(), y.data(), slot_of.data(), w.data(), N, K, C);
  r.out(out);
}
void case_moe_combine_backward(Backend& be, OpRun& r) {
  using namespace moe;
  r.tol = kKernelTol;
  auto y = r.rand(N * K * C), w = r.rand(N * K, 0.f, 1.f), dout = r.rand(N * C), dy = r.rand(N * K * C),
       dw = r.rand(N * K);
  Vec<int32_t> slot_of(N * K);
  for (int64_t i = 0; i < N * K; ++i) slot_of[i] = i % 5 == 3 ? -1 : static_cast<int32_t>((i * 7) % (N * K));
  be.moe_combine_backward(dy.data(), dw.data(), dout.data(), y.data(), slot_of.data(), w.data(), N, K, C);
  r.out(dy); r.out(dw);
}
void case_moe_router_stats(Backend& be, OpRun& r) {
  using namespace moe;
  r.tol = kKernelTol;
  auto probs = r.rand(N * E, 0.f, 1.f), lse = r.rand(N, -1.f, 3.f);
  auto routed = r.ints(E, 0, 2 * N);
  Vec<float> stats(3);
  be.moe_router_stats(stats.data(), probs.data(), lse.data(), routed.data(), N, E);
  r.out(stats);
}
void case_moe_router_backward(Backend& be, OpRun& r) {
  using namespace moe;
  r.tol = kKernelTol;
  auto logits = r.rand(N * E, -2.f, 2.f), dw = r.rand(N * K), dl = r.rand(N * E);
  Vec<float> probs(N * E), lse(N), w(N * K);
  Vec<int32_t> idx(N * K);
  be.moe_router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), N, E, K);
  auto routed = r.ints(E, 0, 2 * N);
  be.moe_router_backward(dl.data(), dw.data(), probs.data(), lse.data(), idx.data(), w.data(), routed.data(), N, E, K,
                         0.01f, 0.001f, 0.5f);
  r.out(dl);
}

// ---- gradient compression ----
void case_topk_select(Backend& be, OpRun& r) {
  auto m = r.rand(300);
  m[7] = -m[3];  // a tie of magnitudes: broken by index
  Vec<int32_t> idx(17, -1), scratch(300);
  be.topk_select(idx.data(), scratch.data(), m.data(), 300, 17);
  r.out(idx);
}
void case_onebit_compress(Backend& be, OpRun& r) {
  const int64_t n = 300, chunk = 64;  // a partial last chunk and a partial last word
  auto m = r.rand(n), residual = r.rand(n);
  m[5] = 0.f;
  m[6] = -0.f;  // the sign bit of zeros: "not below zero" is positive
  Vec<float> scales(5, 7.f);
  Vec<uint32_t> words(10, 0xFFFFFFFFu);  // cleared by the op
  be.onebit_compress(scales.data(), words.data(), residual.data(), m.data(), n, chunk);
  r.out(scales);
  r.out(words);
  r.out(residual);
  be.onebit_compress(scales.data(), words.data(), nullptr, m.data(), n, chunk);  // no error feedback
  r.out(words);
}
void case_onebit_accumulate(Backend& be, OpRun& r) {
  const int64_t n = 300, chunk = 64;
  auto out = r.rand(n), scales = r.rand(5, 0.f, 1.f);
  Vec<uint32_t> words(10);
  for (uint32_t& w : words) w = r.rng.next_u32();
  be.onebit_accumulate(out.data(), 0.5f, scales.data(), words.data(), n, chunk);
  r.out(out);
}
void case_orthonormalise_columns(Backend& be, OpRun& r) {
  auto a = r.rand(40 * 3);
  for (int64_t i = 0; i < 40; ++i) a[i * 3 + 2] = 2 * a[i * 3];  // column 2 depends on column 0: zeroed
  be.orthonormalise_columns(a.data(), 40, 3);
  r.out(a);
}

// ---- local SGD, the step's loss ----
void case_outer_sgd_update(Backend& be, OpRun& r) {
  for (bool nesterov : {false, true}) {
    auto anchor = r.rand(301), v = r.rand(301), delta = r.rand(301);
    be.outer_sgd_update(anchor.data(), v.data(), delta.data(), 301, 0.7f, 0.9f, nesterov);
    r.out(anchor);
    r.out(v);
  }
}
void case_fill_f64(Backend& be, OpRun& r) {
  Vec<double> x(17, 3.0);
  be.fill_f64(x.data() + 1, 15, -0.5);
  r.out(x);
}
void case_accumulate_mean_loss(Backend& be, OpRun& r) {
  auto losses = r.rand(129, 0.f, 8.f);
  Vec<double> sum(1, 1.25);
  be.accumulate_mean_loss(sum.data(), losses.data(), 129, 120);
  be.accumulate_mean_loss(sum.data(), losses.data(), 129, 0);  // no valid row adds 0
  r.out(sum);
}

}  // namespace op_case

#define TESSERA_CASE_ENTRY(name, ret, params, args) NamedCase{#name, &op_case::case_##name},
const NamedCase kCases[] = {TESSERA_BACKEND_OPS(TESSERA_CASE_ENTRY)};
#undef TESSERA_CASE_ENTRY

std::span<const NamedCase> op_cases() { return kCases; }

}  // namespace tessera
