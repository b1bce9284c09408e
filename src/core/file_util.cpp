// POSIX implementation of the whole-file helpers (write loop, temp file + fsync + rename, reads).
#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessera {
namespace {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// Reads all of `path` into a byte container (std::string or std::vector<uint8_t>).
template <typename Bytes>
Result<Bytes> read_whole(const std::string& path) {
  int fd = -1;
  int64_t size = 0;
  TS_RETURN_IF_ERROR(open_read_only(path, &fd, &size));
  Bytes bytes(static_cast<size_t>(size), 0);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, reinterpret_cast<char*>(bytes.data()) + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string msg = n < 0 ? sys_error("cannot read", path)
                              : "'" + path + "' shrank while being read (expected " + std::to_string(bytes.size()) +
                                    " bytes); is another process rewriting it?";
      ::close(fd);
      return io_error(msg);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace

Status open_read_only(const std::string& path, int* fd, int64_t* size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    if (errno == ENOENT) return not_found("missing file '" + path + "'");
    return io_error(sys_error("cannot open", path) + "; check read permission");
  }
  struct stat st;
  if (::fstat(*fd, &st) != 0) {
    std::string msg = sys_error("cannot stat", path);
    ::close(*fd);
    *fd = -1;
    return io_error(msg);
  }
  *size = static_cast<int64_t>(st.st_size);
  return {};
}

bool write_fully(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

Status fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(sys_error("cannot open directory", dir));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) return io_error(sys_error("cannot fsync directory", dir));
  return {};
}

Result<AtomicFileWriter> AtomicFileWriter::create(const std::string& path) {
  // The pid keeps two processes writing the same target from sharing a temporary file.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(sys_error("cannot create", tmp) + " (is the output directory writable?)");
  return AtomicFileWriter(path, std::move(tmp), fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), committed_(o.committed_) {
  o.fd_ = -1;
  o.committed_ = true;  // the moved-from object owns no temporary file any more
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

Status AtomicFileWriter::write(const void* data, size_t bytes) {
  if (!write_fully(fd_, data, bytes)) return io_error(sys_error("cannot write", tmp_) + " (disk full?)");
  return {};
}

Status AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) return io_error(sys_error("cannot fsync", tmp_) + " (disk full?)");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error(sys_error("cannot close", tmp_) + " (disk full?)");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return io_error(sys_error("cannot rename '" + tmp_ + "' to", path_));
  committed_ = true;
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  (void)fsync_dir(dir.empty() ? "." : dir.string());
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  TS_ASSIGN_OR_RETURN(AtomicFileWriter f, AtomicFileWriter::create(path));
  TS_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit();
}

Result<std::string> read_file(const std::string& path) { return read_whole<std::string>(path); }
Result<std::vector<uint8_t>> read_file_bytes(const std::string& path) { return read_whole<std::vector<uint8_t>>(path); }

}  // namespace tessera
