// Planning the parallel layout of a run: the grid, the tensor-parallel split of the model, the pipeline
// schedule and the layer split, with errors phrased in run-config keys.
#include "plan/parallel_layout.h"

#include <algorithm>
#include <numeric>

#include "core/log.h"
#include "model/param_layout.h"
#include "parallel/compression.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/zero.h"
#include "plan/refusals.h"

namespace tessera {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// "a, b or c"
std::string or_list(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return out;
}

Status check_grid(const GridShape& g, int world_size) {
  if (world_size < 1) return invalid_argument("world size must be >= 1, got " + str(world_size));
  if (g.world_size() == world_size) return Status::ok_status();
  // The fixes: launch with as many ranks as the grid needs, or a dp that fills the job (pp and tp kept).
  std::string fix = "launch with mpirun -np " + str(g.world_size());
  const int mp = g.pp * g.tp * g.cp * g.ep;
  if (world_size % mp == 0) fix = "set parallel.dp=" + str(world_size / mp) + " or " + fix;
  const std::string cp = (g.cp > 1 ? " x parallel.cp=" + str(g.cp) : "") + (g.ep > 1 ? " x parallel.ep=" + str(g.ep) : "");
  std::string fits;
  for (const GridShape& f : grid_factorisations(world_size))
    fits += "\n  parallel.dp=" + str(f.dp) + " parallel.pp=" + str(f.pp) + " parallel.tp=" + str(f.tp);
  return invalid_argument("parallel.dp=" + str(g.dp) + " x parallel.pp=" + str(g.pp) + " x parallel.tp=" + str(g.tp) + cp +
                          " needs " + str(g.world_size()) + " ranks but the job has " + str(world_size) + ": " + fix +
                          " (grids that fit " + str(world_size) + " ranks" + (g.cp > 1 || g.ep > 1 ? " without cp and ep" : "") + ":" +
                          fits + ")");
}

Status check_tensor_parallel(const ModelConfig& m, int tp) {
  const Status st = validate_tensor_parallel(m, TensorParallelShard{0, tp});
  if (st.ok()) return st;
  // The tp sizes that split every sharded dimension evenly.
  const int64_t g = std::gcd(std::gcd(m.n_head, m.n_kv_head), m.d_ff);
  std::vector<std::string> sizes;
  for (int64_t t = 1; t <= g && sizes.size() < 8; ++t)
    if (g % t == 0) sizes.push_back(str(t));
  return invalid_argument("parallel.tp=" + str(tp) + " does not split the model (" + st.message() +
                          "): set parallel.tp to " + or_list(sizes) + " (it must divide model.n_head = " +
                          str(m.n_head) + ", model.n_kv_head = " + str(m.n_kv_head) + " and model.d_ff = " +
                          str(m.d_ff) + ")");
}

Status check_sequence_parallel(const RunConfig& cfg) {
  const ParallelConfig& p = cfg.parallel;
  if (!p.sequence_parallel) return Status::ok_status();
  if (p.tp < 2)
    return invalid_argument(
        "parallel.sequence_parallel = true shards activations over the tensor-parallel ranks, but parallel.tp = " +
        str(p.tp) + ": set parallel.tp >= 2, or remove parallel.sequence_parallel");
  const int64_t tokens = cfg.train.micro_batch * cfg.data.seq_len;
  if (tokens % p.tp != 0) {
    const int64_t lower = cfg.data.seq_len / p.tp * p.tp;
    std::string fix = lower > 0 ? "set data.seq_len to a multiple of " + str(p.tp) + " (e.g. " + str(lower) + ")"
                                : "set data.seq_len to a multiple of " + str(p.tp);
    return invalid_argument("parallel.sequence_parallel splits the train.micro_batch x data.seq_len = " +
                            str(cfg.train.micro_batch) + " x " + str(cfg.data.seq_len) + " = " + str(tokens) +
                            " tokens of a micro-batch over parallel.tp = " + str(p.tp) + " ranks, but " +
                            str(tokens) + " is not divisible by " + str(p.tp) + ": " + fix +
                            ", or train.micro_batch to a multiple of " + str(p.tp) +
                            ", or remove parallel.sequence_parallel");
  }
  return Status::ok_status();
}

// How to reach `want` micro-batches: train.grad_accum is train.batch_tokens / (micro_batch x seq_len x dp).
std::string grad_accum_formula(const RunConfig& cfg) {
  return "grad_accum = " + str(cfg.train.grad_accum) + " is train.batch_tokens (" + str(cfg.train.batch_tokens) +
         ") / (train.micro_batch " + str(cfg.train.micro_batch) + " x data.seq_len " + str(cfg.data.seq_len) +
         " x parallel.dp " + str(cfg.parallel.dp) + (cfg.parallel.ep > 1 ? " x parallel.ep " + str(cfg.parallel.ep) : "") +
         ")";
}
std::string batch_tokens_for(const RunConfig& cfg, int64_t grad_accum) {
  return str(grad_accum * cfg.train.micro_batch * cfg.data.seq_len * data_replicas(cfg.parallel));
}
// The largest micro_batch below the current one that keeps batch_tokens whole and gives >= want micro-batches.
int64_t smaller_micro_batch(const RunConfig& cfg, int64_t want) {
  const int64_t per = cfg.data.seq_len * data_replicas(cfg.parallel);
  for (int64_t b = cfg.train.micro_batch - 1; b >= 1; --b)
    if (cfg.train.batch_tokens % (b * per) == 0 && cfg.train.batch_tokens / (b * per) >= want) return b;
  return 0;
}

Status check_schedule(const RunConfig& cfg, PipelineScheduleKind kind, const PipelineShape& shape) {
  const int p = shape.stages, m = shape.micro_batches, V = shape.virtual_stages;
  const std::string name(pipeline_schedule_name(kind));
  if (kind != PipelineScheduleKind::interleaved) {
    if (V != 1)
      return invalid_argument("parallel.virtual_stages = " + str(V) + " needs parallel.schedule = \"interleaved\" (the " +
                              name + " schedule runs one model chunk per rank): set parallel.schedule = "
                              "\"interleaved\", or parallel.virtual_stages = 1");
    // Both schedules keep only m of the p stages busy at once when m < p: the pipeline is mostly bubble.
    if (m < p) {
      std::string fix = "raise train.batch_tokens to " + batch_tokens_for(cfg, p);
      if (int64_t b = smaller_micro_batch(cfg, p)) fix += " or lower train.micro_batch to " + str(b);
      return invalid_argument("fewer micro-batches than stages: the " + name + " schedule over parallel.pp = " +
                              str(p) + " stages needs at least " + str(p) + " micro-batches per step, but " +
                              grad_accum_formula(cfg) + " (derived, not a key): " + fix);
    }
  } else {
    if (V < 2)
      return invalid_argument(
          "parallel.schedule = \"interleaved\" with parallel.virtual_stages = 1 is plain 1F1B: set "
          "parallel.virtual_stages >= 2, or parallel.schedule = \"1f1b\"");
    if (m % p != 0) {
      const int64_t below = m / p * p, above = below + p;
      std::string fix = "set train.batch_tokens to " +
                        (below > 0 ? batch_tokens_for(cfg, below) + " or " : std::string()) +
                        batch_tokens_for(cfg, above) + " (grad_accum = " +
                        (below > 0 ? str(below) + " or " : std::string()) + str(above) + ")";
      return invalid_argument("the interleaved schedule needs the micro-batches per step (grad_accum) to be a multiple of parallel.pp = " +
                              str(p) + " (Megatron's rule), but " + grad_accum_formula(cfg) + ": " + fix +
                              ", or use parallel.schedule = \"1f1b\"");
    }
  }
  // The schedule's own rules, should they grow: its words mapped to the config's keys.
  const Status st = validate_pipeline_shape(kind, shape);
  if (st.ok()) return st;
  std::string msg = st.message();
  auto replace_all = [&msg](const std::string& from, const std::string& to) {
    for (size_t at = msg.find(from); at != std::string::npos; at = msg.find(from, at + to.size()))
      msg.replace(at, from.size(), to);
  };
  replace_all("virtual stages", "parallel.virtual_stages");
  replace_all("micro-batches per step", "micro-batches per step (train.grad_accum)");
  replace_all("pipeline stages", "pipeline stages (parallel.pp)");
  return invalid_argument("parallel.schedule = \"" + name + "\": " + msg);
}

// The ZeRO stage's range (its combinations with other settings are refusals.h rows).
Status check_zero_stage(const RunConfig& cfg) {
  const int zero = cfg.parallel.zero;
  if (zero < 0 || zero > 3) return invalid_argument("parallel.zero = " + str(zero) + ": the ZeRO stage must be 0, 1, 2 or 3");
  return Status::ok_status();
}

// The parameter server (parallel.mode = "ps") replaces the all-reduce over the dp replicas: each
// replica (dp x tp x pp worker ranks, the first of the world) pushes to the servers (the last
// ps.servers ranks), which shard every model-parallel position's buffers. Returns the number of
// ranks the grid (the workers) spans.
Result<int> check_param_server(const RunConfig& cfg, int world_size) {
  const ParallelConfig& p = cfg.parallel;
  if (p.mode != ParallelMode::ps) return world_size;
  const int S = cfg.ps.servers, K = cfg.ps.spare_workers;
  const std::string spares = K > 0 ? " and ps.spare_workers = " + str(K) : "";
  if (S < 1 || world_size <= S + K)
    return invalid_argument("parallel.mode = \"ps\" with ps.servers = " + str(S) + spares + " needs at least " +
                            str(S + K + 1) + " ranks (the last " + str(S + K) + (K > 0 ? " serve or stand by" : " serve") +
                            ", the rest are workers) but the job has " + str(world_size) + ": launch more ranks or lower ps.servers" +
                            (K > 0 ? " or ps.spare_workers" : ""));
  const int workers = world_size - S - K, mp = p.tp * p.pp;
  if (p.dp * mp != workers) {
    const std::string replicas = mp == 1 ? "parallel.dp = " + str(p.dp)
                                         : "parallel.dp x parallel.tp x parallel.pp = " + str(p.dp) + " x " + str(p.tp) +
                                               " x " + str(p.pp) + " = " + str(p.dp * mp);
    const std::string fix = workers % mp == 0 ? "set parallel.dp = " + str(workers / mp) + ", or launch"
                                              : "launch";
    return invalid_argument("parallel.mode = \"ps\": " + str(world_size) + " ranks with ps.servers = " + str(S) + spares +
                            " leave " + str(workers) + " workers but " + replicas + " (dp counts the workers" +
                            (mp == 1 ? "" : "' replicas of parallel.tp x parallel.pp ranks each") + "): " + fix +
                            " with mpirun -np " + str(p.dp * mp + S + K));
  }
  return workers;
}

Result<StageSplit> plan_split(const RunConfig& cfg, int pp, int V) {
  const int64_t L = cfg.model.n_layer, S = static_cast<int64_t>(pp) * V;
  if (L < S)
    return invalid_argument("model.n_layer = " + str(L) + " is fewer than the parallel.pp x parallel.virtual_stages = " +
                            str(pp) + " x " + str(V) + " = " + str(S) +
                            " virtual stages (each needs at least one layer): lower parallel.pp" +
                            (V > 1 ? std::string(" or parallel.virtual_stages") : std::string()) +
                            " so that pp x virtual_stages <= " + str(L));
  const std::vector<int64_t>& counts = cfg.parallel.stage_layers;
  // Interleaved (V > 1): the split that makes the step's simulated schedule shortest at its micro-batches.
  if (counts.empty())
    return balance_stages(cfg.model, cfg.data.seq_len, static_cast<int>(S), pp, V > 1 ? static_cast<int>(cfg.train.grad_accum) : 0);
  if (static_cast<int64_t>(counts.size()) != S)
    return invalid_argument("parallel.stage_layers has " + str(static_cast<int64_t>(counts.size())) +
                            " entries but needs one per virtual stage: parallel.pp x parallel.virtual_stages = " +
                            str(pp) + " x " + str(V) + " = " + str(S) + " (virtual stage chunk * pp + stage, in order)" +
                            ": give " + str(S) + " layer counts summing to model.n_layer = " + str(L) +
                            ", or stage_layers = [] to balance automatically");
  return split_from_layer_counts(cfg.model, cfg.data.seq_len, counts);
}

}  // namespace

ParamLayout chunk_layout(const RunConfig& cfg, const ParallelLayout& lay, int stage, int chunk, int tp_rank, int ep_rank) {
  const int64_t alignment = cfg.parallel.zero > 0 ? zero_layer_alignment(lay.grid.replica_size()) : 16;
  const auto [first, last] = lay.chunk_layers(stage, chunk);
  return ParamLayout(cfg.model, first, last, TensorParallelShard{tp_rank, cfg.parallel.tp}, alignment,
                     stored_experts(cfg, lay, ep_rank), lay.head_stage());
}

ExpertShard stored_experts(const RunConfig& cfg, const ParallelLayout& lay, int ep_rank) {
  if (lay.grid.ep <= 1) return {};
  return {ep_rank, lay.grid.ep};
}

std::pair<int, int> ParallelLayout::chunk_layers(int stage, int chunk) const {
  TS_CHECK(stage >= 0 && stage < pipe.stages) << "stage " << stage << " of " << pipe.stages;
  TS_CHECK(chunk >= 0 && chunk < pipe.virtual_stages) << "chunk " << chunk << " of " << pipe.virtual_stages;
  const int v = chunk * pipe.stages + stage;
  TS_CHECK(v + 1 < static_cast<int>(split.bounds.size())) << "virtual stage " << v << " outside the split";
  return {split.bounds[v], split.bounds[v + 1]};
}

HeadStage ParallelLayout::head_stage() const {
  const size_t S = split.bounds.size();
  return S >= 3 && split.bounds[S - 1] == split.bounds[S - 2] ? HeadStage::own : HeadStage::with_last_layer;
}

std::string ParallelLayout::describe() const {
  std::string s = "dp=" + str(grid.dp) + " tp=" + str(grid.tp) + (sequence_parallel ? " sequence-parallel" : "") +
                  " pp=" + str(grid.pp) + (grid.cp > 1 ? " cp=" + str(grid.cp) + (cp_mode == ContextParallelMode::ring ? " (ring)" : " (ulysses)") : "") +
                  (grid.ep > 1 ? " ep=" + str(grid.ep) : "");
  if (grid.pp == 1) return s;
  s += " (" + std::string(pipeline_schedule_name(schedule));
  if (pipe.virtual_stages > 1) s += " x" + str(pipe.virtual_stages);
  s += ", " + str(pipe.micro_batches) + " micro-batch" + (pipe.micro_batches == 1 ? "" : "es") + "; " +
       (pipe.virtual_stages > 1 ? "virtual stages" : "stages");
  for (size_t v = 0; v + 1 < split.bounds.size(); ++v)
    s += " [" + str(split.bounds[v]) + "," + str(split.bounds[v + 1]) + ")";
  if (head_stage() == HeadStage::own) s += ", the last holding the head alone";
  return s + ")";
}

Result<ParallelLayout> plan_parallel_layout(const RunConfig& cfg, int world_size) {
  const ParallelConfig& p = cfg.parallel;
  if (p.dp < 1)  // a caller's mistake, not the user's: the trainer resolves it first
    return invalid_argument("parallel.dp = 0 (fill the job) is resolved for a world size by load_run_config_for_world "
                            "before the layout is planned");
  ParallelLayout layout;
  layout.grid = GridShape{p.dp, p.pp, p.tp, p.cp, p.ep};
  layout.sequence_parallel = p.sequence_parallel;
  TS_RETURN_IF_ERROR(check_zero_stage(cfg));
  TS_RETURN_IF_ERROR(check_refusals(cfg));
  // A GPU run's communicators would hand device buffers to MPI: until the staged / NCCL
  // communicators are wired into the grid (issue 20), GPU runs are single-rank.
  if (cfg.train.device == Device::cuda && world_size > 1)
    return invalid_argument("train.device = \"cuda\" with " + str(world_size) +
                            " ranks: GPU runs are single-rank until the NCCL / staged communicators reach the "
                            "trainer (docs/cuda.md); run one rank, or train.device = \"cpu\"");
  TS_ASSIGN_OR_RETURN(const int grid_ranks, check_param_server(cfg, world_size));
  TS_RETURN_IF_ERROR(check_grid(layout.grid, grid_ranks));
  TS_RETURN_IF_ERROR(check_tensor_parallel(cfg.model, p.tp));
  TS_RETURN_IF_ERROR(check_sequence_parallel(cfg));
  TS_ASSIGN_OR_RETURN(layout.cp_mode, parse_context_parallel_mode(p.cp_mode));
  TS_RETURN_IF_ERROR(
      validate_context_parallel(p.cp, layout.cp_mode, cfg.data.seq_len, cfg.model.n_head, cfg.model.n_kv_head, p.tp));
  TS_RETURN_IF_ERROR(validate_expert_parallel(p.ep, cfg.model.moe_experts));

  if (p.virtual_stages < 1)
    return invalid_argument("parallel.virtual_stages must be >= 1 (got " + str(p.virtual_stages) + ")");
  if (cfg.train.grad_accum < 1 || cfg.train.grad_accum > 1'000'000)
    return invalid_argument("train.grad_accum must be in [1, 1000000] (got " + str(cfg.train.grad_accum) + ")");
  layout.pipe = PipelineShape{p.pp, static_cast<int>(cfg.train.grad_accum), p.virtual_stages};
  if (p.pp == 1) {
    if (p.virtual_stages != 1)
      return invalid_argument("parallel.virtual_stages = " + str(p.virtual_stages) +
                              " splits each pipeline rank's layers into chunks, but parallel.pp = 1: set parallel.pp "
                              ">= 2 with parallel.schedule = \"interleaved\", or parallel.virtual_stages = 1");
    layout.schedule = PipelineScheduleKind::one_f_one_b;
  } else {
    layout.schedule = p.schedule;
    TS_RETURN_IF_ERROR(check_schedule(cfg, layout.schedule, layout.pipe));
  }
  TS_ASSIGN_OR_RETURN(layout.split, plan_split(cfg, p.pp, p.virtual_stages));
  return layout;
}

}  // namespace tessera
