// The run's data (run_data.h): manifest, loaders, a spare's move onto a lost worker's slice.
#include "train/run_data.h"

#include <string>

#include "core/log.h"
#include "train/training_run.h"

namespace tessera {

Status open_dataset(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  TS_ASSIGN_OR_RETURN(run.manifest, load_manifest(cfg.data.dir));
  TS_RETURN_IF_ERROR(verify_dataset(run.manifest, /*check_checksums=*/run.lead));
  if (run.manifest.vocab_size > cfg.model.vocab_size)
    return invalid_argument("dataset " + cfg.data.dir + " uses a tokenizer with vocabulary " +
                            std::to_string(run.manifest.vocab_size) + " but model.vocab_size is " +
                            std::to_string(cfg.model.vocab_size) + ": set model.vocab_size >= " +
                            std::to_string(run.manifest.vocab_size));
  return Status::ok_status();
}

namespace {

// Train and validation loaders over data slice `data_rank` of `data_ranks` (dp x ep ranks read
// different data; a spare parameter-server worker reads the slice of the worker it replaces).
Status open_loaders_for(TrainingRun& run, int data_rank, int data_ranks) {
  const RunConfig& cfg = run.cfg;
  const int B = static_cast<int>(cfg.train.micro_batch), T = static_cast<int>(cfg.data.seq_len);
  // Context parallelism: the ranks of a cp group read the same sequences, each its own positions
  // (under ring attention two balanced pieces of each).
  const SequenceChunk chunk{run.grid->coord().cp, run.grid->shape().cp,
                            run.layout.cp_mode == ContextParallelMode::ring};
  LoaderConfig lc;
  lc.B = B; lc.T = T; lc.seed = cfg.train.seed;
  lc.rank = data_rank; lc.world = data_ranks;
  lc.chunk = chunk;
  TS_ASSIGN_OR_RETURN(run.loader, DataLoader::open(run.manifest, "train", lc));
  if (cfg.train.eval_interval > 0) {
    auto v = EvalLoader::open(run.manifest, "val", B, T, data_rank, data_ranks, chunk);
    if (!v.ok()) {
      if (run.lead) log_warn("no validation loss: " + v.status().message());
    } else if (v->num_batches() == 0) {  // a mean over nothing is not a loss: never report one
      return invalid_argument("the validation split of " + cfg.data.dir + " holds no full evaluation batch of " +
                              std::to_string(data_ranks) + " replica(s) x train.micro_batch " + std::to_string(B) +
                              " sequences of data.seq_len " + std::to_string(T) +
                              " tokens: lower train.micro_batch or data.seq_len, prepare the data with a larger "
                              "--val-fraction, or set train.eval_interval = 0 to train without validation");
    } else {
      run.val_loader.emplace(std::move(v).value());
    }
  }
  return Status::ok_status();
}

}  // namespace

Status open_loaders(TrainingRun& run) {
  return open_loaders_for(run, run.grid->data_rank(), run.grid->shape().data_size());
}


Status take_worker_place(TrainingRun& run, int worker, int64_t step) {
  const RunConfig& cfg = run.cfg;
  const int workers = cfg.parallel.dp;  // whole replicas: worker w reads data slice w of dp
  // Every worker's stream advances one global batch per step from where the run (or resume) began,
  // which is where this rank's unused loader still stands.
  const LoaderPosition start = run.loader->position();
  const uint64_t windows = run.loader->windows_per_epoch();
  run.val_loader.reset();
  run.loader.reset();
  TS_RETURN_IF_ERROR(open_loaders_for(run, worker, workers));
  const uint64_t per_step = static_cast<uint64_t>(cfg.train.micro_batch * cfg.train.grad_accum) * static_cast<uint64_t>(workers);
  const uint64_t consumed = start.index + static_cast<uint64_t>(step - run.summary.first_step) * per_step;
  TS_RETURN_IF_ERROR(run.loader->restore(LoaderPosition{start.epoch + consumed / windows, consumed % windows}));
  run.state.step = step;
  run.state.loader = run.loader->position();
  run.summary.first_step = step;
  run.clock = RunClock{};
  run.clock.run_start = Timeline::now_s();
  run.heartbeat.beat("train", step);
  log_info("spare worker at world rank " + std::to_string(run.world.rank()) + ": taking the place of worker " +
           std::to_string(worker) + " after step " + std::to_string(step) + " (its data slice from stream position " +
           std::to_string(run.state.loader.index) + " of epoch " + std::to_string(run.state.loader.epoch) + ")");
  return Status::ok_status();
}

}  // namespace tessera
