// The run directory at set-up: a new run must not overwrite another run's checkpoints or metrics;
// --resume restores the latest complete checkpoint (parameters, optimizer, data position).
#include <filesystem>

#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "core/log.h"
#include "train/training_run.h"

namespace fs = std::filesystem;

namespace tessera {
namespace {

// Resuming with other data, seed, batch or optimizer settings is allowed (e.g. a lower lr), but the
// run then no longer continues as the uninterrupted one would: say so, naming each changed key.
void warn_resume_changes(const std::string& checkpoint_dir, const nlohmann::json& now) {
  auto reader = checkpoint::open_checkpoint(checkpoint_dir);
  if (!reader.ok() || !reader->state().contains("run_config")) return;
  const std::string changed = describe_resume_changes(reader->state()["run_config"], now);
  if (!changed.empty())
    log_warn("resuming " + checkpoint_dir + " with changed settings (" + changed +
             "): training continues, but not as the uninterrupted run would have");
}

Status refuse_existing_run(const std::string& out_dir) {
  auto existing = checkpoint::list_complete_checkpoints(out_dir);
  if (existing.ok() && !existing->empty())
    return invalid_argument("train.out_dir " + out_dir + " already holds checkpoints of an earlier run: pass "
                            "--resume to continue it, or choose another train.out_dir");
  if (fs::exists(fs::path(out_dir) / "metrics.jsonl"))
    return invalid_argument("train.out_dir " + out_dir + " already holds the metrics of an earlier run (that "
                            "left no checkpoint): choose another train.out_dir or delete that directory");
  return Status::ok_status();
}

Status resume_latest(TrainingRun& run) {
  const std::string& out_dir = run.cfg.train.out_dir;
  auto latest = checkpoint::find_latest_complete(out_dir);
  if (!latest.ok())
    return not_found("--resume: no complete checkpoint in " + out_dir + "/checkpoints (" +
                     latest.status().message() + "); start without --resume");
  for (const OwnedState& o : run.sync->owned_state()) {  // every owned part; the state is the same in each
    TS_ASSIGN_OR_RETURN(run.state, load_training_checkpoint(latest->path, run.cfg.model,
                                                            *run.stores[static_cast<size_t>(o.chunk)], o.optimizer));
  }
  if (run.lead) warn_resume_changes(latest->path, run.run_json);
  return run.loader->restore(run.state.loader);
}

}  // namespace

Status prepare_run_directory(TrainingRun& run) {
  const std::string& out_dir = run.cfg.train.out_dir;
  if (run.opts.resume) return resume_latest(run);
  if (run.lead) {  // --resume needs an existing run: a refused one must leave no empty directory
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return io_error("cannot create train.out_dir " + out_dir + ": " + ec.message());
  }
  return refuse_existing_run(out_dir);
}

}  // namespace tessera
