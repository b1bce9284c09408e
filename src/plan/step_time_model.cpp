// The step-time model (see step_time_model.h for what each term covers and what is left out).
#include "plan/step_time_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/param_layout.h"
#include "parallel/pipeline_schedule_sim.h"
#include "parallel/tied_embedding_tail.h"
#include "plan/comm_cost.h"
#include "plan/op_costs.h"

namespace tessera {

namespace {

constexpr double kF = 4;  // bytes per f32 (gradients, parameters and activations travel as f32)

// One rank's chunks: per-micro-batch seconds of compute and of tensor-parallel communication.
struct ChunkTime {
  double fwd = 0, bwd = 0, recompute = 0, tp_fwd = 0, tp_bwd = 0, cp_fwd = 0, cp_bwd = 0, ep_fwd = 0, ep_bwd = 0;
  double weight = 0;  // the part of bwd a split backward runs in its weight pass (zb-h1; else 0)
  // The exchanges inside the layers (tp, cp, ep), which nothing overlaps.
  double comm_fwd() const { return tp_fwd + cp_fwd + ep_fwd; }
  double comm_bwd() const { return tp_bwd + cp_bwd + ep_bwd; }
  double params = 0;          // elements of the chunk's (tp-shard) parameters
  double expert_params = 0;   // of which owner-only experts (reduced over dp, not dp x ep)
  double largest_unit = 0;    // elements of its largest layer (ZeRO's unit, DataParallel's bucket floor)
  double tail_wte = 0;        // elements of the tied embedding DataParallel splits off (tied_embedding_tail.h)
};

struct RankTime {
  std::vector<ChunkTime> chunks;
  double params() const {
    double s = 0;
    for (const ChunkTime& c : chunks) s += c.params;
    return s;
  }
  double expert_params() const {
    double s = 0;
    for (const ChunkTime& c : chunks) s += c.expert_params;
    return s;
  }
};

// Context parallelism: the rank runs everything on its T / cp positions except attention, whose
// queries see the whole sequence (Ulysses: 1/cp of the heads over all positions; ring: its positions
// against every key): cp times the FLOPs of attention over T / cp either way.
void add_context_parallel(ChunkOps& ops, int cp) {
  for (std::vector<OpCost>* list : {&ops.forward, &ops.backward})
    for (OpCost& op : *list)
      if (op.cls == OpClass::attention) op.flops *= cp;
}

double attention_seconds(const std::vector<OpCost>& ops, const HardwareSpec& hw, const std::string& prec) {
  return class_seconds(ops, OpClass::attention, hw, prec);
}

RankTime rank_time(const RunConfig& cfg, const ParallelLayout& lay, int stage, const HardwareSpec& hw,
                   const LinkSpec& tp_link, const LinkSpec& cp_link, const LinkSpec& ep_link) {
  const ModelConfig& m = cfg.model;
  const int tp = lay.grid.tp, cp = lay.grid.cp;
  const bool sp = lay.sequence_parallel && tp > 1;
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len / cp;
  const std::string prec(precision_name(cfg.train.precision));
  RankTime r;
  for (int c = 0; c < lay.pipe.virtual_stages; ++c) {
    const auto [first, last] = lay.chunk_layers(stage, c);
    const ParamLayout pl(m, first, last, TensorParallelShard{0, tp}, 16, stored_experts(cfg, lay, 0), lay.head_stage());
    const bool head = pl.holds_head();
    ChunkTime t;
    ChunkOps ops = chunk_ops(m, first, last, head, tp, sp, B, T, cfg.train.recompute, lay.grid.ep);
    ChunkOps plain = chunk_ops(m, first, last, head, tp, sp, B, T, Recompute::none, lay.grid.ep);
    add_context_parallel(ops, cp);
    add_context_parallel(plain, cp);
    t.fwd = ops_seconds(ops.forward, hw, prec);
    t.bwd = ops_seconds(ops.backward, hw, prec);
    t.recompute = t.bwd - ops_seconds(plain.backward, hw, prec);
    // A split backward (zb-h1): each linear's backward is two matmuls of equal FLOPs, the
    // weight-gradient one in the weight pass.
    if (lay.schedule == PipelineScheduleKind::zb_h1) t.weight = class_seconds(ops.backward, OpClass::matmul, hw, prec) / 2;
    t.params = static_cast<double>(pl.total_numel());
    for (const auto& [b, e] : expert_ranges(pl)) t.expert_params += static_cast<double>(e - b);
    t.largest_unit = static_cast<double>(pl.total_numel()) / std::max(1, last - first);
    if (const ParamInfo* wte = tied_embedding_tail_wte(pl, lay.grid.replica_size())) t.tail_wte = static_cast<double>(wte->numel);
    // ZeRO 2 / 3 hand each layer's gradient pages back after its reduction: the next micro-batch's
    // backward faults them in again as it writes them (the weight pass under a split backward).
    if (cfg.parallel.zero >= 2 && lay.grid.replica_size() > 1 && hw.refault_bandwidth > 0) {
      const double refault = kF * t.params / hw.refault_bandwidth;
      t.bwd += refault;
      t.weight += lay.schedule == PipelineScheduleKind::zb_h1 ? refault : 0;
    }
    if (tp > 1) {
      // Per layer: attention and (dense or shared-expert) MLP outputs, (B T, C) each (a MoE layer's
      // experts run whole on every tp rank: no exchange); the embedding's and the vocabulary-
      // parallel loss's sums (max and sum of exponentials) at the ends.
      const double act = kF * static_cast<double>(B * T * m.d_model);
      const double per = sp ? ring_reduce_scatter_s(act, tp, tp_link) + ring_all_gather_s(act, tp, tp_link)
                            : ring_all_reduce_s(act, tp, tp_link);
      int exchanges = 0;  // per pass
      for (int l = first; l < last; ++l) exchanges += 1 + (m.has_dense_mlp(l) ? 1 : 0);
      t.tp_fwd = exchanges * per;
      t.tp_bwd = exchanges * per + (cfg.train.recompute == Recompute::full ? exchanges * per : 0);
      if (first == 0) t.tp_fwd += ring_all_reduce_s(act, tp, tp_link);
      if (head) t.tp_fwd += 2 * ring_all_reduce_s(kF * static_cast<double>(B * T), tp, tp_link);
    }
    const int layers = last - first;
    const bool recomputes_attention = cfg.train.recompute != Recompute::none;
    if (cp > 1 && layers > 0 && lay.cp_mode == ContextParallelMode::ring) {
      // Per layer, forward: cp - 1 hops of the keys and values (B T/cp rows of 2 NKV HS / tp), each
      // behind one step's attention (1/cp of the layer's); backward: the same hops plus the key/value
      // gradients' cp hops, the last one exposed. Recomputed attention repeats the forward's.
      const double kv = kF * static_cast<double>(B * T) * 2.0 * m.n_kv_head * m.head_size() / tp;
      const double hop = point_to_point_s(kv, cp_link);
      const double step_fwd = attention_seconds(plain.forward, hw, prec) / layers / cp;
      const double step_bwd = attention_seconds(plain.backward, hw, prec) / layers / cp;
      const double fwd = (cp - 1) * std::max(0.0, hop - step_fwd);
      const double bwd = (cp - 1) * std::max(0.0, 2 * hop - step_bwd) + hop;
      t.cp_fwd = layers * fwd;
      t.cp_bwd = layers * (bwd + (recomputes_attention ? fwd : 0));
    } else if (cp > 1) {
      // Per layer: qkv (B T/cp rows of (NH + 2 NKV) HS / tp) out and the attention output (NH HS / tp)
      // back; backward moves their gradients the other way; full recompute repeats the forward pair.
      const double rows = static_cast<double>(B * T);
      const double qkv = kF * rows * static_cast<double>(m.qkv_width()) / tp;
      const double att = kF * rows * static_cast<double>(m.n_head * m.head_size()) / tp;
      const double pair = all_to_all_s(qkv, cp, cp_link) + all_to_all_s(att, cp, cp_link);
      t.cp_fwd = layers * pair;
      t.cp_bwd = layers * pair + (cfg.train.recompute == Recompute::full ? layers * pair : 0);
    }
    if (lay.grid.ep > 1) {
      // Per MoE layer: the dispatched rows (B T K slots dropless, fewer under a capacity, C wide) to
      // the experts' owners and the outputs back; backward moves their gradients the same way.
      const int64_t N = B * T, cap = m.moe_capacity(N);
      const int64_t slots = cap > 0 ? std::min(N * m.moe_top_k, m.moe_experts * cap) : N * m.moe_top_k;
      const double pair = 2 * all_to_all_s(kF * static_cast<double>(slots * m.d_model), lay.grid.ep, ep_link);
      int moe_layers = 0;
      for (int l = first; l < last; ++l) moe_layers += m.is_moe_layer(l) ? 1 : 0;
      t.ep_fwd = moe_layers * pair;
      t.ep_bwd = moe_layers * pair;
    }
    r.chunks.push_back(t);
  }
  return r;
}

// The node holds min(world, devices_per_node) of the run's ranks; train.threads = 0 gives each rank
// its share of the cores.
int ranks_on_node(const HardwareSpec& hw, int world_size) { return std::max(1, std::min(world_size, hw.devices_per_node)); }
int run_threads(const HardwareSpec& hw, const RunConfig& cfg, int world_size) {
  return cfg.train.threads > 0 ? cfg.train.threads : std::max(1, hw.cores_per_node / ranks_on_node(hw, world_size));
}

// A CPU machine's ranks beyond its cores (oversubscribed mpirun) take turns on them: each rank's
// compute and optimizer stretch by the excess, while a rank waiting in the bubble or a collective
// leaves its core to the others.
double core_sharing_of(const HardwareSpec& hw, const RunConfig& cfg, int world_size) {
  return hw.core_sharing(ranks_on_node(hw, world_size), run_threads(hw, cfg, world_size));
}

// The machine as ranks `speedup` times faster than the file's device see it (HardwareSpec::
// thread_speedup: a CPU file measured with another number of threads per rank than the run uses):
// compute and the optimizer's streams scale in proportion. Ideal scaling: the default job (1 rank x
// 2 threads, the 1-thread cpu-2core.toml, Zen 4) predicted 6,299 tokens/s for 6,475 measured (3,150
// without it); bench_optimizer_update ran 1.84x at 2 threads.
HardwareSpec scaled_to_threads(HardwareSpec hw, double speedup) {
  if (speedup == 1.0) return hw;
  hw.compute_scale /= speedup;
  hw.matmul_scale /= speedup;
  hw.attention_scale /= speedup;
  hw.memory_op_scale /= speedup;
  hw.optimizer_bandwidth = speedup * hw.optimizer_rate();
  return hw;
}

// Bytes per owned element that ZeRO's own passes over the shard stream in a step's update, beyond
// the norm and AdamW (parallel/zero.cpp): stage 1 divides the reduce-scatter's slice in place (8) and
// copies it into the flat gradient (8); stages 2-3 zero the accumulator after AdamW (4); clipping
// scales the owned gradient (8; the first steps of a run clip). The all-gathers run in place and copy
// nothing. GPT-2 dp 2 ZeRO 1 on a 2-core Zen 4: 100 ms a step of copies and scaling in perf samples
// that the model did not charge (measured +16.6 %).
double zero_update_pass_bytes(int zero) {
  switch (zero) {
    case 1: return 8 + 8 + 8;
    case 2:
    case 3: return 4 + 8;
    default: return 0;
  }
}

// Bytes per owned element that stages 2-3 stream in each micro-batch's backward, as its reduce-scatter
// lands: the slice divided in place (8) and added to the accumulator (12). (Booked with the update,
// GPT-2's ZeRO 2 / 3 update was predicted at 123 ms for 81-85 measured.)
double zero_backward_pass_bytes(int zero, int micro_batches) { return zero >= 2 ? micro_batches * (8.0 + 12.0) : 0.0; }

}  // namespace

std::string StepTimePrediction::describe() const {
  const StepTimeBreakdown& b = breakdown;
  char cp_part[48] = "", ep_part[24] = "";
  if (b.cp_s > 0) std::snprintf(cp_part, sizeof cp_part, "cp %.3g, ", b.cp_s);
  if (b.ep_s > 0) std::snprintf(ep_part, sizeof ep_part, "ep %.3g, ", b.ep_s);
  std::strncat(cp_part, ep_part, sizeof cp_part - std::strlen(cp_part) - 1);
  char buf[352];
  std::snprintf(buf, sizeof buf,
                "step %.4g s, %.4g tokens/s (compute %.3g s [recompute %.3g], bubble %.3g, tp %.3g, %spp %.3g, "
                "dp %.3g [of %.3g], optimizer %.3g, other %.3g)",
                step_s, tokens_per_s, b.compute_s, b.recompute_s, b.bubble_s, b.tp_s, cp_part, b.pp_s, b.dp_s,
                b.dp_total_s,
                b.optimizer_s, b.other_s);
  return buf;
}

Result<StepTimePrediction> predict_step_time(const RunConfig& cfg, int world_size, const HardwareSpec& machine) {
  const double thread_speedup = machine.thread_speedup(run_threads(machine, cfg, world_size));
  const HardwareSpec hw = scaled_to_threads(machine, thread_speedup);
  TS_ASSIGN_OR_RETURN(ParallelLayout lay, plan_parallel_layout(cfg, world_size));
  const ModelConfig& m = cfg.model;
  const GridShape& g = lay.grid;
  const int M = static_cast<int>(cfg.train.grad_accum), P = g.pp, zero = cfg.parallel.zero;
  const LinkSpec tp_link = group_link(hw, g, GridAxis::tp), dp_link = group_link(hw, g, GridAxis::dp),
                 pp_link = group_link(hw, g, GridAxis::pp), cp_link = group_link(hw, g, GridAxis::cp),
                 ep_link = group_link(hw, g, GridAxis::ep);
  // The dense gradients are averaged (and ZeRO-sharded) over dp x cp (Grid::param_replicas()).
  const int replicas = g.replica_size();
  // ZeRO shards over the replicas, or with owner-only experts (ep > 1) over the ranks storing the same experts.
  const int shards = g.ep > 1 ? g.dp * g.cp : replicas;
  std::vector<RankTime> ranks;
  for (int s = 0; s < P; ++s) ranks.push_back(rank_time(cfg, lay, s, hw, tp_link, cp_link, ep_link));
  const double optimizer_rate = hw.optimizer_rate_on_node(ranks_on_node(hw, world_size), run_threads(hw, cfg, world_size));

  // Compute, tp and the pipeline: each stage's micro-batches through the schedule.
  std::vector<double> compute(P, 0), tp(P, 0), cpc(P, 0), epc(P, 0), recompute(P, 0), finish(P, 0);
  for (int s = 0; s < P; ++s)
    for (const ChunkTime& c : ranks[s].chunks) {
      compute[s] += M * (c.fwd + c.bwd);
      recompute[s] += M * c.recompute;
      tp[s] += M * (c.tp_fwd + c.tp_bwd);
      cpc[s] += M * (c.cp_fwd + c.cp_bwd);
      epc[s] += M * (c.ep_fwd + c.ep_bwd);
    }
  StepTimeBreakdown b;
  int slow = 0;
  if (P == 1) {
    finish[0] = compute[0] + tp[0] + cpc[0] + epc[0];
  } else {
    const auto schedules = make_all_pipeline_schedules(lay.schedule, lay.pipe);
    auto cost = [&](int r, const PipeAction& a) {
      const ChunkTime& c = ranks[r].chunks[static_cast<size_t>(a.chunk)];
      if (a.op == PipeOp::weight) return c.weight;
      return a.op == PipeOp::forward ? c.fwd + c.comm_fwd() : c.bwd - c.weight + c.comm_bwd();
    };
    const double act = kF * static_cast<double>(cfg.train.micro_batch * cfg.data.seq_len / g.cp * m.d_model);
    const PipelineSimulation with = simulate_pipeline(schedules, cost, point_to_point_s(act, pp_link));
    const PipelineSimulation without = simulate_pipeline(schedules, cost, 0.0);
    if (!with.finished) return internal_error("pipeline simulation: " + with.error);
    finish = with.finish;
    b.pp_s = with.makespan - without.makespan;
  }
  // The data-parallel part, per stage; the step ends when the slowest stage's last reduction does.
  std::vector<double> dp_exposed(P, 0), dp_total(P, 0), opt(P, 0), end(P, 0);
  // overlap_efficiency of the communication that fits in its window hides; the rest shows.
  auto exposed_of = [ov = hw.overlap_efficiency](double comm, double window, double least) {
    return std::max(comm - ov * std::min(comm, window), least);
  };
  for (int s = 0; s < P; ++s) {
    const double params = ranks[s].params();
    const double bytes = kF * params;
    double bwd_window = 0, fwd_mb = 0, bwd_mb = 0, unit = 0;
    for (const ChunkTime& c : ranks[s].chunks) {
      bwd_window += c.bwd + c.comm_bwd();
      fwd_mb += c.fwd + c.comm_fwd();
      bwd_mb += c.bwd + c.comm_bwd();
      unit = std::max(unit, c.largest_unit);
    }
    if (replicas > 1) {
      if (zero == 0) {  // owner-only experts: over the ranks storing them (dp), the rest over dp x ep
        const double experts = kF * ranks[s].expert_params();
        const double total = ring_all_reduce_s(bytes - experts, replicas, dp_link) + ring_all_reduce_s(experts, g.dp, dp_link);
        const double last = ring_all_reduce_s(std::min(bytes, cfg.parallel.bucket_mb * 1048576.0), replicas, dp_link);
        dp_total[s] = total;
        dp_exposed[s] = exposed_of(total, bwd_window, last);
      } else {
        const double rs = ring_reduce_scatter_s(bytes, shards, dp_link);
        const double ag = ring_all_gather_s(bytes, shards, dp_link);
        const double rs_last = ring_reduce_scatter_s(kF * unit, shards, dp_link);
        // Owner-only experts: the owned dense slices averaged over ep at the end of the step.
        const double ep_avg = g.ep > 1 ? ring_all_reduce_s((bytes - kF * ranks[s].expert_params()) / shards, g.ep, dp_link) : 0;
        if (zero == 1) {
          dp_total[s] = rs + ag + ep_avg;
          dp_exposed[s] = exposed_of(rs, bwd_window, rs_last) + ag + ep_avg;
        } else if (zero == 2) {
          dp_total[s] = M * rs + ag + ep_avg;
          dp_exposed[s] = M * exposed_of(rs, bwd_mb, rs_last) + ag + ep_avg;
        } else {  // every micro-batch gathers before forward and backward; the first unit's gather waits
          // Each gather also faults the other shards' pages in again (handed back after use).
          const double refault = hw.refault_bandwidth > 0 ? bytes * (shards - 1) / shards / hw.refault_bandwidth : 0;
          const double gather = ag + refault;
          const double gather_unit = ring_all_gather_s(kF * unit, shards, dp_link) + refault * unit / params;
          dp_total[s] = M * (2 * gather + rs) + ep_avg;
          dp_exposed[s] =
              M * (exposed_of(gather, fwd_mb, gather_unit) + exposed_of(gather + rs, bwd_mb, rs_last)) + ep_avg;
        }
      }
    }
    // The tied embedding's gradient summed over the first and last stage.
    if (P > 1 && m.tied_embeddings && (s == 0 || s == P - 1)) {
      const double wte = kF * static_cast<double>(m.vocab_size * m.d_model) / g.tp;
      dp_exposed[s] += ring_all_reduce_s(wte, 2, pp_link);
    }
    // The norm and AdamW over the owned parameters (the gradients' zeroing is in the probe's compute),
    // the node's ranks updating at once; ZeRO's passes over its shard in the update and the backward.
    const int zero_passes = shards > 1 ? zero : 0;
    const double owned = zero > 0 ? params / shards : params;
    opt[s] = (kOptimizerBytesPerParam + zero_update_pass_bytes(zero_passes)) * owned / optimizer_rate +
             4 * hw.op_overhead_s * static_cast<double>(ranks[s].chunks.size());
    const double backward_passes = zero_backward_pass_bytes(zero_passes, M) * owned / optimizer_rate;
    compute[s] += backward_passes;
    finish[s] += backward_passes;
    end[s] = finish[s] + dp_exposed[s] + opt[s];
    if (end[s] > end[slow]) slow = s;
  }
  b.compute_s = compute[slow];
  b.recompute_s = recompute[slow];
  b.tp_s = tp[slow];
  b.cp_s = cpc[slow];
  b.ep_s = epc[slow];
  if (P > 1) b.bubble_s = std::max(0.0, finish[slow] - compute[slow] - tp[slow] - cpc[slow] - epc[slow] - b.pp_s);
  b.dp_s = dp_exposed[slow];
  b.dp_total_s = dp_total[slow];
  b.optimizer_s = opt[slow];
  double end_s = end[slow];
  // Ranks sharing cores: the node's busy time (compute + optimizer of its ranks, each stage's equally
  // often) spread over its cores, plus the slowest rank's communication; a pipeline's idle ranks give
  // their cores to the busy ones, so this replaces the bubble rather than adding to it.
  const double sharing = core_sharing_of(hw, cfg, world_size);
  if (sharing > 1) {
    double busy_compute = 0, busy_opt = 0;
    for (int s = 0; s < P; ++s) busy_compute += compute[s] / P, busy_opt += opt[s] / P;
    b.compute_s = sharing * busy_compute;
    b.optimizer_s = sharing * busy_opt;
    const double comm = b.tp_s + b.cp_s + b.ep_s + b.pp_s + b.dp_s;
    const double busy = b.compute_s + b.optimizer_s + comm;
    b.bubble_s = std::max(0.0, end_s - busy);  // exactly 0 when the busy time sets the step
    end_s = std::max(end_s, busy);
    b.recompute_s *= sharing * busy_compute / std::max(compute[slow], 1e-30);
  }
  // The loss average over dp and the gradient-norm sum over the world: latency only.
  b.other_s = hw.step_overhead_s + ring_all_reduce_s(kF, replicas, dp_link) +
              (world_size > 1 ? ring_all_reduce_s(kF, world_size, hw.collective_link(world_size, false)) : 0);
  // DataParallel's tied-embedding tail (parallel/tied_embedding_tail.h; not under ZeRO or compression):
  // dwte copied aside and zeroed at the head, scanned for touched rows and copied back at the end,
  // four passes over it (28 bytes an element) at the optimizer's streaming rate (bench-small dp 2:
  // 5.4 ms of perf samples, the memmove, the fill and the scan).
  if (zero == 0 && cfg.comm.compression == CompressionKind::none)
    for (const ChunkTime& c : ranks[slow].chunks) b.other_s += 28.0 * c.tail_wte / hw.optimizer_rate();

  StepTimePrediction p;
  p.layout = lay;
  p.world_size = world_size;
  p.breakdown = b;
  p.step_s = end_s + b.other_s;
  p.tokens_per_step = cfg.train.micro_batch * cfg.data.seq_len * cfg.train.grad_accum * g.dp;
  p.tokens_per_s = static_cast<double>(p.tokens_per_step) / p.step_s;
  p.flops_per_device = m.flops_per_token(cfg.data.seq_len) * p.tokens_per_s / world_size;
  // Against the peak of the cores a rank computes on (a CPU rank with more threads than the file's).
  const double peak = hw.peak_flops(precision_name(cfg.train.precision)) * thread_speedup;
  p.mfu = peak > 0 ? p.flops_per_device / peak : 0;
  return p;
}

}  // namespace tessera
