// Durable POSIX file I/O for checkpoints: write + fsync of files and directories, and read-only
// positioned reads. Errors come back as Status naming the path and the system error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera::checkpoint {

// A file being written; created exclusively (an existing file is an error, never overwritten).
class DurableFile {
 public:
  static Result<DurableFile> create(const std::string& path);
  DurableFile(DurableFile&& other) noexcept;
  DurableFile& operator=(DurableFile&&) = delete;
  DurableFile(const DurableFile&) = delete;
  ~DurableFile();

  Status write(const void* data, size_t bytes);
  Status write_zeros(size_t bytes);
  // fsync, then close. The file is durable only once this returned ok.
  Status sync_and_close();
  int64_t bytes_written() const { return bytes_; }
  const std::string& path() const { return path_; }
  // Fault injection: writes past `bytes` fail as on a full disk (-1 = no limit); with
  // kill_when_reached, the process SIGKILLs itself there instead (a rank lost mid-save).
  void limit_space(int64_t bytes, bool kill_when_reached = false) {
    space_limit_ = bytes;
    kill_when_reached_ = kill_when_reached;
  }

 private:
  DurableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  int64_t writeback_started_ = 0;  // bytes handed to the disk's write-back so far (sync_file_range)
  int64_t space_limit_ = -1;
  bool kill_when_reached_ = false;
};

// Writes `text` to a new file at `path` and fsyncs it.
Status write_file_durable(const std::string& path, const std::string& text);
// tessera::fsync_dir (core/file_util.h) with the checkpoint writer's advice on failure.
Status fsync_dir(const std::string& path);
// Renames a directory; fails (never replaces) when `to` exists.
Status rename_no_replace(const std::string& from, const std::string& to);

// A file opened read-only; loading a checkpoint never modifies it.
class ReadOnlyFile {
 public:
  static Result<ReadOnlyFile> open(const std::string& path);
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&&) = delete;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  int64_t size() const { return size_; }
  // Reads exactly `bytes` at `offset`; a short read (truncated file) is an error.
  Status read_at(int64_t offset, size_t bytes, void* dst) const;

 private:
  ReadOnlyFile(std::string path, int fd, int64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace tessera::checkpoint
