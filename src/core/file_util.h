// Whole-file reads and crash-safe whole-file replacement (temp file beside the target, fsync,
// rename), shared by the token-shard, tokenizer, manifest, safetensors and checkpoint writers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

// Writes all of `bytes` to `fd`, retrying short writes and EINTR. False (errno set) on failure.
bool write_fully(int fd, const void* data, size_t bytes);

// Opens `path` read-only and reports its size; the caller closes *fd. A missing file is
// not_found, other failures io_error.
Status open_read_only(const std::string& path, int* fd, int64_t* size);

// fsync a directory, so that entries created or renamed in it survive a crash.
Status fsync_dir(const std::string& dir);

// A file written under a temporary name beside `path` (same file system, so the rename is atomic)
// and renamed over `path` by commit(): a reader sees the old file or the whole new one, never half.
// Dropped without commit() (an error on the way), the temporary file is removed.
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  Status write(const void* data, size_t bytes);
  // fsync, close, rename over the target, then fsync the directory (best effort: the new file is
  // already complete and in place).
  Status commit();

 private:
  AtomicFileWriter(std::string path, std::string tmp, int fd) : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Replaces `path` with `bytes` through an AtomicFileWriter.
Status write_file_atomic(const std::string& path, std::string_view bytes);

// A whole file's bytes. A missing file is not_found; other failures io_error, naming the path.
Result<std::string> read_file(const std::string& path);
Result<std::vector<uint8_t>> read_file_bytes(const std::string& path);

}  // namespace tessera
