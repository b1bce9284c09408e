// After each step: sanity checks, the training state, step timing, metrics and the progress line,
// evaluation and checkpoint cadence; and the end-of-run summary.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "checkpoint/writer.h"
#include "core/log.h"
#include "core/memory.h"
#include "train/compression_checkpoint.h"
#include "train/local_sgd_checkpoint.h"
#include "train/moe_metrics.h"
#include "train/preemption.h"
#include "observe/progress.h"
#include "observe/straggler_report.h"
#include "parallel/pipeline_schedule_sim.h"
#include "train/ps_training.h"
#include "train/training_run.h"
#include "train/step_time_report.h"

namespace tessera {
namespace {

double mem_mb() { return memory_stats().total_live / 1048576.0; }

// Validation loss over the dp group (each rank evaluates its slice).
Result<double> validation_loss(TrainingRun& run) {
  TimelineSpan span(run.timeline, "eval", "eval");
  run.val_loader->reset();
  TS_ASSIGN_OR_RETURN(EvalResult local, run.runner->evaluate(*run.val_loader, run.cfg.train.eval_batches));
  float m = static_cast<float>(local.mean_loss);
  TS_RETURN_IF_ERROR(eval_group(run).all_reduce_async(&m, &m, 1, DType::f32, ReduceOp::avg).wait());  // times out
  return static_cast<double>(m);
}

Status log_step(TrainingRun& run, const StepResult& r, float lr, double dt, const RankStepTime& split) {
  const RunConfig& cfg = run.cfg;
  const int64_t step = run.state.step;
  if (step % std::max<int64_t>(1, cfg.train.log_interval) != 0 && step != cfg.train.steps) return Status::ok_status();
  // Every rank's allocator counters, per category live and peak: one small all-gather on the log steps.
  TS_ASSIGN_OR_RETURN(nlohmann::json mem, gather_memory_stats(step_stats_group(run)));
  // Every rank's compute / wait / data split of this step (straggler diagnosis).
  TS_ASSIGN_OR_RETURN(std::vector<RankStepTime> splits, gather_step_times(step_stats_group(run), split));
  // A MoE model's expert load of this step, summed over the ranks (one more small all-gather).
  std::vector<MoeLoadSummary> moe;
  if (cfg.model.is_moe()) {
    std::vector<Transformer::MoeLayerLoad> load = run.runner->take_moe_load();
    if (run.grid->coord().tp != 0) load.clear();  // the tp ranks route the same tokens: counted once
    TS_ASSIGN_OR_RETURN(moe, gather_moe_load(step_stats_group(run), cfg.model, load));
  }
  if (!run.lead) return Status::ok_status();
  for (const std::string& w : moe_collapse_warnings(moe, cfg.train.moe_warn_share, step)) log_warn(w);
  run.moe_load.add(moe, step);
  add_moe_counters(run.timeline, Timeline::now_s(), moe);
  const double tok_s = run.tokens_per_step() / dt;
  const double flops_per_step = cfg.model.flops_per_token(cfg.data.seq_len) * run.tokens_per_step();
  const double peak_before = run.peak->gflops();
  const int remeasures_before = run.peak->remeasures();
  const double mfu = run.peak->mfu(flops_per_step / dt / 1e9 / run.world.size());
  if (run.peak->remeasures() != remeasures_before)
    log_info("step " + std::to_string(step) + ": a step beat the start-up matmul peak (" + std::to_string(static_cast<int>(peak_before)) +
             " GFLOP/s, a busy moment); measured again: " + std::to_string(static_cast<int>(run.peak->gflops())) + " GFLOP/s");
  TrainEvent ev;
  ev.step = step; ev.loss = r.loss; ev.lr = lr; ev.grad_norm = r.grad_norm; ev.tokens_per_s = tok_s;
  ev.mfu = mfu; ev.mem_mb = mem_mb(); ev.time_s = Timeline::now_s() - run.clock.run_start;
  ev.extra = {{"mem", std::move(mem)}};  // [per world rank] {"parameters": {"live", "peak"}, ..., "total": {...}}
  ev.extra["step_time"] = step_times_json(splits);  // [per world rank] {"compute_s", "wait_s", "data_s"}
  if (!moe.empty()) ev.extra["moe"] = moe_load_json(moe);  // [per MoE layer] tokens per expert, dropped, entropy
  TS_RETURN_IF_ERROR(run.metrics->log_train(ev));
  if (!run.opts.quiet) {
    const double mean_dt = run.clock.timed_steps ? run.clock.timed_s / run.clock.timed_steps : dt;
    print_progress({step, cfg.train.steps, r.loss, lr, r.grad_norm, tok_s, mfu, mem_mb(),
                    mean_dt * static_cast<double>(cfg.train.steps - step)});
  }
  return Status::ok_status();
}

Status evaluate_and_log(TrainingRun& run) {
  TS_ASSIGN_OR_RETURN(double val, validation_loss(run));
  run.summary.final_val_loss = val;
  if (!run.lead) return Status::ok_status();
  const double bpt = run.manifest.bytes_per_token();
  nlohmann::json extra = nlohmann::json::object();
  if (bpt > 0) extra["val_loss_per_byte"] = val / bpt;
  TS_RETURN_IF_ERROR(run.metrics->log_eval(run.state.step, val, extra));
  if (!run.opts.quiet) {
    char per_byte[48] = "";
    if (bpt > 0) std::snprintf(per_byte, sizeof per_byte, ", %.4f nats/byte", val / bpt);
    std::printf("%sstep %lld: val loss %.4f (perplexity %.2f%s)\n", clear_progress_line(),
                (long long)run.state.step, val, std::exp(val), per_byte);
    std::fflush(stdout);
  }
  return Status::ok_status();
}

// End of run, lead: the MoE layers' balance over the logged steps, printed (imbalanced layers and ep
// ranks named) and as a metrics event.
Status report_moe_load(TrainingRun& run) {
  if (!run.lead || run.moe_load.steps == 0) return Status::ok_status();
  const int ep = run.grid->shape().ep;
  const std::vector<MoeLayerBalance> balance = moe_layer_balance(run.moe_load, ep, run.cfg.train.moe_warn_share);
  if (!run.opts.json_summary && !run.opts.quiet)
    for (const std::string& line : moe_run_report(balance, run.moe_load.steps, run.cfg.model.moe_experts, ep))
      std::printf("%s\n", line.c_str());
  nlohmann::json ev = moe_run_report_json(balance, run.moe_load.steps);
  ev["step"] = run.state.step;
  return run.metrics->write(ev);
}

// This rank's mean split over the timed steps, as after_step splits each step.
RankStepTime mean_split(const RunClock& c) {
  const double n = static_cast<double>(std::max<int64_t>(c.timed_steps, 1));
  const double wait = c.comm_wait_s + c.cp_exposed_s + c.ep_exchange_s + c.pipeline_wait_s;
  return {std::max(0.0, c.timed_s - wait - c.loader_wait_s) / n, wait / n, c.loader_wait_s / n, c.pipeline_wait_s / n,
          c.update_s / n};
}

// End of run: every rank's mean split over the timed steps (by world rank; just this rank's when it
// steps alone). Collective over the ranks that take steps.
Result<std::vector<RankStepTime>> gather_mean_splits(TrainingRun& run) {
  Communicator& ranks = step_stats_group(run);
  if (ranks.size() < 2 || run.clock.timed_steps == 0) return std::vector<RankStepTime>{mean_split(run.clock)};
  return gather_step_times(ranks, mean_split(run.clock));
}

// End of run, lead, pp > 1: each stage's idle share of the step and the part of it spent waiting on
// the other stages, next to the schedule's bubble with equal stages (printed and as a metrics event).
Status report_pipeline_idle(TrainingRun& run, const std::vector<RankStepTime>& all) {
  const GridShape& shape = run.grid->shape();
  if (!run.lead || shape.pp < 2 || run.clock.timed_steps == 0 || static_cast<int>(all.size()) != shape.world_size())
    return Status::ok_status();
  const PipelineStageShares shares = pipeline_stage_shares(shape, all);
  const double equal = pipeline_bubble_fraction(run.layout.schedule, run.layout.pipe);
  if (!run.opts.json_summary && !run.opts.quiet) std::printf("%s\n", pipeline_idle_line(shares, equal).c_str());
  return run.metrics->write({{"event", "pipeline_idle"}, {"step", run.state.step}, {"idle_share_per_stage", shares.idle},
                             {"pipeline_wait_share_per_stage", shares.pipeline_wait}, {"equal_stage_bubble", equal}});
}

// End of run, lead: names the slowest of `all` (also as a metrics event).
Status report_stragglers(TrainingRun& run, const std::vector<RankStepTime>& all) {
  if (all.size() < 2 || !run.lead) return Status::ok_status();
  const StragglerReport report = analyse_stragglers(all);
  if (!run.opts.json_summary) std::printf("stragglers: %s\n", describe(report).c_str());
  nlohmann::json ev = to_json(report);
  ev["event"] = "stragglers";
  ev["step"] = run.state.step;
  ev["step_time"] = step_times_json(all);
  return run.metrics->write(ev);
}

}  // namespace

StepStart start_step_clock(const TrainingRun& run) {
  return {Timeline::now_s(), run.loader->wait_seconds(), run.sync->exposed_wait_s(), run.cp_exposed_s(),
          run.ep_exchange_s(), run.pipeline_wait_s()};
}
// A checkpoint of the state after this step: synchronous, or (train.async_checkpoint) a snapshot
// written in the background -- except the run's last, which is complete when this returns.
Status save_checkpoint(TrainingRun& run, bool last) {
  const RunConfig& cfg = run.cfg;
  const int64_t step = run.state.step;
  TimelineSpan span(run.timeline, "checkpoint", "io");
  // A preempted rank keeps saying so while it saves: the launcher then knows why it stops.
  if (!run.summary.stop_signal) run.heartbeat.beat("checkpoint", step);
  const double t0 = Timeline::now_s();
  std::vector<CheckpointChunk> chunks;
  for (const OwnedState& o : run.update().owned_state()) {
    chunks.push_back({run.stores[static_cast<size_t>(o.chunk)].get(), o.optimizer, o.range});
    if (!run.local_sgd.empty()) {
      const TrainingRun::LocalSgdChunk& l = run.local_sgd.at(static_cast<size_t>(o.chunk));
      chunks.back().extra = local_sgd_checkpoint_tensors(*l.sync, l.key_prefix);
    }
    if (static_cast<size_t>(o.chunk) < run.compression.size()) {
      const TrainingRun::CompressionChunk& x = run.compression[static_cast<size_t>(o.chunk)];
      if (x.state)
        for (ExtraTensor& e : compression_checkpoint_tensors(x.state(), run.grid->dp().rank(), run.grid->dp().size(),
                                                             x.key_prefix))
          chunks.back().extra.push_back(std::move(e));
    }
  }
  const FaultInjection* faults = run.faults;
  if (cfg.train.async_checkpoint) {
    AsyncSaveOptions o;
    o.keep_last = static_cast<int>(cfg.train.keep_checkpoints);
    o.run_config = run.run_json;
    o.timeout_s = cfg.train.timeout_s;
    o.write_fault = faults->shard_write_fault(step);
    if (faults->damages_checkpoint(step))
      o.after_complete = [faults, step](const std::string& dir) { return faults->after_checkpoint(step, dir); };
    // A server updates its shards as pushes arrive, and ZeRO-3 gathers into the parameter buffers
    // during forward: there the buffers change outside the update, so they are copied.
    // The writer reads live buffers in place, so only host memory (a device's is snapshotted instead).
    o.live_allowed = !is_param_server_run(cfg) && cfg.parallel.zero < 3 && run.backend->device() == Device::cpu;
    TS_RETURN_IF_ERROR(run.async_saver.start(checkpoint_world(run), cfg.train.out_dir, cfg.model, chunks, run.state, std::move(o)));
    if (last) TS_RETURN_IF_ERROR(run.async_saver.wait());
  } else {
    TS_RETURN_IF_ERROR(save_training_checkpoint(checkpoint_world(run), cfg.train.out_dir, cfg.model, chunks, run.state,
                                                static_cast<int>(cfg.train.keep_checkpoints), run.run_json,
                                                faults->shard_write_fault(step), &run.pruner));
    TS_RETURN_IF_ERROR(faults->after_checkpoint(step, checkpoint::checkpoint_target(cfg.train.out_dir, step).final_dir()));
  }
  const double stall = Timeline::now_s() - t0;
  if (run.lead) {
    nlohmann::json ev = {{"event", "checkpoint"}, {"step", step}, {"async", cfg.train.async_checkpoint}, {"stall_s", stall}};
    if (cfg.train.async_checkpoint) {  // the stall's two parts: the previous save still writing, the copy
      ev["wait_previous_s"] = run.async_saver.last_wait_s();
      ev["snapshot_s"] = run.async_saver.last_snapshot_s();
      ev["live"] = run.async_saver.last_live();
    }
    TS_RETURN_IF_ERROR(run.metrics->write(ev));
  }
  return Status::ok_status();
}


namespace {
// Every rank agreed to stop after this step on `stop_signal`: a complete checkpoint of it (an
// asynchronous save in flight is finished first), a "preempted" event, and the run ends.
Result<bool> stop_preempted(TrainingRun& run, int stop_signal) {
  const int64_t step = run.state.step;
  run.summary.stop_signal = stop_signal;
  run.summary.preempted_checkpoint = checkpoint::checkpoint_target(run.cfg.train.out_dir, step).final_dir();
  run.heartbeat.beat("preempted", step, "saving the checkpoint of step " + std::to_string(step));
  TS_RETURN_IF_ERROR(save_checkpoint(run, /*last=*/true));
  if (run.lead)
    TS_RETURN_IF_ERROR(run.metrics->write({{"event", "preempted"},
                                           {"step", step},
                                           {"signal", stop_signal_name(stop_signal)},
                                           {"checkpoint", run.summary.preempted_checkpoint}}));
  return true;
}
}  // namespace

Result<bool> after_step(TrainingRun& run, const StepResult& r, float lr, const StepStart& start) {
  const RunConfig& cfg = run.cfg;
  if (!std::isfinite(r.loss) && !r.anomaly.detected)  // detected: a step skipped (train.on_anomaly)
    return internal_error("loss became " + std::to_string(r.loss) + " at step " + std::to_string(run.state.step) +
                          ": lower optim.lr or enable optim.grad_clip");
  TS_RETURN_IF_ERROR(run.ledger_status);
  if (run.opts.verify_replicas)
    TS_RETURN_IF_ERROR(run.update().verify_replicas("parameters after step " + std::to_string(run.state.step + 1)));
  ++run.state.step;
  ++run.clock.steps_this_run;
  run.state.loader = run.loader->position();
  run.state.adam_steps = run.update().optimizer_steps();
  run.summary.losses.push_back(r.loss);

  RunClock& c = run.clock;
  const double dt = Timeline::now_s() - start.t0;
  if (c.steps_this_run > 1 || cfg.train.steps - run.summary.first_step == 1) {  // the first step warms caches
    c.timed_s += dt;
    ++c.timed_steps;
    c.loader_wait_s += run.loader->wait_seconds() - start.loader_wait;
    c.exposed_s += run.sync->exposed_wait_s() - start.exposed_wait;
    c.comm_wait_s += r.comm_wait_s;
    c.cp_exposed_s += run.cp_exposed_s() - start.cp_exposed;
    c.ep_exchange_s += run.ep_exchange_s() - start.ep_exchange;
    c.pipeline_wait_s += run.pipeline_wait_s() - start.pipeline_wait;
    c.update_s += r.update_s;
  }
  const double data_s = run.loader->wait_seconds() - start.loader_wait;
  // Waiting for peers: the step's collectives, the context- and expert-parallel exchanges inside the
  // model and the other pipeline stages (so the straggler report does not blame a rank for waiting
  // on its cp, ep or pp peers).
  const double pipeline_wait_s = run.pipeline_wait_s() - start.pipeline_wait;
  const double wait_s = r.comm_wait_s + (run.cp_exposed_s() - start.cp_exposed) +
                        (run.ep_exchange_s() - start.ep_exchange) + pipeline_wait_s;
  const RankStepTime split{std::max(0.0, dt - wait_s - data_s), wait_s, data_s, pipeline_wait_s, r.update_s};
  run.timeline.add_counter("step split (s)", start.t0,
                           {{"compute", split.compute_s}, {"wait", split.wait_s}, {"data", split.data_s}});
  if (r.skipped && !r.anomaly.detected && run.lead)
    log_warn("step " + std::to_string(run.state.step) + ": fp16 gradient overflow, update skipped; loss scale now " +
             std::to_string(run.scaler->scale()));
  TS_RETURN_IF_ERROR(log_step(run, r, lr, dt, split));
  if (r.checkpoint_wait_s > 0 && run.lead)  // the rest of the previous asynchronous save's stall
    TS_RETURN_IF_ERROR(run.metrics->write(
        {{"event", "checkpoint_write_wait"}, {"step", run.state.step}, {"wait_s", r.checkpoint_wait_s},
         {"copied_bytes", run.async_saver.last_frozen_bytes()}}));

  const bool planned_last = run.state.step == cfg.train.steps ||
                            (run.opts.stop_after_steps > 0 && c.steps_this_run == run.opts.stop_after_steps);
  return finish_step(run, planned_last);
}

Result<bool> finish_step(TrainingRun& run, bool planned_last) {
  const RunConfig& cfg = run.cfg;
  // A parameter-server worker lost since the last such step: the collectives below go on without it.
  if (is_param_server_run(cfg)) TS_RETURN_IF_ERROR(follow_lost_workers(run));
  if (run.val_loader && (run.state.step % cfg.train.eval_interval == 0 || planned_last))
    TS_RETURN_IF_ERROR(evaluate_and_log(run));
  // After the evaluation, so a signal that arrived during it still stops the run at this step.
  TS_ASSIGN_OR_RETURN(const int stop_signal, agreed_stop_signal(run));
  if (stop_signal && !planned_last) return stop_preempted(run, stop_signal);
  const bool periodic = cfg.train.checkpoint_interval > 0 && run.state.step % cfg.train.checkpoint_interval == 0;
  if (periodic || planned_last) TS_RETURN_IF_ERROR(save_checkpoint(run, planned_last));
  run.heartbeat.beat("train", run.state.step);
  return planned_last;
}

Status save_run_checkpoint(TrainingRun& run, bool last) { return save_checkpoint(run, last); }

Result<TrainSummary> finish_training(TrainingRun& run) {
  TrainSummary& s = run.summary;
  const RunClock& c = run.clock;
  if (run.lead && !run.opts.quiet && *clear_progress_line()) std::printf("\n");
  s.last_step = run.state.step;
  if (c.timed_steps > 0) {
    s.tokens_per_s = run.tokens_per_step() * c.timed_steps / c.timed_s;
    s.loader_wait_fraction = c.loader_wait_s / c.timed_s;
    s.exposed_comm_fraction = c.exposed_s / c.timed_s;
  }
  auto mib_per_step = [&](const Communicator& comm, uint64_t at_start) {
    return c.steps_this_run > 0 ? static_cast<double>(comm.traffic_bytes() - at_start) / 1048576.0 /
                                      static_cast<double>(c.steps_this_run)
                                : 0.0;
  };
  const GridShape& g = run.grid->shape();
  std::string mp_traffic;  // tensor/pipeline-parallel traffic, when there is any (evaluation included)
  if (g.tp > 1 || g.pp > 1) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (tp %.2f, pp %.2f MiB/step)", mib_per_step(run.grid->tp(), c.tp_traffic_at_start),
                  mib_per_step(run.grid->pp(), c.pp_traffic_at_start));
    mp_traffic = buf;
  }
  if (g.cp > 1 && c.timed_s > 0) {  // this rank's (the lead's) share of the step in the cp exchanges
    char buf[96];
    std::snprintf(buf, sizeof buf, "; context-parallel exchanges %.2f%% of step time", 100 * c.cp_exposed_s / c.timed_s);
    mp_traffic += buf;
  }
  if (run.ep_hooks && c.steps_this_run > 0) {  // the dispatch exchanges (evaluation included)
    const ExpertExchangeStats& x = run.ep_hooks->stats();
    const double steps = static_cast<double>(c.steps_this_run);
    const double step_s = c.timed_steps > 0 ? c.timed_s / static_cast<double>(c.timed_steps) : 0.0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "; expert-parallel all-to-all %.3f MiB/step sent per rank (+%.3f kept), %.2f%% of step time",
                  static_cast<double>(x.bytes_sent) / 1048576.0 / steps, static_cast<double>(x.bytes_kept) / 1048576.0 / steps,
                  step_s > 0 ? 100 * x.seconds / steps / step_s : 0.0);
    mp_traffic += buf;
  }
  // Predicted vs measured (train/step_time_report.h): a line after the summary (not under --quiet,
  // which prints the summary line only) and an event in metrics.jsonl.
  const double n = static_cast<double>(std::max<int64_t>(c.timed_steps, 1));
  TS_ASSIGN_OR_RETURN(const std::vector<RankStepTime> splits, gather_mean_splits(run));
  MeasuredStep m{c.timed_s / n, c.comm_wait_s / n, c.loader_wait_s / n, c.timed_steps};
  m.update_s = c.update_s / n;
  for (const RankStepTime& r : splits) m.busiest_compute_s = std::max(m.busiest_compute_s, r.compute_s - r.update_s);
  if (run.prediction && c.timed_steps > 0) {
    s.predicted_step_s = run.prediction->step_s;
    s.measured_step_s = m.step_s;
    if (run.lead) {
      nlohmann::json j = predicted_vs_measured_json(*run.prediction, m);
      j["event"] = "step_time_vs_predicted";
      j["step"] = run.state.step;
      j["hardware"] = run.hardware_name;
      TS_RETURN_IF_ERROR(run.metrics->write(j));
    }
  }
  if (run.lead && !run.opts.json_summary && c.timed_steps > 0)
    std::printf("%s: %lld steps, %.0f tok/s, loader wait %.2f%% of step time, exposed communication %.2f%%, "
                "data-parallel traffic %.2f MiB/step per rank (ring model)%s\n",
                s.stop_signal ? "stopped early (preempted)" : "done", (long long)run.state.step, s.tokens_per_s, 100 * s.loader_wait_fraction,
                100 * s.exposed_comm_fraction, mib_per_step(run.grid->param_replicas(), c.dp_traffic_at_start),
                mp_traffic.c_str());
  if (run.lead && !run.opts.json_summary && !run.opts.quiet && run.prediction && c.timed_steps > 0)
    std::printf("%s\n", predicted_vs_measured_line(*run.prediction, m).c_str());
  TS_RETURN_IF_ERROR(report_pipeline_idle(run, splits));
  TS_RETURN_IF_ERROR(report_stragglers(run, splits));
  TS_RETURN_IF_ERROR(report_moe_load(run));
  if (run.timeline.enabled()) {
    TS_RETURN_IF_ERROR(run.timeline.write_rank_file(run.opts.trace_path));
    TS_RETURN_IF_ERROR(checkpoint_world(run).barrier());
    if (run.lead) TS_RETURN_IF_ERROR(Timeline::merge(run.opts.trace_path, run.world.size()));
  }
  TS_RETURN_IF_ERROR(run.async_saver.wait());  // a save in flight must be complete before the run ends
  run.pruner.finish();                          // and the old checkpoints it replaced gone
  // "preempted" carries the checkpoint, which the launcher names in its message.
  if (s.stop_signal) run.heartbeat.beat("preempted", run.state.step, s.preempted_checkpoint);
  else run.heartbeat.beat("done", run.state.step);
  if (!s.lost_workers.empty()) {  // every survivor is done (its last checkpoint complete) before the job is ended
    TS_RETURN_IF_ERROR(checkpoint_world(run).barrier());
    if (checkpoint_world(run).rank() == 0) {
      std::string names;
      for (int r : s.lost_workers) names += (names.empty() ? "" : ", ") + std::to_string(r);
      const bool all_replaced = s.every_lost_worker_replaced();
      s.lost_report = (all_replaced ? "the run finished with every worker: spare(s) took the place(s) of the "
                                      "parameter-server worker(s) at world rank " + names + ", lost during it"
                                    : "the run finished without the parameter-server worker(s) at world rank " + names +
                                          ", lost during it") +
                      "; its checkpoint of step " + std::to_string(run.state.step) + " (" +
                      checkpoint::checkpoint_target(run.cfg.train.out_dir, run.state.step).final_dir() + ") is complete" +
                      (all_replaced && run.state.step >= run.cfg.train.steps ? "" : ": resume on the whole job with --resume");
    }
  }
  run.finished_ok = true;
  return s;
}

}  // namespace tessera
