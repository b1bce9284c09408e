// TrainingRun: everything one `tessera train` invocation holds between steps (grid, data, model,
// gradient strategy, runner, metrics, state), built by set_up_training and consumed by the step
// loop in trainer.cpp. Split by concern: training_setup.cpp builds it, after_step.cpp does the
// per-step bookkeeping (metrics, eval, checkpoints), run_directory.cpp handles out_dir and resume.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "comm/grid.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "parallel/gradient_sync.h"
#include "data/sample_ledger.h"
#include "parallel/compression_sync.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/local_sgd.h"
#include "parallel/param_server.h"
#include "train/anomaly_guard.h"
#include "train/async_checkpoint.h"
#include "train/fault_injection.h"
#include "train/heartbeat_file.h"
#include "train/matmul_peak.h"
#include "train/moe_report.h"
#include "train/numerics_fault.h"
#include "observe/metrics.h"
#include "parallel/micro_batch_runner.h"
#include "plan/parallel_layout.h"
#include "plan/step_time_model.h"
#include "config/run_config.h"
#include "train/step_hooks.h"
#include "observe/timeline.h"
#include "train/train_checkpoint.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace tessera {

// Step-time accounting of this invocation (the first step warms caches and is not timed).
struct RunClock {
  double run_start = 0;
  double timed_s = 0, loader_wait_s = 0, exposed_s = 0;
  double comm_wait_s = 0;  // blocked in the steps' collectives (StepResult::comm_wait_s)
  double cp_exposed_s = 0;  // in the context-parallel exchanges (ContextParallel::exposed_s)
  double ep_exchange_s = 0;    // in the expert-parallel exchanges
  double pipeline_wait_s = 0;  // blocked on other pipeline stages (MicroBatchRunner::neighbour_wait_s)
  double update_s = 0;         // in the optimizer update (StepResult::update_s)
  int64_t timed_steps = 0, steps_this_run = 0;
  // traffic_bytes() of the dp, tp and pp communicators when the first step began
  uint64_t dp_traffic_at_start = 0, tp_traffic_at_start = 0, pp_traffic_at_start = 0;
};

struct TrainingRun {
  TrainingRun(const RunConfig& cfg, Communicator& world, const TrainerOptions& opts);
  // On an error the peers may still sit in a collective, and freeing a communicator's heartbeat
  // window is collective (MPI_Win_free): an unfinished run abandons its grid first (see
  // Communicator::abandon), so this rank reaches abort_job instead of hanging. A parameter-server
  // run abandons its exchange and role group first (ps_error_path.h).
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  StepParts step_parts();
  ParamStore& store() { return *stores.front(); }
  // Ranks reading different data (dp x ep): the global batch's divisor.
  int64_t data_ranks() const { return grid->shape().data_size(); }
  double tokens_per_step() const;

  const RunConfig& cfg;
  Communicator& world;
  const TrainerOptions opts;
  std::unique_ptr<Communicator> ps_role;  // parallel.mode = "ps": this rank's role group, which the grid spans
  const bool lead;                 // world rank 0: prints, writes metrics
  const nlohmann::json run_json;   // the resolved config, as checkpoints store it
  std::unique_ptr<Grid> grid;      // declared first: destroyed last (abandoned first on error, see above)
  std::unique_ptr<Communicator> embedding_group;  // tied embeddings over pp: first + last stage
  ParallelLayout layout;           // dp x tp x pp, schedule and stage split
  bool finished_ok = false;
  // Set-up loads a checkpoint over the parameters (decided by check_run_directory before the model
  // is built): the seeded initialisation is skipped (GPT-2 at tp 2: 3.7 s of a 14 s resume).
  bool resumes = false;
  int threads = 1;
  std::optional<MatmulPeak> peak;  // sgemm peak of this rank's threads: measured at set-up, again if a step beats it
  // The step-time model's prediction for this run (train/step_time_report.h) and the hardware it used;
  // none for a parameter-server run (not modelled).
  std::optional<StepTimePrediction> prediction;
  std::string hardware_name;
  MoeRunLoad moe_load;  // lead: a MoE model's expert load summed over the logged steps (end-of-run report)
  std::unique_ptr<Backend> backend;  // train.device: runs every op of this rank's models
  DatasetManifest manifest;
  std::unique_ptr<DataLoader> loader;
  std::optional<EvalLoader> val_loader;
  std::vector<std::unique_ptr<ParamStore>> stores;  // one per model chunk on this rank (V if interleaved)
  std::unique_ptr<TensorParallelHooks> tp_hooks;    // tp > 1: the models' all-reduces over grid->tp()
  std::unique_ptr<ContextParallel> cp_hooks;        // cp > 1: the models' exchanges over grid->cp()
  std::unique_ptr<ExpertParallel> ep_hooks;         // ep > 1: the MoE layers' exchanges over grid->ep()
  double cp_exposed_s() const { return cp_hooks ? cp_hooks->exposed_s() : 0.0; }
  double ep_exchange_s() const { return ep_hooks ? ep_hooks->stats().seconds : 0.0; }
  double pipeline_wait_s() const { return runner ? runner->neighbour_wait_s() : 0.0; }
  std::unique_ptr<GradientSync> sync;   // a training rank's gradient strategy (null on a parameter server)
  std::unique_ptr<ParamServer> server;  // parallel.mode = "ps": a server rank's shards (null elsewhere)
  // Parameter server, async modes, once a worker is lost (ps_training.h, follow_lost_workers): the
  // world and (on workers) the dp group without the lost workers; later collectives run on them.
  std::unique_ptr<Communicator> world_survivors, dp_survivors;
  // What this rank updates and saves: its strategy's update half, or the server's shards.
  ParameterUpdate& update() { return sync ? static_cast<ParameterUpdate&>(*sync) : *server; }
  // train.local_steps > 0: each model chunk's local SGD (inside `sync`) and its checkpoint key prefix.
  struct LocalSgdChunk {
    LocalSgd* sync;
    std::string key_prefix;
  };
  std::vector<LocalSgdChunk> local_sgd;
  // comm.compression with state between steps: each model chunk's state (null: none; a
  // parameter-server worker's covers all its chunks, at chunk 0) and its checkpoint key prefix.
  struct CompressionChunk {
    std::function<std::vector<CompressionState>()> state;
    std::string key_prefix;
  };
  std::vector<CompressionChunk> compression;
  std::optional<SampleLedgerWriter> ledger;  // train.sample_ledger on a replica's first rank
  Status ledger_status;                      // its first failure (checked after each step)
  std::unique_ptr<MicroBatchRunner> runner;
  std::unique_ptr<StepHooks> hooks;  // the FaultInjection below (TESSERA_FAULT)
  FaultInjection* faults = nullptr;  // TESSERA_FAULT (none in normal runs)
  std::unique_ptr<NumericsFaultProbe> numerics_faults;  // TESSERA_FAULT nan / spike on this rank (else null)
  std::unique_ptr<AnomalyGuard> guard;  // train.on_anomaly other than "off" (null on a parameter server)
  std::set<int64_t> rolled_back_steps;  // steps a rollback skips when the run reaches them again
  HeartbeatFile heartbeat;           // TESSERA_HEARTBEAT_DIR (set by tessera launch)
  AsyncCheckpointer async_saver;     // train.async_checkpoint
  checkpoint::BackgroundPruner pruner;  // synchronous saves' deletion of old checkpoints
  std::unique_ptr<LossScaler> scaler;  // train.precision = fp16
  Timeline timeline;
  std::optional<MetricsWriter> metrics;
  TrainingState state;
  TrainSummary summary;
  RunClock clock;
};

// Builds the run: agreement checks, threads, data, model, gradient strategy, resume, metrics.
// Every rank returns the same ok/error for the collective parts.
Result<std::unique_ptr<TrainingRun>> set_up_training(const RunConfig& cfg, Communicator& world,
                                                     const TrainerOptions& opts);

// Snapshot of the counters a step's timing reads, taken before the step.
struct StepStart {
  double t0, loader_wait, exposed_wait, cp_exposed, ep_exchange, pipeline_wait;
};
StepStart start_step_clock(const TrainingRun& run);

// After a step: checks, state, timing, metrics and progress, evaluation, checkpoint cadence.
// Returns true when the run must stop: last step, --stop-after reached, or a stop signal (preemption.h;
// then with a checkpoint of this step and summary.stop_signal set).
Result<bool> after_step(TrainingRun& run, const StepResult& r, float lr, const StepStart& start);
// after_step's part that the run's ranks take together: lost parameter-server workers followed, the
// evaluation, the stop agreement and the checkpoint of run.state.step (planned_last: the run's last).
Result<bool> finish_step(TrainingRun& run, bool planned_last);

// A checkpoint of run.state, as after_step takes it (synchronous or train.async_checkpoint; last:
// complete on return). The parameter server's ranks join the workers' saves through it.
Status save_run_checkpoint(TrainingRun& run, bool last);

// End of the run: summary line, timeline files; marks the run finished.
Result<TrainSummary> finish_training(TrainingRun& run);

// After a checkpoint was loaded into the stores, optimizer and loader (at set-up, or a rollback):
// the strategies' state saved beside them (local SGD, compression). Collective over the world.
Status restore_strategy_state(TrainingRun& run);
// train.sample_ledger: a new invocation in the ledger from run.state.step (voiding later records).
Status start_ledger_invocation(TrainingRun& run);
// The newest complete checkpoint that every rank loads (falling back past damaged ones), into the
// stores, optimizer, loader and run.state (run_directory.cpp).
Status restore_latest_checkpoint(TrainingRun& run);

// Before the model is built (seconds for a large one): whether set-up resumes (run.resumes: --resume,
// or TESSERA_RESUME=auto with a complete checkpoint there), and the refusals that need no model: a new
// run in a directory holding another run's checkpoints or metrics, --resume without a checkpoint.
Status check_run_directory(TrainingRun& run);

// Run directory and resume (run_directory.cpp), after check_run_directory: refuses to overwrite
// another run, or restores the latest complete checkpoint into the store, optimizer and loader.
Status prepare_run_directory(TrainingRun& run);

}  // namespace tessera
