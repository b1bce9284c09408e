// Dataset manifest (manifest.json next to the shards): tokenizer, shards with checksums, totals and
// sources. prepare writes it last, so its presence means the dataset is complete.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"

namespace tessera {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kTokenizerModelFile = "tokenizer.model";

struct ManifestShard {
  std::string file;   // relative to the manifest's directory
  std::string split;  // "train" or "val"
  uint64_t tokens = 0;
  uint64_t xxh64 = 0;  // of the whole file; stored as 16 hex digits
};

struct ManifestSource {
  std::string path;
  uint64_t bytes = 0;
};

struct DatasetManifest {
  std::string dir;  // where the manifest was loaded from or saved to (not stored in the file)

  std::string tokenizer_kind;  // byte | bpe | unigram | sentencepiece
  uint32_t vocab_size = 0;
  std::string tokenizer_model_file;  // relative to dir; empty for byte
  int32_t shard_version = 1;
  uint64_t shard_tokens = 0;  // the shard size prepare used
  double val_fraction = 0.0;

  std::vector<ManifestShard> shards;
  std::vector<ManifestSource> sources;
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  uint64_t source_bytes = 0;

  // Full paths of one split's shards, in manifest order.
  std::vector<std::string> shard_paths(const std::string& split) const;
  std::string tokenizer_model_path() const;  // full path, empty for byte
  // Mean bytes of source text per token (1 for the byte tokenizer), to express losses per byte;
  // 0 when unknown (imported shards).
  double bytes_per_token() const {
    const uint64_t tokens = train_tokens + val_tokens;
    return tokens && source_bytes && tokenizer_kind != "external"
               ? static_cast<double>(source_bytes) / static_cast<double>(tokens) : 0.0;
  }
};

// Writes dir/manifest.json atomically and sets m.dir.
Status save_manifest(DatasetManifest& m, const std::string& dir);
// Accepts the dataset directory or the manifest file itself.
Result<DatasetManifest> load_manifest(const std::string& dir_or_file);
// Every shard exists, opens as a valid shard with the recorded token count and, if
// check_checksums, matches its xxh64. The error names the first bad shard.
Status verify_dataset(const DatasetManifest& m, bool check_checksums = true);
Result<std::unique_ptr<Tokenizer>> open_dataset_tokenizer(const DatasetManifest& m);

}  // namespace tessera
