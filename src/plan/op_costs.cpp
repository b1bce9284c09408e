// Per-op FLOPs and bytes of a chunk's forward and backward (see op_costs.h for the conventions).
#include "plan/op_costs.h"

#include <algorithm>

namespace tessera {

namespace {

constexpr double kF = 4;  // bytes per f32

struct Builder {
  std::vector<OpCost>& out;
  // y(M, N) = x(M, K) W(N, K)^T
  void matmul(double M, double K, double N) {
    out.push_back({OpClass::matmul, 2 * M * K * N, kF * (M * K + K * N + M * N),
                   static_cast<int64_t>(std::min({M, K, N}))});
  }
  void memory(double bytes) { out.push_back({OpClass::memory, 0, bytes, 0}); }
  void attention(double flops, double bytes) { out.push_back({OpClass::attention, flops, bytes, 0}); }
};

struct Shape {
  double N, Nr, C, Q, A, F, FC, T, B;  // rows, norm/residual rows, widths of the tp shard
  bool llama;
  bool dense_mlp = true;  // false: a MoE layer without a shared expert
  bool moe = false;       // a mixture-of-experts layer (run whole on every tp rank)
  // MoE: E experts of width MF (d_ff, never split by tp), S dispatched slots of the rank's tokens;
  // under expert parallelism the rank computes experts_here = E / ep of them over
  // rows_per_expert = ep S / E rows each (uniform routing).
  double E = 0, S = 0, experts_here = 0, rows_per_expert = 0, MF = 0;
};

void moe_forward(Builder& b, const Shape& s) {
  b.matmul(s.N, s.C, s.E);                                    // router (f32)
  b.memory(kF * (2 * s.N * s.E + 2 * s.S * s.C));             // softmax and top-k, gather, combine
  for (int e = 0; e < static_cast<int>(s.experts_here); ++e) {
    b.matmul(s.rows_per_expert, s.C, 2 * s.MF);               // gate and up
    b.memory(kF * s.rows_per_expert * 3 * s.MF);              // swiglu
    b.matmul(s.rows_per_expert, s.MF, s.C);                   // down
  }
}

void layer_forward(Builder& b, const Shape& s) {
  b.memory(kF * 2 * s.Nr * s.C);                      // norm 1
  b.matmul(s.N, s.C, s.Q);                            // qkv
  if (s.llama) b.memory(kF * 2 * s.N * s.Q);          // rope on q and k
  b.attention(2 * s.B * s.T * s.T * s.A, kF * s.N * (s.Q + s.A));  // QK^T and AV, causal: 2 x 2 B T^2 A / 2
  b.matmul(s.N, s.A, s.C);                            // attention projection
  b.memory(kF * 3 * s.Nr * s.C);                      // residual
  b.memory(kF * 2 * s.Nr * s.C);                      // norm 2
  if (s.dense_mlp) {
    b.matmul(s.N, s.C, s.FC);                         // fc (llama: gate and up)
    b.memory(kF * s.N * (s.FC + s.F));                // gelu / swiglu
    b.matmul(s.N, s.F, s.C);                          // mlp projection
  }
  if (s.moe) moe_forward(b, s);
  b.memory(kF * 3 * s.Nr * s.C);                      // residual
}

// Backward: two GEMMs per matmul (input and weight gradient, the same FLOPs each), attention's
// backward recomputes the scores (QK^T, dV, dP, dQ, dK: 2.5 x the forward), memory ops about twice
// the bytes (they read the output gradient and the saved input, write the input gradient).
void layer_backward(Builder& b, const Shape& s) {
  const size_t begin = b.out.size();
  layer_forward(b, s);
  std::vector<OpCost> fwd(b.out.begin() + static_cast<std::ptrdiff_t>(begin), b.out.end());
  b.out.resize(begin);
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    if (it->cls == OpClass::matmul) {
      b.out.push_back(*it);
      b.out.push_back(*it);
    } else if (it->cls == OpClass::attention) {
      b.out.push_back({OpClass::attention, 2.5 * it->flops, 2 * it->bytes, 0});
    } else {
      b.out.push_back({OpClass::memory, 0, 2 * it->bytes, 0});
    }
  }
}

}  // namespace

ChunkOps chunk_ops(const ModelConfig& m, int first, int last, bool head, int tp, bool sequence_parallel, int64_t B,
                   int64_t T, Recompute recompute, int ep) {
  ChunkOps out;
  const double N = static_cast<double>(B * T), t = tp;
  const bool llama = m.arch == Arch::llama;
  const double F = static_cast<double>(m.d_ff);
  const Shape s{N,
                sequence_parallel && tp > 1 ? N / t : N,
                static_cast<double>(m.d_model),
                static_cast<double>(m.qkv_width()) / t,
                static_cast<double>(m.d_model) / t,
                F / t,
                (llama ? 2 * F : F) / t,
                static_cast<double>(T),
                static_cast<double>(B),
                llama};
  const double C = s.C, V = static_cast<double>(m.vocab_size) / t;
  // Layer l's shape: dense, or MoE (Transformer::moe_slots: N K slots, fewer under a capacity).
  auto shape = [&](int l) {
    Shape x = s;
    if (!m.is_moe_layer(l)) return x;
    const int64_t n = B * T, cap = m.moe_capacity(n);
    x.moe = true;
    x.dense_mlp = m.has_dense_mlp(l);
    x.E = static_cast<double>(m.moe_experts);
    x.S = static_cast<double>(cap > 0 ? std::min(n * m.moe_top_k, m.moe_experts * cap) : n * m.moe_top_k);
    x.experts_here = x.E / ep;
    x.rows_per_expert = ep * x.S / x.E;
    x.MF = F;
    return x;
  };
  Builder f{out.forward}, b{out.backward};
  if (first == 0) f.memory(kF * (llama ? 2 : 3) * N * C);  // embedding gather (+ positions)
  for (int l = first; l < last; ++l) layer_forward(f, shape(l));
  if (head) {
    f.memory(kF * 2 * s.Nr * C);  // final norm
    f.matmul(N, C, V);            // head
    f.memory(kF * 2 * N * V);     // loss: row max, sum of exponentials (logits read twice)
    b.memory(kF * 2 * N * V);     // dlogits = softmax - onehot
    b.matmul(N, C, V);
    b.matmul(N, C, V);
    b.memory(kF * 4 * s.Nr * C);  // final norm backward
  }
  for (int l = last - 1; l >= first; --l) {
    if (recompute == Recompute::full) layer_forward(b, shape(l));
    if (recompute == Recompute::selective)
      b.attention(2 * s.B * s.T * s.T * s.A, kF * N * (s.Q + s.A));
    layer_backward(b, shape(l));
  }
  if (first == 0) b.memory(kF * 3 * N * C);  // embedding scatter-add
  return out;
}

double total_flops(const std::vector<OpCost>& ops) {
  double sum = 0;
  for (const OpCost& o : ops) sum += o.flops;
  return sum;
}

double op_seconds(const OpCost& op, const HardwareSpec& hw, std::string_view precision) {
  double rate = 0;
  if (op.cls == OpClass::matmul) rate = hw.peak_flops(precision) * hw.gemm_efficiency_at(op.min_dim);
  if (op.cls == OpClass::attention) rate = hw.attention_peak_flops(precision) * hw.attention_efficiency;
  const double compute = rate > 0 ? op.flops / rate : 0;
  const double memory = hw.memory_bandwidth > 0 ? op.bytes / hw.memory_bandwidth : 0;
  return hw.op_overhead_s + std::max(compute, memory);
}

double class_scale(const HardwareSpec& hw, OpClass cls) {
  const double own = cls == OpClass::matmul ? hw.matmul_scale : cls == OpClass::attention ? hw.attention_scale
                                                                                          : hw.memory_op_scale;
  return own > 0 ? own : hw.compute_scale;
}

std::array<double, 3> seconds_by_class(const std::vector<OpCost>& ops, const HardwareSpec& hw, std::string_view precision) {
  std::array<double, 3> sum{};
  for (const OpCost& o : ops) sum[static_cast<size_t>(o.cls)] += op_seconds(o, hw, precision);
  return sum;
}

double class_seconds(const std::vector<OpCost>& ops, OpClass cls, const HardwareSpec& hw, std::string_view precision) {
  return seconds_by_class(ops, hw, precision)[static_cast<size_t>(cls)] * class_scale(hw, cls);
}

double ops_seconds(const std::vector<OpCost>& ops, const HardwareSpec& hw, std::string_view precision) {
  const std::array<double, 3> sum = seconds_by_class(ops, hw, precision);
  double total = 0;
  for (OpClass c : {OpClass::matmul, OpClass::attention, OpClass::memory})
    total += sum[static_cast<size_t>(c)] * class_scale(hw, c);
  return total;
}

}  // namespace tessera
