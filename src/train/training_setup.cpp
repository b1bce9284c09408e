// set_up_training: from a RunConfig to a ready TrainingRun (grid, threads, data, model, gradient
// strategy, micro-batch runner, resume, metrics), with every rank agreeing on each outcome.
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "backend/cpu_isa.h"
#include "comm/agreement.h"
#include "core/log.h"
#include "model/hf_weights.h"
#include "parallel/compression.h"
#include "parallel/context_parallel.h"
#include "parallel/data_parallel.h"
#include "parallel/param_server_worker.h"
#include "parallel/local_sgd.h"
#include "parallel/model_parallel_sync.h"
#include "parallel/tensor_parallel.h"
#include "parallel/zero.h"
#include "checkpoint/catalog.h"
#include "data/sample_ledger.h"
#include "train/compression_checkpoint.h"
#include "train/local_sgd_checkpoint.h"
#include "plan/memory_plan.h"
#include "parallel/pipeline_runner.h"
#include "train/ps_error_path.h"
#include "train/ps_training.h"
#include "train/run_data.h"
#include "train/training_run.h"
#include "train/step_time_report.h"
#include "plan/step_time_json.h"

namespace tessera {
namespace {

// Threads per rank: the configured number, or the machine's cores shared among the ranks on it.
int choose_threads(int configured, int ranks_per_node) {
  if (configured > 0) return configured;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_per_node));
}

// Every rank must agree on the outcome of a local check, or the job would hang in a collective.
Status agree_on(Communicator& world, const Status& local) {
  int32_t bad = local.ok() ? 0 : 1, any_bad = 0;
  TS_RETURN_IF_ERROR(world.all_reduce(&bad, &any_bad, 1, DType::i32, ReduceOp::max));
  if (!local.ok()) return local;
  if (any_bad) return invalid_argument("another rank failed during set-up (see its message)");
  return Status::ok_status();
}

// The whole model's initial values (seeded, or imported from Hugging Face weights) into `store`,
// which may hold any layer range and tensor-parallel shard of it.
Status initialise_parameters(const RunConfig& cfg, ParamStore& store) {
  const ModelConfig& mc = cfg.model;
  init_parameters(store, mc, cfg.train.seed);
  if (cfg.init_weights.empty()) return Status::ok_status();
  const ParamLayout& layout = store.layout();
  const bool whole = layout.whole_tensors() && layout.whole_model();
  if (whole) {  // the import reads and writes a host copy of the flat buffer: crosses both ways
    std::vector<float> host(static_cast<size_t>(store.numel()));
    store.copy_params_to_host(0, store.numel(), host.data());
    TS_RETURN_IF_ERROR(import_hf_weights(cfg.init_weights, mc, layout, host.data()));
    store.copy_params_from_host(0, store.numel(), host.data());
    return Status::ok_status();
  }
  // A stage or shard: import the whole model once (host buffers), then copy this rank's pieces of
  // each tensor across to the store.
  ParamStore full{ParamLayout(mc)};
  TS_RETURN_IF_ERROR(import_hf_weights(cfg.init_weights, mc, full.layout(), full.params()));
  for (const ParamInfo& p : layout.params()) {
    const float* src = full.params() + full.layout().get(p.name).offset;
    for (const TensorPiece& piece : layout.shard_pieces(p))
      store.copy_params_from_host(p.offset + piece.local_offset, piece.numel, src + piece.global_offset);
  }
  return Status::ok_status();
}

// comm.* as the data-parallel gradient exchange takes it.
Result<CompressionConfig> compression_config(const RunConfig& cfg) {
  return CompressionConfig{cfg.comm.compression, cfg.comm.topk_ratio, cfg.comm.powersgd_rank};
}

LocalSgdConfig local_sgd_config(const RunConfig& cfg) {
  return {cfg.train.local_steps, cfg.outer.lr, cfg.outer.momentum, cfg.outer.nesterov};
}

// Every training rank, whatever the layout (dp alone included): this rank's chunks of its stage, as
// its tp shard; the pipeline runner (at pp = 1 it is gradient accumulation) and the model-parallel
// gradient strategy with a DataParallel, ZeroSharded or LocalSgd part per chunk (a parameter-server
// run: the worker's pushes instead, with the same tp / pp corrections).
// The model's micro-batches: the loader's next batch, recorded in the sample ledger when it is on.
BatchSource batch_source(TrainingRun& run) {
  return [&run](int32_t* in, int32_t* tg) {
    run.loader->next_batch(in, tg);
    if (run.ledger && run.ledger_status.ok())
      run.ledger_status = run.ledger->record(run.state.step + 1, run.loader->last_samples());
  };
}

Status build_training_model(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  const ModelConfig& mc = cfg.model;
  const ParallelLayout& lay = run.layout;
  Grid& grid = *run.grid;
  const int stage = grid.coord().pp, tp_size = grid.shape().tp, pp_size = grid.shape().pp;
  const int zero = cfg.parallel.zero;
  std::vector<ParamStore*> chunks;
  StoreOptions store_options = zero > 0 ? zero_store_options(zero) : StoreOptions{};
  store_options.backend = run.backend.get();
  // A resumed run's checkpoint overwrites the seeded values; a parameter-server run restores its own
  // way (ps_training) and keeps them.
  const bool seeded = !run.resumes || is_param_server_run(cfg);
  for (int c = 0; c < lay.pipe.virtual_stages; ++c) {
    run.stores.push_back(std::make_unique<ParamStore>(chunk_layout(cfg, lay, stage, c, grid.coord().tp, grid.coord().ep), store_options));
    if (seeded) TS_RETURN_IF_ERROR(initialise_parameters(cfg, *run.stores.back()));
    chunks.push_back(run.stores.back().get());
  }
  if (tp_size > 1) run.tp_hooks = std::make_unique<TensorParallel>(*run.backend, grid.tp(), lay.sequence_parallel);
  if (grid.shape().cp > 1) run.cp_hooks = std::make_unique<ContextParallel>(grid.cp(), lay.cp_mode);
  if (grid.shape().ep > 1) run.ep_hooks = std::make_unique<ExpertParallel>(grid.ep());
  if (mc.tied_embeddings && pp_size > 1) {  // collective over the grid's ranks (a PS run: the workers only)
    const bool ends = stage == 0 || stage == pp_size - 1;
    GridCoord first_stage = grid.coord();  // one group per (dp, cp, tp): its first and last stage
    first_stage.pp = 0;
    const int color = ends ? grid_world_rank(grid.shape(), first_stage) : -1;
    TS_ASSIGN_OR_RETURN(run.embedding_group, grid.world().split(color, stage, "embedding"));
  }
  ModelParallelGroups groups{&grid.dp(), &grid.tp(), &grid.pp(), run.embedding_group.get(), lay.sequence_parallel};
  const Recompute recompute = cfg.train.recompute;
  const Precision precision = cfg.train.precision;
  TensorParallelHooks* hooks = run.tp_hooks.get();
  ContextParallelHooks* cp_hooks = run.cp_hooks.get();
  ExpertParallelHooks* ep_hooks = run.ep_hooks.get();
  // Context parallelism: the models run on this rank's seq_len / cp positions.
  const int64_t model_seq_len = cfg.data.seq_len / grid.shape().cp;
  if (is_param_server_run(cfg)) {  // pushes after the tp / pp corrections; no per-layer callbacks
    TS_ASSIGN_OR_RETURN(run.sync, make_param_server_worker(run, chunks, groups));
    auto* worker = static_cast<ParamServerWorker*>(run.sync.get());  // what make_param_server_worker makes
    run.compression.push_back({[worker] { return worker->compression_state(); },
                               "compression/ps.stage" + std::to_string(stage) + ".tp" + std::to_string(grid.coord().tp) + "/"});
    run.runner = std::make_unique<PipelineRunner>(
        *run.backend, mc, chunks, cfg.train.micro_batch, cfg.data.seq_len, recompute, grid.pp(), lay.schedule, lay.pipe,
        *run.sync,
        [hooks, precision](int, Transformer& model) {
          model.set_precision(precision);
          if (hooks) model.set_tensor_parallel_hooks(hooks);
        },
        batch_source(run));
    return Status::ok_status();
  }
  const int64_t bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0);
  TS_ASSIGN_OR_RETURN(const CompressionConfig compression, compression_config(cfg));
  const bool whole_replica = tp_size == 1 && pp_size == 1;  // short checkpoint keys (local SGD's, compression's)
  auto make_part = [&](ParamStore& store) -> std::unique_ptr<ReplicaSync> {
    if (cfg.train.local_steps > 0) {
      auto local = std::make_unique<LocalSgd>(*run.backend, grid.dp(), store, cfg.optim, local_sgd_config(cfg));  // cp = 1
      const int chunk = static_cast<int>(run.local_sgd.size());
      run.local_sgd.push_back({local.get(), local_sgd_key_prefix(whole_replica, stage, chunk, grid.coord().tp)});
      return local;
    }
    // The parameters' replicas: dp, the cp ranks sharing each sequence and the ep ranks (which store
    // only their own experts, replicated over dp): dp at cp = ep = 1.
    Communicator& replicas = grid.param_replicas();
    ShardedExperts experts;  // owner-only expert storage: experts' gradients over their own replicas (dp)
    if (store.layout().experts_sharded()) experts = {&grid.dp(), &grid.ep()};
    if (zero > 0)
      return std::make_unique<ZeroSharded>(*run.backend, replicas, store, cfg.optim, zero,
                                           compression.kind == CompressionKind::bf16, experts);
    auto dp = std::make_unique<DataParallel>(*run.backend, replicas, store, cfg.optim, bucket_bytes, compression, experts);
    const int chunk = static_cast<int>(run.compression.size());
    std::function<std::vector<CompressionState>()> state;
    if (CompressedExchange* x = dp->exchange()) state = [x] { return x->state(); };
    run.compression.push_back({std::move(state), compression_key_prefix(whole_replica, stage, chunk, grid.coord().tp)});
    return dp;
  };
  auto sync = std::make_unique<ModelParallelSync>(*run.backend, groups, chunks, make_part);
  ModelParallelSync* s = sync.get();
  auto configure = [s, hooks, cp_hooks, ep_hooks, zero, precision](int chunk, Transformer& model) {
    model.set_precision(precision);
    if (hooks) model.set_tensor_parallel_hooks(hooks);
    if (cp_hooks) model.set_context_parallel_hooks(cp_hooks);
    if (ep_hooks) model.set_expert_parallel_hooks(ep_hooks);
    ReplicaSync* part = &s->chunk_sync(chunk);
    model.set_grad_ready_callback([part](int layer) { part->on_layer_ready(layer); });
    if (zero >= 3) model.set_layer_callback([part](Transformer::LayerEvent e, int layer) { part->on_layer_event(e, layer); });
  };
  run.runner = std::make_unique<PipelineRunner>(
      *run.backend, mc, chunks, cfg.train.micro_batch, model_seq_len, recompute, grid.pp(), lay.schedule, lay.pipe, *sync,
      configure,
      batch_source(run));
  run.sync = std::move(sync);
  return Status::ok_status();
}

// A parameter-server rank: every model-parallel position's chunks (position pp * tp + tp_rank,
// then chunk; ParamServer's order), laid out and initialised as the workers of that position do.
Status build_server_stores(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  const ParallelConfig& p = cfg.parallel;
  for (int stage = 0; stage < p.pp; ++stage)
    for (int t = 0; t < p.tp; ++t)
      for (int c = 0; c < run.layout.pipe.virtual_stages; ++c) {
        run.stores.push_back(std::make_unique<ParamStore>(chunk_layout(cfg, run.layout, stage, c, t, 0)));
        TS_RETURN_IF_ERROR(initialise_parameters(cfg, *run.stores.back()));
      }
  return Status::ok_status();
}

// Parameters, the model, the gradient strategy and the step's runner.
Status build_model(TrainingRun& run) {
  if (is_param_server_rank(run.cfg, run.world.rank())) {  // a server rank: no model to run, no runner
    TS_RETURN_IF_ERROR(build_server_stores(run));
    return build_param_server(run);
  }
  TS_RETURN_IF_ERROR(build_training_model(run));
  if (run.cfg.train.precision == Precision::fp16) {  // dynamic loss scaling keeps fp16 gradients in range
    run.scaler = std::make_unique<LossScaler>(*run.backend);
    run.runner->set_loss_scale(run.scaler->scale());
  }
  if (run.timeline.enabled())  // the label is built per bucket and step: only when tracing
    run.sync->set_trace([&tl = run.timeline](size_t b, double t0, double t1) {
      tl.add("allreduce bucket " + std::to_string(b), "comm", t0, t1, 1);
    });
  return Status::ok_status();
}

// train.sample_ledger: every invocation gets an id (rank 0's, broadcast: a collective over the
// world); each replica's first rank (tp 0, pp 0) records what its loader hands out.
Status open_sample_ledger(TrainingRun& run) {
  if (!run.cfg.train.sample_ledger) return Status::ok_status();
  uint64_t id = 0;
  if (run.lead)
    id = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
         (static_cast<uint64_t>(::getpid()) << 40);
  TS_RETURN_IF_ERROR(run.world.broadcast_async(&id, sizeof id, DType::u8, 0).wait());
  if (!run.loader) return Status::ok_status();  // a parameter server
  const GridCoord c = run.grid->coord();
  if (c.tp != 0 || c.pp != 0 || c.cp != 0) return Status::ok_status();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  LedgerRun line{hex, run.state.step, run.data_ranks(), run.cfg.train.micro_batch, run.cfg.train.seed,
                 run.loader->windows_per_epoch()};
  TS_ASSIGN_OR_RETURN(SampleLedgerWriter w,
                      SampleLedgerWriter::open(run.cfg.train.out_dir, hex, run.grid->data_rank(), run.lead ? &line : nullptr));
  run.ledger.emplace(std::move(w));
  return Status::ok_status();
}

// A resumed run with compression state (train/compression_checkpoint.h): each chunk's from the
// checkpoint just loaded, or -- another dp, none saved -- from the start, which rank 0 reports.
Status restore_compression(TrainingRun& run) {
  TS_ASSIGN_OR_RETURN(auto latest, checkpoint::find_latest_complete(run.cfg.train.out_dir));
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(latest.path));
  Communicator& dp = run.grid->dp();
  for (const TrainingRun::CompressionChunk& c : run.compression) {
    if (!c.state) continue;
    TS_ASSIGN_OR_RETURN(const std::string why_not,
                        restore_compression_state(reader, c.state(), dp.rank(), dp.size(), c.key_prefix));
    if (!why_not.empty() && run.lead)
      log_warn("comm.compression's error-feedback state starts afresh (" + why_not +
               "): the run continues, but not bitwise as it would have");
    if (!why_not.empty()) break;
  }
  return Status::ok_status();
}

// A resumed local SGD run: the outer and per-replica state of the checkpoint just loaded (the
// newest complete one: resume sets aside any newer that failed to load).
Status restore_local_sgd(TrainingRun& run) {
  TS_ASSIGN_OR_RETURN(auto latest, checkpoint::find_latest_complete(run.cfg.train.out_dir));
  for (const TrainingRun::LocalSgdChunk& l : run.local_sgd)
    TS_RETURN_IF_ERROR(restore_local_sgd_state(latest.path, *l.sync, l.key_prefix));
  return Status::ok_status();
}

void print_banner(const TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  const ModelConfig& mc = cfg.model;
  std::printf("tessera: %s (%s, %.2fM parameters), %d rank(s) x %d thread(s), global batch %lld tokens "
              "(%lld x %lld x %lld accum x %lld %s), steps %lld%s\n",
              mc.name.c_str(), std::string(arch_name(mc.arch)).c_str(), mc.num_parameters() / 1e6, run.world.size(),
              run.threads, (long long)cfg.train.batch_tokens, (long long)cfg.train.micro_batch,
              (long long)cfg.data.seq_len, (long long)cfg.train.grad_accum, (long long)run.data_ranks(), run.layout.grid.ep > 1 ? "dp x ep" : "dp",
              (long long)cfg.train.steps,
              run.opts.resume ? (", resuming after step " + std::to_string(run.state.step)).c_str() : "");
  std::printf("tessera: CPU kernels %s\n", cpu_isa_summary().c_str());
  if (run.backend->device() == Device::cuda) std::printf("tessera: device %s\n", cuda_build_summary().c_str());
  const GridShape& g = run.layout.grid;
  if (g.tp > 1 || g.pp > 1 || g.cp > 1 || g.ep > 1) std::printf("tessera: layout %s\n", run.layout.describe().c_str());
  std::fflush(stdout);
}

}  // namespace

TrainingRun::TrainingRun(const RunConfig& c, Communicator& w, const TrainerOptions& o)
    : cfg(c), world(w), opts(o), lead(w.rank() == 0), run_json(to_json(c)),
      timeline(!o.trace_path.empty(), w.rank()) {}

TrainingRun::~TrainingRun() {
  if (finished_ok && world_survivors) {  // lost workers: every communicator that spans them, and the
    for (Communicator* c : {ps_role.get(), world_survivors.get(), dp_survivors.get(), embedding_group.get()})
      if (c) c->abandon();  // survivors' (the job is ended on purpose next), is freed without its peers
    if (grid) grid->abandon();
  }
  if (!finished_ok) {
    // A parameter-server run: its pending messages abandoned, its links and role group freed
    // without their peers; only buffers MPI may still use are kept (ps_error_path.h).
    if (ps_role) abandon_param_server_exchange(*this);
    if (embedding_group) embedding_group->abandon();
    if (grid) grid->abandon();
  }
}

StepParts TrainingRun::step_parts() {
  StepParts parts{store(), *runner, *sync, *sync, *hooks, timeline};
  parts.scaler = scaler.get();
  parts.world = &world;
  parts.before_update = [this] { return async_saver.release_live_buffers(); };
  parts.guard = guard.get();
  for (size_t c = 1; c < stores.size(); ++c) parts.more_chunks.push_back(stores[c].get());
  return parts;
}

double TrainingRun::tokens_per_step() const {
  return static_cast<double>(cfg.train.micro_batch * cfg.data.seq_len * cfg.train.grad_accum * data_ranks());
}

Status restore_strategy_state(TrainingRun& run) {
  if (run.state.step == 0) return Status::ok_status();
  if (!run.local_sgd.empty()) TS_RETURN_IF_ERROR(agree_on(run.world, restore_local_sgd(run)));
  return agree_on(run.world, restore_compression(run));
}

Status start_ledger_invocation(TrainingRun& run) { return agree_on(run.world, open_sample_ledger(run)); }

Result<std::unique_ptr<TrainingRun>> set_up_training(const RunConfig& cfg, Communicator& world,
                                                     const TrainerOptions& opts) {
  TS_ASSIGN_OR_RETURN(ParallelLayout layout, plan_parallel_layout(cfg, world.size()));
  // The memory planner's verdict before anything is allocated (identical on every rank).
  TS_RETURN_IF_ERROR(check_memory_budget(cfg, world.size()));
  auto run = std::make_unique<TrainingRun>(cfg, world, opts);
  run->heartbeat = HeartbeatFile::open(opts.heartbeat_dir, world.rank(), world.size(), cfg.train.out_dir, opts.launch_attempt);
  run->heartbeat.beat("setup", 0);
  run->layout = std::move(layout);
  TS_ASSIGN_OR_RETURN(Communicator * grid_comm, grid_world(*run));  // the world, or a PS role group
  TS_ASSIGN_OR_RETURN(Grid grid, Grid::create(*grid_comm, run->layout.grid));
  run->grid = std::make_unique<Grid>(std::move(grid));
  // Ranks launched with different configs (or binaries) must not meet in a collective.
  TS_RETURN_IF_ERROR(check_agreement(world, "run config", agreement_hash(run->run_json.dump())));

  // Before the first kernel and the first oneDNN call: oneDNN takes its ISA cap only before its first use.
  TS_RETURN_IF_ERROR(agree_on(world, select_cpu_isa(cfg.train.cpu_isa)));
  Result<std::unique_ptr<Backend>> backend = make_backend(cfg.train.device, {opts.rank_on_node, opts.ranks_per_node});
  TS_RETURN_IF_ERROR(agree_on(world, backend.status()));
  run->backend = std::move(backend).value();
  run->threads = choose_threads(cfg.train.threads, opts.ranks_per_node);
  omp_set_num_threads(run->threads);
  // Measured before the loader's prefetch thread exists, so nothing competes with it.
  run->peak.emplace(peak_measurement(*run->backend, cfg.train.precision));
  if (!is_param_server_run(cfg)) {  // the prediction every run is checked against (step_time_report.h)
    // The calibration reuses the set-up peak only where it is the f32 sgemm's.
    const double sgemm_peak = peak_is_sgemm(*run->backend, cfg.train.precision) ? run->peak->gflops() : 0.0;
    TS_ASSIGN_OR_RETURN(HardwareSpec hw, hardware_for_run(cfg, world, opts.ranks_per_node, {opts.hardware_file, sgemm_peak}));
    if (Result<StepTimePrediction> p = predict_step_time(cfg, world.size(), hw); p.ok()) {
      run->prediction = *p;
      run->hardware_name = hw.name;
    }
  }

  TS_RETURN_IF_ERROR(agree_on(world, check_run_directory(*run)));
  TS_RETURN_IF_ERROR(agree_on(world, open_dataset(*run)));
  TS_RETURN_IF_ERROR(open_loaders(*run));
  TS_RETURN_IF_ERROR(build_model(*run));
  TS_RETURN_IF_ERROR(agree_on(world, prepare_run_directory(*run)));
  TS_RETURN_IF_ERROR(agree_on(world, open_sample_ledger(*run)));
  TS_RETURN_IF_ERROR(restore_strategy_state(*run));
  // Replicas of one stage and shard must hold the same layout.
  uint64_t numel = 0;
  for (const auto& st : run->stores) numel += static_cast<uint64_t>(st->numel());
  TS_RETURN_IF_ERROR(check_agreement(run->grid->dp(), "parameter count", numel));
  TS_RETURN_IF_ERROR(run->update().broadcast_parameters());
  TS_ASSIGN_OR_RETURN(std::unique_ptr<FaultInjection> faults,
                      FaultInjection::from_spec(opts.fault_spec, world.rank(), opts.launch_attempt, nullptr));
  run->faults = faults.get();
  run->hooks = std::move(faults);
  if (run->runner) {
    if (std::vector<Fault> nf = run->faults->numerics_faults(); !nf.empty()) {
      run->numerics_faults = std::make_unique<NumericsFaultProbe>(*run->backend, std::move(nf));
      run->faults->set_numerics_probe(run->numerics_faults.get());
      run->runner->set_numerics_probe(run->numerics_faults.get());
    }
    // A parameter-server worker's update is its exchange with the servers: no step all ranks take
    // together to agree on; those runs keep the end-of-step check of the loss (after_step).
    if (cfg.train.on_anomaly != "off" && cfg.parallel.mode != ParallelMode::ps) {
      std::vector<ParamStore*> chunks;
      for (auto& st : run->stores) chunks.push_back(st.get());
      run->guard = std::make_unique<AnomalyGuard>(*run->backend, world, std::move(chunks), *run->runner, run->update(),
                                                  static_cast<int>(cfg.model.n_layer),
                                                  SpikeFactors{cfg.train.spike_loss_factor, cfg.train.spike_grad_factor},
                                                  run->numerics_faults.get());
    }
  }

  if (run->lead) {
    TS_ASSIGN_OR_RETURN(MetricsWriter mw, MetricsWriter::open(cfg.train.out_dir, /*append=*/run->state.step > 0));
    run->metrics.emplace(std::move(mw));
    std::FILE* f = std::fopen((cfg.train.out_dir + "/config.toml").c_str(), "w");
    if (f) { std::fputs(cfg.to_toml().c_str(), f); std::fclose(f); }
    if (!opts.quiet) print_banner(*run);
    if (run->prediction) {
      if (!opts.quiet)
        std::printf("tessera: predicted on %s: %s\n", run->hardware_name.c_str(), run->prediction->describe().c_str());
      nlohmann::json j = step_time_json(*run->prediction);
      j["event"] = "step_time_prediction";
      j["step"] = run->state.step;  // the step the run starts from
      j["hardware"] = run->hardware_name;
      TS_RETURN_IF_ERROR(run->metrics->write(j));
    }
  }
  run->summary.first_step = run->state.step;
  run->clock.run_start = Timeline::now_s();
  run->clock.dp_traffic_at_start = run->grid->param_replicas().traffic_bytes();
  run->clock.tp_traffic_at_start = run->grid->tp().traffic_bytes();
  run->clock.pp_traffic_at_start = run->grid->pp().traffic_bytes();
  run->heartbeat.beat("train", run->state.step);
  return run;
}

}  // namespace tessera
