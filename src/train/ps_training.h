// Parameter-server runs (parallel.mode = "ps") in the trainer: the split of the world into workers
// and servers, each role's gradient strategy, and the server ranks' loop. Workers are ordinary
// dp x tp x pp training runs over the workers' group whose GradientSync pushes and pulls
// (ParamServerWorker); servers build the same TrainingRun (so set-up, resume and checkpoints run
// the trainer's code), holding every model-parallel position's chunks, and serve instead of
// stepping. See parallel/param_server.h.
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/gradient_sync.h"
#include "config/run_config.h"
#include "parallel/model_parallel_sync.h"
#include "train/trainer.h"

namespace tessera {

struct TrainingRun;

inline bool is_param_server_run(const RunConfig& cfg) { return cfg.parallel.mode == ParallelMode::ps; }
// Servers are the ps.servers ranks after the parallel.dp x tp x pp workers, spares the
// ps.spare_workers ranks after them (param_server_protocol.h).
inline bool is_param_server_rank(const RunConfig& cfg, int world_rank) {
  const int workers = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
  return is_param_server_run(cfg) && world_rank >= workers && world_rank < workers + cfg.ps.servers;
}
inline bool is_spare_worker_rank(const RunConfig& cfg, int world_rank) {
  return is_param_server_run(cfg) && world_rank >= cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp + cfg.ps.servers;
}

// The communicator the run's Grid spans: the world, or in a PS run this rank's role group (the
// workers, the servers or the spares; collective over the world, kept in run.ps_role). A server's
// grid is dp = ps.servers x 1 x 1 (its dp group is the servers' group), a spare's ps.spare_workers
// x 1 x 1; run.layout keeps the workers' pipeline shape and stage split, which the servers' stores follow.
Result<Communicator*> grid_world(TrainingRun& run);

// A worker's gradient strategy over its chunks (collective over the world with build_param_server:
// the links). groups: the worker's dp group and its replica's tp / pp / embedding groups.
Result<std::unique_ptr<GradientSync>> make_param_server_worker(TrainingRun& run, std::vector<ParamStore*> chunks,
                                                               const ModelParallelGroups& groups);

// The ranks whose memory counters a log step gathers: the grid's world, except on a worker in the
// async modes, where it is the worker alone (a collective every step would hold the workers in lockstep).
Communicator& step_stats_group(TrainingRun& run);

// Whether every rank stops after this step on a stop signal (preemption.h), and on which (0: go
// on): one all-reduce over the world, or in a parameter-server run the servers' agreement carried by
// their last answer (sync; the async modes do not stop on signals).
Result<int> agreed_stop_signal(TrainingRun& run);

// A server rank's model state: run.stores holds every position's chunks, position-major
// (ParamServer's order), initialised as the workers initialise them; this adds the ParamServer
// over its shards (run.server).
Status build_param_server(TrainingRun& run);

// After a worker's last step: the lead prints the parameter-server traffic of this invocation
// ("parameter server: pushed X MiB + pulled Y MiB per step per worker"); nothing elsewhere.
void report_param_server_traffic(TrainingRun& run);

// Async modes, a lost worker: at the steps where the workers meet (checkpoints, evaluations, the
// last step) the servers agree on the workers they dropped and tell the others in their answers
// (ParamServerOptions::meet_at). When that set grows, every live rank calls this there: the world
// without the lost (and on workers the dp group without them) replace the old ones for the run's
// collectives (checkpoint_world, eval_group): the run goes on and finishes without them. Collective
// over the live ranks. A worker passes no list: it reads the one its last answer carried.
Status follow_lost_workers(TrainingRun& run, std::vector<int> lost_world_ranks = {});
// The communicators of the run's checkpoints and evaluations: the survivors' once a worker is lost.
Communicator& checkpoint_world(TrainingRun& run);
Communicator& eval_group(TrainingRun& run);

// A server rank's whole run: answers the workers until they complete the last step, joining their
// checkpoints; then the usual end of run.
Result<TrainSummary> serve_parameters(TrainingRun& run);

// A spare rank (ps.spare_workers): stands by, joining the live ranks' collectives where the workers
// meet (server 0's SpareNotice says which), until a notice names the lost worker it replaces: then
// it takes that worker's data slice at the meeting step, receives the servers' parameters, joins
// that step's evaluation and checkpoint, and returns true (the caller trains on as the worker).
// false: the run ended while it stood by (it joined the last checkpoint; finish_training follows).
Result<bool> stand_by_as_spare(TrainingRun& run);

}  // namespace tessera
