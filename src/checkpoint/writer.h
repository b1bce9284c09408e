// Saving a checkpoint from many ranks, in three steps the trainer separates with barriers:
//   every rank:  CheckpointWriter w(target, rank); w.add(...)...; w.write_shard();
//   (gather every rank's w.record() to rank 0 as JSON: shard_record_to_json / _from_json; barrier)
//   rank 0:      write_manifest(target, records, config, state); finalize(target);
//                prune_checkpoints(run_dir, keep_last) (catalog.h)
// Everything is written into <run_dir>/checkpoints/step_<%08d>.tmp-<tag>/ and fsynced; finalize
// writes COMPLETE there last and renames the directory into place, so a directory named
// step_<%08d> is always complete. An existing checkpoint is never overwritten.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/format.h"
#include "checkpoint/live_copy.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tessera::checkpoint {

class DurableFile;

// Where one checkpoint is being saved. `staging_tag` names the temporary directory and must be
// the same on every rank: the trainer broadcasts rank 0's default_staging_tag().
struct CheckpointTarget {
  std::string run_dir;
  int64_t step = 0;
  uint64_t staging_tag = 0;

  std::string checkpoints_dir() const;  // <run_dir>/checkpoints
  std::string final_dir() const;        // <run_dir>/checkpoints/step_<%08d>
  std::string staging_dir() const;      // <run_dir>/checkpoints/step_<%08d>.tmp-<tag>
};

uint64_t default_staging_tag();  // this process's pid
CheckpointTarget checkpoint_target(std::string run_dir, int64_t step, uint64_t staging_tag = default_staging_tag());

// Collects this rank's pieces and writes them to shard_<rank>.bin in the staging directory.
class CheckpointWriter {
 public:
  CheckpointWriter(CheckpointTarget target, int rank);

  // Registers elements [global_offset, global_offset + numel) of the flattened tensor `key`.
  // `data` is not copied: it must stay valid and unchanged until write_shard returns (or freeze does).
  Status add(std::string key, DType dtype, std::vector<int64_t> global_shape, int64_t global_offset, int64_t numel,
             const void* data);
  // Writes and fsyncs the shard file (refusing early when the final checkpoint already exists).
  // May run on another thread than add() and freeze().
  Status write_shard();
  // Live saves, where the added buffers change soon after write_shard starts on another thread.
  // Call before add(): write_shard then first copies the added buffers into `scratch` at memory
  // speed (LiveCopy) and writes from there, so the owner's freeze() rarely has anything left to
  // copy. `scratch` must outlive write_shard; keeping it across saves keeps its pages mapped.
  void allow_freeze(std::vector<std::byte>& scratch);
  // For a write_shard running on another thread (after allow_freeze), from the thread that owns
  // the added buffers, before it changes them: what write_shard has not copied yet is copied here,
  // and the slice it is copying is waited for. After it returns the writer reads none of the
  // caller's buffers; the later the call, the less it copies. Returns the bytes copied.
  int64_t freeze();
  // Fault injection: write_shard fails as on a full disk after `bytes` of the shard (-1 = no
  // limit), or with kill_when_reached the process SIGKILLs itself there.
  void limit_space(int64_t bytes, bool kill_when_reached = false) {
    space_limit_ = bytes;
    kill_when_reached_ = kill_when_reached;
  }
  // Bytes of data registered so far (the shard is this plus alignment padding).
  int64_t pending_bytes() const { return pending_bytes_; }
  // What this rank wrote, for the manifest; valid after write_shard.
  const ShardRecord& record() const { return record_; }
  const CheckpointTarget& target() const { return target_; }

 private:
  CheckpointTarget target_;
  int rank_;
  struct Pending {
    TensorEntry entry;  // exactly one piece
    const void* data;
    size_t live_at;     // its offset in live_'s copy
  };
  // Writes piece i (checksum, fingerprint, bytes) slice by slice.
  Status write_piece(DurableFile& file, size_t i, TensorPiece& piece, DType dtype);
  std::vector<Pending> pending_;
  int64_t pending_bytes_ = 0;  // kept as pieces are added: a tp shard adds one per row
  std::unique_ptr<LiveCopy> live_;  // allow_freeze
  ShardRecord record_;
  bool written_ = false;
  int64_t space_limit_ = -1;
  bool kill_when_reached_ = false;
};

// Rank 0, after every rank's write_shard: merges the records (one per rank, ranks 0..N-1),
// checks that every tensor is covered exactly once and every shard file has its recorded size,
// then writes and fsyncs manifest.json. `config` and `state` must be JSON objects (null = empty).
Status write_manifest(const CheckpointTarget& target, const std::vector<ShardRecord>& records,
                      const nlohmann::json& config, const nlohmann::json& state);

// Rank 0, after write_manifest: writes COMPLETE, fsyncs, renames the staging directory to its
// final name and fsyncs the parent. Errors if the final directory exists.
Status finalize(const CheckpointTarget& target);

}  // namespace tessera::checkpoint
