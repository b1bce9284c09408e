// BackgroundPruner: retire old checkpoints now, delete their files on a thread.
#include "checkpoint/background_prune.h"

#include "checkpoint/catalog.h"
#include "core/log.h"

namespace tessera::checkpoint {

Status BackgroundPruner::prune(const std::string& run_dir, int keep_last) {
  finish();
  TS_ASSIGN_OR_RETURN(std::vector<std::string> retired, retire_old_checkpoints(run_dir, keep_last));
  if (retired.empty()) return {};
  deleting_ = std::thread([dirs = std::move(retired), keep_last] {
    for (const std::string& dir : dirs) {
      const Status s = delete_retired_checkpoint_dir(dir);
      if (s.ok())
        log_info("deleted old checkpoint '" + dir + "' (keeping the last " + std::to_string(keep_last) + ")");
      else
        log_warn(s.message() + " (it is no longer marked COMPLETE: nothing resumes from it)");
    }
  });
  return {};
}

void BackgroundPruner::finish() {
  if (deleting_.joinable()) deleting_.join();
}

}  // namespace tessera::checkpoint
