// plan_memory / check_memory_budget (plan/memory_plan.h): categories add up; the activation formula
// equals what a Transformer allocates (every recompute mode, stages, tp shards, sequence
// parallelism); a dp-only plan equals the allocator's counters for the same objects built here; tp
// halves the sharded parameters; ZeRO divides the optimizer state by dp; the micro-batch search is
// monotone in the budget; an over-budget error names the rank and the options that fit.
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "core/memory.h"
#include "model/context_parallel_hooks.h"
#include "model/expert_parallel_hooks.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/zero.h"
#include "plan/memory_plan.h"
#include "config/run_config.h"
#include "../backend_util.h"
#include "../world_of_one.h"

namespace tessera {
namespace {

// preset tiny widened (gpt2, L = 4, C = 128), micro-batch 4 x 64
const std::string kToml =
    "[model]\npreset = \"tiny\"\nn_layer = 4\nd_model = 128\nd_ff = 512\n[data]\ndir = \"data/x\"\nseq_len = 64\n"
    "[train]\nmicro_batch = 4\n[parallel]\ndp = 1\n";

RunConfig config(const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(kToml, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

MemoryPlan plan(const RunConfig& cfg, int world) {
  auto r = plan_memory(cfg, world);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : MemoryPlan{};
}

int64_t cat(const RankMemoryPlan& r, MemCategory c) { return r.at_peak_bytes(c); }

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(MemoryPlan, CategoriesAddUpToThePeak) {
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{}, 1},
      {{"parallel.tp=2", "parallel.sequence_parallel=true"}, 2},
      {{"parallel.pp=2", "train.batch_tokens=1024", "parallel.schedule=gpipe"}, 2},
      {{"parallel.dp=2", "train.batch_tokens=512", "parallel.zero=2"}, 2},
      {{"parallel.dp=2", "train.batch_tokens=512", "parallel.zero=3", "train.recompute=full"}, 2},
  };
  for (const auto& [over, world] : cases) {
    const MemoryPlan p = plan(config(over), world);
    ASSERT_EQ(static_cast<int>(p.ranks.size()), world);
    for (const RankMemoryPlan& r : p.ranks) {
      EXPECT_EQ(std::accumulate(r.at_peak.begin(), r.at_peak.end(), int64_t{0}), r.peak) << over.size();
      for (int c = 0; c < kNumMemCategories; ++c) EXPECT_GE(r.category_peak[c], r.at_peak[c]);
      // (ZeRO-3's paged parameters count nothing until first sampled, which can be after the peak.)
      EXPECT_GT(r.category_peak[static_cast<int>(MemCategory::parameters)], 0);
      EXPECT_GT(cat(r, MemCategory::activations), 0);
    }
  }
}

// A fake tp group member, only so a Transformer allocates its sequence-parallel activations.
class SequenceParallelShape final : public TensorParallelHooks {
 public:
  SequenceParallelShape(int rank, int size) : rank_(rank), size_(size) {}
  int tp_rank() const override { return rank_; }
  int tp_size() const override { return size_; }
  bool sequence_parallel() const override { return true; }
  void copy_to_region_forward(const TpRegion&) override {}
  void copy_to_region_backward(const TpRegion&) override {}
  void reduce_from_region_forward(const TpRegion&) override {}
  void reduce_from_region_backward(const TpRegion&) override {}
  void cross_entropy_max(const TpRegion&) override {}
  void cross_entropy_sum(const TpRegion&) override {}

 private:
  int rank_, size_;
};

TEST(MemoryPlan, ActivationFormulaIsWhatTheTransformerAllocates) {
  for (const char* preset : {"tiny", "tiny-llama"}) {
    ModelConfig mc = model_preset(preset).value();
    mc.n_layer = 4;
    mc.vocab_size = 255;  // padded under tp
    // With the head on a stage of its own: [0,4) without it and [4,4), the head alone.
    const HeadStage with = HeadStage::with_last_layer, own = HeadStage::own;
    for (auto [first, last, head] : {std::tuple{0, 4, with}, {0, 2, with}, {1, 3, with}, {2, 4, with}, {0, 4, own}, {4, 4, own}})
      for (int tp : {1, 2})
        for (bool sp : {false, true}) {
          if (sp && tp == 1) continue;
          for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
            ParamStore store(ParamLayout(mc, first, last, TensorParallelShard{tp - 1, tp}, 16, {}, head));
            Transformer model(tessera::testing::cpu_backend(), mc, store, 2, 32, rc);
            SequenceParallelShape hooks(tp - 1, tp);
            if (sp) model.set_tensor_parallel_hooks(&hooks);
            EXPECT_EQ(static_cast<int64_t>(model.activation_bytes()),
                      transformer_activation_bytes(mc, store.layout(), 2, 32, sp, rc))
                << preset << " layers [" << first << "," << last << ")" << (store.layout().holds_head() ? " + head" : "")
                << " tp " << tp << " sp " << sp << " "
                << recompute_name(rc);
          }
        }
  }
}

// A fake cp group member, only so a Transformer allocates its context-parallel buffers.
class ContextParallelShape final : public ContextParallelHooks {
 public:
  ContextParallelShape(int size, ContextParallelMode mode) : size_(size), mode_(mode) {}
  int cp_rank() const override { return size_ - 1; }
  int cp_size() const override { return size_; }
  ContextParallelMode mode() const override { return mode_; }
  void all_to_all(const float*, float*, int64_t) override {}
  void ring_start(int, const float*, float*, int64_t) override {}
  void ring_wait(int) override {}
  void ring_progress() override {}
  void all_reduce_sum(int32_t*, int64_t) override {}
  Status status() const override { return Status(); }

 private:
  int size_;
  ContextParallelMode mode_;
};

// Context parallelism: T / cp positions per rank, attention's per-head output and the exchange
// buffers (Ulysses') or the travelling keys, values and their gradients (ring), with and without
// tp + sequence parallelism, over pipeline stages and recomputation; MoE layers' cp-summed counts.
TEST(MemoryPlan, ActivationFormulaCountsContextParallelBuffers) {
  for (ContextParallelMode mode : {ContextParallelMode::ulysses, ContextParallelMode::ring})
  for (const char* preset : {"tiny", "tiny-llama", "tiny-moe"}) {
    ModelConfig mc = model_preset(preset).value();
    mc.n_layer = 4;
    for (auto [first, last] : {std::pair{0, 4}, std::pair{1, 3}})
      for (int tp : {1, 2})
        for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
          const int cp = 2;
          const bool ring = mode == ContextParallelMode::ring;
          if (mc.is_moe() && tp > 1) continue;  // MoE refuses sequence parallelism (these hooks)
          if (!ring && (mc.n_kv_head / tp) % cp != 0) continue;  // Ulysses splits the KV heads of a tp rank
          ParamStore store(ParamLayout(mc, first, last, TensorParallelShard{tp - 1, tp}));
          Transformer model(tessera::testing::cpu_backend(), mc, store, 2, 32 / cp, rc);
          SequenceParallelShape tp_hooks(tp - 1, tp);
          ContextParallelShape cp_hooks(cp, mode);
          if (tp > 1) model.set_tensor_parallel_hooks(&tp_hooks);
          model.set_context_parallel_hooks(&cp_hooks);
          EXPECT_EQ(static_cast<int64_t>(model.activation_bytes()),
                    transformer_activation_bytes(mc, store.layout(), 2, 32 / cp, tp > 1, rc, cp, ring))
              << preset << " layers [" << first << "," << last << ") tp " << tp << " " << recompute_name(rc)
              << (ring ? " ring" : " ulysses");
        }
  }
}

// A fake ep group member, only so a Transformer allocates its expert-parallel buffers.
class ExpertParallelShape final : public ExpertParallelHooks {
 public:
  explicit ExpertParallelShape(int size) : size_(size) {}
  int ep_rank() const override { return size_ - 1; }
  int ep_size() const override { return size_; }
  void exchange_counts(const int32_t*, int32_t*, int64_t) override {}
  void start_rows(const float*, const int64_t*, float*, const int64_t*, int64_t) override {}
  void progress_rows() override {}
  void finish_rows() override {}
  Status status() const override { return Status(); }

 private:
  int size_;
};

// Mixture of experts (tp 1 only): routing and expert buffers per MoE layer, dropless and with a
// capacity, MoE every other layer with a shared expert, over pipeline stages and recomputation;
// under expert parallelism the experts' rows for the whole ep group and the receive buffers.
TEST(MemoryPlan, ActivationFormulaCountsTheExperts) {
  for (int tp : {1, 2})
  for (int ep : {1, 2, 4})
  for (int variant = 0; variant < 2; ++variant) {
    ModelConfig mc = model_preset("tiny-moe").value();
    mc.n_layer = 4;
    if (variant == 1) {
      mc.moe_every = 2;
      mc.moe_shared_expert = true;
      mc.moe_capacity_factor = 0.5f;
    }
    for (auto [first, last] : {std::pair{0, 4}, std::pair{1, 3}, std::pair{2, 4}})
      for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
        ParamStore store(ParamLayout(mc, first, last, TensorParallelShard{tp - 1, tp}));
        Transformer model(tessera::testing::cpu_backend(), mc, store, 2, 32, rc);
        ExpertParallelShape ep_hooks(ep);
        if (ep > 1) model.set_expert_parallel_hooks(&ep_hooks);
        EXPECT_EQ(static_cast<int64_t>(model.activation_bytes()),
                  transformer_activation_bytes(mc, store.layout(), 2, 32, false, rc, 1, false, ep))
            << "tp " << tp << " ep " << ep << " variant " << variant << " layers [" << first << "," << last << ") "
            << recompute_name(rc);
      }
  }
}

// The split backward of zb-h1 keeps each layer's linear output gradients (a MoE layer without a
// shared expert has no dense MLP to keep), over pipeline stages and tp shards.
TEST(MemoryPlan, ActivationFormulaCountsTheSplitBackwardsKeptGradients) {
  for (const char* preset : {"tiny", "tiny-llama", "tiny-moe"}) {
    ModelConfig mc = model_preset(preset).value();
    mc.n_layer = 4;
    if (mc.is_moe()) mc.moe_every = 2;
    for (auto [first, last] : {std::pair{0, 4}, std::pair{1, 3}})
      for (int tp : {1, 2}) {
        if (mc.is_moe() && tp > 1) continue;
        ParamStore store(ParamLayout(mc, first, last, TensorParallelShard{tp - 1, tp}));
        Transformer model(tessera::testing::cpu_backend(), mc, store, 2, 32);
        model.set_split_backward(true);
        EXPECT_EQ(static_cast<int64_t>(model.activation_bytes()),
                  transformer_activation_bytes(mc, store.layout(), 2, 32, false, Recompute::none, 1, false, 1, true))
            << preset << " layers [" << first << "," << last << ") tp " << tp;
      }
  }
}

TEST(MemoryPlan, DataParallelPlanEqualsTheAllocatorsCounters) {
  const RunConfig cfg = config();
  const MemoryPlan p = plan(cfg, 1);
  const MemoryStats before = memory_stats();
  reset_memory_peaks();
  {  // what build_training_model allocates for dp alone: the store, AdamW, and the runner's one
     // activation slot (1F1B at pp = 1) and step loss (one double of the backend's memory)
    ParamStore store{ParamLayout(cfg.model)};
    AdamW opt(store.layout(), cfg.optim);
    Transformer model(tessera::testing::cpu_backend(), cfg.model, store, cfg.train.micro_batch, cfg.data.seq_len);
    const Buffer step_loss = tessera::testing::cpu_backend().allocate(sizeof(double), MemCategory::activations);
    const MemoryStats s = memory_stats();
    EXPECT_EQ(static_cast<int64_t>(s.total_peak - before.total_live), p.ranks[0].peak);
    for (int c = 0; c < kNumMemCategories; ++c)
      EXPECT_EQ(static_cast<int64_t>(s.live[c] - before.live[c]), p.ranks[0].at_peak[c]) << c;
  }
}

// ZeroSharded's own buffers (the AdamW moments of its slices and the reductions' receive slots; the
// gathers run in place and need none), against the plan's optimizer and communication categories.
TEST(MemoryPlan, ZeroPlanCountsWhatZeroShardedAllocates) {
  const RunConfig cfg = config({"parallel.zero=1"});
  const MemoryPlan p = plan(cfg, 1);
  const MemoryStats before = memory_stats();
  ParamStore store{ParamLayout(cfg.model, 0, static_cast<int>(cfg.model.n_layer), {}, zero_layer_alignment(1)),
                   zero_store_options(1)};
  const MemoryStats with_store = memory_stats();
  ZeroSharded zero(tessera::testing::cpu_backend(), tessera::testing::world_of_one(), store, cfg.optim, 1);
  const MemoryStats s = memory_stats();
  for (MemCategory c : {MemCategory::optimizer_state, MemCategory::communication})
    EXPECT_EQ(static_cast<int64_t>(s.live[static_cast<int>(c)] - with_store.live[static_cast<int>(c)]), cat(p.ranks[0], c))
        << static_cast<int>(c);
  EXPECT_EQ(static_cast<int64_t>(with_store.live[static_cast<int>(MemCategory::parameters)] -
                                 before.live[static_cast<int>(MemCategory::parameters)]),
            cat(p.ranks[0], MemCategory::parameters));
}

TEST(MemoryPlan, TensorParallelHalvesTheShardedParameters) {
  const RunConfig one = config(), two = config({"parallel.tp=2"});
  const ParamLayout whole(one.model);
  int64_t sharded = 0, replicated = 0;
  for (const ParamInfo& p : whole.params()) (p.split == TpSplit::replicated ? replicated : sharded) += p.numel;
  const MemoryPlan p1 = plan(one, 1), p2 = plan(two, 2);
  for (const RankMemoryPlan& r : p2.ranks) {
    // Within the per-tensor alignment (16 floats a tensor, 16 a layer).
    EXPECT_NEAR(static_cast<double>(r.parameters), static_cast<double>(sharded / 2 + replicated),
                16.0 * 2 * static_cast<double>(whole.params().size()));
    EXPECT_EQ(cat(r, MemCategory::parameters), r.parameters * 4);
    EXPECT_LT(cat(r, MemCategory::activations), cat(p1.ranks[0], MemCategory::activations));
  }
  EXPECT_EQ(p1.ranks[0].parameters, whole.total_numel());
}

TEST(MemoryPlan, ExpertParallelStoresOnlyItsExperts) {
  const std::string moe = "model.preset=tiny-moe";
  const RunConfig one = config({moe}), two = config({moe, "parallel.ep=2", "train.batch_tokens=512"});
  const ParamLayout whole(one.model);
  int64_t experts = 0, dense = 0;
  for (const ParamInfo& p : whole.params()) (p.expert ? experts : dense) += p.numel;
  ASSERT_GT(experts, dense);  // tiny-moe is mostly experts
  const MemoryPlan p1 = plan(one, 1), p2 = plan(two, 2);
  EXPECT_EQ(p1.ranks[0].parameters, whole.total_numel());
  for (const RankMemoryPlan& r : p2.ranks) {
    EXPECT_NEAR(static_cast<double>(r.parameters), static_cast<double>(experts / 2 + dense),
                16.0 * static_cast<double>(whole.params().size()));
    for (MemCategory c : {MemCategory::parameters, MemCategory::gradients, MemCategory::optimizer_state})
      EXPECT_LT(cat(r, c), cat(p1.ranks[0], c) * 0.75) << static_cast<int>(c);
  }
  // ZeRO shards each rank's own experts (and the dense tensors) over dp only: at dp 2 x ep 2 ZeRO 1
  // keeps half of the ep 2 store's optimizer state.
  const MemoryPlan e2 = plan(config({moe, "parallel.dp=2", "parallel.ep=2", "train.batch_tokens=1024"}), 4);
  const MemoryPlan z1 =
      plan(config({moe, "parallel.dp=2", "parallel.ep=2", "train.batch_tokens=1024", "parallel.zero=1"}), 4);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_NEAR(static_cast<double>(z1.ranks[r].parameters), static_cast<double>(experts / 2 + dense),
                32.0 * static_cast<double>(whole.params().size()));
    EXPECT_NEAR(static_cast<double>(cat(z1.ranks[r], MemCategory::optimizer_state)),
                cat(e2.ranks[r], MemCategory::optimizer_state) / 2.0, 0.02 * cat(e2.ranks[r], MemCategory::optimizer_state));
  }
}

TEST(MemoryPlan, ZeroStagesShardTheStateOverDp) {
  auto at = [](int zero) {
    // 8 layers: three layers' full gradients in flight are well under the whole buffer.
    const RunConfig c = config({"model.n_layer=8", "parallel.dp=4", "train.batch_tokens=1024",
                                "parallel.zero=" + std::to_string(zero)});
    return plan(c, 4).ranks[1];
  };
  const RankMemoryPlan z0 = at(0), z1 = at(1), z2 = at(2), z3 = at(3);
  const double opt0 = static_cast<double>(cat(z0, MemCategory::optimizer_state));
  for (const RankMemoryPlan* z : {&z1, &z2, &z3})
    EXPECT_NEAR(static_cast<double>(cat(*z, MemCategory::optimizer_state)), opt0 / 4, opt0 * 0.01);
  // Stage 1 keeps whole gradients and parameters; 2 keeps its owned accumulator and only the full
  // gradients in flight; 3 also only the owned and gathered parameters.
  EXPECT_NEAR(static_cast<double>(cat(z1, MemCategory::gradients)), static_cast<double>(cat(z0, MemCategory::gradients)),
              opt0 * 0.01);
  EXPECT_LT(z2.category_peak[static_cast<int>(MemCategory::gradients)], cat(z1, MemCategory::gradients));
  EXPECT_LT(z3.category_peak[static_cast<int>(MemCategory::parameters)], cat(z2, MemCategory::parameters));
  EXPECT_LT(z1.peak, z0.peak);
  EXPECT_LT(z3.peak, z1.peak);
}

TEST(MemoryPlan, RecomputationShrinksActivations) {
  const int64_t none = cat(plan(config(), 1).ranks[0], MemCategory::activations);
  const int64_t sel = cat(plan(config({"train.recompute=selective"}), 1).ranks[0], MemCategory::activations);
  const int64_t full = cat(plan(config({"train.recompute=full"}), 1).ranks[0], MemCategory::activations);
  EXPECT_LT(sel, none);
  EXPECT_LT(full, sel);
}

TEST(MemoryPlan, PipelineSlotsFollowTheSchedule) {
  const MemoryPlan f = plan(config({"parallel.pp=2", "train.batch_tokens=1024"}), 2);  // 1f1b, 4 micro-batches
  EXPECT_EQ(f.ranks[0].activation_slots, std::vector<int>{2});
  EXPECT_EQ(f.ranks[1].activation_slots, std::vector<int>{1});
  const MemoryPlan g = plan(config({"parallel.pp=2", "train.batch_tokens=1024", "parallel.schedule=gpipe"}), 2);
  EXPECT_EQ(g.ranks[0].activation_slots, std::vector<int>{4});
  EXPECT_GT(g.ranks[0].peak, f.ranks[0].peak);
}

TEST(MemoryPlan, LargestMicroBatchIsMonotoneInTheBudget) {
  // batch_tokens 1024 / seq_len 64 = 16 sequences: candidates 1, 2, 4, 8, 16.
  const MemoryPlan unlimited = plan(config({"train.batch_tokens=1024"}), 1);
  EXPECT_EQ(unlimited.largest_micro_batch_that_fits(), 16);
  int64_t last = 0;
  for (double mb = 5; mb <= 80; mb += 2.5) {
    const RunConfig c = config({"train.batch_tokens=1024", "train.memory_budget_mb=" + std::to_string(mb)});
    const int64_t b = plan(c, 1).largest_micro_batch_that_fits();
    EXPECT_GE(b, last) << mb << " MiB";
    last = b;
    if (b == 0) continue;
    // It fits, and the next larger candidate does not.
    const int64_t budget = static_cast<int64_t>(mb * 1048576.0);
    EXPECT_LE(plan(config({"train.batch_tokens=1024", "train.micro_batch=" + std::to_string(b)}), 1).peak(), budget);
    if (b < 16)
      EXPECT_GT(plan(config({"train.batch_tokens=1024", "train.micro_batch=" + std::to_string(2 * b)}), 1).peak(),
                budget);
  }
  EXPECT_EQ(last, 16);
}

TEST(MemoryPlan, BudgetCheckNamesTheRankAndTheOptionsThatFit) {
  EXPECT_TRUE(check_memory_budget(config({"parallel.dp=2", "train.batch_tokens=512"}), 2).ok());  // no budget
  const RunConfig base = config({"parallel.dp=2", "train.batch_tokens=512"});
  EXPECT_GT(plan(base, 2).peak(), 22 * 1048576);  // 23.0 MiB
  // Just under the peak: ZeRO-1 (21.4 MiB), full recomputation (selective saves too little at T = 64),
  // a smaller micro-batch and tp = 2 each fit.
  const double budget = 22;
  const RunConfig tight = config({"parallel.dp=2", "train.batch_tokens=512", "train.memory_budget_mb=" + std::to_string(budget)});
  const Status s = check_memory_budget(tight, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  const std::string m = s.message();
  EXPECT_HAS(m, "rank 0");
  EXPECT_HAS(m, "MiB");
  EXPECT_HAS(m, "train.memory_budget_mb");
  EXPECT_HAS(m, "parallel.zero=1");
  EXPECT_HAS(m, "train.recompute=full");
  EXPECT_HAS(m, "parallel.tp=2 parallel.dp=1");
  EXPECT_HAS(m, "train.micro_batch=2");
  // Every option named does fit.
  for (const MemoryOption& o : memory_options_that_fit(tight, 2, static_cast<int64_t>(budget * 1048576.0)))
    EXPECT_LE(o.peak, static_cast<int64_t>(budget * 1048576.0)) << o.change;
  // Hopeless: nothing fits, say so.
  const Status none = check_memory_budget(config({"train.memory_budget_mb=0.5"}), 1);
  ASSERT_FALSE(none.ok());
  EXPECT_HAS(none.message(), "no single change");
  // Errors of the layout come back as they are.
  EXPECT_HAS(check_memory_budget(config({"parallel.tp=3", "train.memory_budget_mb=1"}), 3).message(), "parallel.tp");
}

TEST(MemoryPlan, MoreTensorOrPipelineParallelismIsOfferedForTheSameRanks) {
  const RunConfig base = config({"parallel.dp=2", "train.batch_tokens=512"});
  const double budget = static_cast<double>(plan(base, 2).peak()) / 1048576.0 * 0.8;
  const RunConfig tight = config({"parallel.dp=2", "train.batch_tokens=512", "train.memory_budget_mb=" + std::to_string(budget)});
  bool tp = false;
  for (const MemoryOption& o : memory_options_that_fit(tight, 2, static_cast<int64_t>(budget * 1048576.0)))
    tp = tp || o.change == "parallel.tp=2 parallel.dp=1";
  EXPECT_TRUE(tp);
}

}  // namespace
}  // namespace tessera
