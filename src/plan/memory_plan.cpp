// Memory planning: replays a run's allocations (training_setup.cpp, pipeline_runner.cpp,
// transformer.cpp, zero.cpp) against counters that behave like core/memory.cpp's.
#include "plan/memory_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "parallel/pipeline_schedule.h"
#include "parallel/tied_embedding_tail.h"
#include "plan/memory_replay.h"

namespace tessera {
namespace {

using namespace memory_replay;

// ---- one rank ----

// DataParallel's TiedEmbeddingTail (parallel/tied_embedding_tail.h): a side buffer of the tied
// embedding's size, when the chunk holds wte and the head that reads it and dp > 1.
int64_t tied_embedding_tail_bytes(const ParamLayout& layout, int dp) {
  const ParamInfo* wte = tied_embedding_tail_wte(layout, dp);
  return wte ? wte->numel * kF : 0;
}

struct RankResult {
  std::vector<std::pair<int, int>> chunk_layers;
  std::vector<int> slots;
  int64_t parameters = 0;
  MemBytes at_peak{}, category_peak{};
  int64_t peak = 0;
};

RankResult simulate_rank(const RunConfig& cfg, const ParallelLayout& lay, GridCoord coord) {
  const ModelConfig& mc = cfg.model;
  // Context parallelism: each rank holds seq_len / cp positions, and the dense parameters are
  // replicated (and ZeRO-sharded) over dp x cp (Grid::param_replicas(), in world-rank order).
  const int cp = lay.grid.cp, ep = lay.grid.ep;
  const bool ring = lay.cp_mode == ContextParallelMode::ring;
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len / cp;
  const int tp = lay.grid.tp, dp = lay.grid.replica_size(), zero = cfg.parallel.zero;
  const int replica_rank = coord.cp + cp * (coord.ep + lay.grid.ep * coord.dp);
  const bool sp = lay.sequence_parallel && tp > 1;
  const Recompute recompute = cfg.train.recompute;
  Counters k;
  RankResult r;
  auto finish = [&] {
    r.at_peak = k.at_peak();
    r.category_peak = k.category_peak();
    r.peak = k.peak();
    return r;
  };

  // build_training_model: the stores per chunk.
  const int V = lay.pipe.virtual_stages;
  std::vector<std::unique_ptr<ParamLayout>> layouts;
  std::vector<std::unique_ptr<ZeroChunk>> zc;
  for (int c = 0; c < V; ++c) {
    const auto [first, last] = lay.chunk_layers(coord.pp, c);
    r.chunk_layers.push_back({first, last});
    layouts.push_back(std::make_unique<ParamLayout>(chunk_layout(cfg, lay, coord.pp, c, coord.tp, coord.ep)));
    const ParamLayout& layout = *layouts.back();
    r.parameters += layout.total_numel();
    if (zero > 0) {
      // Owner-only experts: ZeRO shards over the ranks storing the same experts (dp) only.
      const bool by_dp = layout.experts_sharded();
      zc.push_back(std::make_unique<ZeroChunk>(mc, layout, zero, by_dp ? lay.grid.dp : dp,
                                               by_dp ? coord.dp : replica_rank, T, k));
      zc.back()->allocate();
    } else {
      k.alloc(MemCategory::parameters, layout.total_numel() * kF);
      k.alloc(MemCategory::gradients, layout.total_numel() * kF);
    }
    // initialise_parameters: a stage or shard imports the whole model once, then frees it.
    const bool whole = layout.whole_tensors() && layout.whole_model();
    if (!cfg.init_weights.empty() && !whole) {
      const ParamLayout full(mc);
      const int a = k.alloc(MemCategory::parameters, full.total_numel() * kF);
      const int b = k.alloc(MemCategory::gradients, full.total_numel() * kF);
      k.free(b);
      k.free(a);
    }
  }
  // ModelParallelSync: a DataParallel (AdamW over the chunk) or a ZeroSharded per chunk.
  for (int c = 0; c < V; ++c) {
    if (zero > 0) {
      zc[static_cast<size_t>(c)]->allocate_sync();
    } else {
      const ParamLayout& layout = *layouts[static_cast<size_t>(c)];
      k.alloc(MemCategory::optimizer_state, layout.total_numel() * kF);
      k.alloc(MemCategory::optimizer_state, layout.total_numel() * kF);
      k.alloc(MemCategory::communication, tied_embedding_tail_bytes(layout, dp));
    }
  }
  // PipelineRunner: the activation slots. Each model is built for train.recompute with whole rows,
  // then configure() (training_setup.cpp) reallocates it (the old set freed first) for its
  // sequence-parallel row shard when it sets the hooks, and again for context parallelism.
  k.alloc(MemCategory::activations, sizeof(double));  // PipelineRunner: the step's loss, on the device
  const std::vector<PipeAction> actions = make_pipeline_schedule(lay.schedule, lay.pipe, coord.pp);
  const bool split = splits_backward(actions);  // the runner's models keep their linear output gradients
  for (int c = 0; c < V; ++c) {
    const int n = activation_slots(actions, c);
    r.slots.push_back(n);
    const ParamLayout& layout = *layouts[static_cast<size_t>(c)];
    for (int i = 0; i < n; ++i) {
      std::vector<int> ids;
      auto reallocate = [&](bool rows_shard, Recompute mode, int cp_size, int ep_size) {
        for (int id : ids) k.free(id);
        ids.clear();
        for (int64_t f : activation_buffers(mc, layout, B, T, rows_shard, mode, cp_size, ring, ep_size, split))
          ids.push_back(k.alloc(MemCategory::activations, f * kF));
      };
      reallocate(false, recompute, 1, 1);
      if (sp) reallocate(true, recompute, 1, 1);
      if (cp > 1) reallocate(sp, recompute, cp, 1);
      if (ep > 1) reallocate(sp, recompute, cp, ep);
    }
  }
  for (auto& z : zc) z->broadcast_parameters();

  // One training step (the next ones repeat it).
  for (auto& z : zc) z->zero_grads();
  bool first_forward = true;
  for (const PipeAction& a : actions) {
    if (a.op == PipeOp::forward) {
      if (first_forward && sp)  // TensorParallel's reduce-scatter receive buffer, N/tp rows of C
        k.alloc(MemCategory::communication, B * T / tp * mc.d_model * kF);
      first_forward = false;
      if (zero > 0) zc[static_cast<size_t>(a.chunk)]->forward();
    } else if (a.op == PipeOp::backward && zero > 0) {
      zc[static_cast<size_t>(a.chunk)]->backward();
    }
  }
  for (auto& z : zc) z->finish();
  // The tied embedding's gradient, summed over the first and last stage (ModelParallelSync).
  if (zero > 0 && lay.grid.pp > 1 && mc.tied_embeddings)
    for (auto& z : zc) z->sum_grad_over("wte");
  for (auto& z : zc) z->complete_update();
  return finish();
}

std::string str(int64_t v) { return std::to_string(v); }

// The config with train.micro_batch = b, keeping train.batch_tokens (grad_accum follows); false when
// b does not divide the batch.
bool with_micro_batch(const RunConfig& cfg, int64_t b, RunConfig& out) {
  const int64_t per = b * cfg.data.seq_len * data_replicas(cfg.parallel);
  if (b < 1 || per <= 0 || cfg.train.batch_tokens % per != 0) return false;
  out = cfg;
  out.train.micro_batch = b;
  out.train.grad_accum = cfg.train.batch_tokens / per;
  return true;
}

// Every rank's plan for one config (one simulation per stage and tp rank; dp replicas are the same).
Result<MemoryPlan> plan_ranks(const RunConfig& cfg, int world_size) {
  TS_ASSIGN_OR_RETURN(ParallelLayout lay, plan_parallel_layout(cfg, world_size));
  MemoryPlan plan;
  plan.layout = lay;
  plan.world_size = world_size;
  plan.micro_batch = cfg.train.micro_batch;
  plan.budget_bytes = static_cast<int64_t>(cfg.train.memory_budget_mb * 1048576.0);
  std::map<std::pair<int, int>, RankResult> kinds;
  for (int rank = 0; rank < world_size; ++rank) {
    const GridCoord c = grid_coord(lay.grid, rank);
    auto it = kinds.find({c.pp, c.tp});
    if (it == kinds.end()) it = kinds.emplace(std::make_pair(c.pp, c.tp), simulate_rank(cfg, lay, c)).first;
    const RankResult& res = it->second;
    RankMemoryPlan p;
    p.rank = rank;
    p.coord = c;
    p.chunk_layers = res.chunk_layers;
    p.activation_slots = res.slots;
    p.parameters = res.parameters;
    p.at_peak = res.at_peak;
    p.category_peak = res.category_peak;
    p.peak = res.peak;
    plan.ranks.push_back(std::move(p));
  }
  return plan;
}

int64_t budget_of(const RunConfig& cfg) { return static_cast<int64_t>(cfg.train.memory_budget_mb * 1048576.0); }

// The candidate micro-batches: divisors of batch_tokens / (seq_len x dp x ep), ascending.
std::vector<int64_t> micro_batch_candidates(const RunConfig& cfg) {
  std::vector<int64_t> out;
  const int64_t per = cfg.data.seq_len * data_replicas(cfg.parallel);
  if (per <= 0 || cfg.train.batch_tokens % per != 0) return {cfg.train.micro_batch};
  const int64_t K = cfg.train.batch_tokens / per;
  for (int64_t b = 1; b * b <= K; ++b)
    if (K % b == 0) {
      out.push_back(b);
      if (b * b != K) out.push_back(K / b);
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int64_t transformer_activation_bytes(const ModelConfig& cfg, const ParamLayout& layout, int64_t B, int64_t T,
                                     bool sequence_parallel, Recompute recompute, int cp, bool ring, int ep,
                                     bool split_backward) {
  int64_t sum = 0;
  for (int64_t f : activation_buffers(cfg, layout, B, T, sequence_parallel, recompute, cp, ring, ep, split_backward))
    sum += f * kF;
  return sum;
}

std::string format_mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

const RankMemoryPlan& MemoryPlan::worst() const {
  static const RankMemoryPlan none;
  if (ranks.empty()) return none;
  size_t w = 0;
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].peak > ranks[w].peak) w = i;
  return ranks[w];
}

int64_t MemoryPlan::largest_micro_batch_that_fits() const {
  int64_t m = -1;
  for (const RankMemoryPlan& r : ranks) m = m < 0 ? r.largest_micro_batch_that_fits : std::min(m, r.largest_micro_batch_that_fits);
  return std::max<int64_t>(m, 0);
}

Result<MemoryPlan> plan_memory(const RunConfig& cfg, int world_size) {
  if (cfg.parallel.dp < 1)
    return invalid_argument("parallel.dp = 0 (fill the job) is resolved for a world size by load_run_config_for_world "
                            "before memory is planned");
  TS_ASSIGN_OR_RETURN(MemoryPlan plan, plan_ranks(cfg, world_size));
  // Largest micro-batch per rank: every candidate's plan (the peak need not be monotone in the
  // micro-batch: a GPipe stage holds grad_accum micro-batches, and grad_accum shrinks as it grows).
  for (RankMemoryPlan& r : plan.ranks) r.largest_micro_batch_that_fits = 0;
  for (int64_t b : micro_batch_candidates(cfg)) {
    RunConfig c;
    if (!with_micro_batch(cfg, b, c)) continue;
    Result<MemoryPlan> p = b == cfg.train.micro_batch ? Result<MemoryPlan>(plan) : plan_ranks(c, world_size);
    if (!p.ok()) continue;  // e.g. too few micro-batches for 1F1B, or rows sequence parallelism cannot split
    for (size_t i = 0; i < plan.ranks.size(); ++i)
      if (plan.budget_bytes <= 0 || p->ranks[i].peak <= plan.budget_bytes)
        plan.ranks[i].largest_micro_batch_that_fits = b;
  }
  return plan;
}

Result<MemoryPlan> plan_memory_peaks(const RunConfig& cfg, int world_size) {
  if (cfg.parallel.dp < 1) return invalid_argument("parallel.dp = 0 must be resolved for a world size first");
  return plan_ranks(cfg, world_size);
}

std::vector<MemoryOption> memory_options_that_fit(const RunConfig& cfg, int world_size, int64_t budget_bytes) {
  std::vector<MemoryOption> out;
  auto fits = [&](const RunConfig& c, const std::string& change) {
    Result<MemoryPlan> p = plan_ranks(c, world_size);
    if (!p.ok() || (budget_bytes > 0 && p->peak() > budget_bytes)) return false;
    out.push_back({change, p->peak()});
    return true;
  };
  for (int z = cfg.parallel.zero + 1; z <= 3; ++z) {
    RunConfig c = cfg;
    c.parallel.zero = z;
    if (fits(c, "parallel.zero=" + str(z))) break;
  }
  // Each recomputation mode that keeps less than the current one, in order.
  for (Recompute mode : {Recompute::selective, Recompute::full}) {
    if (static_cast<int>(mode) <= static_cast<int>(cfg.train.recompute)) continue;
    RunConfig c = cfg;
    c.train.recompute = mode;
    if (fits(c, "train.recompute=" + std::string(recompute_name(mode)))) break;
  }
  if (cfg.parallel.tp > 1 && !cfg.parallel.sequence_parallel) {
    RunConfig c = cfg;
    c.parallel.sequence_parallel = true;
    fits(c, "parallel.sequence_parallel=true");
  }
  // More tp or pp on the same ranks: dp shrinks, the global batch stays (grad_accum grows).
  for (const GridShape& g : grid_factorisations(world_size)) {
    if (g.tp < cfg.parallel.tp || g.pp < cfg.parallel.pp || (g.tp == cfg.parallel.tp && g.pp == cfg.parallel.pp))
      continue;
    RunConfig c = cfg;
    c.parallel.dp = g.dp;
    c.parallel.tp = g.tp;
    c.parallel.pp = g.pp;
    if (g.pp != cfg.parallel.pp) c.parallel.stage_layers.clear();
    const int64_t per = c.train.micro_batch * c.data.seq_len * g.dp;
    if (c.train.batch_tokens % per != 0) continue;
    c.train.grad_accum = c.train.batch_tokens / per;
    std::string change;
    if (g.tp != cfg.parallel.tp) change += "parallel.tp=" + str(g.tp);
    if (g.pp != cfg.parallel.pp) change += std::string(change.empty() ? "" : " ") + "parallel.pp=" + str(g.pp);
    change += " parallel.dp=" + str(g.dp);
    fits(c, change);
  }
  // A smaller micro-batch for the same global batch: the largest that fits.
  std::vector<int64_t> smaller = micro_batch_candidates(cfg);
  for (auto it = smaller.rbegin(); it != smaller.rend(); ++it) {
    if (*it >= cfg.train.micro_batch) continue;
    RunConfig c;
    if (!with_micro_batch(cfg, *it, c)) continue;
    if (fits(c, "train.micro_batch=" + str(*it) + " (grad_accum " + str(c.train.grad_accum) + ")")) break;
  }
  return out;
}

Status check_memory_budget(const RunConfig& cfg, int world_size) {
  const int64_t budget = budget_of(cfg);
  if (budget <= 0) return Status::ok_status();
  TS_ASSIGN_OR_RETURN(MemoryPlan plan, plan_ranks(cfg, world_size));
  if (plan.fits()) return Status::ok_status();
  const RankMemoryPlan& w = plan.worst();
  int over = 0;
  for (const RankMemoryPlan& r : plan.ranks) over += r.peak > budget;
  std::string parts;
  for (int c = 0; c < kNumMemCategories; ++c) {
    if (w.at_peak[static_cast<size_t>(c)] == 0) continue;
    parts += std::string(parts.empty() ? "" : ", ") + std::string(mem_category_name(static_cast<MemCategory>(c))) +
             " " + format_mib(w.at_peak[static_cast<size_t>(c)]);
  }
  std::string msg = "train.memory_budget_mb = " + format_mib(budget) + ": rank " + str(w.rank) + " (dp " +
                    str(w.coord.dp) + ", pp " + str(w.coord.pp) + ", tp " + str(w.coord.tp) +
                    ") is predicted to peak at " + format_mib(w.peak) + " MiB (" + parts + ") over the budget of " +
                    format_mib(budget) + " MiB";
  if (over > 1) msg += " (" + str(over) + " of " + str(world_size) + " ranks are over)";
  const std::vector<MemoryOption> options = memory_options_that_fit(cfg, world_size, budget);
  if (options.empty()) {
    msg += "; no single change of parallel.zero, train.recompute, parallel.sequence_parallel, parallel.tp/pp or "
           "train.micro_batch fits: use more ranks or raise train.memory_budget_mb to at least " +
           format_mib(w.peak);
  } else {
    msg += "; these single changes fit:";
    for (const MemoryOption& o : options) msg += " " + o.change + " (" + format_mib(o.peak) + " MiB);";
    msg += " or raise train.memory_budget_mb to at least " + format_mib(w.peak) + " (`tessera plan` shows the details)";
  }
  return invalid_argument(msg);
}

}  // namespace tessera
