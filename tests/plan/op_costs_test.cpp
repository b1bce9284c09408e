// The cost functions under the step-time model on hand-computable cases (plan/op_costs.h,
// comm_cost.h): matmul FLOPs are 6 N tokens (tp divides them, full recomputation adds one forward),
// attention is causal, an op takes the slower of its FLOPs and bytes, and a ring all-reduce moves
// 2(p-1)/p of the buffer on the link where its group sits.
#include <gtest/gtest.h>

#include <vector>

#include "model/param_layout.h"
#include "plan/comm_cost.h"
#include "plan/op_costs.h"
#include "step_time_fixtures.h"

namespace tessera {
namespace {

using step_time_test::config;
using step_time_test::ideal;

double flops_of(const std::vector<OpCost>& ops, OpClass cls) {
  double s = 0;
  for (const OpCost& o : ops) s += o.cls == cls ? o.flops : 0;
  return s;
}

// Matmul parameters of the whole model: per layer qkv, projection, MLP in and out; the (tied) head.
double matmul_params(const ModelConfig& m) {
  const double C = m.d_model, F = m.d_ff, Q = m.qkv_width(), FC = m.arch == Arch::llama ? 2 * F : F;
  return m.n_layer * (Q * C + C * C + FC * C + C * F) + m.vocab_size * C;
}

TEST(OpCosts, MatmulFlopsAreSixNTokensAndAttentionIsCausal) {
  for (const char* arch : {"tiny", "tiny-llama"}) {
    RunConfig cfg = config({std::string("model.preset=") + arch});
    const ModelConfig& m = cfg.model;
    const int64_t B = 4, T = 64;
    const ChunkOps ops = chunk_ops(m, 0, static_cast<int>(m.n_layer), true, 1, false, B, T, Recompute::none);
    const double tokens = B * T;
    EXPECT_DOUBLE_EQ(flops_of(ops.forward, OpClass::matmul) + flops_of(ops.backward, OpClass::matmul),
                     6 * matmul_params(m) * tokens) << arch;
    // Causal QK^T and AV: 2 matmuls x 2 flops x B T^2 C / 2 per layer.
    EXPECT_DOUBLE_EQ(flops_of(ops.forward, OpClass::attention), m.n_layer * 2.0 * B * T * T * m.d_model) << arch;
  }
}

// A MoE layer: the router, and K times a dense MLP's matmul FLOPs (dropless top-K: N K rows through
// the experts) split into one matmul pair per expert; under ep the same FLOPs in fewer, larger matmuls.
TEST(OpCosts, MixtureOfExpertsCountsTheRouterAndTopKExperts) {
  RunConfig cfg = config({"model.preset=tiny-moe"});
  const ModelConfig& m = cfg.model;
  ModelConfig dense = m;
  dense.moe_experts = 0;
  const int L = static_cast<int>(m.n_layer);
  const int64_t B = 4, T = 64;
  const double N = B * T, C = m.d_model, E = m.moe_experts, K = m.moe_top_k;
  const ChunkOps moe = chunk_ops(m, 0, L, true, 1, false, B, T, Recompute::none);
  const ChunkOps mlp = chunk_ops(dense, 0, L, true, 1, false, B, T, Recompute::none);
  const double mlp_per_layer = 2 * N * C * (2.0 * m.d_ff) + 2 * N * m.d_ff * C;  // gate and up, projection
  EXPECT_DOUBLE_EQ(flops_of(moe.forward, OpClass::matmul),
                   flops_of(mlp.forward, OpClass::matmul) + L * ((K - 1) * mlp_per_layer + 2 * N * C * E));
  auto matmuls = [](const std::vector<OpCost>& ops) {
    return std::count_if(ops.begin(), ops.end(), [](const OpCost& op) { return op.cls == OpClass::matmul; });
  };
  // Per layer the dense MLP's two matmuls become the router's one and two per expert.
  EXPECT_EQ(matmuls(moe.forward), matmuls(mlp.forward) + L * (1 + 2 * m.moe_experts - 2));
  const ChunkOps ep2 = chunk_ops(m, 0, L, true, 1, false, B, T, Recompute::none, 2);
  EXPECT_DOUBLE_EQ(flops_of(ep2.forward, OpClass::matmul), flops_of(moe.forward, OpClass::matmul));
  EXPECT_LT(ep2.forward.size(), moe.forward.size());
}

TEST(OpCosts, TensorParallelDividesAndFullRecomputeAddsOneForward) {
  RunConfig cfg = config();
  const ModelConfig& m = cfg.model;
  const int L = static_cast<int>(m.n_layer);
  const ChunkOps one = chunk_ops(m, 0, L, true, 1, false, 4, 64, Recompute::none);
  const ChunkOps two = chunk_ops(m, 0, L, true, 2, false, 4, 64, Recompute::none);
  EXPECT_DOUBLE_EQ(total_flops(two.forward) * 2, total_flops(one.forward));
  EXPECT_DOUBLE_EQ(total_flops(two.backward) * 2, total_flops(one.backward));
  // Layers only (no head): full recomputation re-runs exactly the layers' forward in backward.
  const ChunkOps plain = chunk_ops(m, 1, 3, false, 1, false, 4, 64, Recompute::none);
  const ChunkOps full = chunk_ops(m, 1, 3, false, 1, false, 4, 64, Recompute::full);
  EXPECT_DOUBLE_EQ(total_flops(full.backward), total_flops(plain.backward) + total_flops(plain.forward));
  const ChunkOps sel = chunk_ops(m, 1, 3, false, 1, false, 4, 64, Recompute::selective);
  EXPECT_DOUBLE_EQ(total_flops(sel.backward) - total_flops(plain.backward),
                   flops_of(plain.forward, OpClass::attention));
}

TEST(OpCosts, RooflineTakesTheSlowerOfFlopsAndBytes) {
  HardwareSpec h = ideal();
  h.memory_bandwidth = 1e9;
  h.op_overhead_s = 1e-6;
  h.gemm_efficiency = {{100, 0.5}, {1000, 1.0}};
  EXPECT_DOUBLE_EQ(h.gemm_efficiency_at(10), 0.5);
  EXPECT_NEAR(h.gemm_efficiency_at(316), 0.75, 1e-3);  // half way in log(size)
  const OpCost mm{OpClass::matmul, 1e9, 1e3, 1000};      // compute bound: 1 ms
  EXPECT_DOUBLE_EQ(op_seconds(mm, h, "fp32"), 1e-6 + 1e-3);
  const OpCost mem{OpClass::memory, 0, 1e6, 0};  // 1 ms at 1 GB/s
  EXPECT_DOUBLE_EQ(op_seconds(mem, h, "fp32"), 1e-6 + 1e-3);
}

// train.precision = "bf16": matmuls at the bf16 peak; attention at the f32 one where the file says
// attention computes in f32 (Tessera's CPU kernels), at the bf16 one where it does not (GPU files).
TEST(OpCosts, Bf16RunsMatmulsAtTheBf16PeakAndAttentionAtItsOwn) {
  HardwareSpec h = ideal();  // f32 peak 1e12, attention at all of it
  h.peak_flops_bf16 = 2e12;
  const OpCost mm{OpClass::matmul, 1e9, 0, 1000}, att{OpClass::attention, 1e9, 0, 0};
  EXPECT_DOUBLE_EQ(op_seconds(mm, h, "fp32"), 1e-3);
  EXPECT_DOUBLE_EQ(op_seconds(mm, h, "bf16"), 0.5e-3);
  EXPECT_DOUBLE_EQ(op_seconds(att, h, "bf16"), 0.5e-3);
  h.attention_precision = "fp32";
  EXPECT_DOUBLE_EQ(op_seconds(att, h, "bf16"), 1e-3);
  EXPECT_DOUBLE_EQ(op_seconds(mm, h, "bf16"), 0.5e-3);
}

TEST(CommCost, RingAllReduceMovesTwoTimesPMinusOneOverPOfTheBuffer) {
  const LinkSpec link{1e-5, 1e9};
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(1e9, 4, {0, 1e9}), 1.5);  // 2 (4-1)/4 x 1 GB at 1 GB/s
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(1e9, 4, link), 6e-5 + 1.5);
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(1e9, 4, link) + ring_all_gather_s(1e9, 4, link),
                   ring_all_reduce_s(1e9, 4, link));
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(1e9, 1, link), 0);
  EXPECT_DOUBLE_EQ(point_to_point_s(1e6, link), 1e-5 + 1e-3);
}

TEST(CommCost, GroupsAcrossNodesUseTheNetwork) {
  const GridShape g{2, 1, 8};  // dp 2 x tp 8 on nodes of 8: tp inside a node, dp across
  EXPECT_FALSE(group_spans_nodes(g, GridAxis::tp, 8));
  EXPECT_TRUE(group_spans_nodes(g, GridAxis::dp, 8));
  HardwareSpec h = ideal();
  EXPECT_EQ(group_link(h, g, GridAxis::dp).bandwidth, h.inter.bandwidth);
  EXPECT_EQ(group_link(h, g, GridAxis::tp).bandwidth, h.intra.bandwidth);
  h.measured = {{8, {1e-6, 5e9}}};
  EXPECT_EQ(group_link(h, g, GridAxis::tp).bandwidth, 5e9);  // a measured group of that size wins inside a node
}

}  // namespace
}  // namespace tessera
