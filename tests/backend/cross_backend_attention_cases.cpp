// The op cases of RoPE and attention (cross_backend_op_cases.h): whole-sequence attention, RoPE at
// position 0 and at an offset, and the ring's block-pair attention.
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "cross_backend_op_cases.h"

namespace tessera::op_case {

// ---- rope, attention ----
constexpr int64_t kAB = 2, kAT = 9, kNH = 4, kNKV = 2, kHS = 16;
constexpr int64_t kQKV = (kNH + 2 * kNKV) * kHS;
void case_rope_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto qkv = r.rand(kAB * kAT * kQKV);
  be.rope_forward(qkv.data(), kAB, kAT, kNH, kNKV, kHS, 10000.f);
  r.out(qkv);
}
void case_rope_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto dqkv = r.rand(kAB * kAT * kQKV);
  be.rope_backward(dqkv.data(), kAB, kAT, kNH, kNKV, kHS, 10000.f);
  r.out(dqkv);
}
void case_attention_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kAB * kAT * kNH * kHS), lse = r.rand(kAB * kNH * kAT), qkv = r.rand(kAB * kAT * kQKV, -2.f, 2.f);
  be.attention_forward(out.data(), lse.data(), qkv.data(), kAB, kAT, kNH, kNKV, kHS);
  r.out(out);
  r.out(lse);
}
void case_attention_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto out = r.rand(kAB * kAT * kNH * kHS), lse = r.rand(kAB * kNH * kAT), qkv = r.rand(kAB * kAT * kQKV, -2.f, 2.f),
       dqkv = r.rand(kAB * kAT * kQKV), dout = r.rand(kAB * kAT * kNH * kHS);
  be.attention_forward(out.data(), lse.data(), qkv.data(), kAB, kAT, kNH, kNKV, kHS);
  be.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), kAB, kAT, kNH, kNKV, kHS);
  r.out(dqkv);
}
void case_rope_forward_at(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto qkv = r.rand(kAB * kAT * kQKV);
  be.rope_forward_at(qkv.data(), kAB, kAT, 5, kNH, kNKV, kHS, 10000.f);
  r.out(qkv);
}
void case_rope_backward_at(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto dqkv = r.rand(kAB * kAT * kQKV);
  be.rope_backward_at(dqkv.data(), kAB, kAT, 5, kNH, kNKV, kHS, 10000.f);
  r.out(dqkv);
}
// One (query chunk, kv chunk) pair of a ring: a full pair of different lengths, then the diagonal.
void case_attention_block_forward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  const int64_t Tk = kAT + 2, kv_stride = 2 * kNKV * kHS;
  auto q = r.rand(kAB * kAT * kQKV, -2.f, 2.f), kv = r.rand(kAB * Tk * kv_stride, -2.f, 2.f);
  Vec<float> out(kAB * kAT * kNH * kHS, 0.f), lse(kAB * kNH * kAT, -std::numeric_limits<float>::infinity());
  const float* k = kv.data();
  const float* v = kv.data() + kNKV * kHS;
  be.attention_block_forward(out.data(), lse.data(), q.data(), kQKV, k, v, kv_stride, kAB, kAT, Tk, kNH, kNKV, kHS,
                             ops::BlockMask::full);
  be.attention_block_forward(out.data(), lse.data(), q.data(), kQKV, q.data() + kNH * kHS,
                             q.data() + (kNH + kNKV) * kHS, kQKV, kAB, kAT, kAT, kNH, kNKV, kHS, ops::BlockMask::causal);
  r.out(out);
  r.out(lse);
}
void case_attention_block_delta(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto delta = r.rand(kAB * kNH * kAT), dout = r.rand(kAB * kAT * kNH * kHS), out = r.rand(kAB * kAT * kNH * kHS);
  be.attention_block_delta(delta.data(), dout.data(), out.data(), kAB, kAT, kNH, kHS);
  r.out(delta);
}
void case_attention_block_backward(Backend& be, OpRun& r) {
  r.tol = kKernelTol;
  auto qkv = r.rand(kAB * kAT * kQKV, -2.f, 2.f), dout = r.rand(kAB * kAT * kNH * kHS), dqkv = r.rand(kAB * kAT * kQKV);
  Vec<float> out(kAB * kAT * kNH * kHS), lse(kAB * kNH * kAT), delta(kAB * kNH * kAT);
  be.attention_forward(out.data(), lse.data(), qkv.data(), kAB, kAT, kNH, kNKV, kHS);
  be.attention_block_delta(delta.data(), dout.data(), out.data(), kAB, kAT, kNH, kHS);
  const float* q = qkv.data();
  const float* k = q + kNH * kHS;
  const float* v = k + kNKV * kHS;
  be.attention_block_backward(dqkv.data(), kQKV, dqkv.data() + kNH * kHS, dqkv.data() + (kNH + kNKV) * kHS, kQKV,
                              dout.data(), q, kQKV, k, v, kQKV, lse.data(), delta.data(), kAB, kAT, kAT, kNH, kNKV, kHS,
                              ops::BlockMask::causal);
  r.out(dqkv);
}

}  // namespace tessera::op_case
