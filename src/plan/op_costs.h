// FLOPs and bytes of every op one micro-batch runs through one model chunk (the step-time model's
// compute term), from the model shape alone: the same ops model/transformer_passes.cpp calls, with
// the tensor-parallel shard's widths and, under sequence parallelism, the norms and residuals on N/tp
// rows. Matmul FLOPs are 2 M K N; attention is causal (half of the T x T work, as in ModelConfig::
// flops_per_token); memory-bound ops count the f32 bytes they read and write.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/recompute.h"
#include "plan/hardware.h"

namespace tessera {

enum class OpClass { matmul, attention, memory };

struct OpCost {
  OpClass cls = OpClass::memory;
  double flops = 0;
  double bytes = 0;
  int64_t min_dim = 0;  // matmul: its smallest dimension (the GEMM efficiency's shape class)
};

// One micro-batch (B sequences of T tokens) through layers [first, last) of a chunk, on one tensor-
// parallel rank of `tp`; with the embedding when first == 0, the final norm, head and loss when
// `head`. backward includes what train.recompute re-runs.
struct ChunkOps {
  std::vector<OpCost> forward, backward;
};
// A mixture-of-experts layer costs its router, the dispatch and combine, and one matmul pair per
// expert this rank computes (E / ep of them) over the rows uniform routing gives it.
ChunkOps chunk_ops(const ModelConfig& m, int first, int last, bool head, int tp, bool sequence_parallel, int64_t B,
                   int64_t T, Recompute recompute, int ep = 1);

// Sum of FLOPs of a list (matmul and attention).
double total_flops(const std::vector<OpCost>& ops);

// Seconds of one op on `hw`: the op overhead plus the larger of its FLOPs at the achieved rate
// (matmul: peak x gemm_efficiency_at(min_dim); attention: peak x attention_efficiency) and its bytes
// at the memory bandwidth (a roofline).
double op_seconds(const OpCost& op, const HardwareSpec& hw, std::string_view precision);
// What the op model misses for a class on `hw`: its matmul_scale / attention_scale / memory_op_scale,
// or compute_scale where that is 0.
double class_scale(const HardwareSpec& hw, OpClass cls);
// op_seconds summed per class (indexed by OpClass), unscaled.
std::array<double, 3> seconds_by_class(const std::vector<OpCost>& ops, const HardwareSpec& hw, std::string_view precision);
// One class's share of ops_seconds: its ops' sum times its class_scale.
double class_seconds(const std::vector<OpCost>& ops, OpClass cls, const HardwareSpec& hw, std::string_view precision);
// Their sum, each op times its class_scale.
double ops_seconds(const std::vector<OpCost>& ops, const HardwareSpec& hw, std::string_view precision);

}  // namespace tessera
