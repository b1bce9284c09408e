// The trainer: builds the model, optimizer, data loaders and (for dp > 1) data parallelism from a
// RunConfig, then runs training steps with logging, evaluation and checkpoints. One process is a
// world of one; under mpirun every rank runs the same trainer on its slice of each global batch.
// The pieces: training_run.h (set-up and per-step bookkeeping), train_step.h (the step itself).
#pragma once
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "config/run_config.h"

namespace tessera {

struct TrainerOptions {
  bool resume = false;          // continue from the latest complete checkpoint in out_dir
  // TESSERA_RESUME=auto (set by tessera launch): resume when out_dir holds a complete checkpoint,
  // else start fresh -- also in a run directory a failed attempt left without any checkpoint.
  bool resume_auto = false;
  int launch_attempt = 0;  // TESSERA_LAUNCH_ATTEMPT (tessera launch): 0 for the first start
  std::string heartbeat_dir;  // TESSERA_HEARTBEAT_DIR: where this rank beats for the launcher ("" = off)
  std::string fault_spec;     // TESSERA_FAULT: planted faults for the drills ("" = none)
  std::string hardware_file;  // TESSERA_HARDWARE: the hardware file when train.hardware is "" ("" = measure)
  bool quiet = false;           // no progress lines (the final summary is still printed)
  bool json_summary = false;    // print no summary: the caller prints TrainSummary as JSON (--json)
  std::string trace_path;       // Chrome trace-event JSON of the whole job ("" = off)
  int64_t stop_after_steps = -1;  // stop (with a checkpoint) after this many steps of this invocation
  bool verify_replicas = false;   // after every step, check that all dp replicas hold bitwise-equal parameters
  int rank_on_node = 0;           // this rank among them (MpiRuntime::rank_on_this_node): picks its GPU
  int ranks_per_node = 1;         // ranks sharing this machine's cores (MpiRuntime::ranks_on_this_node)
  // PreemptionSignals::received() (train/preemption.h): a stop signal makes every rank stop after the
  // same step with a checkpoint of it. Null (on every rank): signals are not watched.
  const volatile std::sig_atomic_t* stop_signal = nullptr;
};

struct TrainSummary {
  int64_t first_step = 0;       // step the run started from (after resume)
  int64_t last_step = 0;        // steps completed in total
  std::vector<float> losses;    // train loss of each step run by this invocation
  double final_val_loss = -1;   // -1 when no evaluation ran
  double tokens_per_s = 0;      // mean over this invocation's steps (excluding the first)
  double loader_wait_fraction = 0;  // loader wait time / step time
  double exposed_comm_fraction = 0;  // dp wait not hidden behind backward / step time
  // The step-time model's prediction (train.hardware, or measured at start) and the measured mean
  // step (rank 0); 0 when not predicted (parameter server) or no step was timed.
  double predicted_step_s = 0, measured_step_s = 0;
  int stop_signal = 0;               // preempted: the signal that stopped the run early (0: not preempted)
  std::string preempted_checkpoint;  // preempted: the checkpoint of the last step, complete
  // Parameter server, async modes: world ranks of the workers lost during the run, which finished
  // without them or with spares in their places (the job must then be ended on purpose: MPI cannot
  // finish it; see ps_training.h).
  std::vector<int> lost_workers;
  int spares_used = 0;  // of ps.spare_workers: the spares that took lost workers' places
  bool every_lost_worker_replaced() const { return spares_used == static_cast<int>(lost_workers.size()); }
  std::string lost_report;           // on the survivors' first rank only: what to tell the user
};

// world: the communicator of all ranks (a world of one without mpirun).
Result<TrainSummary> run_training(const RunConfig& cfg, Communicator& world, const TrainerOptions& opts);

}  // namespace tessera
