// Asynchronous checkpoint saves (train.async_checkpoint): at the step boundary each rank copies
// its pieces of the training state into host memory (the only stall), then a background thread
// writes and fsyncs its shard while training goes on. The ranks meet through files, not
// collectives (a communicator is used from one thread): each rank's thread leaves
// record_<rank>.json in the staging directory; rank 0's thread waits for all of them, writes the
// manifest, removes the records, writes COMPLETE and renames the directory into place -- the same
// atomic protocol as a synchronous save, so a crash or full disk mid-save leaves the previous
// checkpoint the latest complete one. A failed save is reported (naming the rank) and training
// continues; the run's final save must succeed.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "model/config.h"
#include "train/fault_injection.h"
#include "train/train_checkpoint.h"

namespace tessera {

struct AsyncSaveOptions {
  int keep_last = 2;
  nlohmann::json run_config;
  double timeout_s = 300;   // rank 0 waits this long for the other ranks' records
  ShardWriteFault write_fault;  // fault injection: this rank's shard write cut short
  // Run by this rank's thread once the checkpoint is complete (fault injection damages shards here).
  std::function<Status(const std::string& checkpoint_dir)> after_complete;
  // The parameters and AdamW moments may be written from the live buffers instead of a copy: the
  // caller then calls wait_until_written() before it changes them (the next optimizer update).
  // start() takes that way when the previous save's write took under 0.8 x step_s (the time until
  // the update), so the wait is likely none; else (and for the first save) it copies.
  bool live_allowed = false;
  double step_s = 0;  // the last step's duration
};

class AsyncCheckpointer {
 public:
  AsyncCheckpointer() = default;
  ~AsyncCheckpointer();  // waits for the save in flight
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective over `comm` (one broadcast of the staging tag). Waits for this rank's previous save,
  // snapshots its pieces of `chunks` and starts writing them. An error here is this rank's set-up
  // failing (the snapshot could not be taken); a failure of the previous save is logged, not returned.
  Status start(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
               const std::vector<CheckpointChunk>& chunks, const TrainingState& state, AsyncSaveOptions options);
  // Waits for the save in flight (on rank 0: until it is complete or failed) and returns its
  // outcome on this rank; ok when there is none.
  Status wait();
  // Live saves: blocks until this rank's shard is written (the live buffers may change after it).
  // Returns the seconds it waited: the rest of the save's training stall.
  double wait_until_written();
  // Seconds start() spent waiting for the previous save to finish (saves coming faster than the
  // disk writes them), and taking the snapshot: with wait_until_written's, the training stall.
  double last_wait_s() const { return last_wait_s_; }
  double last_snapshot_s() const { return last_snapshot_s_; }
  bool last_live() const { return last_live_; }  // the last save wrote from the live buffers

 private:
  std::thread thread_;
  Status outcome_;                // written by the thread, read after join
  std::mutex mu_;
  std::condition_variable written_cv_;
  bool writing_live_ = false;     // a live save's shard is not yet written (guarded by mu_)
  std::vector<float> snapshot_;   // the copied state the thread writes
  std::unique_ptr<checkpoint::CheckpointWriter> writer_;
  double last_wait_s_ = 0, last_snapshot_s_ = 0;
  double write_s_ = 0;  // the last save's shard write (set by its thread, read after the join)
  bool last_live_ = false;
};

}  // namespace tessera
