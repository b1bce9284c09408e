// Checkpoint saving: per-rank shard files, the manifest from rank 0, and the atomic rename that
// makes the checkpoint visible only once it is complete.
#include "checkpoint/writer.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "checkpoint/file_io.h"
#include "checkpoint/fingerprint.h"
#include "checkpoint/live_copy.h"
#include "core/log.h"

namespace tessera::checkpoint {
namespace fs = std::filesystem;

// Shards hold raw little-endian elements; a big-endian host would need byte swapping here.
static_assert(std::endian::native == std::endian::little, "checkpoint shards are written little-endian");

namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

Status refuse_existing(const CheckpointTarget& t) {
  if (!exists(t.final_dir())) return {};
  return invalid_argument("checkpoint '" + t.final_dir() +
                          "' already exists and is never overwritten; save under another step or move the "
                          "existing directory away");
}

// The staging directory belongs to this save alone (its tag is unique), so a file left there by
// an earlier failed attempt of the same save may be replaced.
Status remove_stale(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return io_error("cannot remove stale '" + path + "': " + ec.message());
  return {};
}

}  // namespace

std::string CheckpointTarget::checkpoints_dir() const { return (fs::path(run_dir) / "checkpoints").string(); }
std::string CheckpointTarget::final_dir() const {
  return (fs::path(checkpoints_dir()) / step_dir_name(step)).string();
}
std::string CheckpointTarget::staging_dir() const {
  char tag[24];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(staging_tag));
  return final_dir() + ".tmp-" + tag;
}

uint64_t default_staging_tag() {
  // pid alone repeats across container restarts (the trainer is often pid 1 or so), and a
  // restarted run must not write into a crashed run's staging directory: add the clock.
  uint64_t pid = static_cast<uint64_t>(::getpid());
  uint64_t secs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  return (secs << 32) | (pid & 0xffffffffu);
}

CheckpointTarget checkpoint_target(std::string run_dir, int64_t step, uint64_t staging_tag) {
  return CheckpointTarget{std::move(run_dir), step, staging_tag};
}

CheckpointWriter::CheckpointWriter(CheckpointTarget target, int rank) : target_(std::move(target)), rank_(rank) {
  record_.rank = rank;
  record_.file = shard_file_name(rank);
}

Status CheckpointWriter::add(std::string key, DType dtype, std::vector<int64_t> global_shape, int64_t global_offset,
                             int64_t numel, const void* data) {
  if (written_) return invalid_argument("checkpoint writer: add('" + key + "') after write_shard; create a new writer");
  if (key.empty()) return invalid_argument("checkpoint writer: tensor key must not be empty");
  for (int64_t d : global_shape)
    if (d < 0) return invalid_argument("checkpoint writer: tensor '" + key + "' has a negative dimension");
  const int64_t total = shape_numel(global_shape);
  if (global_offset < 0 || numel < 0 || global_offset + numel > total) {
    return invalid_argument("checkpoint writer: tensor '" + key + "' range [" + std::to_string(global_offset) + ", " +
                            std::to_string(global_offset + numel) + ") is outside its " + std::to_string(total) +
                            " elements");
  }
  if (numel > 0 && data == nullptr)
    return invalid_argument("checkpoint writer: tensor '" + key + "' has no data pointer");
  TensorEntry e{std::move(key), dtype, std::move(global_shape), {}};
  e.pieces.push_back(TensorPiece{rank_, record_.file, 0, global_offset, numel, 0});
  const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  pending_.push_back(Pending{std::move(e), data, static_cast<size_t>(pending_bytes_)});
  pending_bytes_ += static_cast<int64_t>(bytes);
  if (live_) live_->add(data, bytes);
  return {};
}

namespace {
// The unit of reading, checksumming and writing: a shard streams through the page cache in slices.
constexpr size_t kSliceBytes = size_t{8} << 20;

size_t piece_bytes(const TensorEntry& e) {
  return static_cast<size_t>(e.pieces.front().numel) * dtype_size(e.dtype);
}
}  // namespace

void CheckpointWriter::allow_freeze(std::vector<std::byte>& scratch) {
  TS_CHECK(pending_.empty());
  live_ = std::make_unique<LiveCopy>(scratch);
}

int64_t CheckpointWriter::freeze() {
  TS_CHECK(live_ != nullptr);
  return static_cast<int64_t>(live_->freeze());
}

Status CheckpointWriter::write_piece(DurableFile& file, size_t i, TensorPiece& piece, DType dtype) {
  const size_t bytes = piece_bytes(pending_[i].entry), elem = dtype_size(dtype);
  ChecksumStream checksum;
  uint64_t fingerprint = 0;  // partial fingerprints add up (mod 2^64) over any split of the range
  for (size_t offset = 0; offset < bytes; offset += kSliceBytes) {
    const size_t n = std::min(kSliceBytes, bytes - offset);
    const void* slice = live_ ? static_cast<const void*>(live_->copied(pending_[i].live_at + offset))
                              : static_cast<const char*>(pending_[i].data) + offset;
    checksum.update(slice, n);
    fingerprint += fingerprint_elements(dtype, piece.global_offset + static_cast<int64_t>(offset / elem),
                                        static_cast<int64_t>(n / elem), slice);
    TS_RETURN_IF_ERROR(file.write(slice, n));
  }
  piece.checksum = checksum.digest();
  piece.fingerprint = fingerprint;
  return {};
}

Status CheckpointWriter::write_shard() {
  if (written_) return invalid_argument("checkpoint writer: write_shard called twice");
  if (live_) live_->run();  // first, while the owner computes: afterwards only the copy is read
  TS_RETURN_IF_ERROR(refuse_existing(target_));
  const std::string dir = target_.staging_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return io_error("cannot create checkpoint directory '" + dir + "': " + ec.message() +
                    "; check write permission and free space in the run directory");
  }
  const std::string path = (fs::path(dir) / record_.file).string();
  TS_RETURN_IF_ERROR(remove_stale(path));
  TS_ASSIGN_OR_RETURN(DurableFile file, DurableFile::create(path));
  file.limit_space(space_limit_, kill_when_reached_);

  auto write_all = [&]() -> Status {
    record_.entries.clear();
    for (size_t i = 0; i < pending_.size(); ++i) {
      TensorEntry e = pending_[i].entry;
      TensorPiece& piece = e.pieces.front();
      if (piece.numel == 0) {
        e.pieces.clear();  // keeps the key known on this rank without storing anything
      } else {
        const int64_t pad = (kPieceAlignment - file.bytes_written() % kPieceAlignment) % kPieceAlignment;
        TS_RETURN_IF_ERROR(file.write_zeros(static_cast<size_t>(pad)));
        piece.offset_in_file = file.bytes_written();
        TS_RETURN_IF_ERROR(write_piece(file, i, piece, e.dtype));
      }
      record_.entries.push_back(std::move(e));
    }
    record_.bytes = file.bytes_written();
    return file.sync_and_close();
  };
  Status s = write_all();
  if (!s.ok()) {
    fs::remove(path, ec);  // a partial shard helps nobody; the staging dir is ignored by readers anyway
    return s;
  }
  // The file's directory entry must be durable too before rank 0 writes the manifest.
  TS_RETURN_IF_ERROR(fsync_dir(dir));
  pending_.clear();
  pending_bytes_ = 0;
  written_ = true;
  return {};
}

Status write_manifest(const CheckpointTarget& target, const std::vector<ShardRecord>& records,
                      const nlohmann::json& config, const nlohmann::json& state) {
  // null (a default-constructed json) stands for "nothing": stored as an empty object.
  if (!config.is_object() && !config.is_null())
    return invalid_argument("write_manifest: config must be a JSON object, got " + std::string(config.type_name()));
  if (!state.is_object() && !state.is_null())
    return invalid_argument("write_manifest: state must be a JSON object, got " + std::string(state.type_name()));
  if (records.empty()) return invalid_argument("write_manifest: no shard records (need one per rank)");
  TS_RETURN_IF_ERROR(refuse_existing(target));

  std::vector<const ShardRecord*> by_rank(records.size(), nullptr);
  for (const ShardRecord& r : records) {
    if (r.rank < 0 || r.rank >= static_cast<int>(records.size()) || by_rank[r.rank]) {
      return invalid_argument("write_manifest: shard records must come from ranks 0.." +
                              std::to_string(records.size() - 1) + " exactly once each (got rank " +
                              std::to_string(r.rank) + " unexpectedly); gather one record from every rank");
    }
    by_rank[r.rank] = &r;
  }

  const std::string dir = target.staging_dir();
  Manifest m;
  m.step = target.step;
  m.world_size = static_cast<int>(records.size());
  if (!config.is_null()) m.config = config;
  if (!state.is_null()) m.state = state;
  m.state_fingerprint = state_fingerprint(m.state);
  std::vector<TensorEntry> all;
  for (const ShardRecord* r : by_rank) {
    if (r->file != shard_file_name(r->rank))
      return invalid_argument("write_manifest: rank " + std::to_string(r->rank) + " reports shard file '" + r->file +
                              "', expected '" + shard_file_name(r->rank) + "'");
    const std::string path = (fs::path(dir) / r->file).string();
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec) {
      return not_found("write_manifest: shard of rank " + std::to_string(r->rank) + " is missing: '" + path + "' (" +
                       ec.message() + "); every rank must finish write_shard before rank 0 writes the manifest, and "
                       "all ranks must share the run directory");
    }
    if (static_cast<int64_t>(size) != r->bytes) {
      return corrupt_data("write_manifest: '" + path + "' has " + std::to_string(size) + " bytes but rank " +
                          std::to_string(r->rank) + " wrote " + std::to_string(r->bytes) +
                          "; the shard was modified or the file system lost data; save again");
    }
    m.shards.push_back(ShardRecord{r->rank, r->file, r->bytes, {}});
    for (const TensorEntry& e : r->entries) {
      for (const TensorPiece& p : e.pieces)
        if (p.rank != r->rank || p.file != r->file)
          return invalid_argument("write_manifest: rank " + std::to_string(r->rank) + "'s record has a piece of '" +
                                  e.key + "' in another rank's file; records must come from CheckpointWriter");
      all.push_back(e);
    }
  }
  TS_ASSIGN_OR_RETURN(m.tensors, merge_entries(all));

  const std::string path = (fs::path(dir) / kManifestFile).string();
  TS_RETURN_IF_ERROR(remove_stale(path));
  TS_RETURN_IF_ERROR(write_file_durable(path, manifest_to_json(m).dump(1) + "\n"));
  return fsync_dir(dir);
}

Status finalize(const CheckpointTarget& target) {
  TS_RETURN_IF_ERROR(refuse_existing(target));
  const std::string dir = target.staging_dir();
  if (!exists((fs::path(dir) / kManifestFile).string()))
    return invalid_argument("finalize: '" + dir + "' has no manifest; call write_manifest first");
  const std::string marker = (fs::path(dir) / kCompleteFile).string();
  TS_RETURN_IF_ERROR(remove_stale(marker));
  TS_RETURN_IF_ERROR(write_file_durable(marker, "step " + std::to_string(target.step) + "\n"));
  TS_RETURN_IF_ERROR(fsync_dir(dir));
  TS_RETURN_IF_ERROR(rename_no_replace(dir, target.final_dir()));
  return fsync_dir(target.checkpoints_dir());
}

}  // namespace tessera::checkpoint
