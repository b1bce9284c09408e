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
};

void layer_forward(Builder& b, const Shape& s) {
  b.memory(kF * 2 * s.Nr * s.C);                      // norm 1
  b.matmul(s.N, s.C, s.Q);                            // qkv
  if (s.llama) b.memory(kF * 2 * s.N * s.Q);          // rope on q and k
  b.attention(2 * s.B * s.T * s.T * s.A, kF * s.N * (s.Q + s.A));  // QK^T and AV, causal: 2 x 2 B T^2 A / 2
  b.matmul(s.N, s.A, s.C);                            // attention projection
  b.memory(kF * 3 * s.Nr * s.C);                      // residual
  b.memory(kF * 2 * s.Nr * s.C);                      // norm 2
  b.matmul(s.N, s.C, s.FC);                           // fc (llama: gate and up)
  b.memory(kF * s.N * (s.FC + s.F));                  // gelu / swiglu
  b.matmul(s.N, s.F, s.C);                            // mlp projection
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

ChunkOps chunk_ops(const ModelConfig& m, int first, int last, int tp, bool sequence_parallel, int64_t B, int64_t T,
                   Recompute recompute) {
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
  Builder f{out.forward}, b{out.backward};
  if (first == 0) f.memory(kF * (llama ? 2 : 3) * N * C);  // embedding gather (+ positions)
  for (int l = first; l < last; ++l) layer_forward(f, s);
  if (last == m.n_layer) {
    f.memory(kF * 2 * s.Nr * C);  // final norm
    f.matmul(N, C, V);            // head
    f.memory(kF * 2 * N * V);     // loss: row max, sum of exponentials (logits read twice)
    b.memory(kF * 2 * N * V);     // dlogits = softmax - onehot
    b.matmul(N, C, V);
    b.matmul(N, C, V);
    b.memory(kF * 4 * s.Nr * C);  // final norm backward
  }
  for (int l = last - 1; l >= first; --l) {
    if (recompute == Recompute::full) layer_forward(b, s);
    if (recompute == Recompute::selective)
      b.attention(2 * s.B * s.T * s.T * s.A, kF * N * (s.Q + s.A));
    layer_backward(b, s);
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
  const double peak = hw.peak_flops(precision);
  double rate = 0;
  if (op.cls == OpClass::matmul) rate = peak * hw.gemm_efficiency_at(op.min_dim);
  if (op.cls == OpClass::attention) rate = peak * hw.attention_efficiency;
  const double compute = rate > 0 ? op.flops / rate : 0;
  const double memory = hw.memory_bandwidth > 0 ? op.bytes / hw.memory_bandwidth : 0;
  return hw.op_overhead_s + std::max(compute, memory);
}

double ops_seconds(const std::vector<OpCost>& ops, const HardwareSpec& hw, std::string_view precision) {
  double sum = 0;
  for (const OpCost& o : ops) sum += op_seconds(o, hw, precision);
  return sum * hw.compute_scale;
}

}  // namespace tessera
