// Parameter-server runs in the trainer: roles, each role's gradient strategy, the server loop.
#include "train/ps_training.h"


#include <algorithm>
#include <csignal>
#include <cstdio>

#include "checkpoint/writer.h"
#include "core/log.h"

#include "parallel/compression.h"
#include "parallel/param_server.h"
#include "parallel/param_server_worker.h"
#include "optim/lr_schedule.h"
#include "observe/progress.h"
#include "train/preemption.h"
#include "train/run_data.h"
#include "train/training_run.h"

namespace tessera {

namespace {

PsRoles roles_of(const RunConfig& cfg) {
  const ParallelConfig& p = cfg.parallel;
  return PsRoles(GridShape{p.dp, p.pp, p.tp}, cfg.ps.servers, cfg.ps.spare_workers);
}

// How workers compress their pushes (comm.compression; PowerSGD is refused by plan_parallel_layout).
Result<CompressionConfig> push_compression(const RunConfig& cfg) {
  const CompressionKind kind = cfg.comm.compression;
  return CompressionConfig{kind, cfg.comm.topk_ratio, cfg.comm.powersgd_rank};
}

// Spares that have taken places once `lost` are gone: the servers give them out in order while they
// last, one per lost rank (ParamServer::plan_replacements).
int spares_taken(const PsRoles& roles, size_t lost) { return std::min(roles.spares, static_cast<int>(lost)); }

// The ranks that do not evaluate once `lost` are gone: the lost, the servers and the spares still
// standing by; the evaluating group is the live workers and the spares in the lost ones' places.
std::vector<int> not_evaluating(const RunConfig& cfg, const std::vector<int>& lost) {
  const PsRoles roles = roles_of(cfg);
  std::vector<int> out = lost;
  for (int s = 0; s < roles.servers; ++s) out.push_back(roles.server_world_rank(s));
  for (int k = spares_taken(roles, lost.size()); k < roles.spares; ++k) out.push_back(roles.spare_world_rank(k));
  return out;
}

}  // namespace

Result<Communicator*> grid_world(TrainingRun& run) {
  if (!is_param_server_run(run.cfg)) return &run.world;
  const PsRoles roles = roles_of(run.cfg);
  const int rank = run.world.rank();
  const int role = roles.is_server(rank) ? 1 : roles.is_spare(rank) ? 2 : 0;
  TS_ASSIGN_OR_RETURN(run.ps_role, run.world.split(role, rank, role == 1 ? "ps_servers" : role == 2 ? "ps_spares" : "ps_workers"));
  if (role == 1) run.layout.grid = GridShape{roles.servers, 1, 1};
  if (role == 2) run.layout.grid = GridShape{roles.spares, 1, 1};
  return run.ps_role.get();
}

Result<std::unique_ptr<GradientSync>> make_param_server_worker(TrainingRun& run, std::vector<ParamStore*> chunks,
                                                               const ModelParallelGroups& groups) {
  const RunConfig& cfg = run.cfg;
  const PsConsistency consistency = cfg.ps.consistency;
  const PsRoles roles = roles_of(cfg);
  TS_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> links, make_ps_links(run.world, roles));
  std::unique_ptr<Communicator> solo;
  if (consistency != PsConsistency::sync) {
    Communicator& workers = run.grid->world();  // every worker: a collective split of the workers' group
    TS_ASSIGN_OR_RETURN(solo, workers.split(workers.rank(), 0, "solo"));
  }
  TS_ASSIGN_OR_RETURN(const CompressionConfig compression, push_compression(cfg));
  const int rank = run.world.rank();
  auto worker = std::make_unique<ParamServerWorker>(
      *run.backend, roles, consistency, std::move(links[static_cast<size_t>(roles.link_of(rank))]), groups, std::move(solo),
      std::move(chunks), cfg.optim.grad_clip, compression);
  worker->set_stop_signal_source(run.opts.stop_signal);
  worker->set_standby(roles.is_spare(rank));
  return std::unique_ptr<GradientSync>(std::move(worker));
}

Result<int> agreed_stop_signal(TrainingRun& run) {
  if (!is_param_server_run(run.cfg)) return agree_on_stop_signal(run.world, run.opts.stop_signal);
  const auto* worker = dynamic_cast<const ParamServerWorker*>(run.sync.get());
  return worker ? worker->agreed_stop_signal() : 0;
}

Communicator& step_stats_group(TrainingRun& run) {
  const auto* worker = dynamic_cast<const ParamServerWorker*>(run.sync.get());
  return worker && worker->solo() ? *worker->solo() : run.grid->world();
}

void report_param_server_traffic(TrainingRun& run) {
  const auto* worker = dynamic_cast<const ParamServerWorker*>(run.sync.get());
  const int64_t steps = run.clock.steps_this_run;
  if (!worker || !run.lead || run.opts.json_summary || steps == 0) return;
  const double mib = 1048576.0 * static_cast<double>(steps);
  if (*clear_progress_line()) std::printf("\n");  // after the progress line
  std::printf("parameter server: pushed %.3f MiB + pulled %.3f MiB per step per worker (%s, %d server(s))\n",
              static_cast<double>(worker->pushed_bytes()) / mib, static_cast<double>(worker->pulled_bytes()) / mib,
              std::string(ps_consistency_name(run.cfg.ps.consistency)).c_str(), run.cfg.ps.servers);
  std::fflush(stdout);
}

Communicator& checkpoint_world(TrainingRun& run) { return run.world_survivors ? *run.world_survivors : run.world; }
Communicator& eval_group(TrainingRun& run) { return run.dp_survivors ? *run.dp_survivors : run.grid->param_replicas(); }

Status follow_lost_workers(TrainingRun& run, std::vector<int> lost) {
  const auto* worker = dynamic_cast<const ParamServerWorker*>(run.sync.get());
  if (worker && lost.empty()) lost = worker->lost_workers();
  if (lost.empty() || lost == run.summary.lost_workers) return Status::ok_status();
  std::string names;
  for (int r : lost) names += (names.empty() ? "" : ", ") + std::to_string(r);
  const GridShape& g = run.grid->shape();
  if (worker && (g.tp > 1 || g.pp > 1))
    return comm_error("the parameter servers lost worker(s) (world rank " + names + "): a replica of tp x pp workers "
                      "cannot go on without one; restart the job from its last checkpoint with --resume");
  // The survivors' communicators made at an earlier loss span a worker lost since: freed without it.
  for (auto* c : {&run.world_survivors, &run.dp_survivors})
    if (*c) (*c)->abandon();
  TS_ASSIGN_OR_RETURN(run.world_survivors, run.world.without(lost, "survivors"));
  // Whole replicas: the evaluating ranks are the live workers and the spares in their places.
  if (worker && !worker->standby()) {
    TS_ASSIGN_OR_RETURN(run.dp_survivors, run.world.without(not_evaluating(run.cfg, lost), "evaluating"));
  }
  const PsRoles roles = roles_of(run.cfg);
  std::string spares;  // the spares taking places at this loss (the servers' order)
  for (int k = spares_taken(roles, run.summary.lost_workers.size()); k < spares_taken(roles, lost.size()); ++k)
    spares += (spares.empty() ? "" : ", ") + std::to_string(roles.spare_world_rank(k));
  run.summary.lost_workers = lost;
  run.summary.spares_used = spares_taken(roles, lost.size());
  if (run.world_survivors->rank() == 0)
    log_warn("lost worker(s) at world rank " + names + " after step " + std::to_string(run.state.step) +
             (spares.empty() ? ": the parameter servers go on; checkpoints, evaluations and the end of the run continue with the " +
                                   std::to_string(run.world_survivors->size()) + " other ranks"
                             : ": the spare(s) at world rank " + spares + " take the lost place(s) at this step; the "
                               "parameter servers go on"));
  return Status::ok_status();
}

Result<bool> stand_by_as_spare(TrainingRun& run) {
  auto* spare = static_cast<ParamServerWorker*>(run.sync.get());  // make_param_server_worker made it, standing by
  for (;;) {
    // tessera launch watches every rank's heartbeat: a spare beats while it waits (once a second).
    double last_beat = 0;
    TS_ASSIGN_OR_RETURN(const SpareNotice n, spare->next_notice([&run, &last_beat] {
                          if (Timeline::now_s() - last_beat < 1.0) return;
                          last_beat = Timeline::now_s();
                          run.heartbeat.beat("standby", run.state.step);
                        }));
    run.state.step = n.step;
    if (n.replaces >= 0) spare->set_standby(false);  // evaluates from this step on (follow_lost_workers)
    TS_RETURN_IF_ERROR(follow_lost_workers(run, lost_ranks(n.lost)));
    if (n.replaces >= 0) {
      TS_RETURN_IF_ERROR(take_worker_place(run, static_cast<int>(n.replaces), n.step));
      TS_RETURN_IF_ERROR(spare->broadcast_parameters());  // the servers' answer: their current parameters
      TS_ASSIGN_OR_RETURN(const bool last, finish_step(run, n.step >= run.cfg.train.steps));
      return !last;
    }
    if (n.checkpoint) TS_RETURN_IF_ERROR(save_run_checkpoint(run, n.last != 0));
    if (n.last) return false;
  }
}

Status build_param_server(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  const PsRoles roles = roles_of(cfg);
  const size_t V = run.stores.size() / static_cast<size_t>(roles.positions());
  std::vector<std::vector<ParamStore*>> positions(static_cast<size_t>(roles.positions()));
  for (size_t i = 0; i < run.stores.size(); ++i) positions[i / V].push_back(run.stores[i].get());
  TS_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> links, make_ps_links(run.world, roles));
  TS_ASSIGN_OR_RETURN(const CompressionConfig compression, push_compression(cfg));
  run.server = std::make_unique<ParamServer>(*run.backend, roles, roles.server_index(run.world.rank()), run.grid->dp(),
                                              std::move(links), std::move(positions), cfg.optim, compression);
  return Status::ok_status();
}

Result<TrainSummary> serve_parameters(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  ParamServer& server = *run.server;  // build_param_server made it
  ParamServerOptions o;
  o.consistency = cfg.ps.consistency;
  o.staleness = cfg.ps.staleness;
  o.grad_clip = cfg.optim.grad_clip;
  o.first_step = run.state.step;
  // The workers stop where after_step does: the last step, or --stop-after steps into this invocation.
  o.final_step = cfg.train.steps;
  if (run.opts.stop_after_steps > 0) o.final_step = std::min(o.final_step, o.first_step + run.opts.stop_after_steps);
  // A silent worker is dropped well before its own waits (train.timeout_s) would fail it.
  o.dead_after_s = cfg.train.timeout_s / 2;
  o.lr = [&cfg](int64_t step) { return lr_at(step - 1, cfg.optim, cfg.train.steps); };
  const int64_t interval = cfg.train.checkpoint_interval, final_step = o.final_step;
  o.checkpoint_at = [interval, final_step](int64_t step) {
    return (interval > 0 && step % interval == 0) || step == final_step;
  };
  // The workers' after_step saves with the same collectives over the world; world rank 0 (a worker)
  // writes the manifest and the state (step, data position), each server its shard.
  o.checkpoint = [&run, &server](int64_t step, bool last) {
    run.state.step = step;
    run.state.adam_steps = server.optimizer_steps();
    return save_run_checkpoint(run, last);
  };
  const volatile std::sig_atomic_t* received = run.opts.stop_signal;
  if (received) o.stop_requested = [received] { return static_cast<int>(*received); };
  // TESSERA_FAULT / planted faults name a server by world rank and a worker step.
  o.on_step = [&run](int64_t step) {
    run.heartbeat.beat("train", step);  // tessera launch watches every rank's progress
    return run.hooks->at(StepPoint::step_begin, step, run.store());
  };
  o.log_path = cfg.train.out_dir + "/ps_server" + std::to_string(run.grid->coord().dp) + ".jsonl";
  const int64_t eval_interval = cfg.train.eval_interval;
  o.meet_at = [checkpoint_at = o.checkpoint_at, eval_interval](int64_t step) {
    return checkpoint_at(step) || (eval_interval > 0 && step % eval_interval == 0);
  };
  o.on_lost = [&run](const std::vector<int>& lost) { return follow_lost_workers(run, lost); };
  TS_RETURN_IF_ERROR(server.serve(o));
  run.state.step = o.final_step;
  if (server.stop_signal() != 0) {  // preempted: the workers' stop_preempted saved this step with us
    run.state.step = server.stopped_after();
    run.summary.stop_signal = server.stop_signal();
    run.summary.preempted_checkpoint = checkpoint::checkpoint_target(cfg.train.out_dir, run.state.step).final_dir();
  }
  return finish_training(run);
}

}  // namespace tessera
