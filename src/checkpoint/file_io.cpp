// POSIX implementation of the checkpoint file helpers (open/write/fsync/rename/pread).
#include "checkpoint/file_io.h"

#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/file_util.h"

namespace tessera::checkpoint {
namespace {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// The common fix for a failed write: space or permissions.
constexpr const char* kWriteFix = "; check free disk space and write permission, or choose another run directory";

}  // namespace

Result<DurableFile> DurableFile::create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(sys_error("cannot create", path) + kWriteFix);
  return DurableFile(path, fd);
}

DurableFile::DurableFile(DurableFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), bytes_(o.bytes_), writeback_started_(o.writeback_started_),
      space_limit_(o.space_limit_), kill_when_reached_(o.kill_when_reached_) {
  o.fd_ = -1;
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status DurableFile::write(const void* data, size_t bytes) {
  if (space_limit_ >= 0 && bytes_ + static_cast<int64_t>(bytes) > space_limit_) {
    // As a full disk behaves: what fits is written, then the write fails.
    const size_t fits = static_cast<size_t>(std::max<int64_t>(0, space_limit_ - bytes_));
    if (write_fully(fd_, data, fits)) bytes_ += static_cast<int64_t>(fits);
    if (kill_when_reached_) ::kill(::getpid(), SIGKILL);
    return io_error("cannot write '" + path_ + "': No space left on device (injected fault: disk_full)" + kWriteFix);
  }
  // In slices, each handed to the disk's write-back as soon as it is in the page cache: the disk
  // writes while the rest is checksummed and copied, and the final fsync waits only for the tail
  // (a write-then-fsync of the whole shard leaves the disk idle until the end).
  constexpr size_t kSlice = size_t{8} << 20;
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kSlice, bytes - done);
    if (!write_fully(fd_, p + done, n)) return io_error(sys_error("cannot write", path_) + kWriteFix);
    done += n;
    bytes_ += static_cast<int64_t>(n);
    if (bytes_ - writeback_started_ >= static_cast<int64_t>(kSlice)) {
      (void)::sync_file_range(fd_, writeback_started_, bytes_ - writeback_started_, SYNC_FILE_RANGE_WRITE);  // a hint: fsync decides
      writeback_started_ = bytes_;
    }
  }
  return {};
}

Status DurableFile::write_zeros(size_t bytes) {
  static const char zeros[256] = {};
  while (bytes > 0) {
    size_t n = bytes < sizeof zeros ? bytes : sizeof zeros;
    TS_RETURN_IF_ERROR(write(zeros, n));
    bytes -= n;
  }
  return {};
}

Status DurableFile::sync_and_close() {
  if (::fsync(fd_) != 0) return io_error(sys_error("cannot fsync", path_) + kWriteFix);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error(sys_error("cannot close", path_) + kWriteFix);
  return {};
}

Status write_file_durable(const std::string& path, const std::string& text) {
  TS_ASSIGN_OR_RETURN(DurableFile f, DurableFile::create(path));
  TS_RETURN_IF_ERROR(f.write(text.data(), text.size()));
  return f.sync_and_close();
}

Status fsync_dir(const std::string& path) {
  Status s = tessera::fsync_dir(path);
  if (!s.ok()) return io_error(s.message() + kWriteFix);
  return s;
}

Status rename_no_replace(const std::string& from, const std::string& to) {
  // renameat2(RENAME_NOREPLACE) makes "never overwrite" atomic; filesystems without it (some
  // network filesystems) fall back to check-then-rename, which is safe for one writer per step.
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  if (errno == EEXIST || errno == ENOTEMPTY)
    return invalid_argument("checkpoint '" + to + "' already exists and is never overwritten; "
                            "save under another step or move the existing directory away");
  if (errno != EINVAL && errno != ENOSYS) return io_error(sys_error("cannot rename '" + from + "' to", to) + kWriteFix);
  struct stat st;
  if (::stat(to.c_str(), &st) == 0)
    return invalid_argument("checkpoint '" + to + "' already exists and is never overwritten; "
                            "save under another step or move the existing directory away");
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return io_error(sys_error("cannot rename '" + from + "' to", to) + kWriteFix);
  return {};
}

Result<ReadOnlyFile> ReadOnlyFile::open(const std::string& path) {
  int fd = -1;
  int64_t size = 0;
  TS_RETURN_IF_ERROR(open_read_only(path, &fd, &size));
  return ReadOnlyFile(path, fd, size);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) {
  o.fd_ = -1;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status ReadOnlyFile::read_at(int64_t offset, size_t bytes, void* dst) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, bytes, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(sys_error("cannot read", path_));
    }
    if (n == 0)
      return corrupt_data("'" + path_ + "' is truncated: needed " + std::to_string(bytes) + " more bytes at offset " +
                          std::to_string(offset) + "; the checkpoint is damaged, resume from another one");
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += n;
  }
  return {};
}

}  // namespace tessera::checkpoint
