// Token shard writer (atomic) and memory-mapped reader with header and size validation.
#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/file_util.h"

namespace tessera {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; add byte swaps for this host");

namespace {

std::string errno_text() { return std::strerror(errno); }

const char* kHowToMake = "token shards are made with `tessera prepare` (or llm.c's data scripts)";

}  // namespace

Result<ShardWriteInfo> write_token_shard(const std::string& path, std::span<const uint32_t> tokens,
                                         int32_t version) {
  if (version != kShardVersionU16 && version != kShardVersionU32)
    return invalid_argument("token shard version " + std::to_string(version) + " is not 1 (uint16) or 2 (uint32)");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return invalid_argument("a token shard holds at most 2^31-1 tokens (llm.c's int32 count); got " +
                            std::to_string(tokens.size()) + ": use a smaller shard size");
  const int width = version == kShardVersionU16 ? 2 : 4;

  std::vector<int32_t> header(kShardHeaderInts, 0);
  header[0] = kShardMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());
  header[3] = width;
  if (width == 2) {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] > 0xffff)
        return invalid_argument("token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                                " does not fit a version-1 (uint16) shard: use version 2 for vocabularies > 65536");
  }

  TS_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::create(path));

  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  XXH64_update(st, header.data(), kShardHeaderBytes);
  Status written = file.write(header.data(), kShardHeaderBytes);
  // Converted in chunks so a large shard needs no second full-size buffer.
  constexpr size_t kChunk = 1 << 16;
  std::vector<unsigned char> body(kChunk * width);
  for (size_t start = 0; written.ok() && start < tokens.size(); start += kChunk) {
    const size_t n = std::min(kChunk, tokens.size() - start);
    if (width == 2) {
      for (size_t i = 0; i < n; ++i) {
        uint16_t v = static_cast<uint16_t>(tokens[start + i]);
        std::memcpy(&body[i * 2], &v, 2);
      }
    } else {
      std::memcpy(body.data(), tokens.data() + start, n * 4);
    }
    XXH64_update(st, body.data(), n * width);
    written = file.write(body.data(), n * width);
  }
  ShardWriteInfo info;
  info.tokens = tokens.size();
  info.bytes = kShardHeaderBytes + tokens.size() * width;
  info.xxh64 = XXH64_digest(st);
  XXH64_freeState(st);

  TS_RETURN_IF_ERROR(written);
  TS_RETURN_IF_ERROR(file.commit());
  return info;
}

Result<TokenShard> TokenShard::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("token shard " + path + " does not exist; " + kHowToMake);
    return io_error("cannot open token shard " + path + ": " + errno_text());
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    std::string e = errno_text();
    ::close(fd);
    return io_error("cannot stat " + path + ": " + e);
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    return invalid_argument(path + " is not a regular file, so not a token shard");
  }
  const uint64_t file_bytes = static_cast<uint64_t>(sb.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    return corrupt_data(path + " is " + std::to_string(file_bytes) + " bytes, shorter than the " +
                        std::to_string(kShardHeaderBytes) + "-byte token-shard header: it is truncated or not a token shard; " +
                        kHowToMake);
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  std::string map_err = map == MAP_FAILED ? errno_text() : "";
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return io_error("cannot mmap token shard " + path + ": " + map_err);

  TokenShard s;
  s.path_ = path;
  s.map_ = map;
  s.map_bytes_ = file_bytes;
  int32_t header[4];
  std::memcpy(header, map, sizeof(header));
  if (header[0] != kShardMagic)
    return corrupt_data(path + " is not a token shard (magic " + std::to_string(header[0]) + ", expected " +
                        std::to_string(kShardMagic) + "); " + kHowToMake);
  if (header[1] != kShardVersionU16 && header[1] != kShardVersionU32)
    return corrupt_data(path + " has token-shard version " + std::to_string(header[1]) +
                        ", which this build does not know (1 = uint16 tokens, 2 = uint32 tokens); re-create it with `tessera prepare`");
  const int width = header[1] == kShardVersionU16 ? 2 : 4;
  // llm.c leaves slot 3 zero; a non-zero value must agree with the version.
  if (header[3] != 0 && header[3] != width)
    return corrupt_data(path + " says " + std::to_string(header[3]) + " bytes per token but version " +
                        std::to_string(header[1]) + " means " + std::to_string(width) + ": the header is corrupt");
  if (header[2] < 0)
    return corrupt_data(path + " has a negative token count (" + std::to_string(header[2]) + "): the header is corrupt");
  const uint64_t count = static_cast<uint64_t>(header[2]);
  const uint64_t expected = kShardHeaderBytes + count * width;
  if (file_bytes < expected)
    return corrupt_data(path + " is truncated: its header promises " + std::to_string(count) + " tokens (" +
                        std::to_string(expected) + " bytes) but the file has " + std::to_string(file_bytes) +
                        " bytes; re-create it with `tessera prepare`");
  if (file_bytes > expected)
    return corrupt_data(path + " has " + std::to_string(file_bytes - expected) + " bytes after its " +
                        std::to_string(count) + " tokens: the token count in the header is wrong or the file is corrupt");
  s.version_ = header[1];
  s.width_ = width;
  s.count_ = count;
  s.tokens_ = static_cast<const unsigned char*>(map) + kShardHeaderBytes;
  // Loaders read windows at random offsets; tell the kernel not to read ahead far.
  ::madvise(map, file_bytes, MADV_RANDOM);
  return s;
}

void TokenShard::copy_tokens(uint64_t start, uint64_t n, int32_t* out) const {
  if (width_ == 4) {
    std::memcpy(out, tokens_ + start * 4, n * 4);  // ids < 2^31 keep their value as int32
    return;
  }
  const unsigned char* p = tokens_ + start * 2;
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    out[i] = v;
  }
}

void TokenShard::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  tokens_ = nullptr;
  count_ = 0;
}

TokenShard::~TokenShard() { release(); }

TokenShard::TokenShard(TokenShard&& o) noexcept { *this = std::move(o); }

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    tokens_ = o.tokens_;
    count_ = o.count_;
    version_ = o.version_;
    width_ = o.width_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
    o.tokens_ = nullptr;
    o.count_ = 0;
  }
  return *this;
}

Result<uint64_t> file_xxh64(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return errno == ENOENT ? Status(not_found(path + " does not exist")) : io_error("cannot open " + path + ": " + errno_text());
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) XXH64_update(st, buf.data(), n);
  bool err = std::ferror(f);
  std::fclose(f);
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  if (err) return io_error("read error on " + path);
  return h;
}

std::string xxh64_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace tessera
