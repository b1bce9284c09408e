// run_training: set-up (grid, data, model, optimizer, resume) and the training loop.
#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend/sgemm_peak.h"
#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "comm/agreement.h"
#include "comm/grid.h"
#include "core/log.h"
#include "core/memory.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "model/hf_weights.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "train/evaluate.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/planted_fault.h"
#include "train/progress.h"
#include "train/timeline.h"
#include "train/train_checkpoint.h"

namespace fs = std::filesystem;

namespace tessera {
namespace {

// Threads per rank: the configured number, or the machine's cores shared among the ranks on it.
int choose_threads(int configured) {
  if (configured > 0) return configured;
  int local_ranks = 1;
  if (const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local_ranks = std::max(1, std::atoi(s));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local_ranks);
}

Status check_world(const RunConfig& cfg, int world) {
  const auto& p = cfg.parallel;
  if (p.pp != 1 || p.tp != 1)
    return invalid_argument("parallel.pp and parallel.tp must be 1: pipeline and tensor parallelism are not "
                            "implemented yet (use parallel.dp)");
  if (p.dp != world)
    return invalid_argument("parallel.dp=" + std::to_string(p.dp) + " but the job has " + std::to_string(world) +
                            " ranks: set parallel.dp=" + std::to_string(world) + " or launch with mpirun -np " +
                            std::to_string(p.dp));
  return Status::ok_status();
}

// Every rank must agree on the outcome of a local check, or the job would hang in a collective.
Status agree_on(Communicator& world, const Status& local) {
  int32_t bad = local.ok() ? 0 : 1, any_bad = 0;
  TS_RETURN_IF_ERROR(world.all_reduce(&bad, &any_bad, 1, DType::i32, ReduceOp::max));
  if (!local.ok()) return local;
  if (any_bad) return invalid_argument("another rank failed during set-up (see its message)");
  return Status::ok_status();
}

double mem_mb() { return memory_stats().total_live / 1048576.0; }

// Resuming with other data, seed, batch or optimizer settings is allowed (e.g. a lower lr), but the
// run then no longer continues as the uninterrupted one would: say so, naming each changed key.
// (train.steps, intervals, threads, out_dir and the like do not change the steps taken so far.)
void warn_resume_changes(const std::string& checkpoint_dir, const nlohmann::json& now) {
  auto reader = checkpoint::open_checkpoint(checkpoint_dir);
  if (!reader.ok() || !reader->state().contains("run_config")) return;
  const nlohmann::json& before = reader->state()["run_config"];
  std::string changed;
  auto check = [&](const std::string& section, const std::string& key) {
    const auto b = before.value(section, nlohmann::json::object()).value(key, nlohmann::json());
    const auto n = now.value(section, nlohmann::json::object()).value(key, nlohmann::json());
    if (b != n) changed += (changed.empty() ? "" : ", ") + section + "." + key + " " + b.dump() + " -> " + n.dump();
  };
  for (const char* key : {"dir", "seq_len"}) check("data", key);
  for (const char* key : {"seed", "batch_tokens", "micro_batch", "grad_accum"}) check("train", key);
  const nlohmann::json optim = now.value("optim", nlohmann::json::object());  // a named copy outlives the loop
  for (const auto& [key, value] : optim.items()) check("optim", key);
  check("parallel", "dp");
  if (!changed.empty())
    log_warn("resuming " + checkpoint_dir + " with changed settings (" + changed +
             "): training continues, but not as the uninterrupted run would have");
}


}  // namespace

Result<TrainSummary> run_training(const RunConfig& cfg, Communicator& world, const TrainerOptions& opts) {
  const int rank = world.rank();
  const bool lead = rank == 0;
  TS_RETURN_IF_ERROR(check_world(cfg, world.size()));
  TS_ASSIGN_OR_RETURN(Grid made_grid, Grid::create(world, GridShape{cfg.parallel.dp, cfg.parallel.pp, cfg.parallel.tp}));
  // On an error return the peers may still sit in a collective, and freeing the grid's communicators
  // is collective (MPI_Win_free): this rank would hang there instead of reaching abort_job. Leak them.
  auto grid_owner = std::make_unique<Grid>(std::move(made_grid));
  Grid& grid = *grid_owner;
  bool finished_ok = false;
  struct LeakGridOnError {
    std::unique_ptr<Grid>& owner;
    const bool& ok;
    ~LeakGridOnError() { if (!ok) (void)owner.release(); }
  } leak_grid_on_error{grid_owner, finished_ok};
  // Ranks launched with different configs (or binaries) must not meet in a collective.
  const nlohmann::json run_json = to_json(cfg);
  TS_RETURN_IF_ERROR(check_agreement(world, "run config", agreement_hash(run_json.dump())));

  const int threads = choose_threads(cfg.train.threads);
  omp_set_num_threads(threads);
  // Measured before the loader's prefetch thread exists, so nothing competes with it.
  const double peak_gflops = ops::measure_sgemm_peak_gflops();
  const ModelConfig& mc = cfg.model;
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len, accum = cfg.train.grad_accum;
  const int dp_rank = grid.coord().dp, dp_size = grid.shape().dp;

  // ---- data ----
  Status setup;
  DatasetManifest manifest;
  {
    auto m = load_manifest(cfg.data.dir);
    if (!m.ok()) setup = m.status();
    else manifest = std::move(m).value();
  }
  if (setup.ok()) setup = verify_dataset(manifest, /*check_checksums=*/lead);
  if (setup.ok() && manifest.vocab_size > mc.vocab_size)
    setup = invalid_argument("dataset " + cfg.data.dir + " uses a tokenizer with vocabulary " +
                             std::to_string(manifest.vocab_size) + " but model.vocab_size is " +
                             std::to_string(mc.vocab_size) + ": set model.vocab_size >= " +
                             std::to_string(manifest.vocab_size));
  TS_RETURN_IF_ERROR(agree_on(world, setup));
  LoaderConfig lc;
  lc.B = static_cast<int>(B); lc.T = static_cast<int>(T); lc.seed = cfg.train.seed;
  lc.rank = dp_rank; lc.world = dp_size;
  TS_ASSIGN_OR_RETURN(std::unique_ptr<DataLoader> loader, DataLoader::open(manifest, "train", lc));
  std::optional<EvalLoader> val_loader;
  if (cfg.train.eval_interval > 0) {
    auto v = EvalLoader::open(manifest, "val", static_cast<int>(B), static_cast<int>(T), dp_rank, dp_size);
    if (v.ok()) val_loader.emplace(std::move(v).value());
    else if (lead) log_warn("no validation loss: " + v.status().message());
  }

  // ---- model and optimizer ----
  ParamStore store{ParamLayout(mc)};
  init_parameters(store, mc, cfg.train.seed);
  if (!cfg.init_weights.empty())
    TS_RETURN_IF_ERROR(import_hf_weights(cfg.init_weights, mc, store.layout(), store.params()));
  Transformer model(mc, store, B, T);
  AdamW opt(store.layout(), cfg.optim);  // OptimConfig is an AdamWConfig
  DataParallel dp(grid.dp(), store, static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0));
  model.set_grad_ready_callback([&dp](int layer) { dp.on_layer_ready(layer); });

  // ---- run directory and resume ----
  const std::string& out_dir = cfg.train.out_dir;
  TrainingState state;
  if (lead && !opts.resume) {  // --resume needs an existing run: a refused one must leave no empty directory
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) setup = io_error("cannot create train.out_dir " + out_dir + ": " + ec.message());
  }
  if (setup.ok() && !opts.resume) {
    auto existing = checkpoint::list_complete_checkpoints(out_dir);
    if (existing.ok() && !existing->empty())
      setup = invalid_argument("train.out_dir " + out_dir + " already holds checkpoints of an earlier run: pass "
                               "--resume to continue it, or choose another train.out_dir");
    else if (fs::exists(fs::path(out_dir) / "metrics.jsonl"))
      setup = invalid_argument("train.out_dir " + out_dir + " already holds the metrics of an earlier run (that "
                               "left no checkpoint): choose another train.out_dir or delete that directory");
  }
  if (setup.ok() && opts.resume) {
    auto latest = checkpoint::find_latest_complete(out_dir);
    if (!latest.ok()) {
      setup = not_found("--resume: no complete checkpoint in " + out_dir + "/checkpoints (" +
                        latest.status().message() + "); start without --resume");
    } else {
      auto st = load_training_checkpoint(latest->path, mc, store, &opt);
      if (st.ok()) state = st.value();
      if (st.ok() && lead) warn_resume_changes(latest->path, run_json);
      else setup = st.status();
    }
    if (setup.ok()) setup = loader->restore(state.loader);
  }
  TS_RETURN_IF_ERROR(agree_on(world, setup));
  TS_RETURN_IF_ERROR(check_agreement(world, "parameter count", static_cast<uint64_t>(store.numel())));
  TS_RETURN_IF_ERROR(dp.broadcast_parameters());

  std::optional<MetricsWriter> metrics;
  if (lead) {
    TS_ASSIGN_OR_RETURN(MetricsWriter mw, MetricsWriter::open(out_dir, /*append=*/opts.resume));
    metrics.emplace(std::move(mw));
    std::FILE* f = std::fopen((out_dir + "/config.toml").c_str(), "w");
    if (f) { std::fputs(cfg.to_toml().c_str(), f); std::fclose(f); }
  }
  if (lead && !opts.quiet) {
    std::printf("tessera: %s (%s, %.2fM parameters), %d rank(s) x %d thread(s), global batch %lld tokens "
                "(%lld x %lld x %lld accum x %d dp), steps %lld%s\n",
                mc.name.c_str(), std::string(arch_name(mc.arch)).c_str(), mc.num_parameters() / 1e6, world.size(),
                threads, (long long)cfg.train.batch_tokens, (long long)B, (long long)T, (long long)accum, dp_size,
                (long long)cfg.train.steps,
                opts.resume ? (", resuming after step " + std::to_string(state.step)).c_str() : "");
    std::fflush(stdout);
  }

  // ---- the loop ----
  Timeline timeline(!opts.trace_path.empty(), rank);
  if (timeline.enabled())  // the label is built per bucket and step: only when tracing
    dp.set_trace([&](size_t b, double t0, double t1) {
      timeline.add("allreduce bucket " + std::to_string(b), "comm", t0, t1, 1);
    });
  std::vector<int32_t> inputs(B * T), targets(B * T);
  TrainSummary summary;
  summary.first_step = state.step;
  const double tokens_per_step = static_cast<double>(B * T * accum * dp_size);
  const double flops_per_step = mc.flops_per_token(T) * tokens_per_step;
  const double run_start = Timeline::now_s();
  double timed_s = 0, loader_wait_s = 0, exposed_s = 0;
  int64_t timed_steps = 0;
  int64_t steps_this_run = 0;

  auto evaluate = [&]() -> Result<double> {
    TimelineSpan span(timeline, "eval", "eval");
    val_loader->reset();
    TS_ASSIGN_OR_RETURN(EvalResult local, evaluate_loss(model, *val_loader, cfg.train.eval_batches));
    float m = static_cast<float>(local.mean_loss);
    TS_RETURN_IF_ERROR(grid.dp().all_reduce_async(&m, &m, 1, DType::f32, ReduceOp::avg).wait());  // times out
    return static_cast<double>(m);
  };

  const PlantedFault fault = PlantedFault::from_env();
  while (state.step < cfg.train.steps) {
    const double t_step = Timeline::now_s();
    const bool fault_now = state.step + 1 == fault.step;
    if (fault_now && fault.fail == rank)
      return internal_error("planted failure (TESSERA_TEST_FAIL_RANK) on rank " + std::to_string(rank) + " at step " +
                            std::to_string(fault.step));
    const bool hang_grad_sync = fault_now && fault.hang == rank && !fault.hang_at_loss;
    const float lr = lr_at(state.step, cfg.optim, cfg.train.steps);
    store.zero_grads();
    double loss_sum = 0;
    const double wait_before = loader->wait_seconds(), exposed_before = dp.exposed_wait_s();
    for (int64_t micro = 0; micro < accum; ++micro) {
      {
        TimelineSpan span(timeline, "data", "data", 2);
        loader->next_batch(inputs.data(), targets.data());
      }
      dp.set_sync(micro == accum - 1 && !hang_grad_sync);  // no communication on accumulation micro-steps
      {
        TimelineSpan span(timeline, "forward", "compute");
        loss_sum += model.forward(inputs.data(), targets.data());
      }
      TimelineSpan span(timeline, "backward", "compute");
      model.backward(1.f / static_cast<float>(accum));
    }
    if (hang_grad_sync) PlantedFault::hang_forever();
    {
      TimelineSpan span(timeline, "grad sync wait", "comm");
      TS_RETURN_IF_ERROR(dp.finish());
    }
    float grad_norm;
    {
      TimelineSpan span(timeline, "optimizer", "compute");
      grad_norm = clip_grad_norm(store.grads(), store.numel(), cfg.optim.grad_clip);
      opt.step(store.params(), store.grads(), lr);
    }
    if (fault_now && fault.perturb == rank) store.params()[0] = std::nextafter(store.params()[0], 1e30f);
    if (fault_now && fault.hang == rank && fault.hang_at_loss) PlantedFault::hang_forever();
    float loss = static_cast<float>(loss_sum / accum);
    // Async + wait: unlike a blocking call it times out (train.timeout_s) if a rank never arrives.
    if (dp_size > 1)
      TS_RETURN_IF_ERROR(grid.dp().all_reduce_async(&loss, &loss, 1, DType::f32, ReduceOp::avg).wait());
    if (!std::isfinite(loss))
      return internal_error("loss became " + std::to_string(loss) + " at step " + std::to_string(state.step) +
                            ": lower optim.lr or enable optim.grad_clip");
    if (opts.verify_replicas) {
      const uint64_t h = agreement_hash(std::string_view(reinterpret_cast<const char*>(store.params()),
                                                         static_cast<size_t>(store.numel()) * sizeof(float)));
      TS_RETURN_IF_ERROR(check_agreement(grid.dp(), "parameters after step " + std::to_string(state.step + 1), h));
    }
    ++state.step;
    ++steps_this_run;
    state.loader = loader->position();
    state.adam_steps = opt.steps_taken();
    summary.losses.push_back(loss);

    const double dt = Timeline::now_s() - t_step;
    if (steps_this_run > 1 || cfg.train.steps - summary.first_step == 1) {  // the first step warms caches
      timed_s += dt;
      ++timed_steps;
      loader_wait_s += loader->wait_seconds() - wait_before;
      exposed_s += dp.exposed_wait_s() - exposed_before;
    }
    const double tok_s = tokens_per_step / dt;
    const double mfu = flops_per_step / dt / 1e9 / (peak_gflops * world.size());
    if (lead && (state.step % std::max<int64_t>(1, cfg.train.log_interval) == 0 || state.step == cfg.train.steps)) {
      TrainEvent ev;
      ev.step = state.step; ev.loss = loss; ev.lr = lr; ev.grad_norm = grad_norm; ev.tokens_per_s = tok_s;
      ev.mfu = mfu; ev.mem_mb = mem_mb(); ev.time_s = Timeline::now_s() - run_start;
      TS_RETURN_IF_ERROR(metrics->log_train(ev));
      if (!opts.quiet) {
        const double mean_dt = timed_steps ? timed_s / timed_steps : dt;
        print_progress({state.step, cfg.train.steps, loss, lr, grad_norm, tok_s, mfu, mem_mb(),
                        mean_dt * static_cast<double>(cfg.train.steps - state.step)});
      }
    }
    const bool last = state.step == cfg.train.steps ||
                      (opts.stop_after_steps > 0 && steps_this_run == opts.stop_after_steps);
    if (val_loader && (state.step % cfg.train.eval_interval == 0 || last)) {
      TS_ASSIGN_OR_RETURN(double val, evaluate());
      summary.final_val_loss = val;
      if (lead) {
        const double bpt = manifest.bytes_per_token();
        nlohmann::json extra = nlohmann::json::object();
        if (bpt > 0) extra["val_loss_per_byte"] = val / bpt;
        TS_RETURN_IF_ERROR(metrics->log_eval(state.step, val, extra));
        if (!opts.quiet) {
          char per_byte[48] = "";
          if (bpt > 0) std::snprintf(per_byte, sizeof per_byte, ", %.4f nats/byte", val / bpt);
          std::printf("%sstep %lld: val loss %.4f (perplexity %.2f%s)\n", isatty(1) ? "\r\033[K" : "",
                      (long long)state.step, val, std::exp(val), per_byte);
          std::fflush(stdout);
        }
      }
    }
    const bool periodic = cfg.train.checkpoint_interval > 0 && state.step % cfg.train.checkpoint_interval == 0;
    if (periodic || last) {
      TimelineSpan span(timeline, "checkpoint", "io");
      TS_RETURN_IF_ERROR(save_training_checkpoint(world, out_dir, mc, store, opt, state,
                                                  static_cast<int>(cfg.train.keep_checkpoints), run_json));
    }
    if (last) break;
  }
  if (lead && !opts.quiet && isatty(1)) std::printf("\n");

  summary.last_step = state.step;
  if (timed_steps > 0) {
    summary.tokens_per_s = tokens_per_step * timed_steps / timed_s;
    summary.loader_wait_fraction = loader_wait_s / timed_s;
    summary.exposed_comm_fraction = exposed_s / timed_s;
  }
  if (lead && !opts.quiet && timed_steps > 0)
    std::printf("done: %lld steps, %.0f tok/s, loader wait %.2f%% of step time, exposed communication %.2f%%\n",
                (long long)state.step, summary.tokens_per_s, 100 * summary.loader_wait_fraction,
                100 * summary.exposed_comm_fraction);
  if (timeline.enabled()) {
    TS_RETURN_IF_ERROR(timeline.write_rank_file(opts.trace_path));
    TS_RETURN_IF_ERROR(world.barrier());
    if (lead) TS_RETURN_IF_ERROR(Timeline::merge(opts.trace_path, world.size()));
  }
  finished_ok = true;
  return summary;
}

}  // namespace tessera
