// The run directory at set-up: a new run must not overwrite another run's checkpoints or metrics;
// --resume restores the latest complete checkpoint that loads (parameters, optimizer, data
// position), setting aside a corrupt one; unfinished saves of a crashed run are removed.
#include <filesystem>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "core/log.h"
#include "train/checkpoint_fingerprints.h"
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

Status no_checkpoint_to_resume(const std::string& out_dir) {
  return not_found("--resume: no complete checkpoint in " + out_dir + "/checkpoints; start without --resume");
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

// This rank's parts of one checkpoint: every owned part (the state is the same in each).
Status load_owned_parts(TrainingRun& run, const std::string& path) {
  for (const OwnedState& o : run.update().owned_state()) {
    TS_ASSIGN_OR_RETURN(run.state, load_training_checkpoint(path, run.cfg.model,
                                                            *run.stores[static_cast<size_t>(o.chunk)], o.optimizer));
  }
  return Status::ok_status();
}

// A checkpoint that cannot be read as saved (bad checksum, truncated or missing shard): the
// reason to fall back to an older one.
bool is_damage(const Status& s) {
  return s.code() == StatusCode::corrupt_data || s.code() == StatusCode::not_found ||
         s.code() == StatusCode::io_error;
}

// The newest complete checkpoint that every rank loads. Each rank reads only its own pieces, so
// a corrupt or truncated shard is found by the ranks that read it: all ranks agree on each
// attempt, and older ones are tried until one loads; then the damaged newer ones are set aside
// (renamed, never deleted), so the run can save those steps again. When none loads nothing is
// changed. Any other failure (e.g. a checkpoint of another model) ends the resume on every rank.
Status resume_latest(TrainingRun& run) {
  const std::string& out_dir = run.cfg.train.out_dir;
  auto listed = checkpoint::list_complete_checkpoints(out_dir, /*warn=*/run.lead);
  if (!listed.ok()) return listed.status();
  if (listed->empty()) return no_checkpoint_to_resume(out_dir);
  std::vector<std::string> damaged;  // newer than the one that loads; set aside only once one does
  for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
    const Status local = load_owned_parts(run, it->path);
    // [0]: this rank could not load it; [1]: for a reason other than damage (another model, a
    // config error): that is the user's to fix, so every rank fails instead of falling back.
    int32_t bad[2] = {local.ok() ? 0 : 1, local.ok() || is_damage(local) ? 0 : 1}, any_bad[2] = {0, 0};
    TS_RETURN_IF_ERROR(run.world.all_reduce(bad, any_bad, 2, DType::i32, ReduceOp::max));
    if (any_bad[1]) return bad[1] ? local : invalid_argument("another rank could not resume (see its message)");
    if (any_bad[0]) {
      if (!local.ok()) log_error("cannot load checkpoint " + it->path + ": " + local.message());
      damaged.push_back(it->path);
      continue;
    }
    // What every rank placed, summed over the ranks, must fingerprint as the saving layout recorded.
    // A mismatch stops the resume on every rank (no falling back): it is either damage that the
    // checksums missed or a loader bug, and neither may set checkpoints aside or train on.
    std::vector<CheckpointChunk> chunks;
    for (const OwnedState& o : run.update().owned_state())
      chunks.push_back({run.stores[static_cast<size_t>(o.chunk)].get(), o.optimizer, o.range});
    auto verified = verify_loaded_fingerprints(run.world, it->path, chunks);
    if (!verified.ok()) return verified.status();
    if (run.lead && *verified == 0)
      log_warn("checkpoint " + it->path + " has no fingerprints (saved by an older Tessera): loaded without the "
               "fingerprint check, only the checksums were verified");
    TS_RETURN_IF_ERROR(run.world.barrier());  // every rank is done reading before anything is renamed
    if (run.lead) {
      for (const std::string& bad_dir : damaged) {
        auto aside = checkpoint::set_aside_checkpoint(bad_dir);
        log_warn("checkpoint " + bad_dir + " is damaged (see the errors above); " +
                 (aside.ok() ? "moved to " + *aside : "could not move it aside: " + aside.status().message()) +
                 "; falling back to the previous checkpoint: " + it->path);
      }
      warn_resume_changes(it->path, run.run_json);
      log_info("resuming from " + it->path + " (step " + std::to_string(run.state.step) + ")");
    }
    return run.loader->restore(run.state.loader);
  }
  return corrupt_data("--resume: no checkpoint in " + out_dir + "/checkpoints loads (see the errors above); "
                      "restore one from a backup or start a new run");
}

}  // namespace

Status restore_latest_checkpoint(TrainingRun& run) { return resume_latest(run); }

namespace {

// A relaunch (TESSERA_RESUME=auto) before the first checkpoint starts over in the same directory.
bool relaunch_without_checkpoint(const TrainingRun& run) {
  if (!run.opts.resume_auto) return false;
  auto listed = checkpoint::list_complete_checkpoints(run.cfg.train.out_dir);
  return listed.ok() && listed->empty() && run.opts.launch_attempt > 0;
}

}  // namespace

Status check_run_directory(TrainingRun& run) {
  const std::string& out_dir = run.cfg.train.out_dir;
  auto listed = checkpoint::list_complete_checkpoints(out_dir);
  if (run.opts.resume) {
    if (!listed.ok()) return listed.status();
    if (listed->empty()) return no_checkpoint_to_resume(out_dir);
  }
  run.resumes = run.opts.resume || (run.opts.resume_auto && listed.ok() && !listed->empty());
  if (run.resumes || relaunch_without_checkpoint(run)) return Status::ok_status();
  return refuse_existing_run(out_dir);
}

Status prepare_run_directory(TrainingRun& run) {
  const std::string& out_dir = run.cfg.train.out_dir;
  if (run.lead) {  // no save of this run is running yet: a staging directory is a crashed save's
    auto removed = checkpoint::remove_stale_staging(out_dir);
    if (!removed.ok()) return removed.status();
    for (const std::string& dir : *removed) log_warn("removed unfinished checkpoint save " + dir);
  }
  if (run.resumes) return resume_latest(run);
  if (run.lead) {  // --resume needs an existing run: a refused one must leave no empty directory
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return io_error("cannot create train.out_dir " + out_dir + ": " + ec.message());
  }
  if (relaunch_without_checkpoint(run)) return Status::ok_status();
  return refuse_existing_run(out_dir);
}

}  // namespace tessera
