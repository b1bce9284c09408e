// Sequence-parallel seams of the model: which hooks run on whole rows, the regathers in backward,
// whole pipeline-stage seams, bitwise identity at tp size 1, the shrunken norm/residual activations
// and the error for token rows that tp does not divide.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../token_util.h"
#include "core/memory.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/tensor_parallel_hooks.h"
#include "model/transformer.h"
#include "../backend_util.h"

using namespace tessera;
using tessera::testing::random_tokens;

namespace {
// Records every hook call as "<hook> <point> <layer>" for rank `rank` of `size`, sequence parallel
// when `sp`; communicates nothing (shapes and order, not values).
class SequenceParallelRecorder final : public TensorParallelHooks {
 public:
  SequenceParallelRecorder(int rank, int size, bool sp) : rank_(rank), size_(size), sp_(sp) {}
  std::vector<std::string> calls;
  std::vector<TpRegion> regions;
  int tp_rank() const override { return rank_; }
  int tp_size() const override { return size_; }
  bool sequence_parallel() const override { return sp_; }
  void copy_to_region_forward(const TpRegion& x) override { log("copy_fwd", x); }
  void copy_to_region_backward(const TpRegion& dx) override { log("copy_bwd", dx); }
  void reduce_from_region_forward(const TpRegion& y) override { log("reduce_fwd", y); }
  void reduce_from_region_backward(const TpRegion& dy) override { log("reduce_bwd", dy); }
  void sequence_gather(const TpRegion& x) override { log("gather", x); }
  void cross_entropy_max(const TpRegion& m) override { log("ce_max", m); }
  void cross_entropy_sum(const TpRegion& s) override { log("ce_sum", s); }

 private:
  void log(const char* hook, const TpRegion& r) {
    calls.push_back(std::string(hook) + " " + tp_point_name(r.point) + " " + std::to_string(r.layer));
    regions.push_back(r);
  }
  int rank_, size_;
  bool sp_;
};

size_t live_activation_bytes() { return memory_stats().live[static_cast<size_t>(MemCategory::activations)]; }
}  // namespace

TEST(SequenceParallelSeams, PairsOnWholeRowsPlusRegathersInBackwardAndWholeStageSeams) {
  const ModelConfig cfg = model_preset("tiny").value();  // 2 layers
  const int64_t B = 2, T = 8, N = B * T, C = cfg.d_model;
  ParamStore shard{ParamLayout(cfg, TensorParallelShard{1, 2})};
  init_parameters(shard, cfg, 1);
  Transformer net(tessera::testing::cpu_backend(), cfg, shard, B, T);
  SequenceParallelRecorder rec(1, 2, /*sp=*/true);
  net.set_tensor_parallel_hooks(&rec);
  EXPECT_TRUE(net.sequence_parallel());
  auto tok = random_tokens(N, cfg.vocab_size, 3);
  net.forward(tok.data(), tok.data());
  const std::vector<std::string> forward = {
      "reduce_fwd embedding -1",
      "copy_fwd attn_qkv 0", "reduce_fwd attn_proj 0", "copy_fwd mlp_fc 0", "reduce_fwd mlp_proj 0",
      "copy_fwd attn_qkv 1", "reduce_fwd attn_proj 1", "copy_fwd mlp_fc 1", "reduce_fwd mlp_proj 1",
      "copy_fwd lm_head 2", "ce_max loss 2", "ce_sum loss 2",
  };
  EXPECT_EQ(rec.calls, forward);
  for (size_t i = 0; i < rec.regions.size(); ++i) {
    EXPECT_EQ(rec.regions[i].rows, N) << rec.calls[i] << ": hooks get every row";
    if (rec.regions[i].point != TpPoint::loss) EXPECT_EQ(rec.regions[i].cols, C) << rec.calls[i];
  }
  rec.calls.clear();
  net.backward();
  const std::vector<std::string> backward = {
      "gather lm_head 2", "copy_bwd lm_head 2",
      "reduce_bwd mlp_proj 1", "gather mlp_fc 1", "copy_bwd mlp_fc 1",
      "reduce_bwd attn_proj 1", "gather attn_qkv 1", "copy_bwd attn_qkv 1",
      "reduce_bwd mlp_proj 0", "gather mlp_fc 0", "copy_bwd mlp_fc 0",
      "reduce_bwd attn_proj 0", "gather attn_qkv 0", "copy_bwd attn_qkv 0",
      "reduce_bwd embedding -1",
  };
  EXPECT_EQ(rec.calls, backward);

  // Pipeline stages: a non-last stage gathers its whole output, a non-first one its input gradient.
  const TensorParallelShard one_of_two{1, 2};
  ParamStore s0{ParamLayout(cfg, 0, 1, one_of_two)}, s1{ParamLayout(cfg, 1, 2, one_of_two)};
  init_parameters(s0, cfg, 1);
  init_parameters(s1, cfg, 1);
  Transformer first(tessera::testing::cpu_backend(), cfg, s0, B, T), last(tessera::testing::cpu_backend(), cfg, s1, B, T);
  SequenceParallelRecorder r0(1, 2, true), r1(1, 2, true);
  first.set_tensor_parallel_hooks(&r0);
  last.set_tensor_parallel_hooks(&r1);
  first.forward(tok.data(), nullptr);
  ASSERT_FALSE(r0.calls.empty());
  EXPECT_EQ(r0.calls.back(), "gather stage_output 0");
  EXPECT_EQ(r0.regions.back().data, first.stage_output());
  last.forward(nullptr, tok.data());
  last.backward();
  EXPECT_EQ(r1.calls.back(), "gather stage_input 1");
  EXPECT_NE(last.stage_input(), nullptr);
  std::memset(first.stage_output_grad(), 0, N * C * sizeof(float));
  first.backward();
  EXPECT_EQ(r0.calls.back(), "reduce_bwd embedding -1");
}

TEST(SequenceParallelSeams, AtTpSizeOneItIsBitwiseTheDefault) {
  for (const char* preset : {"tiny", "tiny-llama"}) {
    const ModelConfig cfg = model_preset(preset).value();
    const int64_t B = 2, T = 16, N = B * T;
    ParamStore a{ParamLayout(cfg)}, b{ParamLayout(cfg)};
    init_parameters(a, cfg, 11);
    init_parameters(b, cfg, 11);
    Transformer none(tessera::testing::cpu_backend(), cfg, a, B, T), sp(tessera::testing::cpu_backend(), cfg, b, B, T);
    SequenceParallelRecorder rec(0, 1, /*sp=*/true);
    sp.set_tensor_parallel_hooks(&rec);
    EXPECT_FALSE(sp.sequence_parallel()) << "nothing to split in a world of one";
    a.zero_grads();
    b.zero_grads();
    auto tok = random_tokens(N, cfg.vocab_size, 20), tgt = random_tokens(N, cfg.vocab_size, 30);
    const float la = none.forward(tok.data(), tgt.data());
    const float lb = sp.forward(tok.data(), tgt.data());
    EXPECT_EQ(std::memcmp(&la, &lb, sizeof(float)), 0) << preset;
    none.backward();
    sp.backward();
    EXPECT_EQ(std::memcmp(a.grads(), b.grads(), static_cast<size_t>(a.numel()) * sizeof(float)), 0) << preset;
  }
}

TEST(SequenceParallelSeams, NormAndResidualActivationsShrinkToTheRankRows) {
  const ModelConfig cfg = model_preset("tiny").value();  // L 2, C 64
  const int64_t B = 2, T = 32, N = B * T, C = cfg.d_model, L = cfg.n_layer;
  for (int p : {2, 4}) {
    ParamStore shard{ParamLayout(cfg, TensorParallelShard{0, p})};
    const size_t before = live_activation_bytes();
    Transformer net(tessera::testing::cpu_backend(), cfg, shard, B, T);
    const size_t tp_bytes = live_activation_bytes() - before;
    SequenceParallelRecorder rec(0, p, /*sp=*/true);
    net.set_tensor_parallel_hooks(&rec);
    const size_t sp_bytes = live_activation_bytes() - before;
    // Per layer ln1, residual2, ln2, residual3 (plus their norm statistics), the embedding output
    // and the final norm keep N/p of N rows; one (N, C) scratch buffer is added.
    const int64_t saved_floats = (4 * L + 2) * (N - N / p) * C - N * C;
    EXPECT_GE(static_cast<int64_t>(tp_bytes) - static_cast<int64_t>(sp_bytes),
              saved_floats * static_cast<int64_t>(sizeof(float)))
        << "tp " << p << ": " << tp_bytes << " bytes without sequence parallelism, " << sp_bytes << " with";
  }
}

TEST(SequenceParallelSeamsDeathTest, TokenRowsNotDivisibleByTpNameBothAndTheFix) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ModelConfig cfg = model_preset("tiny").value();
  EXPECT_DEATH(
      {
        ParamStore shard{ParamLayout(cfg, TensorParallelShard{1, 4})};
        Transformer net(tessera::testing::cpu_backend(), cfg, shard, 1, 6);  // 6 token rows over 4 ranks
        SequenceParallelRecorder rec(1, 4, /*sp=*/true);
        net.set_tensor_parallel_hooks(&rec);
      },
      "micro_batch B = 1, seq_len T = 6.*micro_batch\\*seq_len = 6 token rows.*tp = 4");
  const Status s = validate_sequence_parallel(6, 4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("turn sequence parallelism off"), std::string::npos) << s.message();
}
