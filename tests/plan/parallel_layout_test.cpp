// plan_parallel_layout: valid layouts give the expected grid, schedule and per-chunk layer ranges; every
// error names the problem and the key to change.
#include <gtest/gtest.h>

#include "plan/parallel_layout.h"
#include "config/run_config.h"

namespace tessera {
namespace {

const std::string kMinimal = "[data]\ndir = \"data/x\"\n[parallel]\ndp = 1\n";  // preset tiny: L = 2, 4 heads, d_ff 256, T = 64, B = 4

RunConfig config(const std::vector<std::string>& overrides) {
  auto r = parse_run_config(kMinimal, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

ParallelLayout plan_ok(const RunConfig& cfg, int world) {
  auto r = plan_parallel_layout(cfg, world);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : ParallelLayout{};
}

std::string plan_err(const RunConfig& cfg, int world) {
  auto r = plan_parallel_layout(cfg, world);
  EXPECT_FALSE(r.ok()) << "expected an error, got layout " << (r.ok() ? r->describe() : "");
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  return r.status().message();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

// ---- valid layouts ----

TEST(ParallelLayout, GpuRunsAreSingleRank) {
  plan_ok(config({"train.device=cuda"}), 1);
  const std::string e = plan_err(config({"train.device=cuda", "parallel.dp=2"}), 2);
  EXPECT_HAS(e, "train.device = \"cuda\" with 2 ranks");
  EXPECT_HAS(e, "one rank");
}

TEST(ParallelLayout, DataParallelOnlyIsOneStage) {
  const ParallelLayout l = plan_ok(config({"parallel.dp=4"}), 4);
  EXPECT_EQ(l.grid.dp, 4);
  EXPECT_EQ(l.grid.pp, 1);
  EXPECT_EQ(l.grid.tp, 1);
  EXPECT_EQ(l.schedule, PipelineScheduleKind::one_f_one_b);
  EXPECT_EQ(l.pipe.stages, 1);
  EXPECT_EQ(l.pipe.micro_batches, 1);
  EXPECT_EQ(l.pipe.virtual_stages, 1);
  EXPECT_EQ(l.chunk_layers(0, 0), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(l.describe(), "dp=4 tp=1 pp=1");
}

TEST(ParallelLayout, Dp2Tp2Pp2) {
  // grad_accum = 2048 / (4 x 64 x 2) = 4.
  const RunConfig cfg = config({"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "train.batch_tokens=2048"});
  const ParallelLayout l = plan_ok(cfg, 8);
  EXPECT_EQ(l.grid.dp, 2);
  EXPECT_EQ(l.grid.tp, 2);
  EXPECT_EQ(l.grid.pp, 2);
  EXPECT_EQ(l.schedule, PipelineScheduleKind::one_f_one_b);
  EXPECT_EQ(l.pipe.stages, 2);
  EXPECT_EQ(l.pipe.micro_batches, 4);
  EXPECT_EQ(l.pipe.virtual_stages, 1);
  EXPECT_EQ(l.split.bounds, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(l.chunk_layers(0, 0), (std::pair<int, int>{0, 1}));
  EXPECT_EQ(l.chunk_layers(1, 0), (std::pair<int, int>{1, 2}));
  EXPECT_FALSE(l.sequence_parallel);
  EXPECT_EQ(l.describe(), "dp=2 tp=2 pp=2 (1f1b, 4 micro-batches; stages [0,1) [1,2))");
  EXPECT_TRUE(validate_pipeline_shape(l.schedule, l.pipe).ok());
}

TEST(ParallelLayout, Pp4InterleavedTwoChunksOfEightLayers) {
  const RunConfig cfg = config({"model.n_layer=8", "parallel.pp=4", "parallel.schedule=interleaved",
                                "parallel.virtual_stages=2", "train.batch_tokens=1024"});  // grad_accum 4
  const ParallelLayout l = plan_ok(cfg, 4);
  EXPECT_EQ(l.schedule, PipelineScheduleKind::interleaved);
  EXPECT_EQ(l.pipe.stages, 4);
  EXPECT_EQ(l.pipe.micro_batches, 4);
  EXPECT_EQ(l.pipe.virtual_stages, 2);
  ASSERT_EQ(l.split.bounds.size(), 9u);
  // Eight virtual stages of one layer each: rank s holds layers s and 4 + s.
  for (int s = 0; s < 4; ++s)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(l.chunk_layers(s, c), (std::pair<int, int>{c * 4 + s, c * 4 + s + 1}));
  EXPECT_EQ(l.describe(),
            "dp=1 tp=1 pp=4 (interleaved x2, 4 micro-batches; virtual stages [0,1) [1,2) [2,3) [3,4) [4,5) [5,6) "
            "[6,7) [7,8))");
}

// A split may end in an empty stage: the final norm and head alone, which the chunk layouts say.
TEST(ParallelLayout, TheLastStageMayHoldTheHeadAlone) {
  const RunConfig cfg = config({"model.n_layer=4", "parallel.pp=2", "parallel.stage_layers=[4,0]", "train.batch_tokens=1024"});
  const ParallelLayout l = plan_ok(cfg, 2);
  EXPECT_EQ(l.split.bounds, (std::vector<int>{0, 4, 4}));
  EXPECT_EQ(l.head_stage(), HeadStage::own);
  EXPECT_EQ(l.describe(), "dp=1 tp=1 pp=2 (1f1b, 4 micro-batches; stages [0,4) [4,4), the last holding the head alone)");
  const auto [first0, last0] = l.chunk_layers(0, 0);
  const auto [first1, last1] = l.chunk_layers(1, 0);
  const ParamLayout stage0(cfg.model, first0, last0, {}, 16, {}, l.head_stage());
  const ParamLayout stage1(cfg.model, first1, last1, {}, 16, {}, l.head_stage());
  EXPECT_TRUE(stage0.holds_embedding());
  EXPECT_FALSE(stage0.holds_head());
  EXPECT_EQ(stage0.find("lnf.w"), nullptr);
  EXPECT_FALSE(stage1.holds_embedding());
  EXPECT_TRUE(stage1.holds_head());
  EXPECT_NE(stage1.find("lnf.w"), nullptr);
  EXPECT_EQ(stage1.find("h.3.ln1.w"), nullptr);
  // The same layers with the head where it always was.
  EXPECT_EQ(plan_ok(config({"model.n_layer=4", "parallel.pp=2", "parallel.stage_layers=[3,1]", "train.batch_tokens=1024"}), 2)
                .head_stage(),
            HeadStage::with_last_layer);
}

TEST(ParallelLayout, StageLayersByHand) {
  // Interleaved, pp = 2, V = 2: virtual stages 0 1 2 3 are (rank 0, chunk 0) (1, 0) (0, 1) (1, 1).
  RunConfig cfg = config({"model.n_layer=8", "parallel.pp=2", "parallel.schedule=interleaved",
                          "parallel.virtual_stages=2", "parallel.stage_layers=[1,3,2,2]", "train.batch_tokens=512"});
  ParallelLayout l = plan_ok(cfg, 2);
  EXPECT_EQ(l.split.bounds, (std::vector<int>{0, 1, 4, 6, 8}));
  EXPECT_EQ(l.chunk_layers(0, 0), (std::pair<int, int>{0, 1}));
  EXPECT_EQ(l.chunk_layers(1, 0), (std::pair<int, int>{1, 4}));
  EXPECT_EQ(l.chunk_layers(0, 1), (std::pair<int, int>{4, 6}));
  EXPECT_EQ(l.chunk_layers(1, 1), (std::pair<int, int>{6, 8}));
  // 1F1B over 2 stages, and GPipe.
  cfg = config({"model.n_layer=8", "parallel.pp=2", "parallel.stage_layers=3,5", "train.batch_tokens=512"});
  l = plan_ok(cfg, 2);
  EXPECT_EQ(l.chunk_layers(0, 0), (std::pair<int, int>{0, 3}));
  EXPECT_EQ(l.chunk_layers(1, 0), (std::pair<int, int>{3, 8}));
  cfg.parallel.schedule = PipelineScheduleKind::gpipe;
  EXPECT_EQ(plan_ok(cfg, 2).schedule, PipelineScheduleKind::gpipe);
  // At pp = 1 a one-entry list is the whole model.
  EXPECT_EQ(plan_ok(config({"parallel.stage_layers=[2]"}), 1).chunk_layers(0, 0), (std::pair<int, int>{0, 2}));
}

TEST(ParallelLayout, ScheduleIgnoredAtOnePipelineStage) {
  for (const char* s : {"gpipe", "1f1b", "interleaved"}) {
    const ParallelLayout l = plan_ok(config({std::string("parallel.schedule=") + s, "parallel.dp=2"}), 2);
    EXPECT_EQ(l.schedule, PipelineScheduleKind::one_f_one_b) << s;
    EXPECT_TRUE(validate_pipeline_shape(l.schedule, l.pipe).ok()) << s;
  }
}

TEST(ParallelLayout, SequenceParallelAndPaddedVocabulary) {
  const ParallelLayout l = plan_ok(config({"parallel.tp=2", "parallel.sequence_parallel=true"}), 2);
  EXPECT_TRUE(l.sequence_parallel);
  EXPECT_EQ(l.describe(), "dp=1 tp=2 sequence-parallel pp=1");
  // The vocabulary is padded to a multiple of tp: never an error.
  plan_ok(config({"model.vocab_size=257", "parallel.tp=4"}), 4);
}

// ---- errors ----

TEST(ParallelLayout, WorldSizeMismatchNamesTheFix) {
  std::string m = plan_err(config({"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "train.batch_tokens=2048"}), 4);
  EXPECT_HAS(m, "parallel.dp=2 x parallel.pp=2 x parallel.tp=2 needs 8 ranks but the job has 4");
  EXPECT_HAS(m, "set parallel.dp=1 or launch with mpirun -np 8");
  EXPECT_HAS(m, "parallel.dp=4 parallel.pp=1 parallel.tp=1");  // the grids that fit
  m = plan_err(config({}), 2);
  EXPECT_HAS(m, "set parallel.dp=2 or launch with mpirun -np 1");
  // No dp fills 6 ranks with pp = tp = 2: launch with 4, or another grid.
  m = plan_err(config({"parallel.tp=2", "parallel.pp=2", "train.batch_tokens=512"}), 6);
  EXPECT_EQ(m.find("set parallel.dp="), std::string::npos) << m;
  EXPECT_HAS(m, "launch with mpirun -np 4");
  EXPECT_HAS(m, "parallel.dp=3 parallel.pp=2 parallel.tp=1");
}

TEST(ParallelLayout, TensorParallelMustSplitHeadsKvHeadsAndMlp) {
  std::string m = plan_err(config({"parallel.tp=3"}), 3);
  EXPECT_HAS(m, "parallel.tp=3");
  EXPECT_HAS(m, "n_head (4)");
  EXPECT_HAS(m, "set parallel.tp to 1, 2 or 4");
  m = plan_err(config({"model.preset=tiny-llama", "parallel.tp=4"}), 4);  // 4 heads, 2 KV heads
  EXPECT_HAS(m, "n_kv_head (2)");
  EXPECT_HAS(m, "set parallel.tp to 1 or 2");
  m = plan_err(config({"model.d_ff=254", "parallel.tp=4"}), 4);
  EXPECT_HAS(m, "d_ff (254)");
  EXPECT_HAS(m, "set parallel.tp to 1 or 2");
}

TEST(ParallelLayout, FewerLayersThanVirtualStages) {
  std::string m = plan_err(config({"parallel.pp=4", "train.batch_tokens=1024"}), 4);
  EXPECT_HAS(m, "model.n_layer = 2 is fewer than the parallel.pp x parallel.virtual_stages = 4 x 1 = 4");
  EXPECT_HAS(m, "lower parallel.pp so that pp x virtual_stages <= 2");
  m = plan_err(config({"model.n_layer=3", "parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                       "train.batch_tokens=512"}),
               2);
  EXPECT_HAS(m, "model.n_layer = 3 is fewer than");
  EXPECT_HAS(m, "lower parallel.pp or parallel.virtual_stages");
}

TEST(ParallelLayout, StageLayersLengthAndSum) {
  std::string m = plan_err(config({"parallel.pp=2", "parallel.stage_layers=[2]", "train.batch_tokens=512"}), 2);
  EXPECT_HAS(m, "parallel.stage_layers has 1 entries but needs one per virtual stage");
  EXPECT_HAS(m, "give 2 layer counts summing to model.n_layer = 2, or stage_layers = [] to balance automatically");
  m = plan_err(config({"model.n_layer=8", "parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                       "parallel.stage_layers=[4,4]", "train.batch_tokens=512"}),
               2);
  EXPECT_HAS(m, "2 x 2 = 4");
  m = plan_err(config({"parallel.pp=2", "parallel.stage_layers=[1,2]", "train.batch_tokens=512"}), 2);
  EXPECT_HAS(m, "parallel.stage_layers sums to 3 layers but the model has 2");
  EXPECT_HAS(m, "model.n_layer");
  // A config built in code, not through the parser, still gets the per-element rule.
  RunConfig cfg = config({"parallel.pp=2", "train.batch_tokens=512"});
  cfg.parallel.stage_layers = {0, 2};
  EXPECT_HAS(plan_err(cfg, 2), "parallel.stage_layers[0] = 0");
}

TEST(ParallelLayout, FewerMicroBatchesThanStages) {
  // grad_accum = 256 / (4 x 64) = 1 < pp = 2.
  for (const char* schedule : {"1f1b", "gpipe"}) {
    const std::string m = plan_err(config({"parallel.pp=2", std::string("parallel.schedule=") + schedule}), 2);
    EXPECT_HAS(m, "fewer micro-batches than stages");
    EXPECT_HAS(m, "needs at least 2 micro-batches per step");
    EXPECT_EQ(m.find("train.grad_accum"), std::string::npos) << m;  // derived, not a key a user can set
    EXPECT_HAS(m, "grad_accum = 1 is train.batch_tokens (256) / (train.micro_batch 4 x data.seq_len 64 x "
                  "parallel.dp 1)");
    EXPECT_HAS(m, "raise train.batch_tokens to 512 or lower train.micro_batch to 2");
  }
  // No smaller micro-batch fits: only the batch_tokens fix.
  const std::string m = plan_err(config({"parallel.pp=2", "train.micro_batch=1"}), 2);
  EXPECT_HAS(m, "raise train.batch_tokens to 128");
  EXPECT_EQ(m.find("lower train.micro_batch"), std::string::npos) << m;
}

TEST(ParallelLayout, InterleavedRulesNameConfigKeys) {
  const std::vector<std::string> base{"model.n_layer=8", "parallel.pp=2", "parallel.schedule=interleaved"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = base;
    all.insert(all.end(), more.begin(), more.end());
    return config(all);
  };
  std::string m = plan_err(with({"train.batch_tokens=512"}), 2);  // virtual_stages = 1
  EXPECT_HAS(m, "parallel.virtual_stages = 1 is plain 1F1B");
  EXPECT_HAS(m, "set parallel.virtual_stages >= 2, or parallel.schedule = \"1f1b\"");
  m = plan_err(with({"parallel.virtual_stages=2", "train.batch_tokens=768"}), 2);  // grad_accum 3
  EXPECT_HAS(m, "needs the micro-batches per step (grad_accum) to be a multiple of parallel.pp = 2");
  EXPECT_HAS(m, "set train.batch_tokens to 512 or 1024 (grad_accum = 2 or 4)");
  EXPECT_HAS(m, "parallel.schedule = \"1f1b\"");
  m = plan_err(with({"parallel.virtual_stages=2"}), 2);  // grad_accum 1
  EXPECT_HAS(m, "set train.batch_tokens to 512 (grad_accum = 2)");
}

TEST(ParallelLayout, VirtualStagesNeedTheInterleavedSchedule) {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    const std::string m = plan_err(config({"model.n_layer=8", "parallel.pp=2", "parallel.virtual_stages=2",
                                           std::string("parallel.schedule=") + schedule, "train.batch_tokens=512"}),
                                   2);
    EXPECT_HAS(m, "parallel.virtual_stages = 2 needs parallel.schedule = \"interleaved\"");
    EXPECT_HAS(m, "or parallel.virtual_stages = 1");
  }
  const std::string m = plan_err(config({"parallel.virtual_stages=2"}), 1);
  EXPECT_HAS(m, "parallel.pp = 1");
  EXPECT_HAS(m, "set parallel.pp >= 2 with parallel.schedule = \"interleaved\", or parallel.virtual_stages = 1");
}

TEST(ParallelLayout, SequenceParallelErrors) {
  std::string m = plan_err(config({"parallel.sequence_parallel=true"}), 1);
  EXPECT_HAS(m, "parallel.tp = 1");
  EXPECT_HAS(m, "set parallel.tp >= 2, or remove parallel.sequence_parallel");
  m = plan_err(config({"parallel.sequence_parallel=true", "parallel.tp=2", "train.micro_batch=1", "data.seq_len=63"}), 2);
  EXPECT_HAS(m, "train.micro_batch x data.seq_len = 1 x 63 = 63 tokens");
  EXPECT_HAS(m, "not divisible by 2");
  EXPECT_HAS(m, "set data.seq_len to a multiple of 2 (e.g. 62)");
  // micro_batch 2 makes 126 tokens: divisible.
  plan_ok(config({"parallel.sequence_parallel=true", "parallel.tp=2", "train.micro_batch=2", "data.seq_len=63"}), 2);
}

// ---- the parameter server: workers are dp replicas of tp x pp ranks, then ps.servers ----

TEST(ParallelLayout, ContextParallelGridAndErrors) {
  const ParallelLayout l = plan_ok(config({"parallel.dp=2", "parallel.cp=2", "parallel.tp=2"}), 8);
  EXPECT_EQ(l.grid.cp, 2);
  EXPECT_EQ(l.grid.world_size(), 8);
  EXPECT_EQ(l.grid.replica_size(), 4);
  EXPECT_HAS(l.describe(), "cp=2 (ulysses)");
  // The world must be the product, with the fix.
  const std::string world = plan_err(config({"parallel.dp=2", "parallel.cp=2"}), 2);
  EXPECT_HAS(world, "parallel.cp=2");
  EXPECT_HAS(world, "needs 4 ranks");
  // seq_len 64 does not split into 3 chunks.
  EXPECT_HAS(plan_err(config({"parallel.cp=3"}), 3), "does not divide data.seq_len = 64");
  // tiny: 4 heads, 4 KV heads; with tp 2, 2 per rank, which cp 4 cannot split.
  const std::string heads = plan_err(config({"parallel.cp=4", "parallel.tp=2"}), 8);
  EXPECT_HAS(heads, "2 KV heads per tensor-parallel rank");
  EXPECT_HAS(heads, "parallel.cp_mode = \"ring\"");  // the fix names the mode without that limit
  // Ring: two pieces per rank, no limit from the heads (cp 4 at 2 KV heads per tp rank).
  const ParallelLayout ring = plan_ok(config({"parallel.cp=4", "parallel.tp=2", "parallel.cp_mode=\"ring\""}), 8);
  EXPECT_EQ(ring.cp_mode, ContextParallelMode::ring);
  EXPECT_HAS(ring.describe(), "cp=4 (ring)");
  const std::string pieces = plan_err(config({"parallel.cp=2", "parallel.cp_mode=\"ring\"", "data.seq_len=62"}), 2);
  EXPECT_HAS(pieces, "2 x cp = 4 must divide data.seq_len = 62");
  EXPECT_HAS(plan_err(config({"parallel.cp=2", "model.preset=\"tiny-moe\"", "model.moe_capacity_factor=1.5"}), 2),
             "model.moe_capacity_factor");
  plan_ok(config({"parallel.cp=2", "model.preset=\"tiny-moe\""}), 2);  // dropless MoE composes with cp
  EXPECT_HAS(plan_err(config({"parallel.cp=2", "train.local_steps=2"}), 2), "train.local_steps");
}

TEST(ParallelLayout, ExpertParallelGridAndErrors) {
  const std::string moe = "model.preset=\"tiny-moe\"";  // 4 experts
  const RunConfig cfg = config({moe, "parallel.dp=2", "parallel.ep=2", "parallel.pp=2", "train.micro_batch=2", "train.batch_tokens=1024"});
  // ep ranks read different data: the global batch is micro_batch x seq_len x dp x ep (x grad_accum).
  EXPECT_EQ(cfg.train.grad_accum, 1024 / (2 * 64 * 4));
  const ParallelLayout l = plan_ok(cfg, 8);
  EXPECT_EQ(l.grid.ep, 2);
  EXPECT_EQ(l.grid.data_size(), 4);
  EXPECT_EQ(l.grid.replica_size(), 4);
  EXPECT_HAS(l.describe(), "ep=2");
  plan_ok(config({moe, "parallel.ep=4"}), 4);  // one expert per rank
  const std::string world = plan_err(config({moe, "parallel.ep=2"}), 4);
  EXPECT_HAS(world, "parallel.ep=2");
  EXPECT_HAS(world, "needs 2 ranks");
  EXPECT_HAS(plan_err(config({moe, "parallel.ep=3"}), 3), "does not divide model.moe_experts = 4");
  EXPECT_HAS(plan_err(config({"parallel.ep=2"}), 2), "the model is dense (model.moe_experts = 0)");
  EXPECT_HAS(plan_err(config({moe, "parallel.ep=2", "parallel.cp=2"}), 4), "use parallel.ep or parallel.cp");
  EXPECT_HAS(plan_err(config({moe, "parallel.ep=2", "train.local_steps=2"}), 2), "train.local_steps");
  EXPECT_HAS(plan_err(config({moe, "parallel.ep=2", "comm.compression=\"bf16\""}), 2), "comm.compression");
}

TEST(ParallelLayout, ParamServerWorkersAreModelParallelReplicas) {
  // 5 ranks with 1 server: 4 workers = dp 2 x tp 2; the grid spans the workers only.
  ParallelLayout l = plan_ok(config({"parallel.mode=ps", "parallel.dp=2", "parallel.tp=2", "train.batch_tokens=512"}), 5);
  EXPECT_EQ(l.grid.world_size(), 4);
  EXPECT_EQ(l.grid.tp, 2);
  l = plan_ok(config({"parallel.mode=ps", "parallel.pp=2", "train.batch_tokens=512", "ps.servers=2"}), 4);
  EXPECT_EQ(l.grid.pp, 2);
  EXPECT_EQ(l.grid.dp, 1);
}

TEST(ParallelLayout, ParamServerWorkerCountNamesTheFix) {
  // 3 workers cannot hold tp 2 replicas: no dp fits, launch with dp x 2 + 1.
  std::string m = plan_err(config({"parallel.mode=ps", "parallel.tp=2"}), 4);
  EXPECT_HAS(m, "4 ranks with ps.servers = 1 leave 3 workers but parallel.dp x parallel.tp x parallel.pp = 1 x 2 x 1 = 2");
  EXPECT_EQ(m.find("set parallel.dp"), std::string::npos) << m;
  EXPECT_HAS(m, "launch with mpirun -np 3");
  m = plan_err(config({"parallel.mode=ps", "parallel.tp=2"}), 5);
  EXPECT_HAS(m, "set parallel.dp = 2, or launch with mpirun -np 3");
  m = plan_err(config({"parallel.mode=ps", "parallel.dp=2", "parallel.zero=1", "train.batch_tokens=512"}), 3);
  EXPECT_HAS(m, "parallel.zero = 1 is not supported: the servers already shard");
}

}  // namespace
}  // namespace tessera
