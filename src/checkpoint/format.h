// On-disk format of a Tessera checkpoint: the records a manifest holds (tensors, their pieces,
// shard files), their JSON form, and the validation every reader and writer shares.
//
// A checkpoint is a directory <run_dir>/checkpoints/step_<%08d>/ holding shard_<rank>.bin files
// (raw little-endian elements, pieces at 64-byte aligned offsets), manifest.json, and COMPLETE
// (written last). Each tensor is stored by logical name and global shape; each piece records
// which flattened range of the global tensor it holds, so any saved layout loads into any other.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace tessera::checkpoint {

inline constexpr std::string_view kFormatName = "tessera-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kManifestFile = "manifest.json";
inline constexpr std::string_view kCompleteFile = "COMPLETE";
inline constexpr int64_t kPieceAlignment = 64;  // bytes; lets a later loader mmap or use O_DIRECT
// Limits on what a manifest may describe; a manifest is untrusted data (it may be damaged or hostile).
inline constexpr size_t kMaxDims = 16;       // dimensions of a global shape
inline constexpr int kMaxJsonDepth = 64;     // nesting of manifest.json (Tessera writes about 6)

// One stored range of a tensor: elements [global_offset, global_offset + numel) of the flattened
// global tensor live in `file` at byte `offset_in_file`.
struct TensorPiece {
  int rank = 0;
  std::string file;  // relative to the checkpoint directory, e.g. "shard_1.bin"
  int64_t offset_in_file = 0;
  int64_t global_offset = 0;
  int64_t numel = 0;
  uint64_t checksum = 0;  // xxh64 of the piece's bytes, seed 0
  // The piece's partial fingerprint (fingerprint.h), carried from the writing rank to rank 0 in its
  // ShardRecord; merge_entries sums them into TensorEntry::fingerprint. Not stored in manifests.
  std::optional<uint64_t> fingerprint = std::nullopt;
};

struct TensorEntry {
  std::string key;  // logical name, e.g. "param/h.0.attn.qkv.w" or "adam_m/h.0.attn.qkv.w"
  DType dtype = DType::f32;
  std::vector<int64_t> global_shape;
  std::vector<TensorPiece> pieces;
  // The logical fingerprint of the whole unsharded tensor (fingerprint.h), manifest field
  // "fingerprint" (16 hex digits). Absent in checkpoints saved before fingerprints existed: those
  // load without the check.
  std::optional<uint64_t> fingerprint = std::nullopt;
};

// What one rank wrote: its shard file and the pieces in it. The trainer gathers these from every
// rank (as JSON, see shard_record_to_json) so rank 0 can write the manifest.
struct ShardRecord {
  int rank = 0;
  std::string file;
  int64_t bytes = 0;  // exact size of the shard file
  std::vector<TensorEntry> entries;
};

struct Manifest {
  int version = kFormatVersion;
  int64_t step = 0;
  int world_size = 1;
  std::vector<ShardRecord> shards;   // one per rank, entries left empty (they live in `tensors`)
  std::vector<TensorEntry> tensors;  // merged across ranks, pieces sorted by global_offset
  nlohmann::json config = nlohmann::json::object();  // opaque model config
  nlohmann::json state = nlohmann::json::object();   // opaque trainer state
  // "state_fingerprint": state_fingerprint(state) (fingerprint.h), set by write_manifest and checked
  // by manifest_from_json; absent in checkpoints from before fingerprints.
  std::optional<uint64_t> state_fingerprint = std::nullopt;
};

// "step_00000042"; and the inverse, which accepts exactly that form (no ".tmp-*" suffix).
std::string step_dir_name(int64_t step);
bool parse_step_dir_name(std::string_view name, int64_t* step);
std::string shard_file_name(int rank);

Result<DType> parse_dtype_name(std::string_view name);
int64_t shape_numel(const std::vector<int64_t>& shape);
// The element count of `shape`, or -1 when a dimension is negative or the count -- or the count
// times `elem_bytes` -- does not fit in int64 (a manifest's shape must pass this before use).
int64_t checked_shape_numel(const std::vector<int64_t>& shape, size_t elem_bytes = 1);
// True for exactly "shard_<rank>.bin", the only file name a piece or shard record may give: a
// manifest must never make a reader open anything outside its checkpoint directory.
bool is_shard_file_name(std::string_view name, int rank);
uint64_t checksum_bytes(const void* data, size_t bytes);
// checksum_bytes of a byte string fed in parts: digest() equals checksum_bytes of their concatenation.
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  void* state_;  // XXH64_state_t
};

// Combines entries that share a key (pieces from different ranks) and checks that they agree on
// dtype and shape, and that their pieces cover the tensor exactly once. A tensor whose pieces all
// carry partial fingerprints gets their sum as its fingerprint (the pieces' partials are dropped).
Result<std::vector<TensorEntry>> merge_entries(const std::vector<TensorEntry>& entries);
// Pieces sorted, in range, not overlapping, and covering every element. `where` prefixes messages.
Status validate_coverage(const TensorEntry& entry, std::string_view where);

nlohmann::json entries_to_json(const std::vector<TensorEntry>& entries);
Result<std::vector<TensorEntry>> entries_from_json(const nlohmann::json& j, std::string_view where);
nlohmann::json shard_record_to_json(const ShardRecord& record);
Result<ShardRecord> shard_record_from_json(const nlohmann::json& j);

// Parses JSON text (a manifest, or a file next to one), refusing nesting deeper than kMaxJsonDepth:
// later recursive walks of the document (dump, comparison) must not overflow the stack on a hostile
// file. corrupt_data naming `path` when the text is invalid or too deep.
Result<nlohmann::json> parse_json_limited(const std::string& text, const std::string& path);

nlohmann::json manifest_to_json(const Manifest& m);
// Parses and fully validates a manifest; `path` names the file in error messages.
Result<Manifest> manifest_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace tessera::checkpoint
