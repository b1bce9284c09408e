// Asynchronous checkpoint saves (train.async_checkpoint): at the step boundary each rank hands its
// pieces of the training state to a background thread that writes and fsyncs its shard while
// training goes on. The parameters and moments are written from the live buffers where only the
// optimizer update changes them; the update first copies what the writer has not reached yet
// (release_live_buffers), so the stall is that remainder's copy, not the whole state's. The ranks meet through files, not
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
  // caller then calls release_live_buffers() before it changes them (the next optimizer update),
  // which copies only what the writer has not reached by then.
  bool live_allowed = false;
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
  // Live saves, before the live buffers change: copies what the writer has not read yet and waits
  // for the slice it is reading (CheckpointWriter::freeze). Returns the seconds it took: the
  // rest of the save's training stall (0 when the shard was already written).
  double release_live_buffers();
  int64_t last_frozen_bytes() const { return last_frozen_bytes_; }  // what the last release copied
  // Seconds start() spent waiting for the previous save to finish (saves coming faster than the
  // disk writes them), and taking the snapshot: with release_live_buffers's, the training stall.
  double last_wait_s() const { return last_wait_s_; }
  double last_snapshot_s() const { return last_snapshot_s_; }
  bool last_live() const { return last_live_; }  // the last save wrote from the live buffers

 private:
  std::thread thread_;
  Status outcome_;                // written by the thread, read after join
  std::mutex mu_;
  bool writing_live_ = false;     // a live save's shard is not yet written (guarded by mu_)
  std::vector<float> snapshot_;   // the copied state the thread writes
  std::vector<std::byte> frozen_; // a live save's copy of the live buffers (LiveCopy), kept across saves
  std::unique_ptr<checkpoint::CheckpointWriter> writer_;
  double last_wait_s_ = 0, last_snapshot_s_ = 0;
  bool last_live_ = false;
  int64_t last_frozen_bytes_ = 0;
};

}  // namespace tessera
