// Pruning old checkpoints without making the save wait for the file system to free them: the
// COMPLETE markers go at once (so exactly the newest K checkpoints are complete when prune()
// returns), the files are deleted on a thread of this object's own.
#pragma once
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tessera::checkpoint {

class BackgroundPruner {
 public:
  BackgroundPruner() = default;
  ~BackgroundPruner() { finish(); }
  BackgroundPruner(const BackgroundPruner&) = delete;
  BackgroundPruner& operator=(const BackgroundPruner&) = delete;

  // prune_checkpoints(run_dir, keep_last), the deletion of the retired directories left running.
  // Waits first for the previous deletion; its failure is logged as a warning (the directory is
  // already incomplete, so no reader uses it), never returned: an old checkpoint that could not
  // be deleted must not stop training.
  Status prune(const std::string& run_dir, int keep_last);
  // Waits for the deletion in flight, if any.
  void finish();

 private:
  std::thread deleting_;
};

}  // namespace tessera::checkpoint
