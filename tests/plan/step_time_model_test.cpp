// The step-time model (plan/step_time_model.h) on hand-computable cases: the 1F1B bubble is
// (p-1)/(m+p-1), the dp reduction hides behind backward only as far as overlap allows, the optimizer
// streams its bytes at the node's rates, and the breakdown adds up to the step. The op and
// collective costs under it: op_costs_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/param_layout.h"
#include "plan/calibrate.h"
#include "plan/comm_cost.h"
#include "plan/op_costs.h"
#include "plan/step_time_model.h"
#include "step_time_fixtures.h"

namespace tessera {
namespace {

using step_time_test::config;
using step_time_test::cpu_node;
using step_time_test::ideal;
using step_time_test::predict;

TEST(StepTimeModel, SingleRankIsComputeTimesMicroBatches) {
  RunConfig cfg = config({"train.batch_tokens=1024"});  // 4 micro-batches of 4 x 64
  const StepTimePrediction p = predict(cfg, 1, ideal());
  const ChunkOps ops = chunk_ops(cfg.model, 0, 4, true, 1, false, 4, 64, Recompute::none);
  EXPECT_NEAR(p.breakdown.compute_s, 4 * total_flops(ops.forward) / 1e12 + 4 * total_flops(ops.backward) / 1e12,
              1e-12);
  EXPECT_EQ(p.breakdown.bubble_s, 0);
  EXPECT_EQ(p.breakdown.dp_s, 0);
  EXPECT_NEAR(p.step_s, p.breakdown.sum(), 1e-12);
  EXPECT_NEAR(p.tokens_per_s, 1024 / p.step_s, 1e-6);
}

TEST(StepTimeModel, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  // A 2-token vocabulary makes the head negligible, so the 4 stages are equal.
  for (int m : {4, 8, 16}) {
    RunConfig cfg = config({"model.vocab_size=2", "parallel.pp=4", "train.batch_tokens=" + std::to_string(m * 256)});
    const StepTimePrediction p = predict(cfg, 4, ideal());
    const double frac = p.breakdown.bubble_s / (p.breakdown.bubble_s + p.breakdown.compute_s);
    EXPECT_NEAR(frac, 3.0 / (m + 3.0), 2e-3) << m;
    EXPECT_NEAR(p.step_s, p.breakdown.sum(), 1e-12);
  }
  // Interleaved with 2 virtual stages halves it: (p-1)/(V m + p-1).
  RunConfig cfg = config({"model.vocab_size=2", "model.n_layer=8", "parallel.pp=4", "parallel.schedule=interleaved",
                          "parallel.virtual_stages=2", "train.batch_tokens=2048"});
  const StepTimePrediction p = predict(cfg, 4, ideal());
  EXPECT_NEAR(p.breakdown.bubble_s / (p.breakdown.bubble_s + p.breakdown.compute_s), 3.0 / 19.0, 2e-3);
}

// ZB-H1: the weight passes (half the backward's matmuls) fill the bubble; same compute, and the idle
// time per rank is (p - 1)(F + B - W) against 1F1B's (p - 1)(F + B + W).
TEST(StepTimeModel, ZeroBubbleFillsTheBubbleWithWeightPasses) {
  const std::vector<std::string> base = {"model.vocab_size=2", "parallel.pp=4", "train.batch_tokens=2048"};
  std::vector<std::string> zb = base;
  zb.push_back("parallel.schedule=zb-h1");
  const StepTimePrediction one = predict(config(base), 4, ideal()), zero = predict(config(zb), 4, ideal());
  EXPECT_NEAR(zero.breakdown.compute_s, one.breakdown.compute_s, 1e-12);
  const RunConfig cfg = config(base);
  const ChunkOps ops = chunk_ops(cfg.model, 0, 1, false, 1, false, 4, 64, Recompute::none);
  double weight = 0;  // per micro-batch and stage: half the backward's matmul FLOPs (1 layer per stage)
  for (const OpCost& op : ops.backward)
    if (op.cls == OpClass::matmul) weight += op.flops / 2 / 1e12;
  const double fwd = total_flops(ops.forward) / 1e12, bwd = total_flops(ops.backward) / 1e12;
  EXPECT_NEAR(one.breakdown.bubble_s, 3 * (fwd + bwd), 0.05 * one.breakdown.bubble_s);
  EXPECT_NEAR(zero.breakdown.bubble_s, 3 * (fwd + bwd - 2 * weight), 0.05 * one.breakdown.bubble_s);
  EXPECT_LT(zero.step_s, one.step_s);
}

TEST(StepTimeModel, DataParallelReductionHidesOnlyAsFarAsOverlapAllows) {
  RunConfig cfg = config({"parallel.dp=2", "train.batch_tokens=512", "parallel.bucket_mb=0.5"});
  HardwareSpec h = ideal();
  h.overlap_efficiency = 0;
  const StepTimePrediction none = predict(cfg, 2, h);
  const double grads = 4.0 * static_cast<double>(ParamLayout(cfg.model).total_numel());
  EXPECT_NEAR(none.breakdown.dp_s, ring_all_reduce_s(grads, 2, h.intra), 1e-12);
  EXPECT_NEAR(none.breakdown.dp_total_s, none.breakdown.dp_s, 1e-12);
  h.overlap_efficiency = 1;
  h.intra.bandwidth = 1e12;  // fast enough to hide behind one backward: only the last bucket shows
  const StepTimePrediction hidden = predict(cfg, 2, h);
  EXPECT_LT(hidden.breakdown.dp_s, hidden.breakdown.dp_total_s);
  EXPECT_NEAR(hidden.breakdown.dp_s, ring_all_reduce_s(0.5 * 1048576, 2, h.intra), 1e-12);
  // ZeRO 3 moves 1.5 x the all-reduce's bytes per micro-batch.
  RunConfig z3 = config({"parallel.dp=2", "parallel.zero=3", "train.batch_tokens=512"});
  h.overlap_efficiency = 0;
  h.intra.bandwidth = 1e9;
  const StepTimePrediction z = predict(z3, 2, h);
  EXPECT_GT(z.breakdown.dp_total_s, 1.4 * none.breakdown.dp_total_s);
}

// overlap_efficiency is the share of the communication that hides (what --calibrate measures), not
// a share of the window: a backward ten times longer than the exchange still hides only half of it
// at 0.5.
TEST(StepTimeModel, PartialOverlapHidesThatShareOfTheCommunication) {
  RunConfig cfg = config({"parallel.dp=2", "train.batch_tokens=512", "parallel.bucket_mb=0.5"});
  HardwareSpec h = ideal();
  h.intra.bandwidth = 1e11;  // the exchange well inside the backward
  h.overlap_efficiency = 0.5;
  const StepTimePrediction half = predict(cfg, 2, h);
  EXPECT_LT(10 * half.breakdown.dp_total_s, half.breakdown.compute_s);
  EXPECT_NEAR(half.breakdown.dp_s, 0.5 * half.breakdown.dp_total_s, 1e-12);
}

// ZeRO 2 / 3 hand their pages back after use: at refault bandwidth R, every micro-batch's backward
// writes the gradient pages in again (4 P / R), and ZeRO 3's two gathers the other shards'
// parameter pages (2 x 4 P (dp - 1) / dp / R). Stages 0 and 1 keep their pages.
TEST(StepTimeModel, ZeroPaysForThePagesItHandsBack) {
  HardwareSpec h = ideal();
  h.overlap_efficiency = 0;
  const double P = static_cast<double>(ParamLayout(config().model).total_numel());
  for (int zero : {0, 1, 2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    RunConfig cfg = config({"parallel.dp=2", "parallel.zero=" + std::to_string(zero), "train.batch_tokens=1024"});
    ASSERT_EQ(cfg.train.grad_accum, 2);
    h.refault_bandwidth = 0;
    const StepTimePrediction free_pages = predict(cfg, 2, h);
    h.refault_bandwidth = 1e9;
    const StepTimePrediction paid = predict(cfg, 2, h);
    const double grads = zero >= 2 ? 2 * 4 * P / 1e9 : 0;
    const double params = zero == 3 ? 2 * 2 * 4 * P / 2 / 1e9 : 0;
    EXPECT_NEAR(paid.breakdown.compute_s - free_pages.breakdown.compute_s, grads, 1e-9 * grads + 1e-12);
    EXPECT_NEAR(paid.breakdown.dp_total_s - free_pages.breakdown.dp_total_s, params, 1e-9 * params + 1e-12);
  }
}

// The optimizer streams 32 bytes a parameter (the norm and AdamW) at its own measured rate when there is one, else at the
// elementwise memory rate (which a small working set measures in cache).
TEST(StepTimeModel, OptimizerStreamsAtItsOwnMeasuredRate) {
  HardwareSpec h = ideal();
  h.memory_bandwidth = 4e10;
  const RunConfig cfg = config();
  const double P = static_cast<double>(ParamLayout(cfg.model).total_numel());
  const double overhead = 4 * h.op_overhead_s;
  EXPECT_NEAR(predict(cfg, 1, h).breakdown.optimizer_s, kOptimizerBytesPerParam * P / 4e10 + overhead, 1e-12);
  h.optimizer_bandwidth = 1e10;
  EXPECT_NEAR(predict(cfg, 1, h).breakdown.optimizer_s, kOptimizerBytesPerParam * P / 1e10 + overhead, 1e-12);
}

// Ranks updating at once share the node's memory: each streams at its share of node_stream_bandwidth
// where that is below its own rate; ranks beyond the cores take turns (core sharing stretches them),
// so only those on a core of their own split the node's rate.
TEST(StepTimeModel, RanksUpdatingAtOnceShareTheNodesStreams) {
  HardwareSpec h = cpu_node(2);
  h.devices_per_node = 4;
  h.optimizer_bandwidth = 4e10;
  const double overhead = 4 * h.op_overhead_s;
  const RunConfig one = config({"train.threads=1"});
  const RunConfig two = config({"train.threads=1", "parallel.dp=2", "train.batch_tokens=1024"});
  const RunConfig four = config({"train.threads=1", "parallel.dp=4", "train.batch_tokens=2048"});
  const double P = static_cast<double>(ParamLayout(one.model).total_numel());
  const double bytes = kOptimizerBytesPerParam * P;
  EXPECT_NEAR(predict(two, 2, h).breakdown.optimizer_s, bytes / 4e10 + overhead, 1e-12);  // unmeasured: no sharing
  h.node_stream_bandwidth = 6e10;
  EXPECT_NEAR(predict(one, 1, h).breakdown.optimizer_s, bytes / 4e10 + overhead, 1e-12);  // alone: its own rate
  EXPECT_NEAR(predict(two, 2, h).breakdown.optimizer_s, bytes / 3e10 + overhead, 1e-12);  // two at once: half the node's
  // Four ranks on two cores: two update at once (3e10 each), and each takes turns with another (x 2).
  EXPECT_NEAR(predict(four, 4, h).breakdown.optimizer_s, 2 * (bytes / 3e10 + overhead), 1e-12);
  h.node_stream_bandwidth = 1e11;  // more than two ranks' own rates: each streams at its own
  EXPECT_NEAR(predict(two, 2, h).breakdown.optimizer_s, bytes / 4e10 + overhead, 1e-12);
}

// ZeRO's passes over the owned shard (parallel/zero.cpp) stream beside the norm and AdamW's 32 bytes
// an element: in the update, stage 1 the average, the copy into the flat gradient and the clip (24),
// stages 2-3 the accumulator's zeroing (4) and the clip (8); in each micro-batch's backward, stages
// 2-3 the average and the accumulation (20), which the compute carries.
TEST(StepTimeModel, ZeroStreamsItsShardPassesBesideAdamW) {
  HardwareSpec h = ideal();
  h.optimizer_bandwidth = 1e9;
  const double overhead = 4 * h.op_overhead_s;
  auto run = [&](int zero) {
    const RunConfig cfg = config({"parallel.dp=2", "parallel.zero=" + std::to_string(zero), "train.batch_tokens=1024"});
    EXPECT_EQ(cfg.train.grad_accum, 2);
    return predict(cfg, 2, h).breakdown;
  };
  const StepTimeBreakdown plain = run(0);
  const double owned = (run(1).optimizer_s - overhead) * 1e9 / (32 + 24);
  const RunConfig one = config();
  const double params = static_cast<double>(ParamLayout(one.model).total_numel());
  EXPECT_NEAR(owned, params / 2, 0.01 * params);  // half, up to ZeRO's unit alignment
  for (int zero : {2, 3}) {
    const StepTimeBreakdown b = run(zero);
    EXPECT_NEAR(b.optimizer_s - overhead, (32 + 4 + 8) * owned / 1e9, 1e-12) << "zero " << zero;
    EXPECT_NEAR(b.compute_s - plain.compute_s, 2 * 20 * owned / 1e9, 1e-12) << "zero " << zero;
  }
}

// Owner-only experts (ep, no ZeRO): dense gradients are reduced over dp x ep, each rank's
// experts over dp only, and AdamW runs over E / ep experts.
TEST(StepTimeModel, ExpertParallelReducesOnlyTheDenseTensorsAcrossEp) {
  HardwareSpec h = ideal();
  h.overlap_efficiency = 0;
  h.memory_bandwidth = 1e9;
  const std::string moe = "model.preset=tiny-moe";
  const StepTimePrediction ep = predict(config({moe, "parallel.ep=2", "train.batch_tokens=512"}), 2, h);
  const StepTimePrediction dp = predict(config({moe, "parallel.dp=2", "train.batch_tokens=512"}), 2, h);
  const ModelConfig m = config({moe}).model;
  double dense = 0, all = 0;
  const ParamLayout layout(m);
  for (const ParamInfo& p : layout.params()) {
    all += static_cast<double>(p.numel);
    if (!p.expert) dense += static_cast<double>(p.numel);
  }
  EXPECT_NEAR(dp.breakdown.dp_total_s, ring_all_reduce_s(4 * all, 2, h.intra), 1e-3 * dp.breakdown.dp_total_s);
  // Within the alignment padding (16 floats per tensor) that the expert ranges carry.
  EXPECT_NEAR(ep.breakdown.dp_total_s, ring_all_reduce_s(4 * dense, 2, h.intra), 0.02 * ep.breakdown.dp_total_s);
  EXPECT_LT(ep.breakdown.optimizer_s, 0.75 * dp.breakdown.optimizer_s);
}

TEST(StepTimeModel, TensorParallelAddsFourAllReducesPerLayer) {
  RunConfig cfg = config({"parallel.tp=2"});
  const StepTimePrediction p = predict(cfg, 2, ideal());
  const double act = 4.0 * 4 * 64 * 128;
  const double per = ring_all_reduce_s(act, 2, ideal().intra);
  // 4 layers x (2 forward + 2 backward) + the embedding's sum + the loss's two (B T) sums.
  EXPECT_NEAR(p.breakdown.tp_s, 16 * per + per + 2 * ring_all_reduce_s(4.0 * 256, 2, ideal().intra), 1e-12);
  // MoE layers without a shared expert run whole on each tp rank: only attention's two exchanges.
  // (The config's n_layer 4 and d_model 128 stay; every layer is MoE.)
  const RunConfig moe = config({"model.preset=tiny-moe", "parallel.tp=2"});
  ASSERT_EQ(moe.model.n_layer, 4);
  ASSERT_EQ(moe.model.d_model, 128);
  const StepTimePrediction q = predict(moe, 2, ideal());
  EXPECT_NEAR(q.breakdown.tp_s, 8 * per + per + 2 * ring_all_reduce_s(4.0 * 256, 2, ideal().intra), 1e-12);
}

// Ring attention, cp 2: per layer one key/value hop forward, one hop and two gradient hops backward.
// Free compute exposes all four; slow compute hides all but the gradients' last hop home.
TEST(StepTimeModel, RingAttentionHidesHopsBehindEachStepsAttention) {
  const RunConfig cfg = config({"parallel.cp=2", "parallel.cp_mode=ring"});
  const double hop = point_to_point_s(4.0 * 4 * 32 * 2 * 128, ideal().intra);  // B T/cp rows of 2 NKV HS
  HardwareSpec free_compute = ideal();
  free_compute.peak_flops_fp32 = 1e30;
  EXPECT_NEAR(predict(cfg, 2, free_compute).breakdown.cp_s, 4 * (1 + 2 + 1) * hop, 1e-12);
  HardwareSpec slow_compute = ideal();
  slow_compute.peak_flops_fp32 = 1e6;
  EXPECT_NEAR(predict(cfg, 2, slow_compute).breakdown.cp_s, 4 * hop, 1e-12);
}

// The calibrated compute scale (a probe model's measured step over its op sum) multiplies every
// compute time and nothing else.
TEST(StepTimeModel, ComputeScaleMultipliesComputeOnly) {
  const RunConfig cfg = config({"parallel.dp=2", "train.batch_tokens=2048"});
  HardwareSpec scaled = ideal();
  scaled.compute_scale = 1.5;
  const StepTimeBreakdown a = predict(cfg, 2, ideal()).breakdown, b = predict(cfg, 2, scaled).breakdown;
  EXPECT_NEAR(b.compute_s, 1.5 * a.compute_s, 1e-12);
  EXPECT_NEAR(b.dp_total_s, a.dp_total_s, 1e-12);
  EXPECT_NEAR(b.optimizer_s, a.optimizer_s, 1e-12);
}

// A class's own scale multiplies that class's ops only; a class without one takes compute_scale. So
// tensor parallelism, which halves the matmuls but not the replicated memory-bound ops, feels a
// memory-op scale more than one rank does.
TEST(StepTimeModel, EachOpClassTakesItsOwnScale) {
  const RunConfig one = config({"train.batch_tokens=2048"});
  const RunConfig tp = config({"parallel.tp=2", "train.batch_tokens=2048"});
  HardwareSpec memory_slow = ideal();
  memory_slow.memory_bandwidth = 1e9;  // memory-bound ops take a visible share
  HardwareSpec scaled = memory_slow;
  scaled.memory_op_scale = 2.0;
  scaled.compute_scale = 3.0;  // for matmuls and attention here, which have no scale of their own
  scaled.matmul_scale = 0;
  const ChunkOps ops = chunk_ops(one.model, 0, one.model.n_layer, true, 1, false, one.train.micro_batch, one.data.seq_len,
                                 Recompute::none);
  double matmul = 0, attention = 0, memory = 0;
  for (const OpCost& op : ops.forward) {
    const double s = op_seconds(op, memory_slow, "fp32");
    (op.cls == OpClass::matmul ? matmul : op.cls == OpClass::attention ? attention : memory) += s;
  }
  EXPECT_GT(memory, 0);
  EXPECT_NEAR(ops_seconds(ops.forward, scaled, "fp32"), 3.0 * (matmul + attention) + 2.0 * memory,
              1e-9 * (matmul + attention + memory));
  // tp 2 against one rank: a higher memory-op scale raises tp's compute by a larger share.
  HardwareSpec memory_heavy = memory_slow;
  memory_heavy.memory_op_scale = 3.0;
  const double one_ratio = predict(one, 1, memory_heavy).breakdown.compute_s / predict(one, 1, memory_slow).breakdown.compute_s;
  const double tp_ratio = predict(tp, 2, memory_heavy).breakdown.compute_s / predict(tp, 2, memory_slow).breakdown.compute_s;
  EXPECT_GT(tp_ratio, one_ratio);
}

// A CPU file measured with one thread per rank: a rank running 2 threads on free cores computes and
// streams the optimizer twice as fast (one measured with 2, a 1-thread rank half as fast); 2 ranks x
// 2 threads on 2 cores share them back to one core each; a file that does not say its threads, or a
// GPU's (no cores), is taken as measured at the run's.
TEST(StepTimeModel, ARanksThreadsAgainstTheFilesScaleItsCompute) {
  HardwareSpec h = cpu_node(4);
  h.memory_bandwidth = 1e10;
  h.op_overhead_s = 0;
  auto at = [&](const HardwareSpec& hw, int ranks, const std::string& threads) {
    const std::string dp = "parallel.dp=" + std::to_string(ranks);
    return predict(config({dp, "train.threads=" + threads, "train.batch_tokens=" + std::to_string(256 * ranks)}), ranks, hw)
        .breakdown;
  };
  const StepTimeBreakdown one = at(h, 1, "1"), two = at(h, 1, "2");
  EXPECT_NEAR(two.compute_s, one.compute_s / 2, 1e-12);
  EXPECT_NEAR(two.optimizer_s, one.optimizer_s / 2, 1e-12);
  HardwareSpec unknown = h;
  unknown.threads_per_device = 0;
  EXPECT_NEAR(at(unknown, 1, "2").compute_s, one.compute_s, 1e-12);
  HardwareSpec gpu = h;
  gpu.cores_per_node = 0;
  EXPECT_NEAR(at(gpu, 1, "2").compute_s, one.compute_s, 1e-12);
  HardwareSpec measured_at_two = h;
  measured_at_two.threads_per_device = 2;
  EXPECT_NEAR(at(measured_at_two, 1, "1").compute_s, 2 * one.compute_s, 1e-12);
  HardwareSpec two_cores = h;
  two_cores.cores_per_node = 2;
  two_cores.devices_per_node = 2;
  EXPECT_NEAR(at(two_cores, 2, "2").compute_s, at(two_cores, 2, "1").compute_s, 1e-12);
}

// DataParallel's tied-embedding tail streams dwte four times (28 bytes an element) at dp > 1; an
// untied model, one rank, ZeRO or compression has no tail.
TEST(StepTimeModel, TiedEmbeddingTailStreamsTheEmbeddingFourTimes) {
  HardwareSpec hw = ideal();
  hw.optimizer_bandwidth = 1e9;
  const RunConfig tied = config({"parallel.dp=2", "train.batch_tokens=1024"});
  const RunConfig untied = config({"parallel.dp=2", "train.batch_tokens=1024", "model.tied_embeddings=false"});
  const double wte = static_cast<double>(tied.model.vocab_size * tied.model.d_model);
  EXPECT_NEAR(predict(tied, 2, hw).breakdown.other_s - predict(untied, 2, hw).breakdown.other_s, 28.0 * wte / 1e9, 1e-12);
  const RunConfig zero = config({"parallel.dp=2", "parallel.zero=1", "train.batch_tokens=1024"});
  const RunConfig zero_untied = config({"parallel.dp=2", "parallel.zero=1", "train.batch_tokens=1024", "model.tied_embeddings=false"});
  EXPECT_NEAR(predict(zero, 2, hw).breakdown.other_s, predict(zero_untied, 2, hw).breakdown.other_s, 1e-12);
}

// compute_scale is the whole probe's ratio; each class gets its profiled share of the measured step
// (the unprofiled time spread pro rata) over its predicted time; a class the probe lacks gets 0.
TEST(ComputeScales, EachClassIsItsShareOfTheMeasuredStep) {
  HardwareSpec h;
  // measured: 90 ms profiled (60 matmul, 0 attention, 30 memory) in a 99 ms step (10 % between ops)
  set_compute_scales(h, {0.099, 0.060, 0.0, 0.030}, {0, 0.050, 0.0, 0.020});
  EXPECT_NEAR(h.compute_scale, 0.099 / 0.070, 1e-12);
  EXPECT_NEAR(h.matmul_scale, 0.060 * 1.1 / 0.050, 1e-12);
  EXPECT_NEAR(h.memory_op_scale, 0.030 * 1.1 / 0.020, 1e-12);
  EXPECT_EQ(h.attention_scale, 0.0);
  EXPECT_NEAR(class_scale(h, OpClass::attention), h.compute_scale, 1e-12);
}

// A CPU machine's ranks beyond its cores take turns: dp 4 of one thread on 2 cores computes at half
// speed (on 4 cores, or hardware without cores, at full); a pipeline's idle ranks give their cores
// away, so pp 4 on 2 cores costs its stages' busy time over 2 cores, not twice its 1-core step.
TEST(StepTimeModel, RanksBeyondTheCoresTakeTurnsOnThem) {
  HardwareSpec two = ideal(), four = ideal();
  two.cores_per_node = 2;
  four.cores_per_node = 4;
  const RunConfig dp = config({"parallel.dp=4", "train.batch_tokens=1024", "train.threads=1"});
  const StepTimePrediction own = predict(dp, 4, ideal()), shared = predict(dp, 4, two), enough = predict(dp, 4, four);
  EXPECT_NEAR(shared.breakdown.compute_s, 2 * own.breakdown.compute_s, 1e-12);
  EXPECT_NEAR(shared.breakdown.optimizer_s, 2 * own.breakdown.optimizer_s, 1e-12);
  EXPECT_NEAR(enough.step_s, own.step_s, 1e-12);
  EXPECT_NEAR(shared.step_s, shared.breakdown.sum(), 1e-12);
  EXPECT_NEAR(shared.step_s, own.step_s + own.breakdown.compute_s + own.breakdown.optimizer_s, 1e-12);

  const RunConfig pp = config({"parallel.pp=4", "train.batch_tokens=1024", "train.threads=1"});  // m = 4
  const StepTimePrediction alone = predict(pp, 4, ideal()), turns = predict(pp, 4, two);
  ASSERT_GT(alone.breakdown.bubble_s, 0);
  EXPECT_NEAR(turns.step_s, turns.breakdown.sum(), 1e-12);
  EXPECT_GT(turns.step_s, alone.step_s);
  EXPECT_LT(turns.step_s, 2 * alone.step_s - 0.5 * alone.breakdown.bubble_s);
  const double busy = turns.breakdown.compute_s + turns.breakdown.optimizer_s;  // every stage's, over 2 cores
  EXPECT_NEAR(turns.step_s, busy + turns.breakdown.bubble_s + turns.breakdown.pp_s + turns.breakdown.other_s +
                                turns.breakdown.dp_s + turns.breakdown.tp_s, 1e-12);
}

TEST(StepTimeModel, LayoutErrorsComeBackUnchanged) {
  RunConfig cfg = config({"parallel.tp=3"});
  auto r = predict_step_time(cfg, 3, ideal());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("parallel.tp=3"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tessera
