// Tensor-parallel seams of the model: the tp-sharded parameter layout (pieces, padding, init) and
// the hooks the Transformer calls (order of the points, bitwise identity by default).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../token_util.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/tensor_parallel_hooks.h"
#include "model/transformer.h"
#include "../backend_util.h"

using namespace tessera;

using tessera::testing::random_tokens;

namespace {

// GQA LLaMA that splits 4 ways (NH 8, NKV 4, d_ff 160), with a vocabulary that needs padding.
ModelConfig gqa_llama() {
  ModelConfig c = model_preset("tiny-llama").value();
  c.name = "gqa-llama";
  c.n_head = 8;
  c.n_kv_head = 4;
  c.vocab_size = 255;
  return c;
}
// GPT-2 with an untied head and an odd vocabulary.
ModelConfig untied_gpt2() {
  ModelConfig c = model_preset("tiny").value();
  c.tied_embeddings = false;
  c.vocab_size = 257;
  return c;
}

// The layout as it was before tensor parallelism: the reference for tp size 1.
struct Expected {
  std::string name;
  Shape shape;
  int64_t offset;
};
std::vector<Expected> old_layout(const ModelConfig& c, int first, int last) {
  std::vector<Expected> out;
  int64_t off = 0;
  auto add = [&](std::string n, Shape s) {
    out.push_back({std::move(n), s, off});
    off += (shape_numel(s) + 15) / 16 * 16;
  };
  const int64_t C = c.d_model, F = c.d_ff, FC = c.arch == Arch::llama ? 2 * F : F;
  const bool b = c.has_bias();
  if (first == 0) {
    add("wte", {c.vocab_size, C});
    if (c.learned_positions()) add("wpe", {c.max_seq_len, C});
  }
  for (int i = first; i < last; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    add(p + "ln1.w", {C});
    if (b) add(p + "ln1.b", {C});
    add(p + "attn.qkv.w", {c.qkv_width(), C});
    if (b) add(p + "attn.qkv.b", {c.qkv_width()});
    add(p + "attn.proj.w", {C, c.n_head * c.head_size()});
    if (b) add(p + "attn.proj.b", {C});
    add(p + "ln2.w", {C});
    if (b) add(p + "ln2.b", {C});
    add(p + "mlp.fc.w", {FC, C});
    if (b) add(p + "mlp.fc.b", {FC});
    add(p + "mlp.proj.w", {C, F});
    if (b) add(p + "mlp.proj.b", {C});
  }
  if (last == c.n_layer) {
    add("lnf.w", {C});
    if (b) add("lnf.b", {C});
    if (!c.tied_embeddings) add("lm_head.w", {c.vocab_size, C});
    else if (first > 0) add("wte", {c.vocab_size, C});  // the tied head's copy on a later pipeline stage
  }
  out.push_back({"<total>", {}, off});
  return out;
}
}  // namespace

TEST(TensorParallelLayout, SizeOneIsTheOldLayout) {
  for (const ModelConfig& cfg : {model_preset("tiny").value(), model_preset("tiny-llama").value(), gqa_llama(),
                                 untied_gpt2()}) {
    const int L = static_cast<int>(cfg.n_layer);
    for (auto [first, last] : {std::pair{0, L}, std::pair{0, 1}, std::pair{1, L}}) {
      const ParamLayout layout(cfg, first, last, TensorParallelShard{0, 1});
      const auto expected = old_layout(cfg, first, last);
      ASSERT_EQ(layout.params().size() + 1, expected.size()) << cfg.name;
      for (size_t i = 0; i < layout.params().size(); ++i) {
        const ParamInfo& p = layout.params()[i];
        EXPECT_EQ(p.name, expected[i].name);
        EXPECT_EQ(p.shape, expected[i].shape) << p.name;
        EXPECT_EQ(p.global_shape, p.shape) << p.name;
        EXPECT_EQ(p.offset, expected[i].offset) << p.name;
        EXPECT_EQ(p.numel, shape_numel(expected[i].shape)) << p.name;
        const auto pieces = layout.shard_pieces(p);
        ASSERT_EQ(pieces.size(), 1u) << p.name;
        EXPECT_EQ(pieces[0].local_offset, 0);
        EXPECT_EQ(pieces[0].global_offset, 0);
        EXPECT_EQ(pieces[0].numel, p.numel);
      }
      EXPECT_EQ(layout.total_numel(), expected.back().offset) << cfg.name;
      EXPECT_EQ(layout.padded_vocab_size(), cfg.vocab_size);
    }
    EXPECT_EQ(ParamLayout(cfg).total_numel(), ParamLayout(cfg, TensorParallelShard{}).total_numel());
  }
}

TEST(TensorParallelLayout, PiecesOfAllRanksCoverEveryGlobalElementOnce) {
  const std::vector<std::pair<ModelConfig, std::vector<int>>> cases = {
      {model_preset("tiny").value(), {1, 2, 4}},
      {untied_gpt2(), {1, 2, 4}},
      {model_preset("tiny-llama").value(), {1, 2}},  // NKV = 2
      {gqa_llama(), {1, 2, 4}},
  };
  for (const auto& [cfg, sizes] : cases) {
    for (int tp : sizes) {
      std::vector<ParamLayout> ranks;
      for (int r = 0; r < tp; ++r) ranks.emplace_back(cfg, TensorParallelShard{r, tp});
      EXPECT_EQ(ranks[0].padded_vocab_size() % tp, 0);
      EXPECT_GE(ranks[0].padded_vocab_size(), cfg.vocab_size);
      EXPECT_LT(ranks[0].padded_vocab_size(), cfg.vocab_size + tp);
      for (size_t t = 0; t < ranks[0].params().size(); ++t) {
        const ParamInfo& p0 = ranks[0].params()[t];
        std::vector<int> hits(static_cast<size_t>(shape_numel(p0.global_shape)), 0);
        for (const ParamLayout& layout : ranks) {
          const ParamInfo& p = layout.params()[t];
          ASSERT_EQ(p.name, p0.name);
          ASSERT_EQ(p.offset, p0.offset) << "all ranks share one buffer layout";
          std::vector<int> local(static_cast<size_t>(p.numel), 0);
          for (const TensorPiece& q : layout.shard_pieces(p)) {
            ASSERT_GT(q.numel, 0);
            ASSERT_LE(q.local_offset + q.numel, p.numel) << p.name;
            ASSERT_LE(q.global_offset + q.numel, static_cast<int64_t>(hits.size())) << p.name;
            for (int64_t i = 0; i < q.numel; ++i) {
              ++hits[static_cast<size_t>(q.global_offset + i)];
              ++local[static_cast<size_t>(q.local_offset + i)];
            }
          }
          // Every local element maps somewhere, except vocabulary padding rows.
          int64_t mapped = 0;
          for (int x : local) mapped += x;
          if (p.split != TpSplit::vocab) {
            EXPECT_EQ(mapped, p.numel) << p.name << " tp " << tp;
          }
          for (int x : local) ASSERT_LE(x, 1) << p.name;
        }
        // Split tensors: exactly once over all ranks; replicated ones: once on every rank.
        const int want = p0.split == TpSplit::replicated ? tp : 1;
        for (size_t i = 0; i < hits.size(); ++i)
          ASSERT_EQ(hits[i], want) << cfg.name << " tp " << tp << " " << p0.name << " element " << i;
      }
    }
  }
}

TEST(TensorParallelLayout, ShardsFollowHeadsBlocksAndVocabulary) {
  const ModelConfig cfg = gqa_llama();  // NH 8, NKV 4, HS 8, C 64, F 160, V 255
  const int64_t C = 64, HS = 8, F = 160;
  const ParamLayout l1(cfg, TensorParallelShard{1, 2});
  // A local element (row, col) of the shard maps to global (row', col') with this.
  auto global_of = [&](const ParamInfo& p, int64_t local) {
    for (const TensorPiece& q : l1.shard_pieces(p))
      if (local >= q.local_offset && local < q.local_offset + q.numel) return q.global_offset + local - q.local_offset;
    return int64_t{-1};
  };
  const ParamInfo& qkv = l1.get("h.0.attn.qkv.w");
  EXPECT_EQ(qkv.split, TpSplit::column);
  EXPECT_EQ(qkv.shape, (Shape{(4 + 2 * 2) * HS, C}));
  EXPECT_EQ(qkv.global_shape, (Shape{(8 + 2 * 4) * HS, C}));
  EXPECT_EQ(global_of(qkv, 0), 4 * HS * C);                      // q: heads 4..7
  EXPECT_EQ(global_of(qkv, 4 * HS * C), (8 + 2) * HS * C);       // k: kv heads 2..3
  EXPECT_EQ(global_of(qkv, 6 * HS * C), (8 + 4 + 2) * HS * C);   // v: kv heads 2..3
  const ParamInfo& fc = l1.get("h.0.mlp.fc.w");
  EXPECT_EQ(fc.shape, (Shape{F, C}));
  EXPECT_EQ(global_of(fc, 0), F / 2 * C);                        // gate rows 80..159
  EXPECT_EQ(global_of(fc, F / 2 * C), (F + F / 2) * C);          // up rows 240..319
  const ParamInfo& proj = l1.get("h.1.mlp.proj.w");
  EXPECT_EQ(proj.split, TpSplit::row);
  EXPECT_EQ(proj.shape, (Shape{C, F / 2}));
  EXPECT_EQ(global_of(proj, 3 * (F / 2) + 5), 3 * F + F / 2 + 5);  // (3, 5) -> (3, 85)
  EXPECT_EQ(l1.get("h.0.attn.proj.w").shape, (Shape{C, 4 * HS}));
  EXPECT_EQ(l1.get("h.0.ln1.w").split, TpSplit::replicated);
  const ParamInfo& head = l1.get("lm_head.w");
  EXPECT_EQ(head.split, TpSplit::vocab);
  EXPECT_EQ(l1.vocab_size(), 255);
  EXPECT_EQ(l1.padded_vocab_size(), 256);
  EXPECT_EQ(l1.local_vocab_range(), (std::pair<int64_t, int64_t>{128, 256}));
  EXPECT_EQ(head.shape, (Shape{128, C}));
  EXPECT_EQ(head.global_shape, (Shape{255, C}));
  ASSERT_EQ(l1.shard_pieces(head).size(), 1u);
  EXPECT_EQ(l1.shard_pieces(head)[0].numel, 127 * C);  // the last row is padding
  // GPT-2: biases of column-parallel linears split, of row-parallel ones replicated.
  const ParamLayout g(model_preset("tiny").value(), TensorParallelShard{0, 4});
  EXPECT_EQ(g.get("h.0.attn.qkv.b").shape, (Shape{3 * 64 / 4}));
  EXPECT_EQ(g.get("h.0.mlp.fc.b").shape, (Shape{256 / 4}));
  EXPECT_EQ(g.get("h.0.attn.proj.b").split, TpSplit::replicated);
  EXPECT_EQ(g.get("h.0.mlp.proj.b").shape, (Shape{64}));
  EXPECT_EQ(g.get("wpe").split, TpSplit::replicated);
}

TEST(TensorParallelLayout, RejectsSplitsThatCutHeadsOrTheMlpNamingTheField) {
  const ModelConfig llama = model_preset("tiny-llama").value();  // NH 4, NKV 2, d_ff 160
  auto kv = ParamLayout::create(llama, 0, 2, TensorParallelShard{0, 4});
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("n_kv_head"), std::string::npos) << kv.status().message();
  auto heads = ParamLayout::create(model_preset("tiny").value(), 0, 2, TensorParallelShard{0, 3});
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("n_head"), std::string::npos) << heads.status().message();
  ModelConfig ff = gqa_llama();
  ff.d_ff = 162;
  Status s = validate_tensor_parallel(ff, TensorParallelShard{0, 4});
  EXPECT_NE(s.message().find("d_ff"), std::string::npos) << s.message();
  EXPECT_FALSE(validate_tensor_parallel(llama, TensorParallelShard{2, 2}).ok());
  EXPECT_FALSE(validate_tensor_parallel(llama, TensorParallelShard{0, 0}).ok());
  EXPECT_TRUE(ParamLayout::create(llama, 0, 2, TensorParallelShard{1, 2}).ok());
}

TEST(TensorParallelLayout, ShardsInitialiseAsTheirPiecesOfTheWholeModel) {
  for (const ModelConfig& cfg : {untied_gpt2(), gqa_llama()}) {
    ParamStore whole{ParamLayout(cfg)};
    init_parameters(whole, cfg, 7);
    for (int r = 0; r < 4; ++r) {
      ParamStore shard{ParamLayout(cfg, TensorParallelShard{r, 4})};
      std::vector<float> expect(static_cast<size_t>(shard.numel()), 0.f);
      for (const ParamInfo& p : shard.layout().params())
        for (const TensorPiece& q : shard.layout().shard_pieces(p))
          std::memcpy(&expect[p.offset + q.local_offset], whole.param(p.name) + q.global_offset, q.numel * sizeof(float));
      init_parameters(shard, cfg, 7);
      for (const ParamInfo& p : shard.layout().params())
        ASSERT_EQ(std::memcmp(shard.params() + p.offset, &expect[p.offset], p.numel * sizeof(float)), 0)
            << cfg.name << " rank " << r << " " << p.name;
    }
  }
}

namespace {
// Logs every hook call (and grad-ready) as "<hook> <point> <layer>"; arithmetic stays the identity.
class RecordingHooks final : public TensorParallelHooks {
 public:
  std::vector<std::string> calls;
  std::vector<TpRegion> regions;
  int tp_rank() const override { return 0; }
  int tp_size() const override { return 1; }
  void copy_to_region_forward(const TpRegion& x) override { log("copy_fwd", x); }
  void copy_to_region_backward(const TpRegion& dx) override { log("copy_bwd", dx); }
  void reduce_from_region_forward(const TpRegion& y) override { log("reduce_fwd", y); }
  void reduce_from_region_backward(const TpRegion& dy) override { log("reduce_bwd", dy); }
  void cross_entropy_max(const TpRegion& m) override { log("ce_max", m); }
  void cross_entropy_sum(const TpRegion& s) override { log("ce_sum", s); }
  void log(const char* hook, const TpRegion& r) {
    calls.push_back(std::string(hook) + " " + tp_point_name(r.point) + " " + std::to_string(r.layer));
    regions.push_back(r);
  }
};

class WorldOfTwo final : public TensorParallelHooks {
 public:
  int tp_rank() const override { return 1; }
  int tp_size() const override { return 2; }
  void copy_to_region_forward(const TpRegion&) override {}
  void copy_to_region_backward(const TpRegion&) override {}
  void reduce_from_region_forward(const TpRegion&) override {}
  void reduce_from_region_backward(const TpRegion&) override {}
  void cross_entropy_max(const TpRegion&) override {}
  void cross_entropy_sum(const TpRegion&) override {}
};
}  // namespace

TEST(TensorParallelHooks, EveryPointIsCalledInOrderInForwardAndBackward) {
  const ModelConfig cfg = model_preset("tiny").value();  // 2 layers
  ASSERT_EQ(cfg.n_layer, 2);
  const int64_t B = 2, T = 8, N = B * T, C = cfg.d_model;
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 1);
  Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
  RecordingHooks rec;
  net.set_tensor_parallel_hooks(&rec);
  net.set_grad_ready_callback([&](int l) { rec.calls.push_back("grad_ready " + std::to_string(l)); });
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
    const TpRegion& r = rec.regions[i];
    EXPECT_EQ(r.rows, N) << rec.calls[i];
    if (r.point == TpPoint::loss) {
      EXPECT_EQ(r.data, nullptr) << "the fused loss has no row statistics to reduce at tp 1";
    } else {
      EXPECT_NE(r.data, nullptr) << rec.calls[i];
      EXPECT_EQ(r.cols, C) << rec.calls[i];
    }
  }
  EXPECT_EQ(rec.regions[0].data, net.stage_input()) << "the embedding output is reduced";
  EXPECT_EQ(rec.regions[8].data, net.stage_output()) << "the last block's mlp proj output is reduced";
  EXPECT_EQ(rec.regions[10].cols, 1);
  EXPECT_EQ(rec.regions[11].cols, 2);

  rec.calls.clear();
  net.backward();
  const std::vector<std::string> backward = {
      "copy_bwd lm_head 2", "grad_ready 2",
      "reduce_bwd mlp_proj 1", "copy_bwd mlp_fc 1", "reduce_bwd attn_proj 1", "copy_bwd attn_qkv 1", "grad_ready 1",
      "reduce_bwd mlp_proj 0", "copy_bwd mlp_fc 0", "reduce_bwd attn_proj 0", "copy_bwd attn_qkv 0", "grad_ready 0",
      "reduce_bwd embedding -1", "grad_ready -1",
  };
  EXPECT_EQ(rec.calls, backward);

  // Without targets only the forward points up to the head are called.
  rec.calls.clear();
  net.forward(tok.data(), nullptr);
  EXPECT_EQ(rec.calls, std::vector<std::string>(forward.begin(), forward.end() - 2));
}

TEST(TensorParallelHooks, ExplicitIdentityIsBitwiseTheDefault) {
  for (const char* preset : {"tiny", "tiny-llama"}) {
    const ModelConfig cfg = model_preset(preset).value();
    const int64_t B = 2, T = 16, N = B * T;
    ParamStore a{ParamLayout(cfg)}, b{ParamLayout(cfg)}, c{ParamLayout(cfg)};
    init_parameters(a, cfg, 11);
    init_parameters(b, cfg, 11);
    init_parameters(c, cfg, 11);
    Transformer none(tessera::testing::cpu_backend(), cfg, a, B, T), identity(tessera::testing::cpu_backend(), cfg, b, B, T), recorded(tessera::testing::cpu_backend(), cfg, c, B, T);
    IdentityTensorParallelHooks id;
    RecordingHooks rec;
    identity.set_tensor_parallel_hooks(&id);
    recorded.set_tensor_parallel_hooks(&rec);
    a.zero_grads(); b.zero_grads(); c.zero_grads();
    for (int m = 0; m < 2; ++m) {  // two accumulated micro-batches
      auto tok = random_tokens(N, cfg.vocab_size, 20 + m), tgt = random_tokens(N, cfg.vocab_size, 30 + m);
      const float la = none.forward(tok.data(), tgt.data());
      const float lb = identity.forward(tok.data(), tgt.data());
      const float lc = recorded.forward(tok.data(), tgt.data());
      EXPECT_EQ(std::memcmp(&la, &lb, sizeof(float)), 0) << preset;
      EXPECT_EQ(std::memcmp(&la, &lc, sizeof(float)), 0) << preset;
      EXPECT_EQ(std::memcmp(none.losses(), identity.losses(), N * sizeof(float)), 0) << preset;
      none.backward(0.5f);
      identity.backward(0.5f);
      recorded.backward(0.5f);
    }
    const size_t bytes = static_cast<size_t>(a.numel()) * sizeof(float);
    EXPECT_EQ(std::memcmp(a.grads(), b.grads(), bytes), 0) << preset;
    EXPECT_EQ(std::memcmp(a.grads(), c.grads(), bytes), 0) << preset;
    identity.set_tensor_parallel_hooks(nullptr);  // back to the default
    auto tok = random_tokens(N, cfg.vocab_size, 40);
    none.forward(tok.data(), nullptr);
    identity.forward(tok.data(), nullptr);
    EXPECT_EQ(std::memcmp(none.logits(), identity.logits(), N * cfg.vocab_size * sizeof(float)), 0) << preset;
  }
}

TEST(TensorParallelHooksDeathTest, HooksMustMatchTheLayoutsShard) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ModelConfig cfg = model_preset("tiny").value();
  EXPECT_DEATH(
      {
        ParamStore store{ParamLayout(cfg)};
        Transformer net(tessera::testing::cpu_backend(), cfg, store, 1, 8);
        WorldOfTwo two;
        net.set_tensor_parallel_hooks(&two);
      },
      "do not match the parameter layout's shard");
  EXPECT_DEATH(
      {
        ParamStore shard{ParamLayout(cfg, TensorParallelShard{1, 2})};
        init_parameters(shard, cfg, 1);
        Transformer net(tessera::testing::cpu_backend(), cfg, shard, 1, 8);
        auto tok = random_tokens(8, cfg.vocab_size, 1);
        net.forward(tok.data(), tok.data());  // still on the identity hooks
      },
      "call set_tensor_parallel_hooks");
}

TEST(TensorParallelHooks, ShardedModelUsesLocalSizesAndCallsTheLossHooksWithRowStatistics) {
  // One rank of a tp group of 2 with recording (non-communicating) hooks: the shapes, not the values.
  class RankOneOfTwo final : public TensorParallelHooks {
   public:
    std::vector<TpRegion> loss_regions;
    int tp_rank() const override { return 1; }
    int tp_size() const override { return 2; }
    void copy_to_region_forward(const TpRegion&) override {}
    void copy_to_region_backward(const TpRegion&) override {}
    void reduce_from_region_forward(const TpRegion&) override {}
    void reduce_from_region_backward(const TpRegion&) override {}
    void cross_entropy_max(const TpRegion& m) override { loss_regions.push_back(m); }
    void cross_entropy_sum(const TpRegion& s) override { loss_regions.push_back(s); }
  };
  ModelConfig cfg = model_preset("tiny").value();
  cfg.vocab_size = 257;  // padded to 258: rank 1 owns rows [129, 258), the last one padding
  const int64_t B = 1, T = 8;
  ParamStore shard{ParamLayout(cfg, TensorParallelShard{1, 2})};
  init_parameters(shard, cfg, 1);
  Transformer net(tessera::testing::cpu_backend(), cfg, shard, B, T);
  RankOneOfTwo hooks;
  net.set_tensor_parallel_hooks(&hooks);
  EXPECT_EQ(net.logits_width(), 129);
  auto tok = random_tokens(B * T, cfg.vocab_size, 2);
  net.forward(tok.data(), tok.data());
  ASSERT_EQ(hooks.loss_regions.size(), 2u);
  EXPECT_NE(hooks.loss_regions[0].data, nullptr);
  EXPECT_EQ(hooks.loss_regions[0].cols, 1);
  EXPECT_EQ(hooks.loss_regions[1].cols, 2);
  EXPECT_EQ(hooks.loss_regions[1].rows, B * T);
  net.backward();
  EXPECT_TRUE(net.tp_status().ok());
  const float* dwte = shard.grad("wte");
  for (int64_t c = 0; c < cfg.d_model; ++c) EXPECT_EQ(dwte[128 * cfg.d_model + c], 0.f) << "padding row";
}
