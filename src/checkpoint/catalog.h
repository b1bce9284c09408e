// Finding and pruning checkpoints in a run directory. Only directories named step_<%08d> that
// hold a COMPLETE marker and a manifest count; staging (.tmp-*) and incomplete ones are skipped.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::checkpoint {

struct CheckpointInfo {
  std::string path;  // <run_dir>/checkpoints/step_<%08d>
  int64_t step = 0;
};

// Complete checkpoints, oldest first; empty when <run_dir>/checkpoints does not exist.
// With `warn`, logs a warning for each unfinished or incomplete checkpoint directory it skips.
Result<std::vector<CheckpointInfo>> list_complete_checkpoints(const std::string& run_dir, bool warn = false);

// The complete checkpoint with the highest step (warning about skipped ones); not_found if none.
Result<CheckpointInfo> find_latest_complete(const std::string& run_dir);

// Deletes all but the newest `keep_last` (>= 1) complete Tessera checkpoints (manifest with the
// Tessera format name; look-alikes are ignored). Deletes only directories holding nothing but
// files Tessera writes; one with other files is left in place with a warning. COMPLETE goes first, so an
// interrupted prune leaves an incomplete directory that readers skip, never a broken "complete" one.
Status prune_checkpoints(const std::string& run_dir, int keep_last);
// prune_checkpoints in two halves, for deleting off the caller's thread (background_prune.h): the
// first removes the COMPLETE markers of the checkpoints to delete (after it, exactly the newest
// `keep_last` are complete) and returns their directories; the second deletes one such directory.
Result<std::vector<std::string>> retire_old_checkpoints(const std::string& run_dir, int keep_last);
Status delete_retired_checkpoint_dir(const std::filesystem::path& dir);

// Removes the staging directories (step_<%08d>.tmp-*) that a crashed save left in
// <run_dir>/checkpoints, when they hold nothing but files Tessera writes; returns their paths. Call
// it only when no save of this run can be running (at the start of a run).
Result<std::vector<std::string>> remove_stale_staging(const std::string& run_dir);

// Renames a checkpoint that failed to load (corrupt or truncated shard) to <path>.corrupt (or
// .corrupt-2, ...): readers skip it, nothing is deleted, and the step can be saved again.
Result<std::string> set_aside_checkpoint(const std::string& path);

}  // namespace tessera::checkpoint
