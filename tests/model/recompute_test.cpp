// Activation recomputation (model/recompute.h): selective and full give bitwise the losses,
// gradients and AdamW steps of none, with the same layer events and grad-ready order, read each
// layer's parameters only where the layer events say (ZeRO-3), call the tensor-parallel hooks of
// the recomputed forward in backward, keep the pipeline seams, and allocate less.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../token_util.h"
#include "core/memory.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/recompute.h"
#include "model/tensor_parallel_hooks.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "../backend_util.h"

using namespace tessera;
using tessera::testing::random_tokens;

namespace {

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}
bool same_bits(float a, float b) { return same_bits(&a, &b, 1); }

// The first tensor whose bits differ, for the failure message.
std::string first_difference(const ParamStore& a, const ParamStore& b, bool grads) {
  for (const ParamInfo& p : a.layout().params()) {
    const float* x = (grads ? a.grads() : a.params()) + p.offset;
    const float* y = (grads ? b.grads() : b.params()) + p.offset;
    for (int64_t i = 0; i < p.numel; ++i)
      if (!same_bits(x[i], y[i]))
        return p.name + "[" + std::to_string(i) + "]: " + std::to_string(x[i]) + " vs " + std::to_string(y[i]);
  }
  return "none";
}

const Recompute kModes[] = {Recompute::none, Recompute::selective, Recompute::full};

struct Variant {
  const char* preset;
  bool tied;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.preset << (v.tied ? " tied" : " untied"); }
ModelConfig config_of(const Variant& v) {
  ModelConfig cfg = model_preset(v.preset).value();
  cfg.tied_embeddings = v.tied;
  return cfg;
}
std::string variant_name(const Variant& v) {
  std::string s = std::string(v.preset) + (v.tied ? "_tied" : "_untied");
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

// Simulates ZeRO-3 with the layer events: a layer's parameters are poisoned (NaN) except between
// before_forward and after_forward, and between before_backward and its grad-ready callback. A model
// that reads a parameter outside these windows gets NaN losses or gradients.
class ParameterWindows {
 public:
  ParameterWindows(ParamStore& store, const ModelConfig& cfg, Transformer& net, std::vector<std::string>* log)
      : store_(store), cfg_(cfg), log_(log) {
    net.set_layer_callback([this](Transformer::LayerEvent e, int layer) {
      const char* name = e == Transformer::LayerEvent::before_forward    ? "before_forward "
                         : e == Transformer::LayerEvent::after_forward   ? "after_forward "
                                                                         : "before_backward ";
      if (log_) log_->push_back(name + std::to_string(layer));
      if (e == Transformer::LayerEvent::after_forward) poison(layer);
      else restore(layer);
    });
    net.set_grad_ready_callback([this](int layer) {
      if (log_) log_->push_back("grad_ready " + std::to_string(layer));
      poison(layer);
    });
  }
  // Before a step: keep the real parameters and poison every layer's.
  void begin_step() {
    master_.assign(store_.params(), store_.params() + store_.numel());
    for (const ParamInfo& p : store_.layout().params()) fill(p, std::numeric_limits<float>::quiet_NaN());
  }
  // After backward: every parameter back, for the optimizer.
  void end_step() { std::memcpy(store_.params(), master_.data(), master_.size() * sizeof(float)); }

 private:
  // The tensors read at `layer`'s events (a tied head reads wte at n_layer).
  bool read_at(const ParamInfo& p, int layer) const {
    return p.layer == layer || (layer == cfg_.n_layer && cfg_.tied_embeddings && p.name == "wte");
  }
  void fill(const ParamInfo& p, float value) { std::fill(store_.params() + p.offset, store_.params() + p.offset + p.numel, value); }
  void poison(int layer) {
    for (const ParamInfo& p : store_.layout().params())
      if (read_at(p, layer)) fill(p, std::numeric_limits<float>::quiet_NaN());
  }
  void restore(int layer) {
    for (const ParamInfo& p : store_.layout().params())
      if (read_at(p, layer)) std::memcpy(store_.params() + p.offset, master_.data() + p.offset, p.numel * sizeof(float));
  }
  ParamStore& store_;
  const ModelConfig& cfg_;
  std::vector<std::string>* log_;
  std::vector<float> master_;
};

}  // namespace

TEST(Recompute, ParsesTheThreeNamesAndRejectsOthersNamingTheKey) {
  for (Recompute r : kModes) {
    Result<Recompute> parsed = parse_recompute(recompute_name(r));
    ASSERT_TRUE(parsed.ok()) << recompute_name(r);
    EXPECT_EQ(*parsed, r);
  }
  EXPECT_EQ(recompute_name(Recompute::selective), "selective");
  Result<Recompute> bad = parse_recompute("ful");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
  for (const char* part : {"'ful'", "train.recompute", "\"none\"", "\"selective\"", "\"full\""})
    EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
  EXPECT_FALSE(parse_recompute("").ok());
  EXPECT_FALSE(parse_recompute("Full").ok());
}

class RecomputeModels : public ::testing::TestWithParam<Variant> {};

// Three micro-batches per step (gradient accumulation), AdamW with clipping, four steps, every model
// under the ZeRO-3 parameter windows: each micro-batch's loss and per-row losses, the accumulated
// gradients, the parameters after each step, the layer events and the grad-ready order are those
// of none, bit for bit; and so are the logits of an evaluation forward without targets.
TEST_P(RecomputeModels, LossesGradientsAndAdamWStepsAreBitwiseThoseOfNone) {
  const ModelConfig cfg = config_of(GetParam());
  const int64_t B = 2, T = 16, N = B * T;
  const int micro_batches = 3, steps = 4;
  struct Model {
    Recompute mode;
    ParamStore store;
    std::unique_ptr<Transformer> net;
    std::unique_ptr<AdamW> opt;
    std::vector<std::string> log;
    std::unique_ptr<ParameterWindows> windows;
  };
  std::vector<std::unique_ptr<Model>> models;
  for (Recompute mode : kModes) {
    auto m = std::unique_ptr<Model>(new Model{mode, ParamStore{ParamLayout(cfg)}, nullptr, nullptr, {}, nullptr});
    init_parameters(m->store, cfg, 7);
    // none through the constructor's default, the others one each way.
    if (mode == Recompute::none) m->net = std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, m->store, B, T);
    else if (mode == Recompute::selective) m->net = std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, m->store, B, T, mode);
    else {
      m->net = std::make_unique<Transformer>(tessera::testing::cpu_backend(), cfg, m->store, B, T);
      m->net->set_recompute(mode);
    }
    EXPECT_EQ(m->net->recompute(), mode);
    m->opt = std::make_unique<AdamW>(m->store.layout(), AdamWConfig{});
    m->windows = std::make_unique<ParameterWindows>(m->store, cfg, *m->net, &m->log);
    models.push_back(std::move(m));
  }
  // A plain none model without the windows: the reference the windows must not change.
  ParamStore plain_store{ParamLayout(cfg)};
  init_parameters(plain_store, cfg, 7);
  Transformer plain(tessera::testing::cpu_backend(), cfg, plain_store, B, T);
  AdamW plain_opt(plain_store.layout(), AdamWConfig{});

  for (int step = 0; step < steps; ++step) {
    for (auto& m : models) {
      m->store.zero_grads();
      m->log.clear();
    }
    plain_store.zero_grads();
    for (int mb = 0; mb < micro_batches; ++mb) {
      auto tok = random_tokens(N, cfg.vocab_size, 1000 + 10 * step + mb);
      auto tgt = random_tokens(N, cfg.vocab_size, 2000 + 10 * step + mb);
      tgt[5] = -1;  // an ignored target
      const float ref = plain.forward(tok.data(), tgt.data());
      plain.backward(1.f / micro_batches);
      ASSERT_TRUE(std::isfinite(ref));
      for (auto& m : models) {
        m->windows->begin_step();
        const float loss = m->net->forward(tok.data(), tgt.data());
        EXPECT_TRUE(same_bits(loss, ref)) << recompute_name(m->mode) << " step " << step << " micro-batch " << mb
                                          << ": loss " << loss << " vs " << ref;
        EXPECT_TRUE(same_bits(m->net->losses(), plain.losses(), N)) << recompute_name(m->mode);
        m->net->backward(1.f / micro_batches);
        m->windows->end_step();
      }
    }
    for (auto& m : models) {
      EXPECT_TRUE(same_bits(m->store.grads(), plain_store.grads(), plain_store.numel()))
          << recompute_name(m->mode) << " step " << step << ": gradients differ first at "
          << first_difference(m->store, plain_store, /*grads=*/true);
      EXPECT_EQ(m->log, models[0]->log) << recompute_name(m->mode) << ": layer events or grad-ready order differ";
    }
    clip_grad_norm(plain_store.grads(), plain_store.numel(), 1.f);
    plain_opt.step(plain_store.params(), plain_store.grads(), 1e-3f);
    for (auto& m : models) {
      clip_grad_norm(m->store.grads(), m->store.numel(), 1.f);
      m->opt->step(m->store.params(), m->store.grads(), 1e-3f);
      EXPECT_TRUE(same_bits(m->store.params(), plain_store.params(), plain_store.numel()))
          << recompute_name(m->mode) << " after step " << step << ": parameters differ first at "
          << first_difference(m->store, plain_store, /*grads=*/false);
    }
  }
  // Events of one micro-batch: the forward's, then backward's before_backward / grad_ready only.
  const int L = static_cast<int>(cfg.n_layer);
  std::vector<std::string> one;
  for (int l = -1; l <= L; ++l) {
    one.push_back("before_forward " + std::to_string(l));
    one.push_back("after_forward " + std::to_string(l));
  }
  for (int l = L; l >= -1; --l) {
    one.push_back("before_backward " + std::to_string(l));
    one.push_back("grad_ready " + std::to_string(l));
  }
  ASSERT_EQ(models[2]->log.size(), one.size() * micro_batches);
  EXPECT_EQ(std::vector<std::string>(models[2]->log.begin(), models[2]->log.begin() + one.size()), one);

  // Evaluation: a forward without targets gives the same logits.
  auto tok = random_tokens(N, cfg.vocab_size, 77);
  plain.forward(tok.data(), nullptr);
  for (auto& m : models) {
    m->windows->begin_step();
    m->net->forward(tok.data(), nullptr);
    m->windows->end_step();
    EXPECT_TRUE(same_bits(m->net->logits(), plain.logits(), N * plain.logits_width())) << recompute_name(m->mode);
  }
}

// Two pipeline stages with recomputation equal the whole model without: the stage output, the
// input gradient at the seam and every gradient, bitwise (wte of a tied head excepted, as in
// test_transformer: its two copies' gradients are summed elsewhere).
TEST_P(RecomputeModels, PipelineStagesKeepTheirSeams) {
  ModelConfig cfg = config_of(GetParam());
  cfg.n_layer = 4;  // two layers per stage share the recomputation buffers
  const int64_t B = 2, T = 16, N = B * T, C = cfg.d_model;
  const int L = static_cast<int>(cfg.n_layer), S = 2;  // stage 0: layers [0, S), stage 1: [S, L)
  auto tok = random_tokens(N, cfg.vocab_size, 8), tgt = random_tokens(N, cfg.vocab_size, 9);
  // The reference: the same two stages without recomputation.
  ParamStore r0{ParamLayout(cfg, 0, S)}, r1{ParamLayout(cfg, S, L)};
  init_parameters(r0, cfg, 3);
  init_parameters(r1, cfg, 3);
  Transformer ref0(tessera::testing::cpu_backend(), cfg, r0, B, T), ref1(tessera::testing::cpu_backend(), cfg, r1, B, T);
  r0.zero_grads();
  r1.zero_grads();
  ref0.forward(tok.data(), nullptr);
  std::memcpy(ref1.stage_input(), ref0.stage_output(), N * C * sizeof(float));
  const float ref_loss = ref1.forward(nullptr, tgt.data());
  ref1.backward();
  std::memcpy(ref0.stage_output_grad(), ref1.stage_input_grad(), N * C * sizeof(float));
  ref0.backward();
  for (Recompute mode : {Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(std::string(recompute_name(mode)));
    ParamStore s0{ParamLayout(cfg, 0, S)}, s1{ParamLayout(cfg, S, L)};
    init_parameters(s0, cfg, 3);
    init_parameters(s1, cfg, 3);
    Transformer first(tessera::testing::cpu_backend(), cfg, s0, B, T, mode), last(tessera::testing::cpu_backend(), cfg, s1, B, T, mode);
    std::vector<int> order0, order1;
    first.set_grad_ready_callback([&](int l) { order0.push_back(l); });
    last.set_grad_ready_callback([&](int l) { order1.push_back(l); });
    s0.zero_grads();
    s1.zero_grads();
    first.forward(tok.data(), nullptr);
    EXPECT_TRUE(same_bits(first.stage_output(), ref0.stage_output(), N * C));
    std::memcpy(last.stage_input(), first.stage_output(), N * C * sizeof(float));
    const float loss = last.forward(nullptr, tgt.data());
    EXPECT_TRUE(same_bits(loss, ref_loss));
    last.backward();
    EXPECT_TRUE(same_bits(last.stage_input_grad(), ref1.stage_input_grad(), N * C));
    std::memcpy(first.stage_output_grad(), last.stage_input_grad(), N * C * sizeof(float));
    first.backward();
    EXPECT_TRUE(same_bits(s0.grads(), r0.grads(), r0.numel())) << first_difference(s0, r0, true);
    EXPECT_TRUE(same_bits(s1.grads(), r1.grads(), r1.numel())) << first_difference(s1, r1, true);
    EXPECT_EQ(order0, (std::vector<int>{1, 0, -1}));
    std::vector<int> expect1;
    for (int l = L; l >= S; --l) expect1.push_back(l);
    EXPECT_EQ(order1, expect1);
  }
}

// The activation buffers shrink: per layer, selective drops atty (N, A) and lse (B, NH, T), full all
// but the layer output (NS, C); one shared set of what is dropped is added. Counted by the model and
// in the process-wide MemCategory::activations counters alike.
TEST_P(RecomputeModels, ActivationsShrinkByWhatTheLayersDoNotKeep) {
  const ModelConfig cfg = config_of(GetParam());
  const int64_t B = 2, T = 32, N = B * T, C = cfg.d_model, L = cfg.n_layer, NH = cfg.n_head;
  const int64_t A = NH * cfg.head_size(), Q = cfg.qkv_width(), F = cfg.d_ff;
  const int64_t FC = cfg.arch == Arch::llama ? 2 * F : F;
  auto live = [] { return memory_stats().live[static_cast<size_t>(MemCategory::activations)]; };
  ParamStore store{ParamLayout(cfg)};
  size_t bytes[3], counted[3];
  for (int i = 0; i < 3; ++i) {
    const size_t before = live();
    Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T, kModes[i]);
    counted[i] = live() - before;
    bytes[i] = net.activation_bytes();
  }
  EXPECT_EQ(counted[0], bytes[0]);
  EXPECT_EQ(counted[1], bytes[1]);
  EXPECT_EQ(counted[2], bytes[2]);
  EXPECT_LT(bytes[1], bytes[0]);
  EXPECT_LT(bytes[2], bytes[1]);
  const int64_t attention = N * A + B * NH * T;
  const int64_t rest = 2 * (N * C + 2 * N) + N * Q + N * C + N * FC + N * F;  // norms, qkv, residual2, fc, act
  EXPECT_EQ(static_cast<int64_t>(bytes[0] - bytes[1]), (L - 1) * attention * 4);
  EXPECT_EQ(static_cast<int64_t>(bytes[0] - bytes[2]), (L - 1) * (attention + rest) * 4);
  // set_recompute reallocates: the model's bytes become those of the new mode.
  Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T);
  net.set_recompute(Recompute::full);
  EXPECT_EQ(net.activation_bytes(), bytes[2]);
  net.set_recompute(Recompute::none);
  EXPECT_EQ(net.activation_bytes(), bytes[0]);
}

INSTANTIATE_TEST_SUITE_P(Recompute, RecomputeModels,
                         ::testing::Values(Variant{"tiny", true}, Variant{"tiny", false}, Variant{"tiny-llama", true},
                                           Variant{"tiny-llama", false}),
                         [](const auto& info) { return variant_name(info.param); });

namespace {
// Identity hooks of shard `rank` of `size` (no communication: the call order is what is checked)
// that log every call.
class LoggingHooks final : public TensorParallelHooks {
 public:
  LoggingHooks(int rank, int size, bool sp) : rank_(rank), size_(size), sp_(sp) {}
  int tp_rank() const override { return rank_; }
  int tp_size() const override { return size_; }
  bool sequence_parallel() const override { return sp_; }
  void copy_to_region_forward(const TpRegion& r) override { log("copy_fwd", r); }
  void copy_to_region_backward(const TpRegion& r) override { log("copy_bwd", r); }
  void reduce_from_region_forward(const TpRegion& r) override { log("reduce_fwd", r); }
  void reduce_from_region_backward(const TpRegion& r) override { log("reduce_bwd", r); }
  void sequence_gather(const TpRegion& r) override { log("gather", r); }
  void cross_entropy_max(const TpRegion& r) override { log("ce_max", r); }
  void cross_entropy_sum(const TpRegion& r) override { log("ce_sum", r); }
  std::vector<std::string> calls;

 private:
  void log(const char* hook, const TpRegion& r) {
    calls.push_back(std::string(hook) + " " + tp_point_name(r.point) + " " + std::to_string(r.layer));
  }
  int rank_, size_;
  bool sp_;
};
}  // namespace

// Full recomputation calls the forward's hooks of a layer again at the start of its backward (up to
// the MLP's fc: the output projection is not recomputed), after before_backward; selective none.
// Shown on shard 1 of 2, with and without sequence parallelism.
TEST(RecomputeHooks, FullRecomputationCallsTheLayersForwardHooksAtTheStartOfItsBackward) {
  const ModelConfig cfg = model_preset("tiny").value();  // 2 layers
  const int64_t B = 2, T = 8, N = B * T;
  for (bool sp : {false, true}) {
    SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
    std::vector<std::string> expect_forward;
    for (Recompute mode : kModes) {
      ParamStore shard{ParamLayout(cfg, TensorParallelShard{1, 2})};
      init_parameters(shard, cfg, 1);
      Transformer net(tessera::testing::cpu_backend(), cfg, shard, B, T, mode);
      LoggingHooks rec(1, 2, sp);
      net.set_tensor_parallel_hooks(&rec);
      net.set_layer_callback([&](Transformer::LayerEvent e, int l) {
        if (e == Transformer::LayerEvent::before_backward) rec.calls.push_back("before_backward " + std::to_string(l));
      });
      auto tok = random_tokens(N, cfg.vocab_size, 3);
      net.forward(tok.data(), tok.data());
      if (mode == Recompute::none) expect_forward = rec.calls;
      EXPECT_EQ(rec.calls, expect_forward) << recompute_name(mode) << ": the forward's hooks";
      rec.calls.clear();
      net.backward();
      std::vector<std::string> expect = {"before_backward 2"};
      if (sp) expect.push_back("gather lm_head 2");
      expect.push_back("copy_bwd lm_head 2");
      for (int l : {1, 0}) {
        auto at = [l](const char* what) { return std::string(what) + " " + std::to_string(l); };
        expect.push_back(at("before_backward"));
        if (mode == Recompute::full)
          for (const char* c : {"copy_fwd attn_qkv", "reduce_fwd attn_proj", "copy_fwd mlp_fc"}) expect.push_back(at(c));
        expect.push_back(at("reduce_bwd mlp_proj"));
        if (sp) expect.push_back(at("gather mlp_fc"));
        expect.push_back(at("copy_bwd mlp_fc"));
        expect.push_back(at("reduce_bwd attn_proj"));
        if (sp) expect.push_back(at("gather attn_qkv"));
        expect.push_back(at("copy_bwd attn_qkv"));
      }
      expect.push_back("before_backward -1");
      expect.push_back("reduce_bwd embedding -1");
      EXPECT_EQ(rec.calls, expect) << recompute_name(mode);
    }
  }
}

// The numbers for the report: bench-small (6 layers, C 384, V 8192) at B 4, T 256.
TEST(RecomputeMemory, BenchSmallActivationMegabytes) {
  const ModelConfig cfg = model_preset("bench-small").value();
  const int64_t B = 4, T = 256;
  ParamStore store{ParamLayout(cfg)};
  size_t bytes[3];
  for (int i = 0; i < 3; ++i) {
    Transformer net(tessera::testing::cpu_backend(), cfg, store, B, T, kModes[i]);
    bytes[i] = net.activation_bytes();
  }
  std::cout << "bench-small B=4 T=256 activation bytes (MiB):";
  for (int i = 0; i < 3; ++i)
    std::cout << " " << recompute_name(kModes[i]) << " " << bytes[i] << " (" << bytes[i] / 1048576.0 << ")";
  std::cout << "\n";
  EXPECT_LT(bytes[1], bytes[0]);
  EXPECT_LT(bytes[2], bytes[1]);
}
