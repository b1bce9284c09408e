// Token shard files: llm.c's .bin layout (256 x int32 header, then little-endian token ids), with a
// Tessera extension (version 2, uint32 ids) for vocabularies larger than 65536.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace tessera {

constexpr int32_t kShardMagic = 20240520;  // llm.c's data-shard magic
constexpr int kShardHeaderInts = 256;
constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);
// Header slots: [0] magic, [1] version, [2] token count, [3] bytes per token (0 in llm.c's files).
constexpr int32_t kShardVersionU16 = 1;  // llm.c layout: uint16 tokens
constexpr int32_t kShardVersionU32 = 2;  // Tessera extension: uint32 tokens

// Version 1 where every id fits 16 bits (so llm.c can read it), version 2 otherwise.
inline int32_t shard_version_for_vocab(uint64_t vocab_size) {
  return vocab_size <= 65536 ? kShardVersionU16 : kShardVersionU32;
}

struct ShardWriteInfo {
  uint64_t tokens = 0;
  uint64_t bytes = 0;  // file size
  uint64_t xxh64 = 0;  // checksum of the whole file (header included), seed 0
};

// Writes atomically (temp file in the same directory, fsync, rename): a reader never sees half a
// shard. Fails if a token does not fit the version's width or the count exceeds int32 (llm.c's limit).
Result<ShardWriteInfo> write_token_shard(const std::string& path, std::span<const uint32_t> tokens,
                                         int32_t version);

// Read-only memory-mapped shard. Opening validates the header and the file size, so token(i) for
// i < size() never reads outside the mapping.
class TokenShard {
 public:
  static Result<TokenShard> open(const std::string& path);
  TokenShard() = default;
  ~TokenShard();
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  uint64_t size() const { return count_; }
  int32_t version() const { return version_; }
  int bytes_per_token() const { return width_; }
  const std::string& path() const { return path_; }
  uint32_t token(uint64_t i) const {
    const unsigned char* p = tokens_ + i * width_;
    if (width_ == 2) return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
           static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  }
  // Copies tokens [start, start + n) into out as int32 (the model's input type). Bounds are the caller's bug.
  void copy_tokens(uint64_t start, uint64_t n, int32_t* out) const;

 private:
  void release();
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;
  uint64_t count_ = 0;
  int32_t version_ = 0;
  int width_ = 0;
};

// xxh64 (seed 0) of a file's bytes, for manifest checksums.
Result<uint64_t> file_xxh64(const std::string& path);
std::string xxh64_hex(uint64_t h);  // 16 lowercase hex digits

}  // namespace tessera
